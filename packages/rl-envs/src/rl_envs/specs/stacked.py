"""``torch.stack`` of specs: a dense spec when they are equal, a lazy stack otherwise.

``torch.stack([spec_a, spec_b], dim)`` follows TorchRL: equal specs give the
same kind of spec with a new dim of size ``len(specs)``; different leaf specs
(same type, dtype, device and number of dims) give a :class:`Stacked`;
different :class:`~rl_envs.specs.Composite` specs (same batch shape) give a
:class:`StackedComposite`, the spec of a ``LazyStackedTensorDict``.

A lazy stack keeps its members: ``stacked[i]`` (``i`` along the stack dim) is
the ``i``-th spec, ``rand``/``zero``/``one`` stack the members' values and
``is_in`` checks each slice against its member. Dims where the members differ
show as ``-1`` in ``shape``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from rl_envs.specs import _registry
from rl_envs.specs._base import ShapeLike, TensorSpec, as_size, shape_args
from rl_envs.specs.composite import Composite

__all__ = ["Stacked", "StackedComposite", "stack_specs"]


def _stack_shape(shapes: Sequence[torch.Size], dim: int, n: int) -> torch.Size:
    merged = [s if all(sh[i] == s for sh in shapes) else -1 for i, s in enumerate(shapes[0])]
    merged.insert(dim, n)
    return torch.Size(merged)


def _pos_dim(dim: int, ndim: int) -> int:
    d = dim + ndim + 1 if dim < 0 else dim
    if not 0 <= d <= ndim:
        raise ValueError(f"torch.stack of specs: dim={dim} out of range for {ndim}-dim specs.")
    return d


@_registry.register
def stack_specs(specs: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
    """Implements ``torch.stack`` for specs (see the module docstring).

    Raises:
        RuntimeError: the specs differ in type, device, dtype or number of dims
            (leaves), or in batch shape (Composites).
    """
    if out is not None:
        raise NotImplementedError("torch.stack(specs, out=...) is not supported: specs are values.")
    specs = list(specs)
    if not specs:
        raise ValueError("torch.stack of specs needs at least one spec.")
    first = specs[0]
    if isinstance(first, (Composite, StackedComposite)):
        for spec in specs[1:]:
            if not isinstance(spec, (Composite, StackedComposite)):
                raise RuntimeError(
                    "Stacking specs cannot occur: Found more than one type of spec in the list."
                )
            if spec.shape != first.shape:
                raise RuntimeError(f"Shapes differ, got {spec.shape} and {first.shape}")
        d = _pos_dim(dim, len(first.shape))
        if all(spec == first for spec in specs[1:]):
            shape = list(first.shape)
            shape.insert(d, len(specs))
            return first.clone().unsqueeze(d).expand(shape)
        return StackedComposite(*specs, dim=d)
    for spec in specs[1:]:
        if type(spec) is not type(first):
            raise RuntimeError(
                "Stacking specs cannot occur: Found more than one type of specs in the list."
            )
        if spec.device != first.device:
            raise RuntimeError(f"Devices differ, got {first.device} and {spec.device}")
        if spec.dtype != first.dtype:
            raise RuntimeError(f"Dtypes differ, got {first.dtype} and {spec.dtype}")
        if spec.ndim != first.ndim:
            raise RuntimeError(f"Ndims differ, got {first.ndim} and {spec.ndim}")
    d = _pos_dim(dim, first.ndim)
    if all(spec == first for spec in specs[1:]):
        shape = list(first.shape)
        shape.insert(d, len(specs))
        return first.clone().unsqueeze(d).expand(shape)
    return Stacked(*specs, dim=d)


class _LazyStack:
    """What the two lazy stacks share: members, stack dim, indexing and equality."""

    def __init__(self, *specs: Any, dim: int) -> None:
        if not specs:
            raise ValueError(f"{type(self).__name__} needs at least one spec.")
        self._specs = list(specs)
        self.dim = dim
        self.shape = _stack_shape([s.shape for s in self._specs], dim, len(self._specs))

    stack_dim = property(lambda self: self.dim)

    @property
    def device(self) -> torch.device | None:
        """The members' device."""
        return self._specs[0].device

    @property
    def ndim(self) -> int:
        """Number of dims, the stack dim included."""
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def _member(self, idx: Any) -> Any:
        """``spec[idx]``: an int on the stack dim gives that member; other dims index the members.

        A slice / list on the stack dim keeps a stack of the members it picks.
        """
        idx_t = idx if isinstance(idx, tuple) else (idx,)
        if any(i is Ellipsis or i is None for i in idx_t) or len(idx_t) > self.ndim:
            raise IndexError(
                f"{type(self).__name__}[{idx!r}]: index the dims one by one with ints, slices or "
                f"lists (no Ellipsis / None), at most {self.ndim} of them."
            )
        pre, rest = idx_t[: self.dim], idx_t[self.dim :]
        at = rest[0] if rest else slice(None)
        sub = pre + rest[1:]
        if isinstance(at, int):
            member = self._specs[at]
            return member[sub] if sub else member
        if isinstance(at, slice):
            picked = self._specs[at]
        else:
            picked = [self._specs[int(i)] for i in torch.as_tensor(at).reshape(-1)]
        removed = sum(isinstance(i, int) for i in pre)
        return type(self)(*[m[sub] if sub else m for m in picked], dim=self.dim - removed)

    def expand(self, *shape: Any) -> Any:
        """The stack with leading dims added: every member is expanded by them.

        ``-1`` (and the stack's own sizes) keep a dim as it is.
        """
        new = shape_args(shape)
        lead = len(new) - self.ndim
        if lead < 0 or any(t not in (-1, s) for t, s in zip(new[lead:], self.shape, strict=True)):
            raise ValueError(
                f"{type(self).__name__}.expand{tuple(new)}: a lazy stack of shape "
                f"{tuple(self.shape)} can only get leading dims, e.g. expand(2, "
                f"{', '.join(map(str, self.shape))})."
            )
        lead_shape = new[:lead]
        return type(self)(
            *[s.expand(*lead_shape, *s.shape) for s in self._specs], dim=self.dim + lead
        )

    def unsqueeze(self, dim: int) -> Any:
        """A size-1 dim inserted at ``dim`` (in every member; the stack dim shifts after it)."""
        d = dim + self.ndim + 1 if dim < 0 else dim
        if not 0 <= d <= self.ndim:
            raise ValueError(f"{type(self).__name__}.unsqueeze({dim}): dim out of range.")
        if d <= self.dim:
            return type(self)(*[s.unsqueeze(d) for s in self._specs], dim=self.dim + 1)
        return type(self)(*[s.unsqueeze(d - 1) for s in self._specs], dim=self.dim)

    def squeeze(self, dim: int | None = None) -> Any:
        """Size-1 dims removed (all of them or ``dim``); a stack of one member gives the member."""
        if dim is None:
            out = self
            for d in reversed([i for i, s in enumerate(self.shape) if s == 1]):
                out = out.squeeze(d)
            return out
        d = dim + self.ndim if dim < 0 else dim
        if self.shape[d] != 1:
            return self.clone()
        if d == self.dim:
            return self._specs[0].clone()
        if d < self.dim:
            return type(self)(*[s.squeeze(d) for s in self._specs], dim=self.dim - 1)
        return type(self)(*[s.squeeze(d - 1) for s in self._specs], dim=self.dim)

    def unbind(self, dim: int = 0) -> tuple[Any, ...]:
        """The members, when ``dim`` is the stack dim."""
        d = dim + self.ndim if dim < 0 else dim
        if d != self.dim:
            raise ValueError(f"{type(self).__name__}.unbind: only the stack dim ({self.dim}).")
        return tuple(self._specs)

    def _new(self, specs: list[Any]) -> Any:
        return type(self)(*specs, dim=self.dim)

    def clone(self) -> Any:
        """A deep copy."""
        return self._new([s.clone() for s in self._specs])

    def to(self, dest: Any) -> Any:
        """Every member moved to a device (or cast to a dtype)."""
        return self._new([s.to(dest) for s in self._specs])

    def cpu(self) -> Any:
        """Every member on the CPU."""
        return self.to("cpu")

    def explain(self, val: Any) -> str | None:
        """Why ``val`` is not in the stack, or ``None`` when it is."""
        return None if self.is_in(val) else f"not in the lazily stacked {type(self).__name__}"

    def type_check(self, value: Any, key: Any = None) -> None:
        """Checks each slice along the stack dim against its member's dtypes."""
        lead = value.ndim - self.ndim
        for part, spec in zip(value.unbind(lead + self.dim), self._specs, strict=True):
            spec.type_check(part if key is None else part.get(key), key)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and other.dim == self.dim
            and len(other._specs) == len(self._specs)
            and all(a == b for a, b in zip(self._specs, other._specs, strict=True))
        )

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ",\n    ".join(repr(s).replace("\n", "\n    ") for s in self._specs)
        return f"{type(self).__name__}(\n    {inner},\n    dim={self.dim},\n    shape={self.shape})"

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        """``torch.stack`` of lazy stacks (with other specs of their kind)."""
        if func is torch.stack:
            return stack_specs(*args, **(kwargs or {}))
        raise TypeError(f"torch.{getattr(func, '__name__', func)} does not apply to lazy stacks.")


