"""A collector batch filled by one ``env.rollout`` call equals the step-by-step batch.

``Collector(use_env_rollout=True)`` (the default) hands whole batches to the env's
rollout loop; ``use_env_rollout=False`` steps the env itself. With the same seeds
both must give the same batches, bit for bit: observations, actions, policy
outputs, rewards, flags, trajectory ids, and the state carried to the next batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from rl_collectors import Collector
from rl_envs import (
    GymEnv,
    InitTracker,
    NextObservationDelta,
    PendulumEnv,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
)
from rl_modules import MLP, NormalParamExtractor, ProbabilisticActor, TanhNormal


def _stochastic_actor(env: Any) -> ProbabilisticActor:
    obs_dim = env.observation_spec["observation"].shape[-1]
    torch.manual_seed(0)
    params = TensorDictModule(
        nn.Sequential(MLP(obs_dim, 2, num_cells=[16]), NormalParamExtractor()),
        in_keys=["observation"],
        out_keys=["loc", "scale"],
    )
    return ProbabilisticActor(
        params,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        spec=env.action_spec_unbatched,
        return_log_prob=True,
    )


def _mlp_policy(env: Any) -> TensorDictModule:
    obs_dim = env.observation_spec["observation"].shape[-1]
    torch.manual_seed(0)
    net = nn.Sequential(MLP(obs_dim, 1, num_cells=[16]), nn.Tanh())
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def _gym_pendulum() -> Any:
    return GymEnv("Pendulum-v1")


def _short_pendulum() -> Any:
    # Episodes of 7 steps: several ends inside each batch, one on a batch boundary.
    return TransformedEnv(PendulumEnv(batch_size=[3]), StepCounter(max_steps=7))


def _tracked_serial() -> Any:
    env = SerialEnv(2, lambda: TransformedEnv(PendulumEnv(), StepCounter(max_steps=5)))
    return TransformedEnv(env, InitTracker()).append_transform(RewardSum())


def _delta_compressed() -> Any:
    return TransformedEnv(PendulumEnv(batch_size=[2]), StepCounter(max_steps=6)).append_transform(
        NextObservationDelta()
    )


CASES: dict[str, tuple[Callable[[], Any], Callable[[Any], Any] | None, int]] = {
    "gym-mlp": (_gym_pendulum, _mlp_policy, 250),
    "gym-random": (_gym_pendulum, None, 250),
    "batched-stochastic": (_short_pendulum, _stochastic_actor, 21),
    "serial-transformed": (_tracked_serial, _stochastic_actor, 20),
    # post-step_mdp hooks: the collector steps it (the stored steps lack ("next", obs))
    "next-observation-delta": (_delta_compressed, _stochastic_actor, 14),
}


def _collect(case: str, use_env_rollout: bool, batches: int) -> tuple[list[Any], Collector]:
    make_env, make_policy, frames = CASES[case]
    env = make_env()
    env.set_seed(3)
    policy = make_policy(env) if make_policy else None
    torch.manual_seed(1)
    collector = Collector(
        env,
        policy,
        frames_per_batch=frames,
        total_frames=frames * batches,
        use_env_rollout=use_env_rollout,
    )
    return [batch for batch in collector], collector


@pytest.mark.parametrize("case", sorted(CASES))
def test_rollout_batches_equal_stepped_batches(case: str) -> None:
    fused, fused_collector = _collect(case, use_env_rollout=True, batches=3)
    stepped, stepped_collector = _collect(case, use_env_rollout=False, batches=3)
    assert fused_collector.last_timings.fused == (case != "next-observation-delta")
    assert not stepped_collector.last_timings.fused
    for fast, slow in zip(fused, stepped, strict=True):
        assert set(fast.keys(True, True)) == set(slow.keys(True, True))
        for key in slow.keys(True, True):
            assert torch.equal(fast.get(key), slow.get(key)), key
    done = torch.cat([b.get(("next", "done")) for b in stepped]).sum()
    assert done > 0, "the case must end episodes inside the batches"
    assert fused_collector.frames == stepped_collector.frames


def test_rollout_path_keeps_the_random_phase_stepped() -> None:
    """Batches holding random steps (init_random_frames) keep the policy's keys as zeros."""
    env = TransformedEnv(PendulumEnv(batch_size=[2]), StepCounter(max_steps=9))
    env.set_seed(0)
    collector = Collector(
        env, _stochastic_actor(env), frames_per_batch=20, total_frames=60, init_random_frames=20
    )
    batches, fused = [], []
    for batch in collector:
        batches.append(batch)
        fused.append(collector.last_timings.fused)
    assert fused == [False, True, True]
    first, second, third = batches
    assert (first.get("loc") == 0).all() and (second.get("loc") != 0).any()
    ids = torch.cat([first, second, third], dim=1).get(("collector", "traj_ids"))
    assert (ids.diff(dim=1) >= 0).all(), "trajectory ids only grow along time"
