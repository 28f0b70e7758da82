"""MAPPO / IPPO / QMixer losses against plain-torch references written per agent-step."""

from __future__ import annotations

import copy

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import distributions as D
from torch import nn
from torch.nn import functional as F

from rl_objectives import HardUpdate, IPPOLoss, MAPPOLoss, MultiAgentGAE, QMixerLoss

# These checks build losses with target parameters and no updater (their numerics do not
# need one): TorchRL's warning about it is tested in test_target_updater_warning.py.
pytestmark = pytest.mark.filterwarnings("ignore:No target network updater:UserWarning")

N, OBS, A, S = 3, 4, 5, 6  # agents, obs features, actions, global state features
AGENT_KEYS = {
    "action": ("agents", "action"),
    "value": ("agents", "state_value"),
    "sample_log_prob": ("agents", "action_log_prob"),
    "advantage": ("agents", "advantage"),
    "value_target": ("agents", "value_target"),
}


def _actor(lin: nn.Linear) -> ProbabilisticTensorDictSequential:
    return ProbabilisticTensorDictSequential(
        TensorDictModule(lin, [("agents", "observation")], [("agents", "logits")]),
        ProbabilisticTensorDictModule(
            [("agents", "logits")], [("agents", "action")], distribution_class=D.Categorical
        ),
    )


def _data(b: int = 16) -> TensorDict:
    agents = TensorDict(
        {
            "observation": torch.randn(b, N, OBS),
            "action": torch.randint(A, (b, N)),
            "action_log_prob": -torch.rand(b, N) - 1.0,
            "advantage": torch.randn(b, N, 1) * 2 + 0.5,
            "value_target": torch.randn(b, N, 1),
        },
        [b, N],
    )
    return TensorDict({"agents": agents, "state": torch.randn(b, S)}, [b])


def _reference(td, actor_lin, critic, eps=0.2, ent=0.01, critic_from_state=False, norm=None):
    """Clipped PPO per agent-step, advantage standardised per agent (over batch only)."""
    obs = td["agents", "observation"]
    logp_all = F.log_softmax(actor_lin(obs), -1)
    logp = logp_all.gather(-1, td["agents", "action"].unsqueeze(-1)).squeeze(-1)
    ratio = (logp - td["agents", "action_log_prob"]).exp()
    adv = td["agents", "advantage"]
    adv = (adv - adv.mean((0, 2), keepdim=True)) / adv.std((0, 2), keepdim=True)
    adv = adv.squeeze(-1)
    gain = torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    value = critic(td["state"]).unsqueeze(1).expand(-1, N, 1) if critic_from_state else critic(obs)
    target = td["agents", "value_target"]
    if norm is not None:
        mean, std = norm
        value, target = (value - mean) / std, (target - mean) / std
    return {
        "loss_objective": -gain.mean(),
        "loss_entropy": -ent * entropy.mean(),
        "loss_critic": F.smooth_l1_loss(value, target),
    }


@pytest.mark.parametrize("cls", [MAPPOLoss, IPPOLoss])
def test_multiagent_ppo_matches_per_agent_reference_and_gradients(cls):
    torch.manual_seed(0)
    actor_lin, critic_lin = nn.Linear(OBS, A), nn.Linear(OBS, 1)
    critic = TensorDictModule(critic_lin, [("agents", "observation")], [("agents", "state_value")])
    loss = cls(_actor(actor_lin), critic)
    loss.set_keys(**AGENT_KEYS)
    td = _data()
    out = loss(td)
    ref = _reference(td, copy.deepcopy(actor_lin), copy.deepcopy(critic_lin))
    for key, value in ref.items():
        torch.testing.assert_close(out[key], value, msg=key)
    ref_actor, ref_critic = copy.deepcopy(actor_lin), copy.deepcopy(critic_lin)
    ref = _reference(td, ref_actor, ref_critic)
    sum(out[k] for k in ref).backward()
    sum(ref.values()).backward()
    torch.testing.assert_close(actor_lin.weight.grad, ref_actor.weight.grad)
    torch.testing.assert_close(critic_lin.weight.grad, ref_critic.weight.grad)
    assert td["agents"].batch_size == (16, N)  # the input is left as it was


