"""PendulumEnv: parity with Gymnasium's Pendulum-v1, batching, partial resets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rl_envs import PendulumEnv, check_env_specs, step_mdp

gym = pytest.importorskip("gymnasium")


def test_parity_with_gymnasium_pendulum():
    """Same initial state and actions => same observations and rewards, 200 steps."""
    ref = gym.make("Pendulum-v1").unwrapped
    env = PendulumEnv(batch_size=[2])
    rng = np.random.default_rng(0)
    th0 = rng.uniform(-np.pi, np.pi, size=2)
    thdot0 = rng.uniform(-1, 1, size=2)
    actions = rng.uniform(-2.5, 2.5, size=(200, 2, 1)).astype(np.float32)  # some clipped
    td = env.reset(
        TensorDict(th=torch.from_numpy(th0), thdot=torch.from_numpy(thdot0), batch_size=[2])
    )
    for i in range(2):
        ref.reset(seed=0)
        ref.state = np.array([th0[i], thdot0[i]])
        np.testing.assert_array_equal(td["observation"][i].numpy(), ref._get_obs())
    obs_ref = np.zeros((2, 200, 3), np.float32)
    rew_ref = np.zeros((2, 200), np.float32)
    for i in range(2):
        ref.reset(seed=0)
        ref.state = np.array([th0[i], thdot0[i]])
        for t in range(200):
            o, r, *_ = ref.step(actions[t, i])
            obs_ref[i, t], rew_ref[i, t] = o, r
    obs, rew = [], []
    for t in range(200):
        td = env.step(td.set("action", torch.from_numpy(actions[t]).clamp(-2, 2)))
        obs.append(td["next", "observation"])
        rew.append(td["next", "reward"])
        td = step_mdp(td)
        if t < 199:
            assert not td["done"].any()
    assert td["truncated"].all()  # Gymnasium's TimeLimit(200)
    obs = torch.stack(obs, 1).numpy()
    rew = torch.stack(rew, 1).squeeze(-1).numpy()
    np.testing.assert_allclose(obs, obs_ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(rew, rew_ref, rtol=1e-6, atol=1e-6)


def test_unclipped_actions_are_clipped_like_gymnasium():
    env = PendulumEnv(validate_actions=False)
    start = TensorDict(
        th=torch.tensor(0.3, dtype=torch.float64), thdot=torch.tensor(0.1, dtype=torch.float64)
    )
    with pytest.warns(UserWarning, match="outside its spec"):
        a = env.step(env.reset(start).set("action", torch.tensor([9.0])))["next", "observation"]
    b = env.step(env.reset(start).set("action", torch.tensor([2.0])))["next", "observation"]
    assert torch.equal(a, b)


@pytest.mark.parametrize("batch_size", [(), (3,), (2, 2)])
def test_check_env_specs(batch_size):
    env = PendulumEnv(batch_size=batch_size)
    env.set_seed(0)
    check_env_specs(env)


def test_seeding_determinism():
    env = PendulumEnv(batch_size=[4])
    out = []
    for _ in range(2):
        env.set_seed(7)
        torch.manual_seed(7)
        out.append(env.rollout(50))
    assert (out[0] == out[1]).all()


def test_partial_reset_only_touches_masked_entries():
    env = PendulumEnv(batch_size=[3])
    env.set_seed(0)
    td = step_mdp(env.rand_step())
    before = td["observation"].clone()
    td.set("_reset", torch.tensor([[False], [True], [False]]))
    out = env.reset(td)
    assert torch.equal(out["observation"][[0, 2]], before[[0, 2]])
    assert not torch.equal(out["observation"][1], before[1])


def test_batched_rollout_matches_single_envs_dynamics():
    """A batched step equals the per-entry steps (reference: batch of 1 envs)."""
    env = PendulumEnv(batch_size=[3])
    th = torch.tensor([0.1, -2.0, 3.0], dtype=torch.float64)
    thdot = torch.tensor([0.5, -0.3, 0.0], dtype=torch.float64)
    act = torch.tensor([[1.0], [-2.0], [0.3]])
    batched = env.step(env.reset(TensorDict(th=th, thdot=thdot, batch_size=[3])).set("action", act))
    for i in range(3):
        single = PendulumEnv()
        s = single.reset(TensorDict(th=th[i], thdot=thdot[i]))
        s = single.step(s.set("action", act[i]))
        assert torch.equal(s["next", "observation"], batched["next", "observation"][i])


@pytest.mark.gpu
def test_cuda_matches_cpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    th = torch.tensor([0.1, -2.0], dtype=torch.float64)
    thdot = torch.tensor([0.5, -0.3], dtype=torch.float64)
    act = torch.tensor([[1.0], [-2.0]])
    outs = []
    for device in ("cpu", "cuda"):
        env = PendulumEnv(batch_size=[2], device=device)
        td = env.reset(TensorDict(th=th, thdot=thdot, batch_size=[2]))
        td = env.step(td.set("action", act.to(device)))
        outs.append(td["next", "observation"].cpu())
    torch.testing.assert_close(outs[0], outs[1])


@pytest.mark.parametrize("batch_size", [(), (3,)])
def test_get_set_state_resume_is_bit_identical(batch_size, assert_resume_is_exact):
    ref = assert_resume_is_exact(
        lambda: PendulumEnv(batch_size=batch_size, max_episode_steps=10), 7, 25
    )
    assert ref["next", "done"].any()  # crosses episode boundaries (random resets)


def test_set_state_batch_mismatch():
    state = PendulumEnv(batch_size=[2]).get_state()
    with pytest.raises(ValueError, match="batch_size"):
        PendulumEnv(batch_size=[3]).set_state(state)


@pytest.mark.parametrize("break_when_any_done", [False, True])
@pytest.mark.parametrize("batch_size", [(), (5,), (2, 3)])
def test_fast_rollout_equals_generic_loop(batch_size, break_when_any_done):
    """The tensor-only rollout (random actions) = the generic loop, incl. resets and the
    env's state afterwards; episodes of different ages come from a partial reset."""
    env = PendulumEnv(batch_size=batch_size, max_episode_steps=7)
    runs, states = [], []
    for backend in ("pendulum", "generic"):
        env.set_seed(0)
        torch.manual_seed(0)
        root = step_mdp(env.rollout(3, break_when_any_done=False)[..., -1])
        mask = torch.zeros(*batch_size, 1, dtype=torch.bool)
        mask.view(-1)[0] = True
        root = env.reset(root.set("_reset", mask))
        runs.append(
            env.rollout(
                20,
                backend=backend,
                auto_reset=False,
                tensordict=root,
                break_when_any_done=break_when_any_done,
            )
        )
        states.append(env.get_state())
    a, b = runs
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key
    for key in ("th", "thdot", "t"):
        assert torch.equal(states[0][key], states[1][key]), key
    assert a["next", "done"].any()


