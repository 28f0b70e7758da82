"""``Composite``: a nested mapping of specs, the spec of a TensorDict."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.specs import _registry
from rl_envs.specs._base import (
    ShapeLike,
    TensorSpec,
    as_size,
    shape_args,
    spec_torch_function,
)
from rl_envs.specs._dtypes import to_device

__all__ = ["Composite"]

NestedKey = str | tuple[str, ...]
_MISSING = object()


def _make_td(source: dict[str, Any], batch_size: torch.Size, device: Any) -> TensorDict:
    # The values come from our own specs, so their shapes are known to be right:
    # skip TensorDict's per-entry validation.
    return TensorDict._new_unsafe(source, batch_size=batch_size, device=device)


def _key_tuple(key: NestedKey) -> tuple[str, ...]:
    if isinstance(key, str):
        return (key,)
    if isinstance(key, tuple) and key and all(isinstance(k, str) for k in key):
        return key
    raise TypeError(f"A Composite key is a string or a non-empty tuple of strings, got {key!r}.")


def _is_key(key: Any) -> bool:
    return isinstance(key, str) or (
        isinstance(key, tuple) and len(key) > 0 and all(isinstance(k, str) for k in key)
    )


def _lazy_stack_types() -> tuple[type, ...]:
    """The lazy stacks a Composite may hold as entries (registered by ``stacked.py``)."""
    return (_registry.lookup("Stacked"), _registry.lookup("StackedComposite"))


def _is_stacked_composite(value: Any) -> bool:
    return isinstance(value, _registry.lookup("StackedComposite"))


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


class Composite:
    """A nested mapping ``key -> spec`` whose values form a ``TensorDict`` of batch size ``shape``.

    Every sub-spec's shape starts with the Composite's ``shape`` (the batch
    dims). Nested entries are reached with tuples: ``spec["next", "obs"]``.
    ``rand``/``zero``/``one`` return a TensorDict; ``is_in`` checks a TensorDict
    (extra keys in it are ignored).

    A locked Composite (``lock_()``) refuses writes and deletions, in its nested
    Composites too, until ``unlock_()``.

    Args:
        *args: at most one mapping ``{key: spec or mapping}``; mappings become
            nested Composites with the same shape.
        shape: the batch shape (``batch_size`` is accepted as an alias). Defaults to ``()``.
        device: the device of every leaf; sub-specs on another device are moved.
            ``None`` lets leaves live anywhere.
        **kwargs: more ``key=spec`` entries.

    Example:
        >>> import torch
        >>> from rl_envs.specs import Bounded, Unbounded
        >>> spec = Composite(
        ...     observation=Unbounded(shape=(4, 3)),
        ...     next={"reward": Unbounded(shape=(4, 1))},
        ...     shape=(4,),
        ... )
        >>> spec["next", "reward"].shape
        torch.Size([4, 1])
        >>> td = spec.zero()
        >>> td.batch_size, spec.is_in(td)
        (torch.Size([4]), True)
        >>> spec.keys(include_nested=True, leaves_only=True)
        ['observation', ('next', 'reward')]
    """

    def __init__(
        self,
        *args: Mapping[str, Any],
        shape: ShapeLike | None = None,
        device: Any = None,
        batch_size: ShapeLike | None = None,
        data_cls: type | None = None,
        **kwargs: Any,
    ) -> None:
        if len(args) > 1:
            raise TypeError(f"Composite takes at most one positional mapping, got {len(args)}.")
        if shape is not None and batch_size is not None and as_size(shape) != as_size(batch_size):
            raise ValueError(f"Composite: shape={shape} and batch_size={batch_size} differ.")
        self._shape: torch.Size = as_size(shape if shape is not None else batch_size)
        self._device: torch.device | None = to_device(device)
        self._specs: dict[str, TensorSpec | Composite] = {}
        self._locked = False
        # TorchRL's data_cls: the TensorDict-like class (a tensorclass) zero() / rand() build
        self.data_cls = data_cls
        entries: dict[str, Any] = dict(args[0]) if args else {}
        entries.update(kwargs)
        for key, value in entries.items():
            self[key] = value

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        """``torch.stack`` / ``torch.squeeze`` / ``torch.unsqueeze`` of Composites."""
        return spec_torch_function(func, args, kwargs or {})

    def memoize_encode(self, mode: bool = True) -> None:
        """Turns :meth:`TensorSpec.memoize_encode` on (or off) for every leaf."""
        for value in self._specs.values():
            if value is not None:
                value.memoize_encode(mode)

    def erase_memoize_cache(self) -> None:
        """Clears the memoized encodings of every leaf."""
        for value in self._specs.values():
            if value is not None:
                value.erase_memoize_cache()

    # ------------------------------------------------------------- basics
    @property
    def shape(self) -> torch.Size:
        """The batch shape; every entry's shape starts with it."""
        return self._shape

    @shape.setter
    def shape(self, value: ShapeLike) -> None:
        # TorchRL's rule: nested Composites that do not start with the new shape take it
        # (when their leaves allow it); leaves must already start with it.
        value = as_size(value)
        n = len(value)
        for key, spec in self._specs.items():
            if spec is None or spec.shape[:n] == value:
                continue
            if isinstance(spec, Composite) and spec._leaves_start_with(value):
                spec.shape = value
            else:
                raise ValueError(
                    f"Composite.shape = {tuple(value)}: entry {key!r} has shape "
                    f"{tuple(spec.shape)}, which does not start with it."
                )
        self._shape = value

    @property
    def device(self) -> torch.device | None:
        """The device of every leaf, or ``None`` when unconstrained."""
        return self._device

    @property
    def ndim(self) -> int:
        """Number of batch dims."""
        return len(self.shape)

    def ndimension(self) -> int:
        """Same as :attr:`ndim`."""
        return len(self.shape)

    @property
    def batch_size(self) -> torch.Size:
        """Same as :attr:`shape`."""
        return self.shape

    @property
    def locked(self) -> bool:
        """Whether writes are refused."""
        return self._locked

    is_locked = locked

    def lock_(self, recurse: bool = True) -> Composite:
        """Refuses writes and deletions (in nested Composites too) until :meth:`unlock_`."""
        self._locked = True
        if recurse:
            for value in self._specs.values():
                if isinstance(value, Composite):
                    value.lock_(recurse=True)
        return self

    def unlock_(self, recurse: bool = True) -> Composite:
        """Allows writes again (in nested Composites too)."""
        self._locked = False
        if recurse:
            for value in self._specs.values():
                if isinstance(value, Composite):
                    value.unlock_(recurse=True)
        return self

    def _check_unlocked(self, key: Any, action: str) -> None:
        if self._locked:
            raise RuntimeError(
                f"Cannot {action} key {key!r}: this Composite is locked. Call spec.unlock_() "
                f"first, or work on spec.clone()."
            )

    # ------------------------------------------------------------- mapping
    def _missing(self, key: Any, prefix: tuple[str, ...] = ()) -> KeyError:
        where = f" under {prefix!r}" if prefix else ""
        return KeyError(
            f"Key {key!r} is not in this Composite{where}. Keys present: "
            f"{sorted(map(str, self._specs))}."
        )

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                return self._specs[key]
            except KeyError:
                raise self._missing(key) from None
        if _is_key(key):
            node: Any = self
            for i, k in enumerate(key):
                if _is_stacked_composite(node):
                    return node[key[i:]]
                if not isinstance(node, Composite):
                    raise KeyError(
                        f"Key {key!r}: {key[:i]!r} is a {type(node).__name__}, not a Composite, "
                        f"so it has no entry {k!r}."
                    )
                try:
                    node = node._specs[k]
                except KeyError:
                    raise node._missing(k, key[:i]) from None
            return node
        return self._index(key)

    def get(self, key: NestedKey, default: Any = _MISSING) -> Any:
        """``spec[key]``, or ``default`` when the key is missing."""
        try:
            return self[key]
        except KeyError:
            if default is _MISSING:
                raise
            return default

    def __setitem__(self, key: NestedKey, value: Any) -> None:
        keys = _key_tuple(key)
        if len(keys) > 1:
            self._check_unlocked(key, "set")
            sub = self._specs.get(keys[0])
            if sub is None:
                sub = Composite(shape=self.shape, device=self._device)
                self._specs[keys[0]] = sub
            elif not isinstance(sub, Composite):
                raise KeyError(
                    f"Cannot set {key!r}: {keys[0]!r} holds a {type(sub).__name__}, not a Composite."
                )
            sub[keys[1:]] = value
            return
        self._check_unlocked(key, "set")
        self._specs[keys[0]] = self._adopt(keys[0], value)

    def set(self, key: NestedKey, spec: Any) -> Composite:
        """``spec[key] = value``; returns ``self``."""
        self[key] = spec
        return self

    _RESERVED = ("shape", "device", "dtype", "space")

    def _adopt(self, key: str, value: Any) -> TensorSpec | Composite | None:
        if key in self._RESERVED:
            raise AttributeError(
                f"Composite entry {key!r} cannot be set: the name is reserved for the "
                f"Composite's own attribute; pick another key."
            )
        if value is None:  # a declared key without a spec (TorchRL allows it): rand/is_in skip it
            return None
        if isinstance(value, Mapping) and not isinstance(value, Composite):
            value = Composite(value, shape=self.shape, device=self._device)
        if not isinstance(value, (TensorSpec, Composite, *_lazy_stack_types())):
            raise TypeError(
                f"Composite entry {key!r} must be a spec or a mapping of specs, got "
                f"{type(value).__name__}."
            )
        vshape = value.shape
        n = len(self.shape)
        if (
            isinstance(value, Composite)
            and vshape[:n] != self.shape
            and value._leaves_start_with(self.shape)
        ):
            value.shape = self.shape  # a Composite whose shape was reset (TorchRL allows it)
            vshape = value.shape
        if vshape[:n] != self.shape:
            raise ValueError(
                f"The spec of key {key!r} has shape {tuple(vshape)}, which does not start with the "
                f"Composite's batch shape {tuple(self.shape)}. Fix: build it with the batch dims "
                f"first, e.g. spec.expand({(*self.shape, *vshape)}) when it is unbatched."
            )
        if self._device is not None and value.device != self._device:
            value = value.to(self._device)
        if self._locked and isinstance(value, Composite):
            value.lock_()
        return value

    def _leaves_start_with(self, shape: torch.Size) -> bool:
        leaves = [v for v in self.values(True, True) if v is not None]
        return all(v.shape[: len(shape)] == shape for v in leaves)

    def type_check(self, value: Any, key: NestedKey | None = None) -> None:
        """Checks the dtypes of a TensorDict (or of one entry, with ``key``) against the leaves.

        Raises:
            TypeError: a dtype differs (the message names the key).
        """
        if key is not None:
            self[key].type_check(value, key)
            return
        for k, spec in self._checked_leaves():
            item = value.get(k, None) if spec is not None else None
            if item is not None:
                spec.type_check(item, k)

    def clear_device_(self) -> Composite:
        """Drops the device constraint (here and in nested Composites); returns ``self``."""
        self._device = None
        for value in self._specs.values():
            if isinstance(value, Composite):
                value.clear_device_()
        return self

    def cardinality(self) -> Any:
        """The product of the leaves' cardinalities (0 for an empty Composite)."""
        n = None
        for spec in self._specs.values():
            if spec is not None:
                n = spec.cardinality() if n is None else n * spec.cardinality()
        return 0 if n is None else n

    def __delitem__(self, key: NestedKey) -> None:
        keys = _key_tuple(key)
        parent = self[keys[:-1]] if len(keys) > 1 else self
        if not isinstance(parent, Composite) or keys[-1] not in parent._specs:
            raise self._missing(key)
        parent._check_unlocked(key, "delete")
        del parent._specs[keys[-1]]

    def pop(self, key: NestedKey, default: Any = _MISSING) -> Any:
        """Removes ``key`` and returns its spec (or ``default`` when missing)."""
        try:
            value = self[key]
        except KeyError:
            if default is _MISSING:
                raise
            return default
        del self[key]
        return value

    def __contains__(self, key: object) -> bool:
        if not _is_key(key):
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def is_empty(self) -> bool:
        """Whether the Composite holds no leaf (nested empty Composites count as empty)."""
        return not any(True for _ in self.keys(True, True))

    def keys(self, include_nested: bool = False, leaves_only: bool = False) -> list[NestedKey]:
        """The keys, in insertion order.

        Args:
            include_nested: also list nested keys, as tuples.
            leaves_only: skip the keys whose spec is a Composite.
        """
        return [k for k, _ in self.items(include_nested, leaves_only)]

    def items(
        self, include_nested: bool = False, leaves_only: bool = False
    ) -> list[tuple[NestedKey, Any]]:
        """``(key, spec)`` pairs; see :meth:`keys`."""
        out: list[tuple[NestedKey, Any]] = []
        for key, value in self._specs.items():
            is_comp = isinstance(value, Composite) or _is_stacked_composite(value)
            if not (leaves_only and is_comp):
                out.append((key, value))
            if include_nested and is_comp:
                for sub_key, sub in value.items(True, leaves_only):
                    sk = sub_key if isinstance(sub_key, tuple) else (sub_key,)
                    out.append(((key, *sk), sub))
        return out

    def _checked_leaves(self) -> list[tuple[NestedKey, Any]]:
        """``items(True, True)``, but a lazy stack of Composites is one leaf: its entries may
        differ in shape between members, so a TensorDict holds no one tensor for them."""
        out: list[tuple[NestedKey, Any]] = []
        for key, value in self._specs.items():
            if isinstance(value, Composite):
                out += [((key, *_key_tuple(k)), v) for k, v in value._checked_leaves()]
            else:
                out.append((key, value))
        return out

    def values(self, include_nested: bool = False, leaves_only: bool = False) -> list[Any]:
        """The specs; see :meth:`keys`."""
        return [v for _, v in self.items(include_nested, leaves_only)]

    def update(self, other: Mapping[str, Any] | Composite) -> Composite:
        """Sets every entry of ``other``; nested Composites are merged, not replaced."""
        for key, value in other.items():
            current = self._specs.get(key) if isinstance(key, str) else None
            if isinstance(current, Composite) and isinstance(value, Composite):
                current.update(value)
            else:
                self[key] = value
        return self

    def empty(self) -> Composite:
        """A Composite with the same shape, device and ``data_cls`` and no entries."""
        return Composite(shape=self.shape, device=self._device, data_cls=self.data_cls)

    def _copy_structure(self) -> Composite:
        """A new tree of Composites sharing the leaf specs."""
        out = self.empty()
        for key, value in self._specs.items():
            out._specs[key] = value._copy_structure() if isinstance(value, Composite) else value
        return out

    def select(self, *keys: NestedKey, strict: bool = True) -> Composite:
        """A Composite with only ``keys`` (leaf specs are shared, containers are new)."""
        out = self.empty()
        for key in keys:
            value = self.get(key, None) if not strict else self[key]
            if value is None:
                continue
            out[key] = value._copy_structure() if isinstance(value, Composite) else value
        return out

    def exclude(self, *keys: NestedKey) -> Composite:
        """A Composite without ``keys`` (missing keys are ignored)."""
        out = self._copy_structure()
        for key in keys:
            if key in out:
                del out[key]
        return out

    # ------------------------------------------------------------- values
    def _build(self, method: str, shape: ShapeLike | None) -> TensorDict:
        lead = as_size(shape)
        source = {
            key: getattr(value, method)(lead)
            for key, value in self._specs.items()
            if value is not None
        }
        td = _make_td(source, lead + self.shape, self._device)
        if self.data_cls is not None:
            return self.data_cls.from_tensordict(td)
        return td

    def rand(self, shape: ShapeLike | None = None) -> TensorDict:
        """A TensorDict of random values, batch size ``(*shape, *self.shape)``."""
        return self._build("rand", shape)

    def zero(self, shape: ShapeLike | None = None) -> TensorDict:
        """A TensorDict of zeros, batch size ``(*shape, *self.shape)``."""
        return self._build("zero", shape)

    def one(self, shape: ShapeLike | None = None) -> TensorDict:
        """A TensorDict of ones, batch size ``(*shape, *self.shape)``."""
        return self._build("one", shape)

    def explain(self, val: Any) -> str | None:
        """Why ``val`` is not in the spec (naming the key), or ``None`` when it is."""
        if not isinstance(val, TensorDictBase):
            return f"expected a TensorDict, got {type(val).__name__}"
        for key, spec in self._checked_leaves():
            if spec is None:
                continue
            item = val.get(key, None)
            if item is None:
                present = sorted(map(str, val.keys(True, True)))
                return f"key {key!r} is missing (keys present: {present})"
            reason = spec.explain(item)
            if reason is not None:
                return f"key {key!r}: {reason}"
        return None

    def is_in(self, val: Any) -> bool:
        """Whether every leaf of the spec is present in the TensorDict ``val`` and in its spec."""
        if not isinstance(val, TensorDictBase):
            return False
        for key, spec in self._specs.items():
            if spec is None:
                continue
            item = val.get(key, None)
            if item is None or not spec.is_in(item):
                return False
        return True

    def assert_is_in(self, val: Any, key: Any = None) -> None:
        """Raises a ``ValueError`` naming the offending key when ``val`` is not in the spec."""
        reason = self.explain(val)
        if reason is not None:
            where = f" under {key!r}" if key is not None else ""
            raise ValueError(f"TensorDict{where} is not in its Composite spec: {reason}.")

    def project(self, val: TensorDictBase) -> TensorDictBase:
        """Projects the entries of ``val`` into their specs IN PLACE (TorchRL's behaviour).

        Entries already in their spec are left as they are. Returns ``val``.
        """
        for key, spec in self._specs.items():
            item = val.get(key, None)
            if item is not None and spec is not None and not spec.is_in(item):
                val.set(key, spec.project(item))
        return val

    def encode(self, vals: Mapping[str, Any], shape: ShapeLike | None = None) -> TensorDict:
        """A TensorDict from a (nested) mapping of numpy arrays / numbers; keys not in the spec raise."""
        source: dict[str, Any] = {}
        for key, value in vals.items():
            if key not in self._specs:
                raise self._missing(key)
            source[key] = self._specs[key].encode(value)
        return TensorDict(source, batch_size=self.shape, device=self._device)

    def to_numpy(self, val: TensorDictBase) -> dict[str, Any]:
        """A nested dict of numpy arrays (one-hot leaves become indices)."""
        return {
            key: spec.to_numpy(val.get(key))
            for key, spec in self._specs.items()
            if spec is not None
        }

    # ------------------------------------------------------------- shape ops
    def _map(self, fn_leaf: Any, shape: torch.Size, device: Any = _MISSING) -> Composite:
        out = Composite(shape=shape, device=self._device if device is _MISSING else device,
                        data_cls=self.data_cls)  # fmt: skip
        for key, value in self._specs.items():
            out._specs[key] = None if value is None else fn_leaf(value)
        out._locked = False
        return out

    def expand(self, *shape: Any) -> Composite:
        """The spec with its batch shape expanded to ``shape`` (leaves follow).

        Example:
            >>> from rl_envs.specs import Unbounded
            >>> Composite(obs=Unbounded(shape=(3,))).expand(2).zero().batch_size
            torch.Size([2])
        """
        new = shape_args(shape)
        n = self.ndim
        if len(new) < n:
            raise ValueError(
                f"Composite.expand{tuple(new)}: fewer dims than the batch shape {tuple(self.shape)}."
            )
        tail = [s if t == -1 else t for s, t in zip(self.shape, new[len(new) - n :], strict=True)]
        new = torch.Size([*new[: len(new) - n], *tail])
        for old, t in zip(self.shape, tail, strict=True):
            if old != t and old != 1:
                raise ValueError(
                    f"Composite.expand: the last {n} dims of {tuple(new)} must match the batch "
                    f"shape {tuple(self.shape)} (size-1 dims may grow)."
                )
        return self._map(lambda v: v.expand(*new, *v.shape[n:]), new)

    def _index(self, idx: Any) -> Composite:
        shape = torch.empty(self.shape, device="meta")[idx].shape
        idx_t = idx if isinstance(idx, tuple) else (idx,)
        if any(i is Ellipsis for i in idx_t):
            raise IndexError("Composite indexing does not support Ellipsis; index the batch dims.")
        return self._map(lambda v: v[idx], shape)

    def squeeze(self, dim: int | None = None) -> Composite:
        """The spec with size-1 batch dims removed (all of them or ``dim``)."""
        if dim is None:
            dims = [i for i, s in enumerate(self.shape) if s == 1]
            out = self
            for d in reversed(dims):
                out = out.squeeze(d)
            return out if dims else self.clone()
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < self.ndim:
            raise ValueError(
                f"Composite.squeeze({dim}): dim out of the batch shape {tuple(self.shape)}."
            )
        if self.shape[d] != 1:
            return self.clone()
        shape = torch.Size([*self.shape[:d], *self.shape[d + 1 :]])
        return self._map(lambda v: v.squeeze(d), shape)

    def unsqueeze(self, dim: int) -> Composite:
        """The spec with a size-1 batch dim inserted at ``dim``."""
        d = dim + self.ndim + 1 if dim < 0 else dim
        if not 0 <= d <= self.ndim:
            raise ValueError(
                f"Composite.unsqueeze({dim}): dim out of range for batch shape {tuple(self.shape)}."
            )
        shape = torch.Size([*self.shape[:d], 1, *self.shape[d:]])
        return self._map(lambda v: v.unsqueeze(d), shape)

    def unbind(self, dim: int = 0) -> tuple[Composite, ...]:
        """The specs of ``td.unbind(dim)`` for a TensorDict of this spec."""
        d = dim + self.ndim if dim < 0 else dim
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))

    def to(self, dest: Any) -> Composite:
        """The spec on another device (every leaf moved)."""
        if isinstance(dest, torch.dtype):
            return self._map(lambda v: v.to(dest), self.shape)
        device = to_device(dest)
        return self._map(lambda v: v.to(device), self.shape, device)

    def cpu(self) -> Composite:
        """The spec on the CPU."""
        return self.to("cpu")

    def clone(self) -> Composite:
        """A deep copy (unlocked)."""
        return self._map(lambda v: v.clone(), self.shape)

    # ------------------------------------------------------------- equality / repr
    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and self.shape == other.shape
            and self._device == other._device
            and self._specs.keys() == other._specs.keys()
            and all(
                (v is None and other._specs[k] is None) or (v is not None and v == other._specs[k])
                for k, v in self._specs.items()
            )
        )

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        lines = [f"{key}: {_indent(repr(value))}" for key, value in self._specs.items()]
        lines += [f"device={self._device}", f"shape={self.shape}"]
        if self._locked:
            lines.append("locked=True")
        return "Composite(\n    " + ",\n    ".join(lines) + ")"