def test_mappo_centralised_critic_on_a_global_state():
    torch.manual_seed(0)
    actor_lin, critic_lin = nn.Linear(OBS, A), nn.Linear(S, 1)
    critic = TensorDictModule(critic_lin, ["state"], [("agents", "state_value")])
    loss = MAPPOLoss(_actor(actor_lin), critic).set_keys(**AGENT_KEYS)
    td = _data()
    out = loss(td)
    ref = _reference(td, actor_lin, critic_lin, critic_from_state=True)
    torch.testing.assert_close(out["loss_critic"], ref["loss_critic"])
    torch.testing.assert_close(out["loss_objective"], ref["loss_objective"])


class _AffineNorm(nn.Module):
    """A value normaliser with fixed statistics that records what it was fed."""

    def __init__(self, mean: float, std: float) -> None:
        super().__init__()
        self.mean, self.std, self.seen = mean, std, []

    def update(self, target: torch.Tensor) -> None:
        self.seen.append(target.clone())

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def test_mappo_value_norm_normalises_target_and_prediction():
    torch.manual_seed(0)
    actor_lin, critic_lin = nn.Linear(OBS, A), nn.Linear(OBS, 1)
    critic = TensorDictModule(critic_lin, [("agents", "observation")], [("agents", "state_value")])
    norm = _AffineNorm(1.5, 4.0)
    loss = MAPPOLoss(_actor(actor_lin), critic, value_norm=norm).set_keys(**AGENT_KEYS)
    td = _data()
    out = loss(td)
    ref = _reference(td, actor_lin, critic_lin, norm=(1.5, 4.0))
    torch.testing.assert_close(out["loss_critic"], ref["loss_critic"])
    assert len(norm.seen) == 1
    torch.testing.assert_close(norm.seen[0], td["agents", "value_target"])
    with pytest.raises(TypeError, match="update"):
        MAPPOLoss(_actor(actor_lin), critic, value_norm=object())


def test_mappo_computes_multiagent_gae_when_the_advantage_is_missing():
    torch.manual_seed(0)
    b, t = 2, 5
    actor_lin, critic_lin = nn.Linear(OBS, A), nn.Linear(OBS, 1)
    critic = TensorDictModule(critic_lin, [("agents", "observation")], [("agents", "state_value")])
    loss = MAPPOLoss(_actor(actor_lin), critic, gamma=0.9).set_keys(**AGENT_KEYS)
    agents = lambda: TensorDict({"observation": torch.randn(b, t, N, OBS)}, [b, t, N])  # noqa: E731
    td = TensorDict({"agents": agents(), "next": {"agents": agents()}}, [b, t])
    td["agents", "action"] = torch.randint(A, (b, t, N))
    td["agents", "action_log_prob"] = -torch.rand(b, t, N) - 1
    td["next", "reward"] = torch.randn(b, t, 1)  # team-level signals
    td["next", "done"] = torch.rand(b, t, 1) < 0.2
    td["next", "terminated"] = td["next", "done"].clone()
    out = loss(td)
    assert "advantage" not in td["agents"]
    # the same data with the advantage computed beforehand by a per-agent GAE loop
    with torch.no_grad():
        v, nv = (
            critic_lin(td["agents", "observation"]),
            critic_lin(td["next", "agents", "observation"]),
        )
    adv = torch.zeros(b, t, N, 1)
    running = torch.zeros(b, N, 1)
    for i in reversed(range(t)):
        nd = (~td["next", "done"][:, i]).float().unsqueeze(1)
        delta = td["next", "reward"][:, i].unsqueeze(1) + 0.9 * nd * nv[:, i] - v[:, i]
        running = delta + 0.9 * 0.95 * nd * running
        adv[:, i] = running
    ready = td.clone()
    ready["agents", "advantage"] = adv
    ready["agents", "value_target"] = adv + v
    expected = MAPPOLoss(_actor(actor_lin), critic, gamma=0.9).set_keys(**AGENT_KEYS)(
        ready.reshape(-1)
    )
    for key in ("loss_objective", "loss_critic", "loss_entropy"):
        torch.testing.assert_close(out[key], expected[key], msg=key)
    assert isinstance(loss.value_estimator, MultiAgentGAE)


def test_mappo_errors_name_the_group():
    actor_lin = nn.Linear(OBS, A)
    critic = TensorDictModule(
        nn.Linear(OBS, 1), [("agents", "observation")], [("agents", "state_value")]
    )
    loss = MAPPOLoss(_actor(actor_lin), critic).set_keys(**AGENT_KEYS)
    td = _data()
    with pytest.raises(KeyError, match="group"):
        loss(td.rename_key_("agents", "team"))
    bad = TensorDict({"agents": _data(16)["agents"].reshape(4, 4, N)}, [4, 4])
    bad.batch_size = [4]
    with pytest.raises(ValueError, match="one agent dim"):
        loss(bad)


