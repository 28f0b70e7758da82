"""The common base of every tensor spec: shape, dtype, device and shape operations.

A spec describes one value: its full shape (batch dims included), its dtype,
its device and the set of values it accepts. Subclasses implement a handful of
hooks (``rand``, ``_in_range``, ``_project``, ``_remap``, ``_same_params``,
``_repr_fields``); everything else (``zero``, ``one``, ``is_in``, ``explain``,
``encode``, ``expand``, ``squeeze``, ``unsqueeze``, ``spec[idx]``, ``to``,
``clone``, ``==``) is shared here.

Values with extra leading dims are accepted everywhere: ``spec.rand((4,))``
has shape ``(4, *spec.shape)`` and ``spec.is_in`` of it is ``True``.

``is_in`` is strict about the dtype and the device: a ``float64`` value is not
in a ``float32`` spec, a CUDA value is not in a CPU spec. ``explain(value)``
returns the reason as a sentence (``None`` when the value is in the spec), and
``assert_is_in(value, key)`` raises it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from rl_envs.specs import _registry
from rl_envs.specs._dtypes import to_device, to_numpy_dtype

__all__ = ["EncodeShapeError", "ShapeLike", "TensorSpec", "as_size"]

ShapeLike = int | Sequence[int] | torch.Size


def as_size(shape: ShapeLike | None) -> torch.Size:
    """Normalises ``None``, an int or a sequence of ints to a ``torch.Size``.

    Example:
        >>> as_size(3), as_size(None), as_size([2, 3])
        (torch.Size([3]), torch.Size([]), torch.Size([2, 3]))
    """
    if shape is None:
        return torch.Size(())
    if isinstance(shape, torch.Size):
        return shape
    if isinstance(shape, int):
        return torch.Size((shape,))
    return torch.Size(int(s) for s in shape)


def shape_args(shape: tuple[Any, ...]) -> torch.Size:
    """Accepts ``f(2, 3)`` as well as ``f((2, 3))`` and ``f(torch.Size([2, 3]))``."""
    if len(shape) == 1 and not isinstance(shape[0], int):
        return as_size(shape[0])
    return as_size(shape)


def same_device(a: torch.device, b: torch.device) -> bool:
    """Whether a tensor on ``a`` lives where a spec on ``b`` says: same type, and the same index
    unless one has none. CPU indices are ignored: a CPU tensor never carries one (a tensor
    moved to ``"cpu:1"`` reports ``"cpu"``), so a spec on ``"cpu:1"`` holds CPU tensors."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    return a.type == "cpu" or a.index is None or b.index is None or a.index == b.index


def tensor_repr(t: torch.Tensor) -> str:
    if t.numel() == 1 or (t.numel() > 0 and bool((t == t.reshape(-1)[0]).all())):
        value = t.reshape(-1)[0].item()
        return f"Tensor(shape={t.shape}, value={value})" if t.ndim else f"Tensor(value={value})"
    return f"Tensor(shape={t.shape}, dtype={t.dtype})"


class EncodeShapeError(ValueError, RuntimeError):
    """``encode`` got a value whose shape does not fit the spec (TorchRL raises RuntimeError)."""


