"""``ReplayBuffer.update_if_present``: patch stored records only if they were not overwritten."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rl_buffers._layout import NestedKey, as_tuple
from rl_buffers.storages import _generations as generations


@dataclass(frozen=True)
class UpdateResult:
    """What :meth:`ReplayBuffer.update_if_present` did, one flag per input record.

    Every record is in exactly one of ``updated``, ``version_rejected`` (live, but its
    version was not new enough) and stale (its slot was rewritten since the handle).
    ``version_rejected`` is ``None`` when no version was given.
    """

    updated: torch.Tensor
    updated_count: int
    stale_count: int
    version_rejected: torch.Tensor | None = None
    version_rejected_count: int = 0


def _version_key(version_key: NestedKey, patch_keys: list[tuple]) -> tuple:
    if isinstance(version_key, str) and "." in version_key:
        raise ValueError(
            f"Dotted-string version keys are ambiguous ({version_key!r}): pass the tuple form, "
            f"e.g. {tuple(version_key.split('.'))!r}."
        )
    key = as_tuple(version_key)
    if key in patch_keys:
        raise ValueError(
            f"version_key {version_key!r} may not appear in patch: the buffer writes the version itself."
        )
    return key


class ConditionalUpdates:
    """``update_if_present``, mixed into :class:`~rl_buffers.ReplayBuffer`.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage, TensorDictReplayBuffer, RoundRobinWriter
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4), writer=RoundRobinWriter(track_generations=True))
        >>> index = rb.extend(TensorDict(x=torch.zeros(4), batch_size=[4]))
        >>> handle = rb.writer.generations_of(index)
        >>> _ = rb.extend(TensorDict(x=torch.ones(1), batch_size=[1]))  # slot 0 rewritten
        >>> result = rb.update_if_present(index=index, generation=handle, patch={"x": torch.full((4,), 9.0)})
        >>> result.updated.tolist(), rb[:]["x"].tolist()
        ([False, True, True, True], [1.0, 9.0, 9.0, 9.0])
    """

    def update_if_present(
        self,
        *,
        index: torch.Tensor,
        generation: torch.Tensor,
        patch: dict[NestedKey, torch.Tensor],
        version_key: NestedKey | None = None,
        version: int | torch.Tensor | None = None,
        require_newer: bool = False,
    ) -> UpdateResult:
        """Writes ``patch`` into the records ``(index, generation)`` that are still stored.

        A record whose slot was rewritten (or emptied) since ``generation`` was read is
        skipped, untouched. With ``version_key`` and ``version``, a live record is
        patched only if ``version`` is newer than its stored one (``>`` with
        ``require_newer``, else ``>=``), and the version is written with the patch;
        of several rows naming one slot, the highest version wins. The whole patch is
        checked before anything is written.

        Args:
            index: the records' slots (``[n]``), e.g. a sample's ``"index"``.
            generation: their generations (a sample's ``"index_generation"``).
            patch: entry -> new values ``[n, *item shape]`` (nested keys as tuples).
            version_key: an integer entry holding each record's version.
            version: the incoming version: an int, or ``[n]`` (or ``[n, 1]``) int64.
            require_newer: reject equal versions.

        Raises:
            RuntimeError: the storage cannot update entries in place, or the writer
                does not track generations (conditional updates need both).
            KeyError: a patch key or ``version_key`` is not stored.
            ValueError: a shape / dtype mismatch, ``version_key`` without ``version``
                (or the reverse), ``version_key`` in ``patch``, a dotted-string key.
        """
        storage, writer = self._storage, self._writer
        if not hasattr(storage, "set_leaf_") or getattr(storage, "ndim", 1) != 1:
            raise RuntimeError(
                f"conditional updates (update_if_present) need a 1-d tensor storage of TensorDicts; "
                f"this buffer has a {type(storage).__name__}."
            )
        if not getattr(writer, "tracks_generations", False):
            raise RuntimeError(
                "conditional updates (update_if_present) need slot generations: build the buffer "
                "with writer=RoundRobinWriter(track_generations=True) (or TensorDictRoundRobinWriter)."
            )
        if (version_key is None) != (version is None):
            raise ValueError("pass both version_key and version, or neither.")
        index = torch.as_tensor(index).reshape(-1)
        n = index.numel()
        patch = {as_tuple(k): torch.as_tensor(v) for k, v in patch.items()}
        vkey = _version_key(version_key, list(patch)) if version_key is not None else None
        with self._lock:
            for key, value in patch.items():
                self._check_entry(key, value, n)
            if vkey is not None:
                version = self._check_version(vkey, version, n)
            live = (
                generations.lookup(storage, index).cpu()
                == torch.as_tensor(generation).reshape(-1).cpu()
            )
            apply = live.clone()
            rejected = None
            if vkey is not None:
                stored = storage.get_leaf(vkey)[index.clamp(0, len(storage) - 1)].reshape(n).cpu()
                newer = version > stored if require_newer else version >= stored
                apply &= newer
                apply &= _highest_per_slot(index, version, apply)
                rejected = live & ~apply
            rows = apply.nonzero().squeeze(-1)
            if rows.numel():
                self._futures.clear()
                slots = index[rows]
                for key, value in patch.items():
                    storage.set_leaf_(key, value[rows], slots)
                if vkey is not None:
                    leaf = storage.get_leaf(vkey)
                    storage.set_leaf_(vkey, version[rows].reshape(-1, *leaf.shape[1:]), slots)
        return UpdateResult(
            updated=apply,
            updated_count=int(apply.sum()),
            stale_count=int((~live).sum()),
            version_rejected=rejected,
            version_rejected_count=int(rejected.sum()) if rejected is not None else 0,
        )

    def _check_entry(self, key: tuple, value: torch.Tensor, n: int) -> None:
        storage = self._storage
        if not storage.has_key(key):
            raise KeyError(f"update_if_present: the storage has no entry {key!r}.")
        leaf = storage.get_leaf(key)
        if tuple(value.shape) != (n, *leaf.shape[1:]):
            raise ValueError(
                f"update_if_present: patch {key!r} has shape {tuple(value.shape)}; the storage "
                f"expects {(n, *leaf.shape[1:])} (one row per index)."
            )
        if value.dtype != leaf.dtype:
            raise ValueError(
                f"update_if_present: patch {key!r} has dtype {value.dtype}, the storage holds {leaf.dtype}."
            )

    def _check_version(self, key: tuple, version: Any, n: int) -> torch.Tensor:
        storage = self._storage
        if not storage.has_key(key):
            raise KeyError(f"update_if_present: the storage has no version entry {key!r}.")
        leaf = storage.get_leaf(key)
        if leaf.dtype.is_floating_point or leaf.dtype == torch.bool or leaf[0].numel() != 1:
            raise ValueError(
                f"update_if_present: version_key {key!r} must be an integer entry with one value "
                f"per record; it holds {leaf.dtype} of per-item shape {tuple(leaf.shape[1:])}."
            )
        version = torch.as_tensor(version, dtype=torch.int64).cpu()
        if version.ndim == 0:
            return version.expand(n).clone()
        if version.numel() != n:
            raise ValueError(
                f"update_if_present: version has {version.numel()} entries for {n} records."
            )
        return version.reshape(n)


def _highest_per_slot(
    index: torch.Tensor, version: torch.Tensor, candidate: torch.Tensor
) -> torch.Tensor:
    """True on the row with the highest version among the candidate rows of each slot."""
    keep = torch.zeros_like(candidate)
    rows = candidate.nonzero().squeeze(-1)
    if not rows.numel():
        return keep
    slots, versions = index[rows].cpu(), version[rows]
    # sort by version, then (stably) by slot: each slot's run ends on its highest version
    order = torch.argsort(versions, stable=True)
    order = order[torch.argsort(slots[order], stable=True)]
    sorted_slots = slots[order]
    last = torch.ones_like(sorted_slots, dtype=torch.bool)
    last[:-1] = sorted_slots[1:] != sorted_slots[:-1]
    keep[rows[order[last]]] = True
    return keep