# -- QMixerLoss -------------------------------------------------------------------------


class _StateMixer(nn.Module):
    """Monotonic mixing with state-dependent positive weights: sum_i softplus(W s)_i q_i + b(s)."""

    def __init__(self) -> None:
        super().__init__()
        self.w, self.b = nn.Linear(S, N), nn.Linear(S, 1)

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return (F.softplus(self.w(state)) * q.squeeze(-1)).sum(-1, keepdim=True) + self.b(state)


def _qmix_data(b: int = 12) -> TensorDict:
    def step():
        return TensorDict(
            {"agents": TensorDict({"observation": torch.randn(b, N, OBS)}, [b, N]),
             "state": torch.randn(b, S)},
            [b],
        )  # fmt: skip

    td = step()
    td["next"] = step()
    td["agents", "action"] = torch.randint(A, (b, N))
    td["next", "reward"] = torch.randn(b, 1)
    td["next", "terminated"] = torch.rand(b, 1) < 0.3
    td["next", "done"] = td["next", "terminated"] | (torch.rand(b, 1) < 0.3)
    return td


@pytest.mark.parametrize("mixer_kind", ["vdn", "state"])
def test_qmixer_loss_matches_reference_with_target_networks(mixer_kind):
    torch.manual_seed(0)
    gamma = 0.9
    local_lin = nn.Linear(OBS, A)
    local = TensorDictModule(local_lin, [("agents", "observation")], [("agents", "action_value")])
    if mixer_kind == "vdn":
        mixer_mod = None

        def mix(m, q, s):
            return q.sum(-2)

        mixer = TensorDictModule(
            lambda q: q.sum(-2), [("agents", "chosen_action_value")], ["chosen_action_value"]
        )
    else:
        mixer_mod = _StateMixer()

        def mix(m, q, s):
            return m(q, s)

        mixer = TensorDictModule(
            mixer_mod, [("agents", "chosen_action_value"), "state"], ["chosen_action_value"]
        )
    loss = QMixerLoss(local, mixer, action_space="categorical", gamma=gamma)
    target_local, target_mixer = copy.deepcopy(local_lin), copy.deepcopy(mixer_mod)
    with torch.no_grad():  # online parameters move away from the stored targets
        for p in [*local_lin.parameters(), *(mixer_mod.parameters() if mixer_mod else [])]:
            p.add_(torch.randn_like(p) * 0.3)
    td = _qmix_data()
    out = loss(td)
    q = local_lin(td["agents", "observation"])
    chosen = q.gather(-1, td["agents", "action"].unsqueeze(-1))  # [b, N, 1]
    pred = mix(mixer_mod, chosen, td["state"]).squeeze(-1)
    with torch.no_grad():
        q_next = target_local(td["next", "agents", "observation"]).max(-1, keepdim=True).values
        next_value = mix(target_mixer, q_next, td["next", "state"]).squeeze(-1)
        not_term = (~td["next", "terminated"]).float().squeeze(-1)
        target = td["next", "reward"].squeeze(-1) + gamma * not_term * next_value
    torch.testing.assert_close(out["loss"], F.mse_loss(pred, target))
    torch.testing.assert_close(td["td_error"], (pred - target).detach().pow(2))
    out["loss"].backward()
    assert local_lin.weight.grad is not None and local_lin.weight.grad.abs().sum() > 0
    # a hard update copies both networks into their targets
    HardUpdate(loss, value_network_update_interval=1).step()
    torch.testing.assert_close(loss.target_local_value_network_params["module", "weight"],
                               local_lin.weight.detach())  # fmt: skip


def test_qmixer_loss_wraps_a_plain_mixer_and_reads_one_hot_actions():
    torch.manual_seed(0)
    local_lin = nn.Linear(OBS, A)
    local = TensorDictModule(local_lin, [("agents", "observation")], [("agents", "action_value")])

    class Sum(nn.Module):
        def forward(self, q):
            return q.sum(-2)

    loss = QMixerLoss(local, Sum(), action_space="one_hot", delay_value=False, gamma=0.5)
    td = _qmix_data()
    td["agents", "action"] = F.one_hot(td["agents", "action"], A)
    out = loss(td)
    q = local_lin(td["agents", "observation"])
    pred = (q * td["agents", "action"]).sum((-1, -2))
    with torch.no_grad():
        nxt = local_lin(td["next", "agents", "observation"]).max(-1).values.sum(-1)
        target = (
            td["next", "reward"].squeeze(-1) + 0.5 * (~td["next", "terminated"]).squeeze(-1) * nxt
        )
    torch.testing.assert_close(out["loss"], F.mse_loss(pred, target))


