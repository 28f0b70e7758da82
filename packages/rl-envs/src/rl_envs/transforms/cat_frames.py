"""``CatFrames``: stacks the last N observations along a feature dimension."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, get_or_raise, reset_mask
from rl_envs.transforms.transform import EnvSpecs, Transform


class CatFrames(Transform):
    """Concatenates the ``N`` most recent frames of each in_key along ``dim``.

    In an env, the transform keeps one buffer per key: at a reset it is filled
    with copies of the first frame (``padding="same"``) or with
    ``padding_value`` and the first frame last (``padding="constant"``), only
    for the reset entries; each step drops the oldest frame and appends the new
    one. On a bare TensorDict of trajectories (time = last batch dim, e.g. a
    replay-buffer slice), frames are gathered along time without crossing
    episode boundaries, read from ``done_key`` (``("next", "done")``) when present:
    by ``forward`` (``transform(td)``, e.g. on sampled slices), or with
    ``as_inverse=True`` by ``inv`` instead (TorchRL's inverse path: the stacking
    happens when data are *written*, e.g. ``ReplayBuffer.extend`` in TorchRL;
    ``forward`` is then the identity and the env path is refused).

    Args:
        N: number of frames.
        dim: the (negative) feature dim to concatenate along, e.g. ``-3`` for
            ``[C, H, W]`` pixels or ``-1`` for vectors.
        in_keys: entries to stack (default ``["pixels"]``).
        out_keys: destinations (default ``in_keys``).
        padding: ``"same"`` or ``"constant"``.
        padding_value: the fill of ``"constant"`` padding.
        as_inverse: stack trajectories in ``inv`` (returns a shallow copy of its input
            with ``out_keys`` added) and make ``forward`` the identity; such a
            transform cannot sit in an env (``TransformedEnv`` raises), as in TorchRL.
        reset_key: kept for TorchRL parity (partial resets read ``"_reset"``).
        done_key: the episode-end flag used on bare trajectories.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = CatFrames(N=2, dim=-1, in_keys=["obs"])
        >>> root = t._reset(TensorDict(), TensorDict(obs=torch.tensor([1.0])))
        >>> root["obs"]
        tensor([1., 1.])
        >>> t._step(root, TensorDict(obs=torch.tensor([2.0])))["obs"]
        tensor([1., 2.])
        >>> traj = TensorDict(obs=torch.tensor([[1.0], [2.0], [3.0]]), batch_size=[3])
        >>> CatFrames(N=2, dim=-1, in_keys=["obs"], as_inverse=True).inv(traj)["obs"]
        tensor([[1., 1.],
                [1., 2.],
                [2., 3.]])
    """

    def __init__(
        self,
        N: int,
        dim: int,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        padding: str = "same",
        padding_value: float = 0.0,
        as_inverse: bool = False,
        reset_key: NestedKey | None = None,
        done_key: NestedKey | None = None,
    ) -> None:
        if in_keys is None:
            in_keys = ["pixels"]
        super().__init__(in_keys, out_keys)
        if N < 1:
            raise ValueError(f"CatFrames: N must be >= 1, got {N}.")
        if dim >= 0:
            raise ValueError(
                f"CatFrames: dim must be < 0 to accommodate for tensordict of different batch-sizes "
                f"(a negative feature dim, counted from the end), got {dim}."
            )
        if padding not in ("same", "constant"):
            raise ValueError(f"CatFrames: padding must be 'same' or 'constant', got {padding!r}.")
        self.as_inverse = as_inverse
        self.reset_key = reset_key
        self.N = N
        self.dim = dim
        self.padding = padding
        self.padding_value = padding_value
        self.done_key = done_key if done_key is not None else ("next", "done")
        self._buffers_by_key: dict[NestedKey, torch.Tensor] = {}

    def _fresh_buffer(self, frame: torch.Tensor) -> torch.Tensor:
        if self.padding == "same":
            return torch.cat([frame] * self.N, dim=self.dim)
        pad = torch.full_like(frame, self.padding_value)
        return torch.cat([pad] * (self.N - 1) + [frame], dim=self.dim)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        mask = reset_mask(tensordict)
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            frame = get_or_raise(self, tensordict_reset, in_key)
            fresh = self._fresh_buffer(frame)
            previous = self._buffers_by_key.get(in_key)
            if mask is not None and previous is not None and previous.shape == fresh.shape:
                m = mask.reshape(
                    *mask.shape[: tensordict_reset.batch_dims],
                    *[1] * (fresh.ndim - tensordict_reset.batch_dims),
                )
                fresh = torch.where(m, fresh, previous)
            self._buffers_by_key[in_key] = fresh
            tensordict_reset.set(out_key, fresh.clone())
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._push_frames(next_tensordict, zero_init=False)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """One online step outside an env: appends each frame to its buffer.

        A buffer not yet filled by a reset starts as zeros, or as
        ``padding_value`` with ``padding="constant"`` (TorchRL's online path):
        the first call holds ``N - 1`` such frames and the new one.
        """
        return self._push_frames(next_tensordict, zero_init=True)

    def _push_frames(self, next_tensordict: TensorDictBase, zero_init: bool) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            frame = get_or_raise(self, next_tensordict, in_key)
            buffer = self._buffers_by_key.get(in_key)
            shape = _cat_shape(frame.shape, self.dim, self.N)
            if zero_init and (buffer is None or buffer.shape != shape):
                fill = self.padding_value if self.padding == "constant" else 0
                buffer = frame.new_full(shape, fill)
            if buffer is None:
                raise RuntimeError(
                    f"CatFrames: no frames for {in_key!r} yet: reset the env before stepping it."
                )
            size = frame.shape[self.dim]
            kept = buffer.narrow(self.dim, size, buffer.shape[self.dim] - size)
            buffer = torch.cat([kept, frame], dim=self.dim)
            self._buffers_by_key[in_key] = buffer
            next_tensordict.set(out_key, buffer.clone())
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Stacks frames along the time dim (the last batch dim) of stored trajectories.

        With ``as_inverse=True`` this is the identity (``inv`` stacks instead).
        """
        if self.as_inverse:
            return tensordict
        return self._stack_trajectories(tensordict)

    def unfolding(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Stacks frames of stored trajectories (TorchRL's name for what :meth:`forward` does).

        The time dim is the one named ``"time"`` (rollouts name their last dim so)
        or, without names, the last batch dim; a ``"time"`` dim elsewhere raises.
        Episodes are split at ``done_key``; frames before an episode start are
        padded (``padding``). Writes ``out_keys`` in place and returns ``tensordict``.

        Example:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(obs=torch.arange(3.0).reshape(3, 1), batch_size=[3])
            >>> CatFrames(N=2, dim=-1, in_keys=["obs"], padding="constant").unfolding(td)["obs"]
            tensor([[0., 0.],
                    [0., 1.],
                    [1., 2.]])
        """
        names = tensordict.names if tensordict._has_names() else None
        if names is not None and "time" in names and names.index("time") != len(names) - 1:
            raise ValueError(
                f"CatFrames.unfolding: the 'time' dim must be the last batch dim, got names "
                f"{names}; transpose the data first (td.transpose(i, -1))."
            )
        return self._stack_trajectories(tensordict)

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """With ``as_inverse=True``: :meth:`forward`'s stacking, on a shallow copy of
        ``tensordict``; otherwise ``tensordict`` unchanged."""
        if not self.as_inverse:
            return tensordict
        return self._stack_trajectories(tensordict.clone(False))

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self.inv(tensordict)

    def _has_inverse(self) -> bool:
        return self.as_inverse

    def _stack_trajectories(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.batch_dims < 1:
            raise ValueError(
                "CatFrames cannot process unbatched tensordict instances: on a bare "
                "TensorDict it needs a time dimension, pass trajectories shaped [..., T] "
                "(time = last batch dim)."
            )
        time_dim = tensordict.batch_dims - 1
        T = tensordict.batch_size[-1]
        done = tensordict.get(self.done_key, None)
        batch = tuple(tensordict.batch_size)
        if done is None:
            episode = torch.zeros(batch, dtype=torch.long, device=tensordict.device)
        else:
            ended = done.reshape(batch).long()
            episode = torch.cumsum(ended, dim=-1) - ended  # a done at t starts a new episode at t+1
        t = torch.arange(T, device=episode.device).expand(batch)
        first = torch.ones_like(episode, dtype=torch.bool)
        first[..., 1:] = episode[..., 1:] != episode[..., :-1]
        start = torch.cummax(torch.where(first, t, torch.zeros_like(t)), dim=-1).values
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            value = get_or_raise(self, tensordict, in_key)
            frames = []
            for lag in range(self.N - 1, -1, -1):
                idx = t - lag
                valid = idx >= start
                idx = torch.maximum(idx, start)
                view = idx.reshape(*batch, *[1] * (value.ndim - len(batch))).expand_as(value)
                frame = torch.gather(value, time_dim, view)
                if self.padding == "constant":
                    v = valid.reshape(view.shape[: len(batch)] + (1,) * (value.ndim - len(batch)))
                    frame = torch.where(v, frame, torch.full_like(frame, self.padding_value))
                frames.append(frame)
            tensordict.set(out_key, torch.cat(frames, dim=self.dim))
        return tensordict

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        if self.as_inverse:
            raise RuntimeError(
                "CatFrames(as_inverse=True) stacks frames of stored trajectories when they "
                "are written (inv); it cannot sit in an env. Use CatFrames(..., "
                "as_inverse=False) in the TransformedEnv, and the as_inverse=True instance "
                "on the data you store: stacked = catframes.inv(trajectories)."
            )
        return super().transform_specs(specs)

    def transform_leaf_spec(self, spec: Any) -> Any:
        from rl_envs.specs import Bounded

        if isinstance(spec, Bounded):
            return Bounded(
                low=torch.cat([spec.space.low.expand(spec.shape)] * self.N, dim=self.dim),
                high=torch.cat([spec.space.high.expand(spec.shape)] * self.N, dim=self.dim),
                shape=_cat_shape(spec.shape, self.dim, self.N),
                device=spec.device,
                dtype=spec.dtype,
            )
        from rl_envs.transforms._utils import unbounded_like

        return unbounded_like(spec, _cat_shape(spec.shape, self.dim, self.N))

    def extra_repr(self) -> str:
        inverse = ", as_inverse=True" if self.as_inverse else ""
        return (
            f"N={self.N}, dim={self.dim}, {super().extra_repr()}, padding={self.padding!r}{inverse}"
        )


def _cat_shape(shape: torch.Size, dim: int, n: int) -> torch.Size:
    out = list(shape)
    out[dim] *= n
    return torch.Size(out)
