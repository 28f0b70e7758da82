"""Fault suite, envs (issue 36): bad input at every env entry point gets a clear error.

Each case feeds one bad input and checks the error names what was expected, what came and
the fix (or that the documented behaviour holds). Quick: no case runs more than a few steps.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    CatTensors,
    DoubleToFloat,
    PendulumEnv,
    TransformedEnv,
)

OUT_OF_SPEC = pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")


def _pendulum(**kw):
    return PendulumEnv(**kw)


def _cheetah(**kw):
    pytest.importorskip("mujoco")
    from rl_envs.mujoco import HalfCheetahEnv

    return HalfCheetahEnv(num_envs=2, seed=0, num_threads=1, **kw)


# ------------------------------------------------------------- step before reset
def test_pendulum_step_before_reset():
    with pytest.raises(RuntimeError, match=r"step\(\) was called before reset\(\).*env.reset"):
        _pendulum().step(TensorDict(action=torch.zeros(1)))


def test_mujoco_step_before_reset():
    with pytest.raises(RuntimeError, match=r"HalfCheetahEnv.step\(\) was called before reset"):
        _cheetah().step(TensorDict(action=torch.zeros(2, 6), batch_size=[2]))


def test_rollout_without_reset_before_any_reset():
    env = _pendulum()
    start = TensorDict(observation=torch.zeros(3))
    with pytest.raises(RuntimeError, match=r"rollout\(auto_reset=False\).*before reset"):
        env.rollout(3, auto_reset=False, tensordict=start)


def test_stepping_a_done_env_without_reset():
    env = _pendulum()
    td = env.reset()
    td["done"] = torch.ones(1, dtype=torch.bool)
    with pytest.raises(RuntimeError, match=r"'done'=True.*must be reset.*step_and_maybe_reset"):
        env.step(td.set("action", torch.zeros(1)))


# ------------------------------------------------------------- MuJoCo reset kwargs
@pytest.mark.parametrize(("name", "bad"), [("qpos", float("nan")), ("qvel", float("inf"))])
def test_mujoco_reset_non_finite_state(name, bad):
    env = _cheetah()
    with pytest.raises(ValueError, match=rf"reset\({name}=...\): expected finite"):
        env.reset(**{name: torch.full((2, 9), bad)})


def test_mujoco_reset_wrong_shape_state():
    with pytest.raises(ValueError, match=r"reset\(qpos=...\) got shape \(9,\), expected \(2, 9\)"):
        _cheetah().reset(qpos=torch.zeros(9))


def test_mujoco_reset_unknown_keyword():
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['qpso'\]"):
        _cheetah().reset(qpso=torch.zeros(2, 9))


# ------------------------------------------------------------- MuJoCo divergence
def test_mujoco_diverged_simulation_raises():
    env = _cheetah()
    td = env.reset(qvel=torch.full((2, 9), 1e12))
    with pytest.raises(RuntimeError, match=r"env rows \[0, 1\] diverged.*Reset the env"):
        env.step(td.set("action", torch.zeros(2, 6)))


def test_mujoco_diverged_simulation_terminates_when_asked():
    env = _cheetah(on_unstable="terminate")
    qvel = torch.zeros(2, 9)
    qvel[1] = 1e12
    td = env.reset(qvel=qvel)
    with pytest.warns(UserWarning, match=r"env rows \[1\] diverged"):
        td = env.step(td.set("action", torch.zeros(2, 6)))
    assert td["next", "terminated"].flatten().tolist() == [False, True]


# ------------------------------------------------------------- non-finite / huge actions
@OUT_OF_SPEC
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e30])
def test_mujoco_non_finite_or_huge_action(bad):
    env = _cheetah()
    td = env.reset()
    with pytest.raises(ValueError, match=r"expected finite actions of magnitude <= 1e\+10"):
        env.step(td.set("action", torch.full((2, 6), bad)))


@OUT_OF_SPEC
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_pendulum_non_finite_action(bad):
    env = _pendulum()
    td = env.reset()
    with pytest.raises(ValueError, match=r"PendulumEnv: expected a finite action"):
        env.step(td.set("action", torch.full((1,), bad)))


@OUT_OF_SPEC
def test_pendulum_huge_finite_action_is_clamped_to_the_spec():
    env = _pendulum()
    td = env.step(env.reset().set("action", torch.full((1,), 1e30)))
    assert torch.isfinite(td["next", "reward"]).all()


def test_pendulum_reset_non_finite_start_state():
    with pytest.raises(ValueError, match=r"the input's 'th' must be finite"):
        _pendulum().reset(TensorDict(th=torch.full((1,), float("nan")), thdot=torch.zeros(1)))


# ------------------------------------------------------------- masks
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_non_bool_reset_mask(dtype):
    env = _pendulum(batch_size=[2])
    td = env.reset().set("_reset", torch.tensor([[1], [0]], dtype=dtype))
    with pytest.raises(TypeError, match=r"'_reset' must be a bool tensor.*mask.bool\(\)"):
        env.reset(td)


def test_non_bool_reset_mask_mujoco():
    env = _cheetah()
    td = env.reset().set("_reset", torch.tensor([[1.0], [0.0]]))
    with pytest.raises(TypeError, match=r"'_reset' must be a bool tensor"):
        env.reset(td)


def test_non_bool_step_mask():
    env = _pendulum(batch_size=[2])
    td = env.reset().set("action", torch.zeros(2, 1)).set("_step", torch.tensor([1, 0]))
    with pytest.raises(TypeError, match=r"'_step' must be a bool tensor"):
        env.step(td)


# ------------------------------------------------------------- missing / malformed actions
def test_missing_action_key_pendulum():
    env = _pendulum()
    with pytest.raises(KeyError, match=r"needs the action entry 'action'.*shape \(1,\)"):
        env.step(env.reset())


def test_missing_action_key_mujoco():
    env = _cheetah()
    with pytest.raises(KeyError, match=r"needs the action entry 'action'.*shape \(2, 6\)"):
        env.step(env.reset())


def test_wrong_action_shape():
    env = _pendulum()
    with pytest.raises(ValueError, match=r"wrong shape: expected \(1,\).*got \(3,\)"):
        env.step(env.reset().set("action", torch.zeros(3)))


def test_wrong_action_device():
    env = _pendulum()
    td = env.reset()
    td = TensorDict({k: v for k, v in td.items()})  # no device: entries may differ
    td.set("action", torch.zeros(1, device="meta"))
    with pytest.raises(ValueError, match=r"wrong device: expected cpu, got meta"):
        env.step(td)


def test_wrong_action_dtype_with_validation():
    env = _pendulum(validate_actions=True)
    with pytest.raises(ValueError, match=r"wrong dtype: expected torch.float32, got torch.int64"):
        env.step(env.reset().set("action", torch.zeros(1, dtype=torch.int64)))


def test_wrong_action_dtype_without_validation_is_cast_by_the_env():
    env = _pendulum()  # documented: TorchRL's behaviour, the env casts
    td = env.step(env.reset().set("action", torch.zeros(1, dtype=torch.int64)))
    assert td["next", "reward"].dtype == torch.float32


# ------------------------------------------------------------- seeds
@pytest.mark.parametrize("seed", ["abc", 1.5, torch.tensor(0.5)])
def test_seed_of_wrong_type(seed):
    with pytest.raises(TypeError, match=r"set_seed\(\): expected an int or None"):
        _pendulum().set_seed(seed)


def test_seed_of_wrong_type_mujoco():
    with pytest.raises(TypeError, match=r"HalfCheetahEnv.set_seed\(\): expected an int"):
        _cheetah().set_seed("abc")


# ------------------------------------------------------------- transforms fed wrong keys
def test_transform_with_missing_in_key():
    env = TransformedEnv(_pendulum(), DoubleToFloat(in_keys=["obs_typo"]))
    with pytest.raises(KeyError, match=r"in_key 'obs_typo' is missing.*present"):
        env.rollout(2)


def test_cat_tensors_with_missing_in_key():
    with pytest.raises(KeyError, match=r"in_key 'obs_typo' is not in the observation spec"):
        TransformedEnv(_pendulum(), CatTensors(in_keys=["obs_typo"], out_key="x")).rollout(2)


# ------------------------------------------------------------- Gymnasium
def _gym():
    return pytest.importorskip("gymnasium")


@OUT_OF_SPEC
def test_gym_nan_action():
    from rl_envs import GymEnv

    _gym()
    env = GymEnv("Pendulum-v1")
    with pytest.raises(ValueError, match=r"expected a finite action for Box"):
        env.step(env.reset().set("action", torch.full((1,), float("nan"))))


@OUT_OF_SPEC
def test_gym_out_of_space_discrete_action():
    from rl_envs import GymEnv

    _gym()
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    with pytest.raises(ValueError, match=r"rejected the action 7.*Discrete\(2\)"):
        env.step(env.reset().set("action", torch.tensor(7)))


def test_gym_env_raising_in_step():
    from rl_envs import GymWrapper

    gym = _gym()

    class Boom(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,))
        action_space = gym.spaces.Box(-1.0, 1.0, (1,))

        def reset(self, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            raise RuntimeError("physics exploded")

    env = GymWrapper(Boom())
    with pytest.raises(RuntimeError, match="physics exploded"):
        env.step(env.rand_action(env.reset()))


def test_gym_step_before_reset():
    from rl_envs import GymEnv

    _gym()
    with pytest.raises(Exception, match=r"Cannot call env.step\(\) before calling env.reset"):
        GymEnv("Pendulum-v1").step(TensorDict(action=torch.zeros(1)))


# ------------------------------------------------------------- PettingZoo
def _walkers(step_hook=None):
    """A 3-agent parallel PettingZoo env, Discrete(3) actions; ``step_hook`` edits step()."""
    pettingzoo = pytest.importorskip("pettingzoo")
    gym = _gym()
    from rl_envs.libs.pettingzoo import PettingZooWrapper

    class Walkers(pettingzoo.ParallelEnv):
        metadata = {"name": "walkers_v0"}  # noqa: RUF012 (PettingZoo's class attribute)

        def __init__(self):
            self.possible_agents = [f"walker_{i}" for i in range(3)]
            self.seen = []

        @functools.cache  # noqa: B019
        def observation_space(self, agent):
            return gym.spaces.Box(-10.0, 10.0, (2,), np.float32)

        @functools.cache  # noqa: B019
        def action_space(self, agent):
            return gym.spaces.Discrete(3)

        def reset(self, seed=None, options=None):
            self.agents = list(self.possible_agents)
            return {a: np.zeros(2, np.float32) for a in self.agents}, {}

        def step(self, actions):
            self.seen.append(actions)
            obs = {a: np.ones(2, np.float32) for a in self.agents}
            rew = dict.fromkeys(self.agents, 1.0)
            flags = dict.fromkeys(self.agents, False)
            out = (obs, rew, flags, dict(flags), {})
            return step_hook(out) if step_hook else out

    env = PettingZooWrapper(Walkers(), use_mask=True)
    return env, env.reset()


def test_pettingzoo_live_agent_without_observation():
    def drop(out):
        out[0].pop("walker_2")
        return out

    env, td = _walkers(drop)
    with pytest.raises(ValueError, match=r"agents \['walker_2'\] are live.*no observation"):
        env.step(env.rand_action(td))


def test_pettingzoo_agent_not_in_possible_agents():
    def spawn(out):
        out[0]["ghost"] = np.zeros(2, np.float32)
        return out

    env, td = _walkers(spawn)
    with pytest.raises(ValueError, match=r"\['ghost'\] that are not in possible_agents"):
        env.step(env.rand_action(td))


@OUT_OF_SPEC
@pytest.mark.parametrize("bad", [7, -1, 0.7])
def test_pettingzoo_out_of_space_discrete_action(bad):
    env, td = _walkers()
    group = next(iter(env.group_map))
    action = torch.zeros(env.full_action_spec[group, "action"].shape, dtype=torch.float64)
    action[0] = bad
    with pytest.raises(ValueError, match=r"agent 'walker_0'.*Discrete\(3\)"):
        env.step(td.set((group, "action"), action))
    assert env._env.seen == []


# ------------------------------------------------------------- VMAS
@OUT_OF_SPEC
def test_vmas_nan_action():
    pytest.importorskip("vmas")
    from rl_envs.libs.vmas import VmasEnv

    env = VmasEnv("navigation", num_envs=2, n_agents=2, seed=0)
    td = env.rand_action(env.reset())
    td.get(("agents", "action"))[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"agent 'agent_0'.*NaN or inf in env rows \[0\]"):
        env.step(td)


@pytest.mark.parametrize("batched", ["SerialEnv", "ParallelEnv"])
def test_batched_env_of_reset_requiring_envs_refuses_step_before_reset(batched):
    import rl_envs

    env = getattr(rl_envs, batched)(2, rl_envs.PendulumEnv)
    try:
        td = TensorDict(action=torch.zeros(2, 1), batch_size=[2])
        with pytest.raises(RuntimeError, match=r"step\(\) was called before reset\(\)"):
            env.step(td)
        root = env.reset()
        root["action"] = torch.zeros(2, 1)
        env.step(root)  # after a reset it steps
    finally:
        env.close()
