"""``set_truncated``: the last step of each batch ends its trajectories (truncated, done)."""

from __future__ import annotations

import functools

import pytest
import torch
from rl_collectors_toy_env import (
    ScalePolicy,
    ToyEnv,
    ToyEnvWithDoneKeys,
    make_toy_env_with_done_keys,
)

from rl_collectors import Collector, MultiAsyncCollector, MultiSyncCollector


def _batches(set_truncated: bool, use_env_rollout: bool = True) -> list:
    collector = Collector(
        ToyEnvWithDoneKeys((2,), min_len=3, span=4),
        ScalePolicy(1.0),
        frames_per_batch=10,
        total_frames=30,
        set_truncated=set_truncated,
        use_env_rollout=use_env_rollout,
    )
    return list(collector)


@pytest.mark.parametrize("use_env_rollout", [True, False])
def test_last_step_is_truncated_and_done_and_nothing_else_changes(use_env_rollout: bool) -> None:
    plain = _batches(False, use_env_rollout)
    cut = _batches(True, use_env_rollout)
    for before, after in zip(plain, cut, strict=True):
        last = torch.zeros(before.shape, dtype=torch.bool)
        last[..., -1] = True
        expected_trunc = before["next", "truncated"] | last.unsqueeze(-1)
        assert torch.equal(after["next", "truncated"], expected_trunc)
        assert torch.equal(after["next", "done"], before["next", "done"] | last.unsqueeze(-1))
        # terminated is left alone, and the env is not reset: observations, ids are the same
        assert torch.equal(after["next", "terminated"], before["next", "terminated"])
        assert torch.equal(after["observation"], before["observation"])
        assert torch.equal(after["collector", "traj_ids"], before["collector", "traj_ids"])


def test_env_without_a_truncated_key_is_refused() -> None:
    with pytest.raises(ValueError, match="add_truncated_keys"):
        Collector(ToyEnv(), None, frames_per_batch=4, set_truncated=True)


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_multiprocess_workers_truncate_their_last_step(cls) -> None:
    with cls(
        [functools.partial(make_toy_env_with_done_keys, batch_size=(2,))] * 2,
        ScalePolicy(1.0),
        frames_per_batch=20,
        total_frames=40,
        set_truncated=True,
        cat_results="stack",
    ) as collector:
        for batch in collector:
            assert batch["next", "truncated"][..., -1, :].all()
            assert batch["next", "done"][..., -1, :].all()
            assert not batch["next", "truncated"][..., :-1, :].any()  # the toy env never truncates
