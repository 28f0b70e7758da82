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


def _two_rows() -> TensorDict:
    from tensordict import TensorDict

    done = torch.zeros(2, 5, 1, dtype=torch.bool)
    done[0, 1] = done[1, 3] = True
    return TensorDict({"x": torch.arange(10.0).reshape(2, 5), ("next", "done"): done}, [2, 5])


def test_torchrl_keywords_prefix_trajectory_key_and_done_key() -> None:
    from rl_collectors import split_trajectories

    td = _two_rows()
    # No ids and no "collector" entry: rebuilt from ("next", "done") at the root, as TorchRL.
    out = split_trajectories(td)
    assert out["x"].tolist() == [[0, 1, 0, 0], [2, 3, 4, 0], [5, 6, 7, 8], [9, 0, 0, 0]]
    assert out["mask"].sum(1).tolist() == [2, 3, 4, 1]
    assert out["traj_ids"][:, 0].tolist() == [0, 1, 2, 3]
    with_ids = td.clone()
    with_ids["collector", "traj_ids"] = torch.tensor([[0, 0, 0, 1, 1], [2, 2, 2, 2, 2]])
    by_prefix = split_trajectories(with_ids, prefix="collector")
    by_key = split_trajectories(with_ids, trajectory_key=("collector", "traj_ids"))
    assert torch.equal(by_prefix["x"], by_key["x"]) and by_key.shape == (3, 5)
    assert by_key["collector", "mask"].sum(1).tolist() == [3, 2, 5]


def test_as_nested_matches_the_padded_layout() -> None:
    from rl_collectors import split_trajectories

    td = _two_rows()
    padded = split_trajectories(td)
    nested = split_trajectories(td, as_nested=True)
    assert nested.shape[-1] == -1 and nested["next", "done"].is_nested
    for i, length in enumerate(padded["mask"].sum(1).tolist()):
        assert torch.equal(nested[i]["x"], padded["x"][i, :length])
