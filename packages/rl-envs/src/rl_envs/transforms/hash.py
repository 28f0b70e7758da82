"""``Hash``: a hash of entries (strings, non-tensor data or tensors) as a uint8 tensor."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from copy import copy
from typing import Any

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase

from rl_envs.transforms._utils import NestedKey, missing_key_error
from rl_envs.transforms.transform import Transform


def _unwrap(value: Any, raw: bool) -> Any:
    if raw:
        return value
    if isinstance(value, NonTensorStack):
        return value.tolist()
    if isinstance(value, NonTensorData):
        return value.data
    return value


class Hash(Transform):
    """Writes ``hash_fn(value)`` of each ``in_key`` to its ``out_key`` (TorchRL's ``Hash``).

    The default ``hash_fn`` is :meth:`reproducible_hash`: SHA-256 of the string,
    as 32 ``uint8``. Non-tensor entries are unwrapped (``.data`` /
    ``.tolist()``) before hashing unless ``use_raw_nontensor``. With
    ``in_keys_inv`` (or a ``repertoire``), every hash computed is remembered and
    ``inv`` maps the hashes under ``out_keys_inv`` back to the hashed values.

    Args:
        in_keys: the entries to hash.
        out_keys: where the hashes go.
        in_keys_inv: where ``inv`` writes the values looked up from hashes.
        out_keys_inv: the hashes ``inv`` reads.
        hash_fn: ``(value) -> Tensor`` (``(value, seed)`` when ``seed`` is given).
        seed: passed to ``hash_fn``; for the default, prepended to the string.
        use_raw_nontensor: give ``NonTensorData`` / ``NonTensorStack`` to ``hash_fn`` as they are.
        repertoire: a dict (not copied) in which hash -> value pairs are stored.

    Raises:
        ValueError: ``hash_fn`` returned something other than a tensor.
        RuntimeError: ``inv`` without a repertoire.

    Example:
        >>> from tensordict import TensorDict, NonTensorData
        >>> t = Hash(in_keys=["text"], out_keys=["hash"])
        >>> out = t(TensorDict(text=NonTensorData("abc")))
        >>> out["hash"].shape, out["hash"].dtype
        (torch.Size([32]), torch.uint8)
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey],
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        *,
        hash_fn: Callable[..., torch.Tensor] | None = None,
        seed: Any = None,
        use_raw_nontensor: bool = False,
        repertoire: dict[Any, Any] | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self._hash_fn = hash_fn if hash_fn is not None else Hash.reproducible_hash
        self._seed = seed
        self.use_raw_nontensor = use_raw_nontensor
        if repertoire is None and self.in_keys_inv:
            repertoire = {}
        self._repertoire = repertoire

    @staticmethod
    def reproducible_hash(string: Any, seed: Any = None) -> torch.Tensor:
        """SHA-256 of ``seed + string`` (``None`` counts as ``""``) as 32 ``uint8``.

        Example:
            >>> Hash.reproducible_hash("abc")[:4]
            tensor([186, 120,  22, 191], dtype=torch.uint8)
        """
        text = "" if string is None else str(string)
        if seed is not None:
            text = str(seed) + text
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        return torch.tensor(list(digest), dtype=torch.uint8)

    @classmethod
    def hash_to_repertoire_key(cls, hash_tensor: Any) -> Any:
        """A hashable (nested tuples) form of a hash tensor."""
        if isinstance(hash_tensor, torch.Tensor):
            hash_tensor = hash_tensor.tolist()
        if isinstance(hash_tensor, list):
            return tuple(cls.hash_to_repertoire_key(t) for t in hash_tensor)
        return hash_tensor

    def call_hash_fn(self, value: Any) -> torch.Tensor:
        """``hash_fn`` on one (unwrapped) value; remembers it in the repertoire if any."""
        out = self._hash_fn(value) if self._seed is None else self._hash_fn(value, self._seed)
        if not isinstance(out, torch.Tensor):
            raise ValueError(f"Hash: hash_fn must return a tensor, got {type(out).__name__}.")
        if self._repertoire is not None:
            self._repertoire[self.hash_to_repertoire_key(out)] = copy(value)
        return out

    def get_input_from_hash(self, hash_tensor: torch.Tensor) -> Any:
        """The value a hash was computed from (``None`` for an unknown hash)."""
        if self._repertoire is None:
            raise RuntimeError(
                "Hash.inv needs a repertoire: pass in_keys_inv or repertoire= at construction."
            )
        return self._repertoire.get(self.hash_to_repertoire_key(hash_tensor))

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            value = next_tensordict.get(in_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise missing_key_error(self, in_key, next_tensordict)
            next_tensordict.set(out_key, self.call_hash_fn(_unwrap(value, self.use_raw_nontensor)))
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv, strict=True):
            hashed = tensordict.get(out_key, None)
            if hashed is None:
                raise missing_key_error(self, out_key, tensordict, role="out_key_inv")
            tensordict.set_non_tensor(in_key, self.get_input_from_hash(hashed))
        return tensordict

    def transform_leaf_spec(self, spec: Any) -> Any:
        from rl_envs.specs import Unbounded

        sample = self._hash_fn(
            _unwrap(spec.zero(), self.use_raw_nontensor),
            *((self._seed,) if self._seed is not None else ()),
        )
        return Unbounded(shape=sample.shape, dtype=sample.dtype, device=spec.device)

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """The repertoire (TorchRL's format)."""
        return {"_repertoire": self._repertoire}
