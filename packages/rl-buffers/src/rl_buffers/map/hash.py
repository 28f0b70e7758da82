"""Hash modules: rows of a tensor -> one integer each, for :class:`~rl_buffers.map.QueryModule`."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class BinaryToDecimal(nn.Module):
    """Reads the last dim as ``num_bits``-bit binary numbers and sums them, per row.

    Args:
        num_bits: bits per number; the last dim must be a multiple of it.
        device: where the bit weights live.
        dtype: of the result.
        convert_to_binary: map inputs to bits first (``> 0`` -> 1, else 0).

    Examples:
        >>> to_decimal = BinaryToDecimal(num_bits=4, device="cpu", dtype=torch.int32, convert_to_binary=True)
        >>> to_decimal(torch.tensor([[0.0, 0, 1, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 10, 0]])).tolist()
        [3, 2]
    """

    def __init__(
        self,
        num_bits: int,
        device: torch.device | str,
        dtype: torch.dtype,
        convert_to_binary: bool = False,
    ) -> None:
        super().__init__()
        self.num_bits = num_bits
        self.convert_to_binary = convert_to_binary
        self.register_buffer(
            "bases", 2 ** torch.arange(num_bits - 1, -1, -1, device=device, dtype=dtype)
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        width = features.shape[-1]
        if width < self.num_bits or width % self.num_bits:
            raise ValueError(
                f"BinaryToDecimal: the last dim ({width}) must be a multiple of num_bits={self.num_bits}."
            )
        bits = (features > 0) if self.convert_to_binary else features
        groups = bits.to(self.bases.dtype).reshape(*features.shape[:-1], -1, self.num_bits)
        return (groups * self.bases).sum(-1).sum(-1)


class SipHash(nn.Module):
    """One integer per row of ``[batch, features]``: Python's ``hash`` (SipHash) of its bytes.

    Equal rows give equal hashes within a process; across processes only with the same
    ``PYTHONHASHSEED`` (Python salts ``hash`` per process).

    Args:
        as_tensor: return an int64 tensor ``[batch]``; ``False``: the rows' bytes (a list).

    Examples:
        >>> x = torch.tensor([[0.1, 0.2], [0.3, 0.4], [0.1, 0.2]])
        >>> h = SipHash()(x)
        >>> h.shape, bool(h[0] == h[2]), bool(h[0] == h[1])
        (torch.Size([3]), True, False)
    """

    def __init__(self, as_tensor: bool = True) -> None:
        super().__init__()
        self.as_tensor = as_tensor

    def forward(self, x: torch.Tensor) -> torch.Tensor | list[bytes]:
        if x.dtype == torch.bfloat16:  # numpy has no bfloat16
            x = x.to(torch.float16)
        rows = [row.tobytes() for row in x.detach().cpu().reshape(x.shape[0], -1).numpy()]
        if not self.as_tensor:
            return rows
        return torch.tensor([hash(row) for row in rows], dtype=torch.int64)


class RandomProjectionHash(SipHash):
    """Projects rows on ``n_components`` random directions, rounds to ``dtype_cast``, hashes.

    Nearby rows share a hash once their projections round to the same values, so
    continuous observations map to a compact key. The projection is drawn (with
    ``init_method``, default standard normal) on the first call, from the input's width.

    Args:
        n_components: projection width. Default: 16.
        dtype_cast: the dtype the projection is computed and rounded in. Default:
            ``torch.bfloat16``.
        as_tensor: as in :class:`SipHash`.
        init_method: fills the ``[features, n_components]`` projection in place.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> h = RandomProjectionHash(n_components=8)(torch.randn(100, 5))
        >>> h.shape, h.unique().numel()
        (torch.Size([100]), 100)
    """

    _N_COMPONENTS_DEFAULT = 16

    def __init__(
        self,
        *,
        n_components: int | None = None,
        dtype_cast: torch.dtype = torch.bfloat16,
        as_tensor: bool = True,
        init_method: Callable[[torch.Tensor], object] | None = None,
    ) -> None:
        super().__init__(as_tensor=as_tensor)
        self.n_components = self._N_COMPONENTS_DEFAULT if n_components is None else n_components
        self.dtype_cast = dtype_cast
        self.init_method = init_method or nn.init.normal_
        self.transform: torch.Tensor | None = None

    def fit(self, x: torch.Tensor) -> None:
        """Draws the projection for inputs of ``x``'s width."""
        projection = torch.empty(x.shape[-1], self.n_components, device=x.device)
        self.init_method(projection)
        self.transform = projection.to(self.dtype_cast)

    def forward(self, x: torch.Tensor) -> torch.Tensor | list[bytes]:
        if self.transform is None:
            self.fit(x)
        return super().forward(x.to(self.dtype_cast) @ self.transform)
