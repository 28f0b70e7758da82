"""ModelBasedEnvBase / DreamerEnv: the env contract over a world model given as a callable."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_envs import (
    Bounded,
    Composite,
    DreamerEnv,
    EnvBase,
    ModelBasedEnvBase,
    PendulumEnv,
    Unbounded,
    WorldModelEnv,
    check_env_specs,
)


class _Linear(torch.nn.Module):
    """A fixed toy transition: s' = tanh(A s + B a + C b), b' = 0.5 b + s', r = sum(s')."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.A = torch.nn.Parameter(torch.randn(4, 4, generator=g) * 0.3)
        self.B = torch.nn.Parameter(torch.randn(2, 4, generator=g))
        self.C = torch.nn.Parameter(torch.randn(3, 4, generator=g) * 0.3)

    def forward(self, s, b, a):
        s2 = torch.tanh(s @ self.A + a @ self.B + b @ self.C)
        b2 = 0.5 * b + s2[..., :3]
        return s2, b2, s2.sum(-1, keepdim=True)


def _env(batch=(5,)):
    wm = TensorDictModule(
        _Linear(), in_keys=["state", "belief", "action"], out_keys=["state", "belief", "reward"]
    )
    env = DreamerEnv(wm, prior_shape=(4,), belief_shape=(3,), batch_size=batch)
    env.action_spec_unbatched = Bounded(-1.0, 1.0, shape=(2,))
    return env


@pytest.mark.parametrize("batch", [(), (5,), (2, 3)])
def test_dreamer_env_check_env_specs(batch):
    env = _env(batch)
    check_env_specs(env)
    assert isinstance(env, ModelBasedEnvBase)


def test_dreamer_env_rollout_matches_manual_loop_and_adopts_batch():
    env = _env((5,))
    policy_net = torch.nn.Linear(7, 2)
    policy = TensorDictModule(
        lambda s, b: torch.tanh(policy_net(torch.cat([s, b], -1))),
        in_keys=["state", "belief"],
        out_keys=["action"],
    )
    start = TensorDict(state=torch.randn(9, 4), belief=torch.randn(9, 3), batch_size=[9])
    root = env.reset(start.clone())
    assert env.batch_size == (9,)
    out = env.rollout(6, policy, auto_reset=False, tensordict=root)
    assert out.batch_size == (9, 6)
    model = env.world_model.module
    s, b = start["state"], start["belief"]
    rewards, states = [], []
    for _ in range(6):
        a = torch.tanh(policy_net(torch.cat([s, b], -1)))
        s, b, r = model(s, b, a)
        rewards.append(r)
        states.append(s)
    torch.testing.assert_close(out["next", "reward"], torch.stack(rewards, 1))
    torch.testing.assert_close(out["next", "state"], torch.stack(states, 1))
    torch.testing.assert_close(out["state"][:, 1:], out["next", "state"][:, :-1])
    assert not out["next", "done"].any() and not out["next", "terminated"].any()
    # imagination is differentiable: the return's gradient reaches the policy
    out["next", "reward"].sum().backward()
    assert policy_net.weight.grad is not None and policy_net.weight.grad.abs().sum() > 0


def test_dreamer_env_reset_without_latents_raises():
    env = _env((2,))
    with pytest.raises(KeyError, match=r"\['belief'\].*data\['next'\]"):
        env.reset(TensorDict(state=torch.zeros(2, 4), batch_size=[2]))
    td = env.reset()
    assert td["state"].shape == (2, 4) and not td["done"].any()


def test_set_specs_from_env_and_decoder():
    base = PendulumEnv(batch_size=[3])
    env = _env(())
    env.set_specs_from_env(base)
    assert env.action_spec.shape == (1,) and env.reward_spec.shape == (1,)
    assert set(env.observation_keys) == {"state", "belief"}
    with pytest.raises(ValueError, match="no obs_decoder"):
        env.decode_obs(TensorDict())
    dec = TensorDictModule(lambda s: s * 2, in_keys=["state"], out_keys=["reco"])
    env2 = DreamerEnv(env.world_model, (4,), (3,), obs_decoder=dec)
    td = env2.decode_obs(TensorDict(state=torch.ones(4)))
    torch.testing.assert_close(td["reco"], torch.full((4,), 2.0))


