"""A recurrent policy in a real env: the env carries the LSTM state, and step mode equals sequence mode."""

from __future__ import annotations

import pytest
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

from rl_collectors import Collector
from rl_envs import InitTracker, PendulumEnv, StepCounter, TransformedEnv
from rl_modules import LSTMModule, set_recurrent_mode


def _policy() -> tuple[TensorDictSequential, LSTMModule]:
    lstm = LSTMModule(input_size=3, hidden_size=8, in_key="observation", out_key="features")
    head = TensorDictModule(
        torch.nn.Sequential(torch.nn.Linear(8, 1), torch.nn.Tanh()),
        in_keys=["features"],
        out_keys=["action"],
    )
    return TensorDictSequential(lstm, head), lstm


def test_collected_steps_equal_the_sequence_mode_replay() -> None:
    torch.manual_seed(0)
    policy, lstm = _policy()
    env = TransformedEnv(PendulumEnv(batch_size=[3]), InitTracker())
    env.append_transform(StepCounter(max_steps=7))  # several episodes inside one batch
    env.append_transform(lstm.make_tensordict_primer())  # a TorchRL-style primer description
    collector = Collector(env, policy, frames_per_batch=60, total_frames=60)
    batch = next(iter(collector))
    collector.shutdown()
    assert batch.shape == (3, 20) and batch["is_init"].sum() >= 6
    # the state really moves along a trajectory (it was carried, not re-zeroed each step)
    h = batch["recurrent_state_h"]
    assert h[:, 1:].abs().sum() > 0
    replay = batch.select("observation", "is_init", "recurrent_state_h", "recurrent_state_c")
    with torch.no_grad(), set_recurrent_mode(True):
        replayed = policy(replay.clone())
    torch.testing.assert_close(replayed["action"], batch["action"], rtol=1e-5, atol=1e-6)


def test_an_env_without_the_primer_is_an_error_not_a_silent_reset() -> None:
    policy, _ = _policy()
    env = TransformedEnv(PendulumEnv(batch_size=[2]), InitTracker())
    with pytest.raises(RuntimeError, match="TensorDictPrimer"):
        env.rollout(5, policy)
