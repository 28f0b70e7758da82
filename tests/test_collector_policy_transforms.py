"""Collector(auto_register_policy_transforms=...): the env gets what a recurrent policy needs."""

from __future__ import annotations

import warnings

import pytest
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

from rl_collectors import Collector
from rl_envs import InitTracker, PendulumEnv, TransformedEnv
from rl_modules import ConsistentDropoutModule, GRUModule


def _policy() -> TensorDictSequential:
    gru = GRUModule(input_size=3, hidden_size=8, in_key="observation", out_key="features")
    head = TensorDictModule(torch.nn.Linear(8, 1), in_keys=["features"], out_keys=["action"])
    return TensorDictSequential(gru, head)


def _init_keys(env) -> int:
    return sum(k == "is_init" for k in env.full_observation_spec.keys(True, True))


def test_true_appends_the_init_tracker_and_the_primer_once() -> None:
    collector = Collector(PendulumEnv(batch_size=[2]), _policy(), frames_per_batch=8,
                          total_frames=8, auto_register_policy_transforms=True)  # fmt: skip
    keys = set(collector.env.full_observation_spec.keys(True, True))
    assert {"is_init", "recurrent_state"} <= keys
    batch = next(iter(collector))
    collector.shutdown()
    assert batch["is_init"][:, 0].all() and not batch["is_init"][:, 1:].any()
    assert batch["next", "recurrent_state"][:, -1].abs().sum() > 0  # the state was carried
    # idempotent: an env that has them already gets nothing more
    again = Collector(collector.env, _policy(), frames_per_batch=8, total_frames=8,
                      auto_register_policy_transforms=True)  # fmt: skip
    assert _init_keys(again.env) == 1 and again.env is collector.env
    partly = TransformedEnv(PendulumEnv(batch_size=[2]), InitTracker())
    third = Collector(partly, _policy(), frames_per_batch=8, total_frames=8,
                      auto_register_policy_transforms=True)  # fmt: skip
    assert _init_keys(third.env) == 1
    assert "recurrent_state" in third.env.full_observation_spec.keys(True, True)


def test_default_warns_and_false_is_silent_both_leave_the_env() -> None:
    env = PendulumEnv(batch_size=[2])
    with pytest.warns(FutureWarning, match="auto_register_policy_transforms"):
        collector = Collector(env, _policy(), frames_per_batch=8, total_frames=8)
    assert collector.env is env
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        quiet = Collector(env, _policy(), frames_per_batch=8, total_frames=8,
                          auto_register_policy_transforms=False)  # fmt: skip
    assert quiet.env is env and "is_init" not in env.full_observation_spec.keys(True, True)
    # a policy without recurrent modules needs nothing: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        plain = TensorDictModule(
            torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"]
        )
        Collector(env, plain, frames_per_batch=8, total_frames=8)


def test_a_module_that_cannot_build_its_primer_is_skipped_with_a_warning() -> None:

    policy = TensorDictSequential(
        GRUModule(input_size=3, hidden_size=8, in_key="observation", out_key="features"),
        ConsistentDropoutModule(0.1, in_keys="features"),  # no input_shape: no primer
        TensorDictModule(torch.nn.Linear(8, 1), in_keys=["features"], out_keys=["action"]),
    )
    with pytest.warns(UserWarning, match="ConsistentDropoutModule: .*input_shape"):
        collector = Collector(PendulumEnv(batch_size=[2]), policy, frames_per_batch=8,
                              total_frames=8, auto_register_policy_transforms=True)  # fmt: skip
    keys = set(collector.env.full_observation_spec.keys(True, True))
    assert {"is_init", "recurrent_state"} <= keys  # the GRU still got its primer
    collector.shutdown()