def test_mappo_reads_a_group_that_lost_its_agent_batch_dim():
    """A replay-buffer sample may carry the group with the root batch only: the per-agent
    log-probabilities ``[*B, n_agents]`` give the agent dim back."""
    torch.manual_seed(0)
    actor_lin, critic_lin = nn.Linear(OBS, A), nn.Linear(OBS, 1)
    critic = TensorDictModule(critic_lin, [("agents", "observation")], [("agents", "state_value")])
    loss = MAPPOLoss(_actor(actor_lin), critic).set_keys(**AGENT_KEYS)
    td = _data()
    flat = TensorDict({"agents": td["agents"].to_dict(), "state": td["state"]}, [16])
    assert flat["agents"].batch_size == (16,)
    out, ref = loss(flat), _reference(td, actor_lin, critic_lin)
    for key, value in ref.items():
        torch.testing.assert_close(out[key], value, msg=key)


# -- MultiAgentGAE ----------------------------------------------------------------------


def test_multiagent_gae_per_agent_rewards_team_flags_against_a_loop():
    """[B, T, n] values, per-agent rewards, team done / terminated: a truncated step
    bootstraps, a terminated one does not; average_gae standardises each agent alone."""
    torch.manual_seed(0)
    b, t, gamma, lmbda = 2, 7, 0.9, 0.8
    value, next_value = torch.randn(b, t, N, 1), torch.randn(b, t, N, 1)
    reward = torch.randn(b, t, N, 1)
    terminated = torch.zeros(b, t, 1, dtype=torch.bool)
    truncated = torch.zeros(b, t, 1, dtype=torch.bool)
    terminated[0, 2], truncated[1, 4] = True, True
    td = TensorDict(
        {
            "agents": TensorDict({"state_value": value}, [b, t, N]),
            "next": {
                "agents": TensorDict({"state_value": next_value, "reward": reward}, [b, t, N]),
                "done": terminated | truncated,
                "terminated": terminated,
            },
        },
        [b, t],
    )
    gae = MultiAgentGAE(gamma=gamma, lmbda=lmbda)
    gae.set_keys(
        value=("agents", "state_value"),
        reward=("agents", "reward"),
        advantage=("agents", "advantage"),
        value_target=("agents", "value_target"),
    )
    out = gae(td.clone())
    expected = torch.zeros(b, t, N, 1)
    for env in range(b):
        for agent in range(N):
            running = 0.0
            for i in reversed(range(t)):
                boot = 0.0 if bool(terminated[env, i]) else 1.0
                cont = 0.0 if bool(terminated[env, i] | truncated[env, i]) else 1.0
                delta = (
                    reward[env, i, agent, 0]
                    + gamma * boot * next_value[env, i, agent, 0]
                    - value[env, i, agent, 0]
                )
                running = delta + gamma * lmbda * cont * running
                expected[env, i, agent, 0] = running
    torch.testing.assert_close(out["agents", "advantage"], expected)
    torch.testing.assert_close(out["agents", "value_target"], expected + value)
    gae.average_gae = True
    averaged = gae(td.clone())["agents", "advantage"]
    for agent in range(N):
        a = expected[:, :, agent]
        torch.testing.assert_close(averaged[:, :, agent], (a - a.mean()) / a.std())


def test_mappo_reads_a_per_agent_advantage_kept_at_the_root_keys():
    # TorchRL's default keys: advantage / value_target at the root, shaped [*B, n_agents, 1]
    torch.manual_seed(0)
    actor_lin, critic_lin = nn.Linear(OBS, A), nn.Linear(OBS, 1)
    critic = TensorDictModule(critic_lin, [("agents", "observation")], [("agents", "state_value")])
    keys = {k: v for k, v in AGENT_KEYS.items() if k not in ("advantage", "value_target")}
    td = _data()
    root = td.clone()
    root["advantage"] = root["agents"].pop("advantage")
    root["value_target"] = root["agents"].pop("value_target")
    out = MAPPOLoss(_actor(actor_lin), critic).set_keys(**keys)(root)
    expected = MAPPOLoss(_actor(actor_lin), critic).set_keys(**AGENT_KEYS)(td)
    for key in ("loss_objective", "loss_critic"):
        torch.testing.assert_close(out[key], expected[key], msg=key)
