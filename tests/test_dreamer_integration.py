"""Dreamer across packages: rl_modules' RSSM in rl_envs' DreamerEnv, driven by rl_objectives' losses."""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from rl_envs import Bounded, DreamerEnv, check_env_specs
from rl_modules import MLP, RSSMPosterior, RSSMPrior, RSSMRollout, WorldModelWrapper
from rl_objectives import DreamerActorLoss, DreamerModelLoss, DreamerValueLoss, ValueEstimators

S, B_, H, A, OBS = 4, 6, 8, 2, 3


def _parts():
    torch.manual_seed(0)
    prior_net = RSSMPrior(None, hidden_dim=H, rnn_hidden_dim=B_, state_dim=S, action_dim=A)
    post_net = RSSMPosterior(hidden_dim=H, state_dim=S, rnn_hidden_dim=B_, obs_embed_dim=H)
    reward_net = MLP(S + B_, 1, num_cells=[H])
    return prior_net, post_net, reward_net


def _imagination(prior_net, reward_net, batch=(5,)):
    wm = WorldModelWrapper(
        TensorDictModule(
            prior_net, in_keys=["state", "belief", "action"], out_keys=["_", "_", "state", "belief"]
        ),
        TensorDictModule(reward_net, in_keys=["state", "belief"], out_keys=["reward"]),
    )
    env = DreamerEnv(wm, prior_shape=(S,), belief_shape=(B_,), batch_size=batch)
    env.action_spec_unbatched = Bounded(-1.0, 1.0, shape=(A,))
    return env


def test_dreamer_env_with_rssm_prior_passes_check_env_specs():
    prior_net, _, reward_net = _parts()
    check_env_specs(_imagination(prior_net, reward_net))
    check_env_specs(_imagination(prior_net, reward_net, batch=()))


def test_actor_loss_through_dreamer_env_matches_plain_loop():
    prior_net, _, reward_net = _parts()
    env = _imagination(prior_net, reward_net)
    policy_net = torch.nn.Linear(S + B_, A)
    actor = TensorDictModule(
        lambda s, b: torch.tanh(policy_net(torch.cat([s, b], -1))),
        in_keys=["state", "belief"],
        out_keys=["action"],
    )
    value_net = MLP(S + B_, 1, num_cells=[H])
    value = TensorDictModule(value_net, in_keys=["state", "belief"], out_keys=["state_value"])
    loss = DreamerActorLoss(actor, value, env, imagination_horizon=4)
    loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.9, lmbda=0.8)
    start = TensorDict(state=torch.randn(3, 2, S), belief=torch.randn(3, 2, B_), batch_size=[3, 2])
    torch.manual_seed(7)
    losses, fake = loss(start)
    torch.manual_seed(7)
    s, b = start["state"].reshape(6, S), start["belief"].reshape(6, B_)
    rs, vs = [], []
    for _ in range(4):
        a = torch.tanh(policy_net(torch.cat([s, b], -1)))
        _, _, s, b = prior_net(s, b, a)
        rs.append(reward_net(torch.cat([s, b], -1)))
        vs.append(value_net(torch.cat([s, b], -1)))
    g, out = vs[-1], []
    for t in reversed(range(4)):
        g = rs[t] + 0.9 * (vs[t] if t == 3 else (0.2 * vs[t] + 0.8 * g))
        out.insert(0, g)
    target = torch.stack(out, 1)
    w = (0.9 ** torch.arange(4.0)).reshape(1, 4, 1)
    torch.testing.assert_close(losses["loss_actor"], -(target * w).sum((1, 2)).mean())
    losses["loss_actor"].backward()
    assert policy_net.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in prior_net.parameters())
    vl, _ = DreamerValueLoss(value, gamma=0.9)(fake)
    assert torch.isfinite(vl["loss_value"])


def test_model_loss_on_rssm_rollout_trains():
    prior_net, post_net, reward_net = _parts()
    nxt = "next"
    enc = TensorDictModule(
        MLP(OBS, H, num_cells=[H]),
        in_keys=[(nxt, "observation")],
        out_keys=[(nxt, "encoded_latents")],
    )
    prior = TensorDictModule(
        prior_net,
        in_keys=["state", "belief", "action"],
        out_keys=[(nxt, "prior_mean"), (nxt, "prior_std"), "_", (nxt, "belief")],
    )
    post = TensorDictModule(
        post_net,
        in_keys=[(nxt, "belief"), (nxt, "encoded_latents")],
        out_keys=[(nxt, "posterior_mean"), (nxt, "posterior_std"), (nxt, "state")],
    )
    dec = TensorDictModule(
        MLP(S + B_, OBS, num_cells=[H]),
        in_keys=[(nxt, "state"), (nxt, "belief")],
        out_keys=[(nxt, "reco_observation")],
    )
    rew = TensorDictModule(
        reward_net, in_keys=[(nxt, "state"), (nxt, "belief")], out_keys=[(nxt, "reward")]
    )
    wm = WorldModelWrapper(TensorDictSequential(enc, RSSMRollout(prior, post), dec), rew)
    loss = DreamerModelLoss(wm, free_nats=0.0, burn_in=1).set_keys(
        pixels="observation", reco_pixels="reco_observation"
    )
    g = torch.Generator().manual_seed(0)
    actions = torch.rand(8, 10, A, generator=g) * 2 - 1
    obs = actions.cumsum(1)[..., :1].expand(8, 10, OBS).clone()  # a learnable toy dynamics
    data = TensorDict(
        {"state": torch.zeros(8, 10, S), "belief": torch.zeros(8, 10, B_), "action": actions,
         (nxt, "observation"): obs, (nxt, "reward"): obs[..., :1].clone()},
        [8, 10],
    )  # fmt: skip
    optim = torch.optim.Adam(wm.parameters(), lr=1e-2)
    first = None
    for _ in range(60):
        losses, _ = loss(data)
        total = losses["loss_model_reco"] + losses["loss_model_reward"] + losses["loss_model_kl"]
        first = total.item() if first is None else first
        optim.zero_grad()
        total.backward()
        optim.step()
    assert total.item() < 0.5 * first


def test_slice_sampler_serves_sequences_within_episodes_of_uint8_pixels():
    from rl_buffers import LazyTensorStorage, SliceSampler, TensorDictReplayBuffer

    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(1000),
        sampler=SliceSampler(slice_len=8, traj_key="traj_id"),
        batch_size=4 * 8,
    )
    for traj, length in enumerate([20, 9, 31, 8]):
        buffer.extend(
            TensorDict(
                {
                    "traj_id": torch.full((length,), traj),
                    "step": torch.arange(length),
                    ("next", "pixels"): torch.randint(
                        0, 255, (length, 64, 64, 3), dtype=torch.uint8
                    ),
                },
                [length],
            )
        )
    for _ in range(20):
        batch = buffer.sample().reshape(4, 8)
        assert batch["next", "pixels"].dtype == torch.uint8
        ids, steps = batch["traj_id"], batch["step"]
        assert bool((ids == ids[:, :1]).all())  # one episode per sequence
        assert bool((steps.diff(dim=1) == 1).all())  # consecutive steps