class TensorSpec:
    """Base class of the tensor specs (not instantiated directly).

    Attributes:
        shape: the full shape of a value, batch dims included.
        dtype: the dtype of a value.
        device: the device of a value.
    """

    # Number of trailing dims that hold the "domain" (e.g. the one-hot dim of
    # OneHot): shape operations never touch them.
    _domain_dims: int = 0

    def __init__(self, shape: ShapeLike | None, device: Any, dtype: torch.dtype) -> None:
        self.shape: torch.Size = as_size(shape)
        self.device: torch.device = to_device(device, torch.device("cpu"))
        self.dtype: torch.dtype = dtype

    # ------------------------------------------------------------------ basics
    @property
    def ndim(self) -> int:
        """Number of dims of a value (batch dims included)."""
        return len(self.shape)

    def ndimension(self) -> int:
        """Same as :attr:`ndim` (TorchRL name)."""
        return len(self.shape)

    def numel(self) -> int:
        """Number of elements of one value."""
        return self.shape.numel()

    def _full_shape(self, shape: ShapeLike | None) -> torch.Size:
        if shape is None or shape == ():
            return self.shape
        return as_size(shape) + self.shape

    # ------------------------------------------------------------- values
    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """A random value, with ``shape`` prepended to the spec's shape."""
        raise NotImplementedError(type(self).__name__)

    def zero(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """The all-zeros value, with ``shape`` prepended.

        Example:
            >>> from rl_envs.specs import Unbounded
            >>> Unbounded(shape=(2,)).zero((3,)).shape
            torch.Size([3, 2])
        """
        return torch.zeros(self._full_shape(shape), dtype=self.dtype, device=self.device)

    def one(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """The all-ones value, with ``shape`` prepended."""
        return torch.ones(self._full_shape(shape), dtype=self.dtype, device=self.device)

    def _in_range(self, val: torch.Tensor) -> bool:
        """Whether the values of a tensor of the right shape/dtype/device are in the spec."""
        return True

    def _range_reason(self, val: torch.Tensor) -> str:
        return f"its values are outside the spec ({self._domain_text()})"

    def _domain_text(self) -> str:
        return "any value"

    def _meta_reason(self, val: Any) -> str | None:
        if not isinstance(val, torch.Tensor):
            return f"expected a torch.Tensor, got {type(val).__name__}"
        n = len(self.shape)
        vs = val.shape
        if len(vs) < n or (n and vs[len(vs) - n :] != self.shape):
            return (
                f"expected shape {tuple(self.shape)} (optionally with leading batch dims), "
                f"got {tuple(vs)}"
            )
        if val.dtype != self.dtype:
            return f"expected dtype {self.dtype}, got {val.dtype}"
        if not same_device(val.device, self.device):
            return f"expected device {self.device}, got {val.device}"
        return None

    def is_in(self, val: Any) -> bool:
        """Whether ``val`` could have come from this spec (shape, dtype, device and range).

        Leading batch dims are allowed: ``val.shape`` must end with ``spec.shape``.

        Example:
            >>> import torch
            >>> from rl_envs.specs import Bounded
            >>> spec = Bounded(-1.0, 1.0, shape=(2,))
            >>> spec.is_in(torch.zeros(2)), spec.is_in(torch.full((2,), 2.0))
            (True, False)
        """
        if not isinstance(val, torch.Tensor) or val.dtype != self.dtype:
            return False
        n = len(self.shape)
        vs = val.shape
        if len(vs) < n or (n and vs[len(vs) - n :] != self.shape):
            return False
        if not same_device(val.device, self.device):
            return False
        return self._in_range(val)

    def type_check(self, value: torch.Tensor, key: Any = None) -> None:
        """Raises a ``TypeError`` when ``value.dtype`` is not the spec's dtype (TorchRL's check)."""
        if value.dtype is not self.dtype:
            where = f" for key {key!r}" if key is not None else ""
            raise TypeError(
                f"value.dtype={value.dtype}{where} but {type(self).__name__}.dtype={self.dtype}; "
                f"cast it with value.to({self.dtype})."
            )

    def clear_device_(self) -> TensorSpec:
        """A no-op for leaf specs, which always have a device (Composites can drop theirs)."""
        return self

    def cardinality(self) -> Any:
        """The number of values the spec holds (``inf`` for continuous bounded specs)."""
        raise NotImplementedError(f"cardinality is not defined for {type(self).__name__} specs.")

    def contains(self, val: Any) -> bool:
        """Same as :meth:`is_in`."""
        return self.is_in(val)

    def explain(self, val: Any) -> str | None:
        """Why ``val`` is not in the spec, as a sentence; ``None`` when it is.

        Example:
            >>> import torch
            >>> from rl_envs.specs import Unbounded
            >>> Unbounded(shape=(3,)).explain(torch.zeros(2))
            'expected shape (3,) (optionally with leading batch dims), got (2,)'
        """
        reason = self._meta_reason(val)
        if reason is not None:
            return reason
        if not self._in_range(val):
            return self._range_reason(val)
        return None

    def assert_is_in(self, val: Any, key: Any = None) -> None:
        """Raises a ``ValueError`` naming ``key``, the spec and the reason when ``val`` is not in it."""
        reason = self.explain(val)
        if reason is not None:
            where = f" for key {key!r}" if key is not None else ""
            raise ValueError(
                f"Value{where} is not in its spec: {reason}. Spec: {self!r}. "
                f"Fix the producer of this value, or call spec.project(value) to map it into the spec."
            )

    def project(self, val: torch.Tensor) -> torch.Tensor:
        """The value of the spec closest to ``val`` (cast to the spec's dtype and device).

        Example:
            >>> import torch
            >>> from rl_envs.specs import Bounded
            >>> Bounded(-1.0, 1.0, shape=(2,)).project(torch.tensor([-3.0, 0.5]))
            tensor([-1.0000,  0.5000])
        """
        if not isinstance(val, torch.Tensor):
            val = torch.as_tensor(val)
        return self._project(val)

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return val.to(dtype=self.dtype, device=self.device)

    # ------------------------------------------------------------- encode
    def _as_tensor(self, val: Any) -> torch.Tensor:
        """A tensor of the spec's dtype/device that never aliases a numpy input."""
        if isinstance(val, torch.Tensor):
            return val.to(dtype=self.dtype, device=self.device)
        if isinstance(val, list) and len(val) == 1 and isinstance(val[0], np.ndarray):
            val = val[0]
        if self.dtype == torch.bfloat16:
            out = torch.from_numpy(np.array(val, dtype=np.float32)).to(torch.bfloat16)
        else:
            # np.array copies: the tensor does not alias a buffer the simulator may reuse.
            out = torch.from_numpy(np.array(val, dtype=to_numpy_dtype(self.dtype)))
        if self.device.type != "cpu":
            out = out.to(self.device)
        return out

    # ------------------------------------------------------------- memoized encode
    _encode_memo: dict[tuple[Any, ...], torch.Size] | None = None

    def memoize_encode(self, mode: bool = True) -> None:
        """Caches, per input kind, the shape fix-up that :meth:`encode` applies (TorchRL's name).

        With ``mode=True``, the first ``encode`` of a numpy array, tensor or number
        of a given type, dtype and shape records the output shape; later calls
        with the same kind of input skip the shape checks. Values are never cached.
        ``mode=False`` turns it off; :meth:`erase_memoize_cache` clears the records.

        Example:
            >>> import numpy as np
            >>> from rl_envs.specs import Unbounded
            >>> spec = Unbounded(shape=(1,))
            >>> spec.memoize_encode()
            >>> spec.encode(np.float64(0.5)), spec.encode(np.float64(1.5))
            (tensor([0.5000]), tensor([1.5000]))
        """
        self._encode_memo = {} if mode else None

    def erase_memoize_cache(self) -> None:
        """Forgets what :meth:`memoize_encode` recorded (it stays on)."""
        if self._encode_memo is not None:
            self._encode_memo.clear()

    def _memo_key(self, val: Any) -> tuple[Any, ...] | None:
        if isinstance(val, (torch.Tensor, np.ndarray, np.generic)):
            return (type(val), val.dtype, tuple(val.shape))
        if isinstance(val, (bool, int, float)):
            return (type(val),)
        return None  # lists and other containers: their length is not in the key

    def encode(self, val: Any) -> torch.Tensor:
        """Converts a numpy array, python number, list or tensor into a value of this spec.

        With :meth:`memoize_encode` on, the shape fix-up is looked up instead of
        recomputed for inputs of a kind seen before.

        The result has the spec's dtype and device. A value with the spec's number
        of elements but another shape (e.g. ``()`` for a ``(1,)`` spec) is reshaped.
        The values are not range-checked: call :meth:`assert_is_in` for that.

        Example:
            >>> import numpy as np
            >>> from rl_envs.specs import Unbounded
            >>> Unbounded(shape=(1,)).encode(np.float64(0.5))
            tensor([0.5000])
        """
        memo = self._encode_memo
        if memo is None:
            return self._fit_value(self._as_tensor(val), val)
        key = self._memo_key(val)
        shape = memo.get(key) if key is not None else None
        out = self._as_tensor(val)
        if shape is not None:
            return out if out.shape == shape else out.reshape(shape)
        out = self._fit_value(out, val)
        if key is not None:
            memo[key] = out.shape
        return out

    def _fit_value(self, out: torch.Tensor, val: Any) -> torch.Tensor:
        """TorchRL's rule for ``encode``: a tensor may carry leading dims; any other input
        (numpy, list, number) is reshaped to the spec's shape, which needs as many elements."""
        if isinstance(val, torch.Tensor) or out.shape == self.shape:
            return self._fit_shape(out, self.shape, val)
        if out.numel() == self.shape.numel():
            return out.reshape(self.shape)
        raise EncodeShapeError(
            f"Shape mismatch: cannot encode a {type(val).__name__} of shape {tuple(out.shape)} "
            f"in {type(self).__name__} of shape {tuple(self.shape)} (the numbers of elements "
            f"differ: {out.numel()} vs {self.shape.numel()}). Pass one value of the spec's "
            f"shape, or encode with spec.expand(*batch, *spec.shape) for a batch."
        )

    def _fit_shape(self, out: torch.Tensor, shape: torch.Size, val: Any) -> torch.Tensor:
        n = len(shape)
        if out.shape == shape or (n and out.shape[out.ndim - n :] == shape and out.ndim > n):
            return out
        if n == 0 and out.ndim > 0:
            return out
        if out.numel() == shape.numel():
            return out.reshape(shape)
        raise ValueError(
            f"Cannot encode a value of shape {tuple(out.shape)} in {type(self).__name__} of "
            f"shape {tuple(shape)}: the shapes differ and so do the numbers of elements "
            f"({out.numel()} vs {shape.numel()}). Got {type(val).__name__}."
        )

    def to_numpy(self, val: torch.Tensor) -> np.ndarray:
        """The numpy form of a value (what a Gymnasium env expects as an action)."""
        return val.detach().cpu().numpy()

    # ------------------------------------------------------------- shape ops
    def _remap(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> TensorSpec:
        """A copy of the spec whose leading (non-domain) dims went through ``fn``.

        ``fn`` maps any tensor whose leading dims are the spec's leading dims
        (trailing extra dims allowed) and leaves the trailing ones untouched.
        """
        raise NotImplementedError(type(self).__name__)

    @property
    def _lead_ndim(self) -> int:
        return len(self.shape) - self._domain_dims

    def _meta(self) -> torch.Tensor:
        return torch.empty(self.shape, device="meta")

    def expand(self, *shape: Any) -> TensorSpec:
        """The spec with leading dims added (or size-1 dims expanded).

        The new shape must end with the spec's shape, except where the spec has
        a size-1 dim, which may grow. ``-1`` keeps a dim as it is.

        Example:
            >>> from rl_envs.specs import Bounded
            >>> Bounded(0.0, 1.0, shape=(3,)).expand(4, 3).shape
            torch.Size([4, 3])
        """
        new = shape_args(shape)
        n = self.ndim
        if len(new) < n:
            raise ValueError(
                f"{type(self).__name__}.expand{tuple(new)}: the new shape has fewer dims than "
                f"the spec's shape {tuple(self.shape)}; pass the batch dims followed by it."
            )
        tail = [s if t == -1 else t for s, t in zip(self.shape, new[len(new) - n :], strict=True)]
        new = torch.Size([*new[: len(new) - n], *tail])
        for old, t in zip(self.shape, tail, strict=True):
            if old != t and old != 1:
                raise ValueError(
                    f"{type(self).__name__}.expand: the last {n} dims of {tuple(new)} must "
                    f"match the spec's shape {tuple(self.shape)} (size-1 dims may grow)."
                )
        dd = self._domain_dims
        if dd and new[len(new) - dd :] != self.shape[n - dd :]:
            raise ValueError(
                f"{type(self).__name__}.expand: the last {dd} dim(s) of the shape hold the "
                f"domain and cannot change; got {tuple(new)} for shape {tuple(self.shape)}."
            )
        if new == self.shape:
            return self.clone()
        lead = new[: len(new) - dd]
        k = self._lead_ndim

        def fn(t: torch.Tensor) -> torch.Tensor:
            return t.expand(*lead, *t.shape[k:])

        return self._remap(fn)

    def squeeze(self, dim: int | None = None) -> TensorSpec:
        """The spec without size-1 dims (all of them, or ``dim``); domain dims are kept."""
        k = self._lead_ndim
        if dim is None:
            dims = tuple(i for i in range(k) if self.shape[i] == 1)
        else:
            d = dim + self.ndim if dim < 0 else dim
            if not 0 <= d < k:
                raise ValueError(
                    f"{type(self).__name__}.squeeze({dim}): dim out of range for shape "
                    f"{tuple(self.shape)} (the last {self._domain_dims} dim(s) hold the domain)."
                )
            dims = (d,) if self.shape[d] == 1 else ()
        if not dims:
            return self.clone()
        return self._remap(lambda t: t.squeeze(dims))

    def unsqueeze(self, dim: int) -> TensorSpec:
        """The spec with a size-1 dim inserted at ``dim`` (before the domain dims)."""
        d = dim + self.ndim + 1 if dim < 0 else dim
        if not 0 <= d <= self._lead_ndim:
            raise ValueError(
                f"{type(self).__name__}.unsqueeze({dim}): dim out of range for shape "
                f"{tuple(self.shape)} (the last {self._domain_dims} dim(s) hold the domain)."
            )
        return self._remap(lambda t: t.unsqueeze(d))

    def reshape(self, *shape: Any) -> TensorSpec:
        """The spec with its leading (non-domain) dims reshaped."""
        new = shape_args(shape)
        dd = self._domain_dims
        if dd:
            if len(new) < dd or new[len(new) - dd :] != self.shape[self.ndim - dd :]:
                raise ValueError(
                    f"{type(self).__name__}.reshape: the last {dd} dim(s) hold the domain and "
                    f"must stay {tuple(self.shape[self.ndim - dd :])}; got {tuple(new)}."
                )
            new = new[: len(new) - dd]
        k = self._lead_ndim
        return self._remap(lambda t: t.reshape(*new, *t.shape[k:]))

    view = reshape

    def __getitem__(self, idx: Any) -> TensorSpec:
        """Indexes the leading (batch) dims of the spec, like indexing a value would.

        Example:
            >>> from rl_envs.specs import Unbounded
            >>> Unbounded(shape=(4, 3))[0].shape
            torch.Size([3])
        """
        idx_t = idx if isinstance(idx, tuple) else (idx,)
        k = self._lead_ndim

        def fn(t: torch.Tensor) -> torch.Tensor:
            extra = t.ndim - k
            if extra and any(i is Ellipsis for i in idx_t):
                return t[(*idx_t, *(slice(None),) * extra)]
            return t[idx_t]

        return self._remap(fn)

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """The specs of ``value.unbind(dim)`` for a value of this spec."""
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < self._lead_ndim:
            raise ValueError(f"{type(self).__name__}.unbind({dim}): dim out of range.")
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))

    # ------------------------------------------------------------- torch functions
    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        """``torch.stack`` / ``torch.squeeze`` / ``torch.unsqueeze`` of specs (TorchRL's protocol)."""
        return spec_torch_function(func, args, kwargs or {})

    # ------------------------------------------------------------- copies
    def to(self, dest: Any) -> TensorSpec:
        """The spec on another device, or with another dtype (``spec.to(torch.float64)``)."""
        if isinstance(dest, torch.dtype):
            if dest == self.dtype:
                return self
            return self._with(dtype=dest)
        device = to_device(dest)
        if device == self.device:
            return self
        return self._with(device=device)

    def cpu(self) -> TensorSpec:
        """The spec on the CPU."""
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> TensorSpec:
        """The spec on a CUDA device."""
        return self.to("cuda" if device is None else torch.device("cuda", device))

    def clone(self) -> TensorSpec:
        """An independent copy of the spec."""
        return self._with()

    def _with(self, **changes: Any) -> TensorSpec:
        """A new spec with some constructor parameters (device/dtype) replaced."""
        raise NotImplementedError(type(self).__name__)

    # ------------------------------------------------------------- equality / repr
    def _same_params(self, other: TensorSpec) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.device == other.device
            and self._same_params(other)
        )

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # specs are mutable containers

    def _repr_fields(self) -> list[str]:
        return []

    def __repr__(self) -> str:
        fields = [
            f"shape={self.shape}",
            *self._repr_fields(),
            f"device={self.device}",
            f"dtype={self.dtype}",
            f"domain={self.domain}",
        ]
        return f"{type(self).__name__}(\n    " + ",\n    ".join(fields) + ")"

    @property
    def domain(self) -> str:
        """``"continuous"`` for floating dtypes, ``"discrete"`` otherwise."""
        return "continuous" if self.dtype.is_floating_point or self.dtype.is_complex else "discrete"


def spec_torch_function(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The torch functions that apply to specs; anything else is refused."""
    if func is torch.stack:
        return _registry.lookup("stack_specs")(*args, **kwargs)
    if func is torch.squeeze:
        return args[0].squeeze(*args[1:], **kwargs)
    if func is torch.unsqueeze:
        return args[0].unsqueeze(*args[1:], **kwargs)
    name = getattr(func, "__name__", func)
    raise TypeError(
        f"torch.{name} does not apply to specs; only torch.stack, torch.squeeze and "
        "torch.unsqueeze do. Call it on a value instead (spec.rand() / spec.zero())."
    )
