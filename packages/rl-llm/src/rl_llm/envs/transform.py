"""``LLMTransform``: the base of the transforms a :class:`~rl_llm.ChatEnv` runs after its steps."""

from __future__ import annotations

from typing import Any

from tensordict import TensorDictBase


class LLMTransform:
    """Base class of chat-env transforms (tools, rewards, policy versions).

    A transform sees every reset output and every step output of the env it is
    appended to (``env.append_transform(t)``), in the order they were appended.
    Subclasses override either hook; both return the TensorDict they were given,
    updated. ``rl_llm`` stands alone, so these are not ``rl_envs`` transforms:
    they plug into :class:`~rl_llm.ChatEnv` only (TorchRL's names and hook
    signatures are kept: ``_reset(tensordict, tensordict_reset)`` and
    ``_step(tensordict, next_tensordict)``).

    Examples:
        >>> import torch
        >>> class Bonus(LLMTransform):
        ...     def _step(self, tensordict, next_tensordict):
        ...         next_tensordict["reward"] += 1.0
        ...         return next_tensordict
        >>> from tensordict import TensorDict
        >>> Bonus()._step(None, TensorDict(reward=torch.zeros(2, 1), batch_size=[2]))["reward"].tolist()
        [[1.0], [1.0]]
    """

    parent: Any = None
    """The env this transform is appended to (set by ``append_transform``)."""

    def set_container(self, env: Any) -> None:
        """Called by the env when the transform is appended to it."""
        if self.parent is not None and self.parent is not env:
            raise RuntimeError(
                f"{type(self).__name__} is already appended to another env; build one transform per env."
            )
        self.parent = env

    def _reset(
        self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        """Maps the reset output; ``tensordict`` is the reset's input (may hold ``"_reset"``)."""
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Maps the step output (the future ``"next"`` entry); ``tensordict`` is the step's input."""
        return next_tensordict

    def close(self) -> None:
        """Releases what the transform holds (processes, files). Called by ``env.close()``."""