@_registry.register
class Stacked(_LazyStack):
    """A lazy stack of leaf specs of one type that differ (e.g. in shape or bounds).

    Built by ``torch.stack`` (see the module docstring). ``rand``/``zero``/``one``
    return ``torch.stack`` of the members' values when their shapes agree, and a
    nested tensor (stack dim 0 only) when they do not.

    Example:
        >>> import torch
        >>> from rl_envs.specs import Bounded
        >>> spec = torch.stack([Bounded(0.0, 1.0, shape=(2,)), Bounded(5.0, 6.0, shape=(2,))])
        >>> type(spec).__name__, spec.shape
        ('Stacked', torch.Size([2, 2]))
        >>> value = spec.rand()
        >>> spec.is_in(value), bool((value[1] >= 5).all())
        (True, True)
    """

    @property
    def dtype(self) -> torch.dtype:
        """The members' dtype."""
        return self._specs[0].dtype

    def __getitem__(self, idx: Any) -> TensorSpec:
        return self._member(idx)

    def _values(self, method: str, shape: ShapeLike | None) -> torch.Tensor:
        lead = as_size(shape)
        vals = [getattr(s, method)(lead) for s in self._specs]
        if all(v.shape == vals[0].shape for v in vals):
            return torch.stack(vals, self.dim + len(lead))
        if self.dim == 0 and not lead:
            return torch.nested.nested_tensor(vals, layout=torch.jagged)
        raise ValueError(
            f"Stacked.{method}: the members' shapes differ and the stack dim is {self.dim}; "
            "only a stack along dim 0 can be returned (as a nested tensor). Sample the "
            "members one by one: spec.unbind(spec.dim)."
        )

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """One random value per member, stacked."""
        return self._values("rand", shape)

    def zero(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """One zero value per member, stacked."""
        return self._values("zero", shape)

    def one(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """One all-ones value per member, stacked."""
        return self._values("one", shape)

    def project(self, val: torch.Tensor) -> torch.Tensor:
        """Each slice of ``val`` along the stack dim projected into its member."""
        d = val.ndim - self.ndim + self.dim
        parts = [s.project(p) for s, p in zip(self._specs, val.unbind(d), strict=True)]
        return torch.stack(parts, d)

    def is_in(self, val: Any) -> bool:
        """Whether each slice of ``val`` along the stack dim is in its member."""
        if not isinstance(val, torch.Tensor):
            return False
        if val.is_nested:
            parts = val.unbind(0)
        else:
            lead = val.ndim - self.ndim
            if lead < 0 or val.shape[lead + self.dim] != len(self._specs):
                return False
            parts = val.unbind(lead + self.dim)
        return len(parts) == len(self._specs) and all(
            s.is_in(p) for s, p in zip(self._specs, parts, strict=True)
        )


@_registry.register
class StackedComposite(_LazyStack):
    """A lazy stack of Composites that differ: the spec of a ``LazyStackedTensorDict``.

    Built by ``torch.stack`` of Composites of one batch shape (see the module
    docstring). ``spec[key]`` stacks the members' entries for ``key``;
    :meth:`keys` lists the keys every member has. It is not a
    :class:`~rl_envs.specs.Composite` subclass: envs built here take dense specs.

    Example:
        >>> import torch
        >>> from rl_envs.specs import Composite, Unbounded
        >>> a = Composite(obs=Unbounded(shape=(3,)), extra=Unbounded(shape=(1,)))
        >>> b = Composite(obs=Unbounded(shape=(4,)))
        >>> spec = torch.stack([a, b])
        >>> spec.keys(), spec["obs"].shape
        (['obs'], torch.Size([2, -1]))
        >>> td = spec.zero()
        >>> type(td).__name__, td[1]["obs"].shape
        ('LazyStackedTensorDict', torch.Size([4]))
    """

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, (str, tuple)) and all(isinstance(k, str) for k in _as_tuple(idx)):
            return torch.stack([s[idx] for s in self._specs], self.dim)
        return self._member(idx)

    def keys(self, include_nested: bool = False, leaves_only: bool = False) -> list[Any]:
        """The keys every member has, in the first member's order."""
        first = self._specs[0].keys(include_nested, leaves_only)
        rest = [set(s.keys(include_nested, leaves_only)) for s in self._specs[1:]]
        return [k for k in first if all(k in r for r in rest)]

    def items(
        self, include_nested: bool = False, leaves_only: bool = False
    ) -> list[tuple[Any, Any]]:
        """``(key, spec[key])`` for the keys every member has; see :meth:`keys`."""
        return [(k, self[k]) for k in self.keys(include_nested, leaves_only)]

    def values(self, include_nested: bool = False, leaves_only: bool = False) -> list[Any]:
        """``spec[key]`` for the keys every member has; see :meth:`keys`."""
        return [v for _, v in self.items(include_nested, leaves_only)]

    def project(self, val: TensorDictBase) -> TensorDictBase:
        """Projects each slice of ``val`` along the stack dim into its member, in place."""
        d = val.ndim - self.ndim + self.dim
        for spec, part in zip(self._specs, val.unbind(d), strict=True):
            spec.project(part)
        return val

    def __contains__(self, key: object) -> bool:
        return all(key in s for s in self._specs)

    def __iter__(self) -> Any:
        return iter(self.keys())

    def _values(self, method: str, shape: ShapeLike | None) -> TensorDictBase:
        lead = as_size(shape)
        tds = [getattr(s, method)(lead) for s in self._specs]
        return LazyStackedTensorDict.lazy_stack(tds, self.dim + len(lead))

    def rand(self, shape: ShapeLike | None = None) -> TensorDictBase:
        """A ``LazyStackedTensorDict`` of one random TensorDict per member."""
        return self._values("rand", shape)

    def zero(self, shape: ShapeLike | None = None) -> TensorDictBase:
        """A ``LazyStackedTensorDict`` of one zero TensorDict per member."""
        return self._values("zero", shape)

    def one(self, shape: ShapeLike | None = None) -> TensorDictBase:
        """A ``LazyStackedTensorDict`` of one all-ones TensorDict per member."""
        return self._values("one", shape)

    def is_in(self, val: Any) -> bool:
        """Whether each slice of ``val`` along the stack dim is in its member."""
        if not isinstance(val, TensorDictBase):
            return False
        lead = val.ndim - self.ndim
        if lead < 0 or val.shape[lead + self.dim] != len(self._specs):
            return False
        parts = val.unbind(lead + self.dim)
        return all(s.is_in(p) for s, p in zip(self._specs, parts, strict=True))


def _as_tuple(key: Any) -> tuple[Any, ...]:
    return key if isinstance(key, tuple) else (key,)
