"""``NextStateReconstructor``: rebuilds ``("next", obs)`` of a flat sample from its neighbours."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, as_key_list
from rl_envs.transforms.transform import Transform


def _under_next(key: NestedKey) -> tuple[str, ...]:
    return ("next", *key) if isinstance(key, tuple) else ("next", key)


class NextStateReconstructor(Transform):
    """Writes ``("next", k)[i] = k[i + 1]`` where position ``i + 1`` continues ``i``'s trajectory.

    The consumer side of collectors that drop ``("next", obs)`` before storing (those
    entries repeat the root entries of the following step). On a flat ``[B]`` sample,
    position ``i + 1`` is the next step of position ``i`` when both carry the same
    trajectory id (``traj_key``), step ``i`` is not done (``done_key``: it catches two
    slices of one trajectory put back to back) and, if ``step_count_key`` is given,
    the step counts follow each other. Elsewhere (trajectory ends, the last position,
    a random sample's unrelated neighbours) ``fill_value`` (NaN) is written.

    Args:
        keys: the root entries whose ``("next", k)`` counterpart is rebuilt.
        traj_key: the trajectory ids; ``None``: the sample is one trajectory.
        done_key: the done flags of each step; ``None``: not checked.
        step_count_key: step counts that must increase by one; ``None``: not checked.
        fill_value: written where the next step is not in the sample. Integer
            entries need an integer (NaN cannot be stored).
        strict: a configured marker key missing from the sample raises a
            ``KeyError`` (``False``: that check is dropped).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(
        ...     {"observation": torch.arange(4.0).unsqueeze(-1),
        ...      ("next", "done"): torch.tensor([[False], [True], [False], [False]]),
        ...      ("collector", "traj_ids"): torch.tensor([0, 0, 1, 1])},
        ...     batch_size=[4],
        ... )
        >>> NextStateReconstructor()(td)["next", "observation"].squeeze(-1)
        tensor([1., nan, 3., nan])
    """

    def __init__(
        self,
        keys: Sequence[NestedKey] = ("observation",),
        *,
        traj_key: NestedKey | None = ("collector", "traj_ids"),
        done_key: NestedKey | None = ("next", "done"),
        step_count_key: NestedKey | None = None,
        fill_value: float = float("nan"),
        strict: bool = True,
    ) -> None:
        super().__init__()
        self.keys = tuple(as_key_list(list(keys)))
        self.traj_key = traj_key
        self.done_key = done_key
        self.step_count_key = step_count_key
        self.fill_value = fill_value
        self.strict = strict

    def _marker(
        self, tensordict: TensorDictBase, key: NestedKey | None, what: str
    ) -> torch.Tensor | None:
        """The ``[B]`` marker at ``key`` (first element of trailing dims), or ``None``."""
        if key is None:
            return None
        value = tensordict.get(key, None)
        if value is None:
            if self.strict:
                raise KeyError(
                    f"NextStateReconstructor: the {what} {key!r} is not in the sample "
                    f"(keys: {sorted(map(str, tensordict.keys(True, True)))}). Pass the "
                    f"right key, None to skip this check, or strict=False to drop it "
                    "silently."
                )
            return None
        batch = tensordict.batch_size[0]
        if value.shape[0] != batch:
            raise ValueError(
                f"NextStateReconstructor: the {what} {key!r} has leading dim "
                f"{value.shape[0]}, the sample has {batch} elements."
            )
        return value.reshape(batch, -1)[:, 0]

    def _continues(self, tensordict: TensorDictBase) -> torch.Tensor:
        """``[B]`` bool: whether position ``i + 1`` is the next step of position ``i``."""
        batch = tensordict.batch_size[0]
        ok = torch.zeros(batch, dtype=torch.bool, device=tensordict.device)
        ok[:-1] = True
        traj = self._marker(tensordict, self.traj_key, "trajectory key")
        if traj is not None:
            ok[:-1] &= traj[1:] == traj[:-1]
        done = self._marker(tensordict, self.done_key, "done key")
        if done is not None:
            ok[:-1] &= ~done[:-1].bool()
        count = self._marker(tensordict, self.step_count_key, "step-count key")
        if count is not None:
            ok[:-1] &= count[1:] == count[:-1] + 1
        return ok

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.batch_dims != 1:
            raise ValueError(
                "NextStateReconstructor expects a flat (B,) sample, got batch_size="
                f"{tuple(tensordict.batch_size)}: reshape(-1) it or sample from a 1-d storage."
            )
        batch = tensordict.batch_size[0]
        if batch == 0:
            return tensordict
        ok = self._continues(tensordict)
        fill_is_nan = isinstance(self.fill_value, float) and math.isnan(self.fill_value)
        for key in self.keys:
            root = tensordict.get(key)
            if fill_is_nan and not root.is_floating_point():
                raise TypeError(
                    f"NextStateReconstructor: {key!r} has non-floating dtype {root.dtype}, "
                    "which cannot hold NaN: pass an integer fill_value (e.g. fill_value=-1)."
                )
            shifted = torch.roll(root, -1, dims=0)
            mask = ok.reshape(batch, *[1] * (root.ndim - 1))
            fill = torch.full((), self.fill_value, dtype=root.dtype, device=root.device)
            tensordict.set(_under_next(key), torch.where(mask, shifted, fill))
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Inside an env the next observations exist: nothing to rebuild."""
        return next_tensordict

    def extra_repr(self) -> str:
        return f"keys={list(self.keys)}, traj_key={self.traj_key!r}, done_key={self.done_key!r}"
