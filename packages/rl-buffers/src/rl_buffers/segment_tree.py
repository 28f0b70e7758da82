"""Sum and min segment trees with a compiled backend and a pure-torch fallback.

Reference: Schaul et al., "Prioritized Experience Replay", ICLR 2016 (the
proportional variant uses a sum tree to sample and a min tree for the
importance weights).
"""

from __future__ import annotations

import warnings
from typing import Literal

import torch

from rl_buffers import _extension
from rl_buffers import _segment_tree_torch as _ref

Backend = Literal["auto", "torch", "cpp", "cuda"]
_BACKENDS = ("auto", "torch", "cpp", "cuda")
_warned: set[str] = set()


def resolve_backend(backend: str, device: torch.device) -> str:
    """Picks the kernels for a tree on ``device``: ``"torch"``, ``"cpp"`` or ``"cuda"``.

    ``"auto"`` tries the compiled extension once per process and, if it cannot
    be built or loaded, warns once with the reason and returns ``"torch"``.
    ``"cpp"`` / ``"cuda"`` raise instead of falling back.

    Args:
        backend: ``"auto"``, ``"torch"``, ``"cpp"`` or ``"cuda"``.
        device: where the tree lives.

    Returns:
        The backend that will run.

    Raises:
        ValueError: for an unknown backend or one that does not match ``device``.
        RuntimeError: when ``"cpp"`` / ``"cuda"`` is asked and the extension is unavailable.

    Examples:
        >>> resolve_backend("torch", torch.device("cpu"))
        'torch'
    """
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}.")
    if backend == "torch":
        return "torch"
    kind = "cuda" if device.type == "cuda" else "cpu"
    wanted = "cuda" if kind == "cuda" else "cpp"
    if backend != "auto" and backend != wanted:
        raise ValueError(
            f"backend={backend!r} cannot run a tree on {device}: use backend={wanted!r}, "
            "'auto' or 'torch'."
        )
    if kind == "cpu" and device.type != "cpu":
        return "torch"  # e.g. mps: only the reference kernels apply
    reason = _extension.load(kind)
    if reason is None:
        return wanted
    if backend != "auto":
        raise RuntimeError(
            f"backend={backend!r} was asked but the segment-tree extension is unavailable: "
            f"{reason}. Use backend='torch' (identical results) or install a C++ compiler and ninja."
        )
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn(
            f"rl_buffers: the compiled segment tree ({wanted}) is unavailable, using the "
            f"pure-torch fallback (same results, slower). Reason: {reason}",
            RuntimeWarning,
            stacklevel=3,
        )
    return "torch"


