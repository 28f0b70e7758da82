"""``Bounded``: values between element-wise bounds, continuous (float dtypes) or discrete (int dtypes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rl_envs.specs._base import ShapeLike, TensorSpec, as_size, tensor_repr
from rl_envs.specs._dtypes import to_torch_dtype
from rl_envs.specs._spaces import ContinuousBox

__all__ = ["Bounded", "BoundedContinuous", "BoundedDiscrete"]


def _scalar_of(t: torch.Tensor) -> float | int | None:
    """The common value of all elements of ``t``, or ``None`` when they differ."""
    if t.numel() == 0:
        return None
    first = t.reshape(-1)[0]
    if not bool((t == first).all()):
        return None
    return first.item()


class Bounded(TensorSpec):
    """Values with ``low <= value <= high`` element-wise.

    A floating ``dtype`` gives a continuous box (``rand`` is uniform; infinite
    bounds are allowed, ``rand`` then draws normals on the open side); an integer
    ``dtype`` (or ``domain="discrete"``) gives a discrete one, where ``rand`` is
    uniform over the integers of ``[low, high]`` and ``project`` rounds.

    The bounds are stored once, expanded to the full shape, as ``spec.space.low``
    and ``spec.space.high`` (also ``spec.low`` / ``spec.high``). When all elements
    share the same bounds, ``rand``/``is_in``/``project`` use python scalars
    (one kernel each, no broadcast of the bound tensors).

    Args:
        low: lower bound(s), a number or anything that broadcasts to ``shape``.
        high: upper bound(s), a number or anything that broadcasts to ``shape``.
        shape: the full shape; defaults to the broadcast shape of ``low`` and ``high``.
        device: defaults to CPU.
        dtype: defaults to ``torch.get_default_dtype()`` (``torch.int64`` with
            ``domain="discrete"``).
        domain: ``"continuous"`` or ``"discrete"``; only used to pick the default dtype.

    Raises:
        ValueError: when ``low > high`` somewhere, or the bounds do not broadcast to ``shape``.

    Example:
        >>> import torch
        >>> spec = Bounded(low=-2.0, high=2.0, shape=(1,))
        >>> bool((spec.rand((100,)).abs() <= 2).all())
        True
        >>> spec.project(torch.tensor([3.0]))
        tensor([2.])
        >>> Bounded(0, 4, shape=(2,), dtype=torch.int64).rand().dtype
        torch.int64
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Bounded:
        # the dtype picks the subclass (TorchRL's behaviour): low, high, shape, device, dtype, domain
        domain = args[5] if len(args) > 5 else kwargs.get("domain")
        if domain is None and cls is BoundedDiscrete:
            domain = "discrete"
        default = torch.int64 if domain == "discrete" else None
        dtype = to_torch_dtype(args[4] if len(args) > 4 else kwargs.get("dtype"), default)
        continuous = dtype.is_floating_point or dtype.is_complex
        target = BoundedContinuous if continuous else BoundedDiscrete
        obj = super().__new__(target)
        if not issubclass(target, cls):  # Python skips __init__ then: run it here
            obj.__init__(*args, **kwargs)
        return obj

    def __init__(
        self,
        low: Any,
        high: Any,
        shape: ShapeLike | None = None,
        device: Any = None,
        dtype: Any = None,
        domain: str | None = None,
    ) -> None:
        if domain not in (None, "continuous", "discrete"):
            raise ValueError(f"domain must be 'continuous' or 'discrete', got {domain!r}.")
        default = torch.int64 if domain == "discrete" else None
        dtype = to_torch_dtype(dtype, default)
        low_t = torch.as_tensor(low, device=device if device is not None else None)
        high_t = torch.as_tensor(high, device=low_t.device)
        if shape is None:
            try:
                shape = torch.broadcast_shapes(low_t.shape, high_t.shape)
            except RuntimeError as err:
                raise ValueError(
                    f"Bounded: low (shape {tuple(low_t.shape)}) and high (shape "
                    f"{tuple(high_t.shape)}) do not broadcast together; pass bounds of one shape."
                ) from err
        shape = as_size(shape)
        super().__init__(shape, device if device is not None else low_t.device, dtype)
        if not dtype.is_floating_point and (
            not torch.isfinite(low_t.double()).all() or not torch.isfinite(high_t.double()).all()
        ):
            raise ValueError(
                f"Bounded with integer dtype {dtype} needs finite bounds, got low={low!r}, "
                f"high={high!r}; use Unbounded(dtype={dtype}) for an integer without bounds."
            )
        try:
            low_t = low_t.to(dtype=dtype, device=self.device).expand(shape).contiguous()
            high_t = high_t.to(dtype=dtype, device=self.device).expand(shape).contiguous()
        except RuntimeError as err:
            raise ValueError(
                f"Bounded: low (shape {tuple(torch.as_tensor(low).shape)}) and high (shape "
                f"{tuple(torch.as_tensor(high).shape)}) must broadcast to shape {tuple(shape)}."
            ) from err
        bad = low_t > high_t
        if bool(bad.any()):
            where = tuple(bad.nonzero()[0].tolist())
            raise ValueError(
                f"Bounded: low must be <= high everywhere; at index {where} low="
                f"{low_t[where].item()} > high={high_t[where].item()}."
            )
        self._space = ContinuousBox(low_t, high_t)
        self._lo = _scalar_of(low_t)
        self._hi = _scalar_of(high_t)
        self._scalar = self._lo is not None and self._hi is not None and dtype != torch.bool
        self._finite = bool(
            torch.isfinite(low_t.double()).all() and torch.isfinite(high_t.double()).all()
        )
        self._scale = (high_t - low_t) if dtype.is_floating_point and self._finite else None

    # ------------------------------------------------------------- bounds
    @property
    def space(self) -> ContinuousBox:
        """The bounds, ``space.low`` and ``space.high`` (tensors of ``shape``)."""
        return self._space

    @property
    def low(self) -> torch.Tensor:
        """Lower bounds, a tensor of ``shape``."""
        return self._space.low

    @property
    def high(self) -> torch.Tensor:
        """Upper bounds, a tensor of ``shape``."""
        return self._space.high

    # ------------------------------------------------------------- values
    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Uniform values in ``[low, high]`` (normals on infinite sides), ``shape`` prepended."""
        full = self._full_shape(shape)
        low, high = self._space.low, self._space.high
        if self.dtype.is_floating_point:
            if self._scalar and self._finite:
                out = torch.empty(full, dtype=self.dtype, device=self.device)
                out.uniform_(self._lo, self._hi)
                # uniform_ computes in double and rounds to the dtype: for dtypes narrower than
                # double, rounding is monotonic and the bounds are representable, so the result
                # stays in [low, high]; float64 may overshoot by one ulp, so clamp it.
                return out.clamp_(self._lo, self._hi) if self.dtype == torch.float64 else out
            if self._finite:
                r = torch.rand(full, dtype=self.dtype, device=self.device)
                return torch.addcmul(low, r, self._scale).clamp_(low, high)
            return self._rand_infinite(full)
        if self._scalar:
            return torch.randint(
                int(self._lo), int(self._hi) + 1, full, dtype=self.dtype, device=self.device
            )
        r = torch.rand(full, dtype=torch.float64, device=self.device)
        lo64, hi64 = low.double(), high.double()
        out = torch.minimum((r * (hi64 - lo64 + 1)).floor_() + lo64, hi64)
        return out.to(self.dtype)

    def _rand_infinite(self, full: torch.Size) -> torch.Tensor:
        low, high = self._space.low, self._space.high
        lo_inf, hi_inf = torch.isinf(low), torch.isinf(high)
        finite_low = torch.where(lo_inf, torch.zeros_like(low), low)
        finite_high = torch.where(hi_inf, torch.zeros_like(high), high)
        u = torch.rand(full, dtype=self.dtype, device=self.device)
        uniform = finite_low + u * (finite_high - finite_low)
        g = torch.randn(full, dtype=self.dtype, device=self.device)
        out = torch.where(
            lo_inf & hi_inf,
            g,
            torch.where(
                lo_inf, finite_high - g.abs(), torch.where(hi_inf, finite_low + g.abs(), uniform)
            ),
        )
        return out.clamp_(low, high)

    def _in_range(self, val: torch.Tensor) -> bool:
        if self._scalar:
            return torch.equal(val.clamp(self._lo, self._hi), val)
        if self.dtype == torch.bool:
            return bool(((val >= self._space.low) & (val <= self._space.high)).all())
        return torch.equal(torch.clamp(val, self._space.low, self._space.high), val)

    def _domain_text(self) -> str:
        if self._scalar:
            return f"{self._lo} <= value <= {self._hi}"
        return "low <= value <= high element-wise, see spec.space"

    def _range_reason(self, val: torch.Tensor) -> str:
        v = val.double() if not val.dtype.is_floating_point else val
        low = self._space.low.to(v.dtype)
        high = self._space.high.to(v.dtype)
        bad = ~((v >= low) & (v <= high))
        if not bool(bad.any()):
            return f"its values are outside the spec ({self._domain_text()})"
        idx = tuple(bad.nonzero()[0].tolist())
        spec_idx = idx[len(idx) - self.ndim :] if self.ndim else ()
        return (
            f"value[{', '.join(map(str, idx))}] = {val[idx].item()} is outside "
            f"[{self._space.low[spec_idx].item()}, {self._space.high[spec_idx].item()}]"
        )

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if not self.dtype.is_floating_point and val.dtype.is_floating_point:
            val = val.round()
        val = val.to(dtype=self.dtype, device=self.device)
        if self.dtype == torch.bool:
            return torch.maximum(torch.minimum(val, self._space.high), self._space.low)
        if self._scalar:
            return val.clamp(self._lo, self._hi)
        return torch.clamp(val, self._space.low, self._space.high)

    def cardinality(self) -> float:
        """``inf`` (TorchRL's value, for discrete bounds too)."""
        return float("inf")

    # ------------------------------------------------------------- copies
    def _remap(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Bounded:
        low, high = fn(self._space.low), fn(self._space.high)
        return Bounded(low, high, shape=low.shape, device=self.device, dtype=self.dtype)

    def _with(self, **changes: Any) -> Bounded:
        device = changes.get("device", self.device)
        dtype = changes.get("dtype", self.dtype)
        return Bounded(
            self._space.low.to(device),
            self._space.high.to(device),
            shape=self.shape,
            device=device,
            dtype=dtype,
        )

    def _same_params(self, other: TensorSpec) -> bool:
        return self._space == other._space  # type: ignore[attr-defined]

    def _repr_fields(self) -> list[str]:
        low, high = tensor_repr(self._space.low), tensor_repr(self._space.high)
        return [f"space=ContinuousBox(low={low}, high={high})"]


class BoundedContinuous(Bounded):
    """:class:`Bounded` with a floating dtype (what ``Bounded(...)`` builds for one).

    Example:
        >>> isinstance(Bounded(-1.0, 1.0, shape=(2,)), BoundedContinuous)
        True
    """


class BoundedDiscrete(Bounded):
    """:class:`Bounded` with an integer dtype; ``domain`` defaults to ``"discrete"`` (``torch.int64``).

    Example:
        >>> BoundedDiscrete(0, 4, shape=(2,)).dtype
        torch.int64
    """

    def __init__(
        self,
        low: Any,
        high: Any,
        shape: ShapeLike | None = None,
        device: Any = None,
        dtype: Any = None,
        domain: str | None = "discrete",
    ) -> None:
        super().__init__(low, high, shape, device, dtype, domain)
