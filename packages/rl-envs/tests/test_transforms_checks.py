"""FiniteTensorDictCheck and RemoveEmptySpecs."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Composite,
    EnvBase,
    FiniteTensorDictCheck,
    PendulumEnv,
    RemoveEmptySpecs,
    TransformedEnv,
    Unbounded,
    check_env_specs,
)


def test_finite_check_passes_finite_data_and_names_the_bad_entry() -> None:
    env = TransformedEnv(PendulumEnv(), FiniteTensorDictCheck())
    assert env.rollout(3).batch_size == (3,)
    with pytest.raises(ValueError, match=r"\('nested', 'x'\)"):
        FiniteTensorDictCheck()(TensorDict(nested=TensorDict(x=torch.tensor([0.0, float("nan")]))))


class WithEmpty(EnvBase):
    """Declares an empty nested observation and writes an empty sub-TensorDict."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Composite(
            observation=Unbounded(shape=(2,)), other=Composite(inner=Composite())
        )
        self.action_spec = Unbounded(shape=(1,))

    def _out(self) -> TensorDict:
        return TensorDict(observation=torch.zeros(2), other=TensorDict(inner=TensorDict()))

    def _reset(self, td):
        return self._out()

    def _step(self, td):
        return self._out().set("reward", torch.zeros(1))

    def _set_seed(self, seed):
        pass


def test_remove_empty_specs_drops_empty_entries_from_specs_and_data() -> None:
    env = TransformedEnv(WithEmpty(), RemoveEmptySpecs())
    assert list(env.observation_spec.keys()) == ["observation"]
    ro = env.rollout(2)
    assert "other" not in set(ro.keys()) | set(ro["next"].keys())
    check_env_specs(env)


def test_finite_check_error_phrase():
    with pytest.raises(ValueError, match="Encountered a non-finite tensor"):
        FiniteTensorDictCheck()(TensorDict(x=torch.tensor([float("inf")])))
