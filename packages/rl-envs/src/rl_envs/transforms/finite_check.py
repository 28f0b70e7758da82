"""``FiniteTensorDictCheck``: raises when an env writes a NaN or an infinite value."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_envs.transforms.transform import Transform


def _check_finite(td: TensorDictBase) -> TensorDictBase:
    for key, value in td.items(True, True):
        bad = (
            isinstance(value, torch.Tensor)
            and value.is_floating_point()
            and not bool(torch.isfinite(value).all())
        )
        if bad:
            raise ValueError(
                f"FiniteTensorDictCheck: Encountered a non-finite tensor at entry {key!r} (a NaN "
                f"or an infinite value, shape {tuple(value.shape)}); find where the env or a "
                "transform produces it."
            )
    return td


class FiniteTensorDictCheck(Transform):
    """Checks that every floating entry of each step, reset or sample is finite.

    Raises:
        ValueError: naming the first entry with a NaN or an infinity.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> FiniteTensorDictCheck()(TensorDict(a=torch.zeros(2)))["a"]
        tensor([0., 0.])
    """

    def __init__(self) -> None:
        super().__init__(in_keys=[])

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return _check_finite(next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return _check_finite(tensordict_reset)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return _check_finite(tensordict)
