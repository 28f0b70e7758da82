"""``QueryModule``: TensorDict entries -> a hash and a small integer id per row."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey, unravel_key
from torch import nn

from rl_buffers.map.hash import SipHash


def _new_like(module: nn.Module) -> nn.Module:
    """A fresh module of ``module``'s class with its hashing settings (the aggregator)."""
    return SipHash(as_tensor=True) if not isinstance(module, SipHash) else type(module)()


class QueryModule(nn.Module):
    """Hashes the ``in_keys`` entries of each row into an id, written at ``index_key``.

    Each entry is hashed by its hash module (one per key), the per-key hashes are
    combined by ``aggregator`` (with several keys), and each distinct hash gets the
    next free id (0, 1, 2, ...): ids index a storage, e.g. in :class:`TensorDictMap`.
    The raw hash goes to ``hash_key``.

    Args:
        in_keys: the entries that identify a row.
        index_key: where the id goes. Default: ``"_index"``.
        hash_key: where the hash goes. Default: ``"_hash"``.
        hash_module: one module for all keys (each key gets its own copy of the class)
            or one per key. Default: :class:`SipHash`.
        aggregator: combines the per-key hashes ``[batch, n_keys]``; default: a new
            module of the first key's hash module class.
        clone: write into a shallow copy of the input rather than the input.

    Examples:
        >>> from tensordict import TensorDict
        >>> query = QueryModule(in_keys=["a", "b"], index_key="index")
        >>> out = query(TensorDict(a=torch.tensor([[1.0], [1.0], [2.0]]), b=torch.ones(3, 1), batch_size=[3]))
        >>> out["index"].tolist()
        [0, 0, 1]
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        index_key: NestedKey = "_index",
        hash_key: NestedKey = "_hash",
        *,
        hash_module: nn.Module | Sequence[nn.Module] | None = None,
        aggregator: nn.Module | None = None,
        clone: bool = False,
    ) -> None:
        super().__init__()
        self.in_keys = [unravel_key(key) for key in in_keys]
        self.index_key = unravel_key(index_key)
        self.hash_key = unravel_key(hash_key)
        if hash_module is None:
            hash_module = SipHash()
        if isinstance(hash_module, nn.Module):
            modules = [hash_module] + [_new_like(hash_module) for _ in self.in_keys[1:]]
        else:
            modules = list(hash_module)
            if len(modules) != len(self.in_keys):
                raise ValueError(
                    f"QueryModule: {len(modules)} hash modules for {len(self.in_keys)} in_keys; "
                    "pass one module, or one per key."
                )
        self.hash_module = dict(zip(self.in_keys, modules, strict=True))
        self.aggregator = aggregator if aggregator is not None else _new_like(modules[0])
        self.clone = clone
        self._ids: dict[int, int] = {}

    def hash_to_int(self, hashes: torch.Tensor, extend: bool = True) -> torch.Tensor:
        """The id of each hash; new hashes get new ids (``extend``) or ``-1``."""
        out = []
        for value in hashes.reshape(-1).tolist():
            known = self._ids.get(value)
            if known is None and extend:
                known = self._ids[value] = len(self._ids)
            out.append(-1 if known is None else known)
        return torch.tensor(out, dtype=torch.int64).reshape(hashes.shape)

    def forward(
        self,
        tensordict: TensorDictBase,
        *,
        extend: bool = True,
        write_hash: bool = True,
        clone: bool | None = None,
    ) -> TensorDictBase:
        hashes = [self.hash_module[key](tensordict.get(key)) for key in self.in_keys]
        hashed = hashes[0] if len(hashes) == 1 else self.aggregator(torch.stack(hashes, -1))
        output = tensordict.copy() if (self.clone if clone is None else clone) else tensordict
        output.set(self.index_key, self.hash_to_int(hashed, extend=extend))
        if write_hash:
            output.set(self.hash_key, hashed)
        return output
