"""split_trajectories against a plain Python loop."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_collectors import split_trajectories


def _reference(ids: torch.Tensor, values: torch.Tensor) -> list[list[float]]:
    """Cut every row where the id changes, drop id -1: list of trajectories (value lists)."""
    out = []
    for row_ids, row_values in zip(
        ids.reshape(-1, ids.shape[-1]), values.reshape(-1, ids.shape[-1]), strict=True
    ):
        current: list[float] = []
        previous = None
        for i, v in zip(row_ids.tolist(), row_values.tolist(), strict=True):
            if previous is not None and i != previous and current:
                out.append(current)
                current = []
            if i != -1:
                current.append(v)
            previous = i
        if current:
            out.append(current)
    return out


@pytest.mark.parametrize("shape", [(7,), (3, 6), (2, 2, 5)])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_python_loop(shape: tuple[int, ...], seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    changes = torch.rand(shape, generator=generator) < 0.3
    ids = torch.cumsum(changes.reshape(-1, shape[-1]).to(torch.int64), -1)
    ids = (ids + 100 * torch.arange(ids.shape[0]).unsqueeze(-1)).reshape(shape)
    if seed == 1:
        ids[..., -2:] = -1  # frames a preempted worker never collected
    values = torch.randn(shape)
    td = TensorDict(
        {"x": values, "flag": values > 0, "vec": values.unsqueeze(-1).expand(*shape, 2).clone(),
         ("collector", "traj_ids"): ids},
        batch_size=shape,
    )  # fmt: skip
    out = split_trajectories(td)
    mask = out["collector", "mask"]
    expected = _reference(ids, values)
    got = [out["x"][i][mask[i]].tolist() for i in range(out.shape[0])]
    assert got == expected
    assert out.shape == (len(expected), max(len(t) for t in expected))
    assert not out["x"][~mask].any() and not out["flag"][~mask].any()
    torch.testing.assert_close(out["vec"][..., 0], out["x"])


def test_missing_ids_are_reported() -> None:
    with pytest.raises(KeyError, match="traj_ids"):
        split_trajectories(TensorDict({"x": torch.zeros(3)}, [3]))