class _SegmentTree:
    """A complete binary tree over ``size`` leaves, reduced with ``op``."""

    _op: int = _ref.SUM
    _neutral: float = 0.0

    def __init__(
        self,
        size: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        backend: Backend = "auto",
    ) -> None:
        if size < 1:
            raise ValueError(f"segment tree size must be >= 1, got {size}.")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"segment tree dtype must be float32 or float64, got {dtype}.")
        self.size = int(size)
        self.capacity = 1 << max(0, (self.size - 1).bit_length())
        self.device = torch.device(device)
        self.backend = resolve_backend(backend, self.device)
        self.tree = torch.full((2 * self.capacity,), self._neutral, dtype=dtype, device=self.device)
        self._ops = torch.ops.rl_buffers_segtree if self.backend != "torch" else None

    def __getstate__(self) -> dict:
        # torch.ops namespaces do not pickle: the compiled kernels are looked up again on load
        return {k: v for k, v in self.__dict__.items() if k != "_ops"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        # the loading process may lack the extension: same tree, the fallback kernels then
        self.backend = resolve_backend("torch" if self.backend == "torch" else "auto", self.device)
        self._ops = torch.ops.rl_buffers_segtree if self.backend != "torch" else None

    def __len__(self) -> int:
        return self.size

    def _check_index(self, index: torch.Tensor) -> None:
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= self.size):
            raise IndexError(
                f"segment tree index out of range: got values in [{int(index.min())}, "
                f"{int(index.max())}], expected [0, {self.size})."
            )

    def update(self, index: torch.Tensor | int, value: torch.Tensor | float) -> None:
        """Sets leaves ``index`` to ``value`` (broadcast); the last write to a repeated index wins."""
        index = torch.as_tensor(index, dtype=torch.long, device=self.device).reshape(-1)
        value = torch.as_tensor(value, dtype=self.tree.dtype, device=self.device)
        value = value.expand(index.shape) if value.numel() == 1 else value.reshape(-1)
        self._check_index(index)
        self.update_checked(index, value)

    def update_checked(self, index: torch.Tensor, value: torch.Tensor) -> None:
        """:meth:`update` for inputs the caller has checked: no conversion, no range check.

        Args:
            index: ``[n]`` int64 leaves in ``[0, size)``, on the tree's device.
            value: ``[n]`` values of the tree's dtype, on the tree's device.
        """
        if self._ops is None:
            _ref.update(self.tree, self.capacity, index, value, self._op)
        elif self.backend == "cuda":
            index, value = _ref.dedup_last(index, value)
            self._ops.update(self.tree, self.capacity, index, value, self._op)
        else:
            self._ops.update(self.tree, self.capacity, index, value, self._op)

    def query(self, start: int = 0, end: int | None = None) -> torch.Tensor:
        """The reduction of leaves ``[start, end)`` as a 0-d tensor."""
        end = self.size if end is None else end
        if not 0 <= start <= end <= self.size:
            raise IndexError(f"segment tree query [{start}, {end}) is outside [0, {self.size}].")
        if self._ops is None:
            return _ref.query(self.tree, self.capacity, start, end, self._op)
        return self._ops.query(self.tree, self.capacity, start, end, self._op)

    def __getitem__(self, index: torch.Tensor | int) -> torch.Tensor:
        index = torch.as_tensor(index, dtype=torch.long, device=self.device)
        return self.tree[index + self.capacity]

    def values(self) -> torch.Tensor:
        """A copy of the ``size`` leaves."""
        return self.tree[self.capacity : self.capacity + self.size].clone()

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"tree": self.tree.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        tree = state["tree"]
        if tree.shape != self.tree.shape:
            raise ValueError(
                f"segment tree checkpoint has {tree.numel()} nodes, this tree has {self.tree.numel()}: "
                "the sampler's max_capacity must match the checkpoint's."
            )
        self.tree.copy_(tree)

    def clear(self) -> None:
        self.tree.fill_(self._neutral)


class SumSegmentTree(_SegmentTree):
    """A sum tree: range sums and prefix-sum search in O(log n).

    Args:
        size: number of leaves.
        dtype: ``torch.float32`` or ``torch.float64``.
        device: where the tree lives (CUDA trees use the CUDA kernels).
        backend: ``"auto"`` (compiled if possible, else torch, warned once),
            ``"torch"``, ``"cpp"`` or ``"cuda"``.

    Examples:
        >>> tree = SumSegmentTree(4, backend="torch")
        >>> tree.update(torch.arange(4), torch.tensor([1.0, 2.0, 3.0, 4.0]))
        >>> float(tree.query(0, 4))
        10.0
        >>> tree.scan_lower_bound(torch.tensor([0.5, 2.5, 9.9]))
        tensor([0, 1, 3])
    """

    _op = _ref.SUM
    _neutral = 0.0

    def scan_lower_bound(self, mass: torch.Tensor) -> torch.Tensor:
        """For each mass ``m``, the first leaf ``i`` whose prefix sum through ``i`` exceeds ``m``."""
        mass = torch.as_tensor(mass, device=self.device)
        if self._ops is None:
            return _ref.scan_lower_bound(self.tree, self.capacity, mass)
        return self._ops.scan_lower_bound(self.tree, self.capacity, mass)


class MinSegmentTree(_SegmentTree):
    """A min tree: range minima in O(log n).

    Args:
        size: number of leaves.
        dtype: ``torch.float32`` or ``torch.float64``.
        device: where the tree lives.
        backend: ``"auto"``, ``"torch"``, ``"cpp"`` or ``"cuda"``.

    Examples:
        >>> tree = MinSegmentTree(4, backend="torch")
        >>> tree.update(torch.tensor([1, 2]), torch.tensor([3.0, 0.5]))
        >>> float(tree.query(0, 4))
        0.5
    """

    _op = _ref.MIN
    _neutral = float("inf")
