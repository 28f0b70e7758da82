"""How one stored item is laid out: its leaves, their shapes and dtypes.

A storage keeps one tensor per leaf. ``Layout`` turns incoming data (a
TensorDict, a tensor or a pytree of tensors) into the list of leaves in a
fixed order, checks it against what the storage holds (keys, per-item
shapes, dtypes) before anything is written, and rebuilds sampled leaves into
the same kind of data.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from tensordict import TensorDict, TensorDictBase, is_tensor_collection

NestedKey = str | tuple[str, ...]


def as_tuple(key: NestedKey) -> tuple[str, ...]:
    """``"a"`` -> ``("a",)``; tuples unchanged."""
    return (key,) if isinstance(key, str) else tuple(key)


def expand_to_batch(value: torch.Tensor, data: TensorDictBase) -> torch.Tensor:
    """``value`` (one entry per item) repeated over the items' own batch dims.

    A storage that keeps whole items (a ListStorage of ``[T]`` trajectories)
    writes and samples ``[B, T]`` data for ``[B]`` indices: each step carries its
    item's index (or weight). Values that already cover the batch are unchanged.

    Example:
        >>> from tensordict import TensorDict
        >>> data = TensorDict(batch_size=[2, 3])
        >>> expand_to_batch(torch.tensor([4, 7]), data).tolist()
        [[4, 4, 4], [7, 7, 7]]
    """
    if value.dim() >= data.batch_dims or value.shape[:1] != data.batch_size[:1]:
        return value
    extra = data.batch_dims - value.dim()
    return value.reshape(*value.shape, *([1] * extra)).expand(data.batch_size)


def _fmt(key: tuple[str, ...]) -> str:
    return repr(key[0]) if len(key) == 1 else repr(key)


def td_leaf_keys(
    data: TensorDictBase, ignore: Iterable[tuple[str, ...]] = ()
) -> list[tuple[str, ...]]:
    """The sorted leaf keys of a TensorDict (as tuples), without ``ignore``."""
    ignored = set(ignore)
    keys = [as_tuple(k) for k in data.keys(include_nested=True, leaves_only=True)]
    return sorted(k for k in keys if k not in ignored)


@dataclass
class Layout:
    """The structure of one item: ``kind`` is ``"tensordict"``, ``"tensor"`` or ``"pytree"``."""

    kind: str
    keys: list[tuple[str, ...]]
    shapes: list[torch.Size]
    dtypes: list[torch.dtype]
    item_batch: torch.Size = field(default_factory=torch.Size)
    treespec: Any = None
    _tree: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        tree: dict = {}
        for i, key in enumerate(self.keys):
            node = tree
            for part in key[:-1]:
                node = node.setdefault(part, {})
            node[key[-1]] = i
        self._tree = tree

    @classmethod
    def infer(cls, data: Any, batch_ndim: int, ignore: Iterable[tuple[str, ...]] = ()) -> Layout:
        """The layout of ``data`` whose first ``batch_ndim`` dims index items."""
        if is_tensor_collection(data):
            keys = td_leaf_keys(data, ignore)
            if not keys:
                raise ValueError("cannot store a TensorDict without tensor entries.")
            leaves = [data.get(k) for k in keys]
            for k, leaf in zip(keys, leaves, strict=False):
                if not isinstance(leaf, torch.Tensor):
                    raise TypeError(
                        f"entry {_fmt(k)} is a {type(leaf).__name__}, not a tensor: tensor "
                        "storages hold tensors only; use ListStorage for arbitrary objects."
                    )
            return cls("tensordict", keys, [x.shape[batch_ndim:] for x in leaves],
                       [x.dtype for x in leaves], item_batch=data.batch_size[batch_ndim:])  # fmt: skip
        if isinstance(data, torch.Tensor):
            return cls("tensor", [("_",)], [data.shape[batch_ndim:]], [data.dtype])
        leaves, spec = pytree.tree_flatten(data)
        if not leaves or not all(isinstance(x, torch.Tensor) for x in leaves):
            raise TypeError(
                f"tensor storages hold TensorDicts, tensors or pytrees of tensors; got {type(data).__name__} "
                "with non-tensor leaves. Use ListStorage for arbitrary objects."
            )
        keys = [(f"leaf{i}",) for i in range(len(leaves))]
        return cls("pytree", keys, [x.shape[batch_ndim:] for x in leaves],
                   [x.dtype for x in leaves], treespec=spec)  # fmt: skip

    def bytes_per_item(self) -> int:
        """Bytes of one item across all leaves."""
        return sum(
            s.numel() * torch.empty((), dtype=d).element_size()
            for s, d in zip(self.shapes, self.dtypes, strict=False)
        )

    def leaves(
        self, data: Any, batch_ndim: int, ignore: Iterable[tuple[str, ...]] = ()
    ) -> list[torch.Tensor]:
        """The leaves of ``data``, checked against this layout (raises before any write).

        Raises:
            KeyError: a key is missing or unexpected.
            ValueError: a per-item shape or the batch shape differs.
            TypeError: a dtype or the kind of data differs.
        """
        if self.kind == "tensordict":
            if not is_tensor_collection(data):
                raise TypeError(f"this storage holds TensorDicts; got a {type(data).__name__}.")
            got = td_leaf_keys(data, ignore)
            if got != self.keys:
                missing = sorted(set(self.keys) - set(got))
                extra = sorted(set(got) - set(self.keys))
                raise KeyError(
                    f"the data's keys do not match the storage's: missing {', '.join(map(_fmt, missing)) or 'none'}; "
                    f"unexpected {', '.join(map(_fmt, extra)) or 'none'}. Every write must carry exactly the keys of "
                    "the first write; add or drop those entries (or empty() the buffer first)."
                )
            leaves = [data.get(k) for k in self.keys]
        elif self.kind == "tensor":
            if not isinstance(data, torch.Tensor):
                raise TypeError(f"this storage holds tensors; got a {type(data).__name__}.")
            leaves = [data]
        else:
            leaves, spec = pytree.tree_flatten(data)
            if spec != self.treespec:
                raise KeyError(
                    f"the data's structure {spec} differs from the storage's {self.treespec}: "
                    "every write must have the structure of the first write."
                )
        batch = None
        for key, leaf, shape, dtype in zip(
            self.keys, leaves, self.shapes, self.dtypes, strict=False
        ):
            if not isinstance(leaf, torch.Tensor):
                raise TypeError(f"entry {_fmt(key)} is a {type(leaf).__name__}, expected a tensor.")
            if leaf.dtype != dtype:
                raise TypeError(
                    f"entry {_fmt(key)} has dtype {leaf.dtype}, the storage holds {dtype}: "
                    f"cast it first (e.g. .to({dtype}))."
                )
            if leaf.shape[batch_ndim:] != shape or leaf.dim() < batch_ndim:
                raise ValueError(
                    f"entry {_fmt(key)} has per-item shape {tuple(leaf.shape[batch_ndim:])} "
                    f"(full shape {tuple(leaf.shape)}), the storage expects {tuple(shape)} after "
                    f"{batch_ndim} batch dim(s)."
                )
            if batch is None:
                batch = leaf.shape[:batch_ndim]
            elif leaf.shape[:batch_ndim] != batch:
                raise ValueError(
                    f"entry {_fmt(key)} has batch shape {tuple(leaf.shape[:batch_ndim])}, other "
                    f"entries have {tuple(batch)}."
                )
        return leaves

    def build(
        self,
        leaves: list[torch.Tensor],
        batch_size: torch.Size,
        extra: dict[str, torch.Tensor] | None = None,
        device: torch.device | None = None,
    ) -> Any:
        """Rebuilds data from leaves whose leading dims are ``batch_size``.

        Args:
            leaves: one tensor per key of the layout, in its order.
            batch_size: the leading dims of every leaf.
            extra: entries added at the root of a TensorDict (e.g. the sampled
                ``"index"``), unchecked: their leading dims must be ``batch_size``.
                Building them in is cheaper than a validated ``set`` afterwards.
            device: the TensorDict's device (the leaves must already be there; extras are moved).
        """
        if self.kind == "tensor":
            return leaves[0]
        if self.kind == "pytree":
            return pytree.tree_unflatten(leaves, self.treespec)
        full = torch.Size([*batch_size, *self.item_batch]) if self.item_batch else batch_size
        root = self._build_source(self._tree, leaves, full, device)
        if extra:
            root.update(extra if device is None else {k: v.to(device) for k, v in extra.items()})
        return TensorDict._new_unsafe(root, batch_size=full, device=device)

    def _build_source(
        self, node: dict, leaves: list[torch.Tensor], batch_size: torch.Size, device: Any = None
    ) -> dict:
        source = {}
        for name, v in node.items():
            if type(v) is int:
                source[name] = leaves[v]
            else:
                sub = self._build_source(v, leaves, batch_size, device)
                source[name] = TensorDict._new_unsafe(sub, batch_size=batch_size, device=device)
        return source

    def to_meta(self) -> dict:
        """A JSON-able description (pytree layouts are not JSON-able: they pickle)."""
        return {
            "kind": self.kind,
            "keys": [list(k) for k in self.keys],
            "shapes": [list(s) for s in self.shapes],
            "dtypes": [str(d).removeprefix("torch.") for d in self.dtypes],
            "item_batch": list(self.item_batch),
        }

    @classmethod
    def from_meta(cls, meta: dict, treespec: Any = None) -> Layout:
        return cls(meta["kind"], [tuple(k) for k in meta["keys"]],
                   [torch.Size(s) for s in meta["shapes"]],
                   [getattr(torch, d) for d in meta["dtypes"]],
                   item_batch=torch.Size(meta["item_batch"]), treespec=treespec)  # fmt: skip
