"""``RandomPolicy``: actions drawn from the action spec."""

from __future__ import annotations

from typing import Any

from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_modules._spec import is_composite


class RandomPolicy:
    """A policy that writes ``action_spec.rand()`` (e.g. to fill a buffer before training).

    With a Composite-like spec (e.g. ``env.full_action_spec``) every entry is
    drawn and written; with a single spec the draw goes to ``action_key``. The
    spec's own shape is used (an env's action spec includes its batch dims).

    Args:
        action_spec: any spec-like object with ``rand()``; ``None`` to set it
            later (:meth:`set_action_spec_from_env`, as collectors do).
        action_key: where a single spec's draw is written.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Box:  # a tiny spec-like object
        ...     def rand(self, shape=()):
        ...         return torch.rand(*shape, 3) * 2 - 1
        ...     def clone(self):
        ...         return self
        >>> RandomPolicy(Box())(TensorDict())["action"].shape
        torch.Size([3])
    """

    def __init__(self, action_spec: Any = None, action_key: NestedKey = "action") -> None:
        if action_spec is not None and hasattr(action_spec, "clone"):
            action_spec = action_spec.clone()
        self.action_spec = action_spec
        self.action_key = action_key

    def set_action_spec_from_env(self, env: Any) -> None:
        """Take ``env.full_action_spec`` when no spec was given (no-op otherwise)."""
        if self.action_spec is None:
            self.action_spec = env.full_action_spec.clone()

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.action_spec is None:
            raise RuntimeError(
                "RandomPolicy.action_spec is not set: pass action_spec= to the constructor, or "
                "call set_action_spec_from_env(env) (collectors do it when given an env)."
            )
        if is_composite(self.action_spec):
            return tensordict.update(self.action_spec.rand())
        return tensordict.set(self.action_key, self.action_spec.rand())
