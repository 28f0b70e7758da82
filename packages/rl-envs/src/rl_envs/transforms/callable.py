"""``CallableTransform``: a plain function used as a transform."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensordict import TensorDictBase

from rl_envs.transforms.transform import Transform


class CallableTransform(Transform):
    """Runs ``fn(tensordict) -> tensordict`` on every reset and step output.

    What ``TransformedEnv`` and ``Compose`` make of a callable that is not a
    :class:`Transform` (TorchRL accepts plain functions there too). The function has no
    inverse and leaves the specs unchanged.

    Args:
        fn: maps a TensorDict to a TensorDict (it may edit it in place).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = CallableTransform(lambda td: td.set("y", td["x"] + 1))
        >>> t(TensorDict(x=torch.zeros(2)))["y"]
        tensor([1., 1.])
    """

    def __init__(self, fn: Callable[[TensorDictBase], TensorDictBase]) -> None:
        super().__init__()
        if not callable(fn):
            raise TypeError(f"CallableTransform wraps a callable, got {type(fn).__name__}.")
        self.fn = fn

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.fn(next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self.fn(tensordict_reset)

    def extra_repr(self) -> str:
        return f"fn={getattr(self.fn, '__name__', self.fn)!r}"


def as_transform(obj: Any) -> Transform:
    """``obj`` if it is a Transform, a :class:`CallableTransform` if it is callable."""
    if isinstance(obj, Transform):
        return obj
    if callable(obj):
        return CallableTransform(obj)
    raise TypeError(
        f"expected a Transform or a callable TensorDict -> TensorDict, got {type(obj).__name__}. "
        "Wrap a plain function in a Transform subclass overriding _call, or pass the function."
    )
