"""Rollouts name their last dim "time" (TorchRL's behaviour); CatFrames.unfolding reads it."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import CatFrames, GymEnv, PendulumEnv, StepCounter, TransformedEnv


@pytest.mark.parametrize(
    ("make", "names"),
    [
        (lambda: GymEnv("CartPole-v1"), ["time"]),  # the fast path
        (lambda: PendulumEnv(batch_size=[2]), [None, "time"]),
        (lambda: TransformedEnv(PendulumEnv(), StepCounter()), ["time"]),
    ],
)
def test_rollout_last_dim_is_named_time(make, names) -> None:
    env = make()
    ro = env.rollout(4)
    assert ro.names == names
    assert ro["next"].names == names
    # and the usual reshapes still work on it
    assert ro.reshape(-1).batch_size.numel() == ro.batch_size.numel()


def test_lazy_or_preallocated_rollouts_keep_their_names() -> None:
    env = PendulumEnv()
    lazy = env.rollout(3, return_contiguous=False)
    assert not lazy._has_names()
    out = env.rollout(3).clone().rename(None)
    assert not env.rollout(3, out=out)._has_names()


def test_cat_frames_unfolding_matches_forward_and_hand_computed_frames() -> None:
    obs = torch.arange(5.0).reshape(5, 1)
    done = torch.tensor([False, True, False, False, False]).reshape(5, 1)
    td = TensorDict(obs=obs, next=TensorDict(done=done, batch_size=[5]), batch_size=[5])
    td = td.refine_names("time")
    t = CatFrames(N=2, dim=-1, in_keys=["obs"], out_keys=["stacked"])
    out = t.unfolding(td.clone())["stacked"]
    # padding "same": an episode's first frame repeats; a new episode starts after step 1
    assert out.tolist() == [[0.0, 0.0], [0.0, 1.0], [2.0, 2.0], [2.0, 3.0], [3.0, 4.0]]
    assert torch.equal(out, t(td.clone())["stacked"])
    batch = TensorDict(obs=torch.zeros(5, 2, 1), batch_size=[5, 2]).refine_names("time", None)
    with pytest.raises(ValueError, match="'time' dim must be the last"):
        t.unfolding(batch)
