"""Run a TensorDict module over one batch dimension it does not expect, with ``torch.vmap``."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase


class VmapModule(TensorDictModuleBase):
    """``module`` mapped over dim ``vmap_dim`` of the TensorDict with ``torch.vmap``.

    The wrapped module sees entries without that dimension; its outputs are
    stacked back along it and written into the input TensorDict. With
    ``mock=True`` (or after :meth:`mock_`) the map is a Python loop over
    ``unbind`` then ``stack``, for modules ``vmap`` cannot trace (same result).

    Args:
        module: a TensorDict module.
        vmap_dim: the dimension mapped over (default: the TensorDict's last batch dim).
        mock: loop instead of ``torch.vmap``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> first = TensorDictModule(lambda x: x[0], in_keys=["x"], out_keys=["y"])
        >>> td = TensorDict(x=torch.arange(6.0).view(2, 3), batch_size=[2])
        >>> VmapModule(first, 0)(td)["y"]
        tensor([0., 3.])
    """

    def __init__(
        self, module: TensorDictModuleBase, vmap_dim: int | None = None, mock: bool = False
    ) -> None:
        super().__init__()
        self.module = module
        self.in_keys, self.out_keys = list(module.in_keys), list(module.out_keys)
        self.vmap_dim, self.mock = vmap_dim, mock

    def mock_(self, value: bool = True) -> None:
        """Loop instead of ``torch.vmap`` (``value=False`` switches back)."""
        self.mock = value

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        dim = tensordict.ndim - 1 if self.vmap_dim is None else self.vmap_dim
        if tensordict.ndim == 0:
            raise ValueError(
                "VmapModule: the TensorDict has no batch dimension to map over; give it a "
                "batch_size (or call the wrapped module directly)."
            )
        if self.mock:
            out = torch.stack([self.module(td) for td in tensordict.unbind(dim)], dim)
        else:
            out = torch.vmap(self.module, (dim,), (dim,))(tensordict)
        return tensordict.update(out)
