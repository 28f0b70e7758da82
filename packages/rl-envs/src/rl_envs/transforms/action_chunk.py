"""``ActionChunkTransform``: per-step actions -> windows of the next ``H`` actions."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import Transform

ACTION_CHUNK_KEY: tuple[str, str] = ("vla_action", "chunk")
"""Where :class:`ActionChunkTransform` writes the chunk by default (TorchRL's key)."""

ACTION_IS_PAD_KEY: str = "action_is_pad"
"""Where :class:`ActionChunkTransform` writes the padding mask by default."""


class ActionChunkTransform(Transform):
    """Builds, for each step ``t``, the chunk ``a[t], a[t+1], ..., a[t+H-1]`` of actions.

    A data transform for chunked behaviour cloning (ACT-style targets): an action tensor
    ``[*B, T, action_dim]`` becomes a chunk ``[*B, T, H, action_dim]`` and a bool mask
    ``[*B, T, H]`` that is ``True`` on the slots past the end of the window, which repeat
    the last available action. When the data holds ``("next", done_key)`` (shaped
    ``[*B, T]`` or ``[*B, T, 1]``), chunks stop at each trajectory's last step too. Used
    in a replay buffer, chunks are built on ``sample`` only (``inv`` is the identity); in
    an env the transform does nothing.

    Args:
        chunk_size: the horizon ``H`` (>= 1).

    Keyword Args:
        action_key: the per-step action (default ``"action"``).
        chunk_key: where the chunk goes (default ``("vla_action", "chunk")``).
        pad_key: where the padding mask goes (default ``"action_is_pad"``).
        time_dim: the time dim of the action; the action dim must follow it (default -2).
        done_key: the done flag cutting chunks at trajectory ends, read under ``"next"``;
            ``None`` ignores it (default ``"done"``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(action=torch.arange(4.0).view(1, 4, 1), batch_size=[1, 4])
        >>> out = ActionChunkTransform(3)(td)
        >>> out["vla_action", "chunk"][0, :, :, 0]
        tensor([[0., 1., 2.],
                [1., 2., 3.],
                [2., 3., 3.],
                [3., 3., 3.]])
        >>> out["action_is_pad"][0, 2]
        tensor([False, False,  True])
    """

    def __init__(
        self,
        chunk_size: int,
        *,
        action_key: NestedKey = "action",
        chunk_key: NestedKey = ACTION_CHUNK_KEY,
        pad_key: NestedKey = ACTION_IS_PAD_KEY,
        time_dim: int = -2,
        done_key: NestedKey | None = "done",
    ) -> None:
        if int(chunk_size) < 1:
            raise ValueError(f"ActionChunkTransform: chunk_size must be >= 1, got {chunk_size}.")
        super().__init__()
        self.chunk_size = int(chunk_size)
        self.action_key = action_key
        self.chunk_key = chunk_key
        self.pad_key = pad_key
        self.time_dim = int(time_dim)
        self.done_key = done_key

    def _trajectory_end(self, tensordict: TensorDictBase, action: torch.Tensor) -> torch.Tensor:
        """For each step, the index of the last step of its trajectory: ``[*B, T]``."""
        lead = action.shape[:-1]
        steps = torch.arange(lead[-1], device=action.device)
        last = torch.full(lead, lead[-1] - 1, device=action.device)
        done = None if self.done_key is None else tensordict.get(("next", self.done_key), None)
        if done is None:
            return last
        if done.shape == (*lead, 1):
            done = done.squeeze(-1)
        elif done.shape != lead:
            raise ValueError(
                f"ActionChunkTransform: ('next', {self.done_key!r}) has shape "
                f"{tuple(done.shape)}, which does not line up with the action of shape "
                f"{tuple(action.shape)}: expected {(*lead, 1)} or {tuple(lead)}. Pass "
                "done_key=None to chunk without trajectory boundaries."
            )
        ends = torch.where(done.bool(), steps, last)
        # the first done at or after each step: a cumulative min read from the end
        return ends.flip(-1).cummin(-1).values.flip(-1)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get(self.action_key, None)
        if action is None:
            raise KeyError(
                f"ActionChunkTransform: action_key {self.action_key!r} is missing from the "
                f"TensorDict (present: {sorted(tensordict.keys(True, True), key=str)})."
            )
        time_dim = self.time_dim if self.time_dim >= 0 else action.dim() + self.time_dim
        if time_dim != action.dim() - 2:
            raise ValueError(
                "ActionChunkTransform expects the action dimension to immediately follow the "
                f"time dimension (action shaped [..., T, action_dim]); got action.shape="
                f"{tuple(action.shape)} with time_dim={self.time_dim}."
            )
        horizon, size = action.shape[-2], self.chunk_size
        end = self._trajectory_end(tensordict, action).unsqueeze(-1)  # [*B, T, 1]
        offsets = torch.arange(size, device=action.device)
        index = torch.arange(horizon, device=action.device).unsqueeze(-1) + offsets  # [T, H]
        pad = index > end
        index = torch.minimum(index, end)  # [*B, T, H]
        flat = index.flatten(-2).unsqueeze(-1).expand(*index.shape[:-2], -1, action.shape[-1])
        chunk = action.gather(-2, flat).unflatten(-2, (horizon, size))
        tensordict.set(self.chunk_key, chunk)
        tensordict.set(self.pad_key, pad.contiguous())
        return tensordict

    # in an env, and on a replay buffer's write path, the transform is the identity
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict

    def _has_inverse(self) -> bool:
        return False

    def extra_repr(self) -> str:
        return (
            f"chunk_size={self.chunk_size}, action_key={self.action_key!r}, "
            f"chunk_key={self.chunk_key!r}, done_key={self.done_key!r}"
        )