def test_step_before_reset_raises():
    with pytest.raises(RuntimeError, match=r"PendulumEnv.step\(\) was called before reset"):
        PendulumEnv().step(TensorDict(action=torch.zeros(1)))


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")  # EnvBase's probe, first
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_action_raises_and_leaves_the_state(bad):
    env = PendulumEnv(batch_size=[2])
    td = env.reset()
    state = env.get_state()
    with pytest.raises(ValueError, match=r"PendulumEnv: expected a finite action"):
        env.step(td.set("action", torch.tensor([[0.0], [bad]])))
    assert torch.equal(env.get_state()["th"], state["th"])


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")
def test_huge_finite_action_is_clamped_as_in_gymnasium():
    env = PendulumEnv()
    td = env.reset(TensorDict(th=torch.zeros(1), thdot=torch.zeros(1)))
    huge = env.step(td.clone().set("action", torch.full((1,), 1e30)))
    env.reset(TensorDict(th=torch.zeros(1), thdot=torch.zeros(1)))
    top = env.step(td.clone().set("action", torch.full((1,), env.max_torque)))
    assert torch.equal(huge["next", "observation"], top["next", "observation"])


@pytest.mark.parametrize("key", ["th", "thdot"])
def test_reset_with_non_finite_start_state_raises(key):
    td = TensorDict(th=torch.zeros(1), thdot=torch.zeros(1))
    td[key] = torch.full((1,), float("nan"))
    with pytest.raises(ValueError, match=rf"the input's '{key}' must be finite"):
        PendulumEnv().reset(td)


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")
def test_finite_actions_whose_sum_overflows_are_not_taken_for_inf():
    env = PendulumEnv(batch_size=[2])
    td = env.step(env.reset().set("action", torch.full((2, 1), 3e38)))  # sum: inf in float32
    assert torch.isfinite(td["next", "reward"]).all()
