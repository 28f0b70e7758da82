"""``TimeMaxPool``: the element-wise maximum over the last T frames."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, get_or_raise, reset_mask
from rl_envs.transforms.transform import Transform


class TimeMaxPool(Transform):
    """Writes, per in_key, the element-wise max of its last ``T`` frames (Atari flicker fix).

    After a (partial) reset the window holds copies of the first frame. Called on
    successive TensorDicts outside an env (``_call``), it pools over those calls.

    Args:
        in_keys: frames (default ``["observation"]``).
        out_keys: destinations (default ``in_keys``).
        T: window length.
        reset_key: unused (partial resets read ``"_reset"``); TorchRL parity.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = TimeMaxPool(in_keys=["obs"], T=2)
        >>> root = t._reset(TensorDict(), TensorDict(obs=torch.tensor([3.0])))
        >>> t._step(root, TensorDict(obs=torch.tensor([1.0])))["obs"]
        tensor([3.])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        T: int = 1,
        reset_key: NestedKey | None = None,
    ) -> None:
        if T < 1:
            raise ValueError(f"TimeMaxPool: T must be >= 1, got {T}.")
        super().__init__(in_keys if in_keys is not None else ["observation"], out_keys)
        self.T = T
        self._windows: dict[NestedKey, torch.Tensor] = {}

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        mask = reset_mask(tensordict)
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            frame = get_or_raise(self, tensordict_reset, in_key)
            fresh = frame.unsqueeze(0).expand(self.T, *frame.shape).clone()
            old = self._windows.get(in_key)
            if mask is not None and old is not None and old.shape == fresh.shape:
                m = mask.reshape(
                    1,
                    *mask.shape[: tensordict_reset.batch_dims],
                    *[1] * (frame.ndim - tensordict_reset.batch_dims),
                )
                fresh = torch.where(m, fresh, old)
            self._windows[in_key] = fresh
            tensordict_reset.set(out_key, fresh.max(0).values)
        return tensordict_reset

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Pushes each frame into its window (started with copies of the frame if there is
        none yet) and writes the window's max."""
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            frame = get_or_raise(self, next_tensordict, in_key)
            window = self._windows.get(in_key)
            if window is None or window.shape[1:] != frame.shape:
                window = frame.unsqueeze(0).expand(self.T, *frame.shape)
            window = torch.cat([window[1:], frame.unsqueeze(0)], 0)
            self._windows[in_key] = window
            next_tensordict.set(out_key, window.max(0).values)
        return next_tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(next_tensordict)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "TimeMaxPool cannot be called independently: it pools over env steps, use it "
            "in a TransformedEnv."
        )
