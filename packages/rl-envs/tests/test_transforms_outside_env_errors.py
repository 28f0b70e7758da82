"""Env-only transforms used on bare data raise with TorchRL 0.14's phrases and types."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Compose,
    FrameSkipTransform,
    InitTracker,
    NoopResetEnv,
    StepCounter,
    TargetReturn,
)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (InitTracker, "InitTracker cannot be executed without a parent"),
        (lambda: Compose(InitTracker()), "InitTracker cannot be executed without a parent"),
        (StepCounter, "StepCounter cannot be called independently"),
        (
            FrameSkipTransform,
            "FrameSkipTransform can only be used when appended to a transformed env",
        ),
        (NoopResetEnv, r"NoopResetEnv\.parent not found\. Make sure that the parent is set\."),
        (lambda: TargetReturn(200.0), "cannot be executed without a parent"),
    ],
)
def test_forward_on_data_raises(make, match):
    td = TensorDict(observation=torch.zeros(3, 2), batch_size=[3])
    with pytest.raises(NotImplementedError, match=match):
        make()(td)


def test_frame_skip_outside_env():
    td = TensorDict(reward=torch.zeros(1), done=torch.zeros(1, dtype=torch.bool))
    with pytest.raises(RuntimeError, match="parent not found for FrameSkipTransform"):
        FrameSkipTransform(2)._step(td, td.clone())
    with pytest.raises(ValueError, match="frame_skip should have a value greater or equal to one"):
        FrameSkipTransform(0)


def test_noop_reset_outside_env():
    td = TensorDict(observation=torch.zeros(2))
    with pytest.raises(RuntimeError, match=r"NoopResetEnv\.parent not found"):
        NoopResetEnv()._reset(td, td.clone())


def test_compose_pop_out_of_range_is_an_index_error():
    compose = Compose(StepCounter())
    compose.pop()
    with pytest.raises(IndexError, match="index -1 is out of range"):
        compose.pop()
    with pytest.raises(IndexError, match="index 3 is out of range"):
        Compose(StepCounter()).pop(3)


def test_cat_frames_on_unbatched_data():
    from rl_envs import CatFrames

    with pytest.raises(ValueError, match="cannot process unbatched tensordict instances"):
        CatFrames(N=2, dim=-1, in_keys=["obs"])(TensorDict(obs=torch.zeros(3)))
