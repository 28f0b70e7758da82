"""``rl_envs.transforms.functional.cat_frames`` against a plain Python loop."""

from __future__ import annotations

import pytest
import torch

from rl_envs.transforms.functional import cat_frames


def _reference(
    x: torch.Tensor, n: int, padding: str, value: float, starts: list[int]
) -> torch.Tensor:
    """Loop over time of a [T, d] tensor; ``starts[t]``: first step of t's trajectory."""
    rows = []
    for t in range(x.shape[0]):
        window = []
        for s in range(t - n + 1, t + 1):
            if s >= starts[t]:
                window.append(x[s])
            elif padding == "same":
                window.append(x[starts[t]])
            else:
                window.append(torch.full_like(x[0], value))
        rows.append(torch.cat(window))
    return torch.stack(rows)


@pytest.mark.parametrize("padding", ["same", "constant"])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_single_trajectory_matches_loop(padding: str, n: int) -> None:
    x = torch.randn(7, 3)
    out = cat_frames(x, N=n, dim=-1, time_dim=-2, padding=padding, padding_value=-2.0)
    torch.testing.assert_close(out, _reference(x, n, padding, -2.0, [0] * 7))


@pytest.mark.parametrize("padding", ["same", "constant"])
def test_done_mask_restarts_windows(padding: str) -> None:
    n, T = 3, 6
    x = torch.randn(T, 2)
    starts = [0, 0, 0, 3, 3, 3]  # a trajectory ends at step 2
    mask = torch.tensor([[s < starts[t] for s in range(t - n + 1, t + 1)] for t in range(T)])
    out = cat_frames(x, N=n, dim=-1, time_dim=-2, padding=padding, done_mask=mask.unsqueeze(-2))
    torch.testing.assert_close(out, _reference(x, n, padding, 0.0, starts))


def test_batch_dims_and_dtype_kept() -> None:
    x = torch.arange(2 * 4 * 2).view(2, 4, 2)
    out = cat_frames(x, N=2, dim=-1, time_dim=-2, padding="constant", padding_value=9)
    assert out.dtype == torch.int64 and out.shape == (2, 4, 4)
    for b in range(2):
        torch.testing.assert_close(out[b], _reference(x[b], 2, "constant", 9, [0] * 4))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dim": 0}, "dim must be < 0"),
        ({"dim": -1, "time_dim": 1}, "time_dim must be < 0"),
        ({"dim": -1, "padding": "zeros"}, "padding must be one of"),
    ],
)
def test_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cat_frames(torch.zeros(1, 5, 2), N=2, **kwargs)