def test_model_based_env_base_step_keeps_spec_entries_only():
    class Env(ModelBasedEnvBase):
        def _reset(self, td, **kwargs):
            return TensorDict(obs=torch.zeros(2, 1), batch_size=[2])

    wm = TensorDictModule(
        lambda o, a: (o + a, o.abs(), o * 0),
        in_keys=["obs", "action"],
        out_keys=["obs", "reward", "junk"],
    )
    env = Env(wm, batch_size=[2])
    env.observation_spec = Composite(obs=Unbounded((2, 1)), shape=[2])
    env.action_spec = Unbounded((2, 1))
    td = env.step(env.reset().set("action", torch.ones(2, 1)))
    assert "junk" not in set(td["next"].keys())
    torch.testing.assert_close(td["next", "obs"], torch.ones(2, 1))
    with pytest.raises(TypeError, match="callable"):
        Env(3)


class _Drift(ModelBasedEnvBase):
    def _reset(self, td, **kwargs):
        batch = self.batch_size if td is None or self.batch_size else td.batch_size
        return TensorDict(obs=torch.zeros(*batch, 1), batch_size=batch)


def test_model_based_env_is_batch_unlocked():
    wm = TensorDictModule(
        lambda o, a: (o + a, -(o + a).abs()), in_keys=["obs", "action"], out_keys=["obs", "reward"]
    )
    env = _Drift(wm)
    env.observation_spec = Composite(obs=Unbounded((1,)))
    env.action_spec = Unbounded((1,))
    assert not env.batch_locked
    td = env.reset(TensorDict(batch_size=[3])).set("action", torch.ones(3, 1))
    out = env.step(td)
    assert torch.equal(out["next", "obs"], torch.ones(3, 1))
    assert out["next", "done"].shape == (3, 1)
    batched = _Drift(wm, batch_size=[2])
    with pytest.raises(RuntimeError, match=r"shape==env\.batch_size"):
        batched.step(TensorDict(action=torch.ones(4, 1), batch_size=[4]))


def test_model_based_env_flags_done_and_terminated_only():
    wm = TensorDictModule(
        lambda o, a: (o + a, o.sum(-1, True)), ["obs", "action"], ["obs", "reward"]
    )
    env = _Drift(wm, batch_size=[2])
    assert set(env.done_keys) == {"done", "terminated"}  # TorchRL's model-based envs
    env.observation_spec = Composite(obs=Unbounded((2, 1)), shape=[2])
    env.action_spec = Unbounded((2, 1))
    r = env.rollout(2)
    assert "truncated" not in r["next"].keys()  # noqa: SIM118 (TensorDict has no __contains__)
    assert r["next", "terminated"].shape == (2, 2, 1)


class _StepOnly(torch.nn.Module):
    """A world model's step part: z' = z + a, r = sum(z'), done = z'[0] > 2 (hand-checkable)."""

    def __init__(self, with_done: bool) -> None:
        super().__init__()
        mods = [
            TensorDictModule(lambda z, a: z + a, ["latent", "action"], [("next", "latent")]),
            TensorDictModule(lambda z: z.sum(-1, True), [("next", "latent")], [("next", "reward")]),
        ]
        if with_done:
            mods.append(
                TensorDictModule(lambda z: z[..., :1] > 2, [("next", "latent")], [("next", "done")])
            )
        from tensordict.nn import TensorDictSequential

        self.step_module = TensorDictSequential(*mods)


class _Ref(EnvBase):
    def __init__(self) -> None:
        super().__init__(batch_size=[2])
        self.observation_spec = Composite(latent=Unbounded((2, 3)), shape=[2])
        self.action_spec = Unbounded((2, 3))


def test_world_model_env_rollout_matches_hand_loop():
    env = WorldModelEnv(_StepOnly(with_done=False), base_env=_Ref())
    start = TensorDict(latent=torch.zeros(2, 3), batch_size=[2])
    ones = torch.ones(2, 3)
    out = env.rollout(4, actions=[ones] * 4, tensordict=start)
    assert out.batch_size == (2, 4)
    for t in range(4):
        torch.testing.assert_close(out["next", "latent"][:, t], ones * (t + 1))
        torch.testing.assert_close(out["next", "reward"][:, t], torch.full((2, 1), 3.0 * (t + 1)))
    assert not out["next", "done"].any()  # no done head: never done


def test_world_model_env_done_head_stops_rollout():
    env = WorldModelEnv(_StepOnly(with_done=True), base_env=_Ref())
    start = TensorDict(latent=torch.zeros(2, 3), batch_size=[2])
    out = env.rollout(10, actions=[torch.ones(2, 3)] * 10, tensordict=start)
    assert out.shape[-1] == 3 and out["next", "done"][:, -1].all()


def test_world_model_env_needs_a_latent_and_a_step_module():
    env = WorldModelEnv(_StepOnly(with_done=False), base_env=_Ref())
    with pytest.raises(RuntimeError, match="initial latent under 'latent'"):
        env.reset()
    with pytest.raises(TypeError, match="step_module"):
        WorldModelEnv(torch.nn.Linear(2, 2), base_env=_Ref())
