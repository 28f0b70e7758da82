"""``ActionTokenizerTransform``: a policy that speaks action tokens drives a continuous env."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.specs import Categorical
from rl_envs.transforms._utils import NestedKey, missing_key_error
from rl_envs.transforms.transform import Transform

__all__ = ["ACTION_TOKENS_KEY", "ActionTokenizerTransform"]

ACTION_TOKENS_KEY: tuple[str, str] = ("vla_action", "tokens")
"""Where a VLA policy writes its discrete action tokens (TorchRL's key)."""


class ActionTokenizerTransform(Transform):
    """Maps continuous actions to token ids and back with an action tokenizer.

    ``mode="encode"`` (default): ``forward`` (a replay-buffer sample, a module chain)
    writes ``out_key`` = ``tokenizer.encode(in_key)``; in an env, the policy writes the
    tokens at ``out_key`` (spec: ``Categorical(tokenizer.vocab_size)`` of the action's shape,
    long) and ``inv`` decodes them into the env's ``in_key``. Outside an env, ``inv`` leaves
    a TensorDict without tokens alone (raw actions going into a buffer).
    ``mode="decode"``: the reverse roles, for a token-head policy whose module chain ends
    with the decode; the env's action spec is untouched.

    Args:
        tokenizer: an object with ``encode`` / ``decode`` / ``vocab_size`` (e.g.
            :class:`~rl_envs.vla.UniformActionTokenizer`).
        in_key: the continuous action (``"action"``).
        out_key: the tokens (``ACTION_TOKENS_KEY``).
        mode: ``"encode"`` or ``"decode"``.

    Example:
        >>> from tensordict import TensorDict
        >>> from rl_envs.vla import UniformActionTokenizer
        >>> t = ActionTokenizerTransform(UniformActionTokenizer(256, low=-1.0, high=1.0))
        >>> t(TensorDict(action=torch.tensor([[-1.0, 0.0, 1.0]]), batch_size=[1]))[ACTION_TOKENS_KEY]
        tensor([[  0, 128, 255]])
    """

    invertible = True

    def __init__(
        self,
        tokenizer: Any,
        *,
        in_key: NestedKey = "action",
        out_key: NestedKey = ACTION_TOKENS_KEY,
        mode: str = "encode",
    ) -> None:
        if not all(hasattr(tokenizer, a) for a in ("encode", "decode", "vocab_size")):
            raise TypeError(
                "ActionTokenizerTransform needs an action tokenizer (an ActionTokenizerBase-like "
                f"object with encode, decode and vocab_size), got {type(tokenizer).__name__}."
            )
        if mode not in ("encode", "decode"):
            raise ValueError(
                f"ActionTokenizerTransform: mode must be 'encode' or 'decode', got {mode!r}."
            )
        action, tokens = in_key, out_key
        if mode == "encode":
            super().__init__([action], [tokens], in_keys_inv=[action], out_keys_inv=[tokens])
        else:
            super().__init__([tokens], [action], in_keys_inv=[tokens], out_keys_inv=[action])
        self.tokenizer = tokenizer
        self.mode = mode

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return self.tokenizer.encode(x) if self.mode == "encode" else self.tokenizer.decode(x)

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return self.tokenizer.decode(x) if self.mode == "encode" else self.tokenizer.encode(x)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # actions are inputs: a step's output has nothing to map

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        (source,) = self.out_keys_inv
        if tensordict.get(source, None) is None:
            if self._env_and_index()[0] is not None:  # in an env the policy must write them
                raise missing_key_error(self, source, tensordict, role="out_key_inv")
            return tensordict
        return super()._inv_call(tensordict)

    def transform_action_spec(self, action_spec: Any) -> Any:
        if self.mode == "decode":
            return action_spec
        return self._map_specs_inv(action_spec)

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        return Categorical(
            n=int(self.tokenizer.vocab_size), shape=spec.shape, dtype=torch.long, device=spec.device
        )
