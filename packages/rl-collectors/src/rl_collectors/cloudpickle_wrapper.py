"""``CloudpickleWrapper``: a callable that crosses process boundaries by value (TorchRL's name)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import cloudpickle


class _WrapOnce(type):
    """Wrapping a wrapper (with no new keyword arguments) gives the wrapper back."""

    def __call__(cls, fn: Any, **kwargs: Any) -> Any:
        if isinstance(fn, cls) and not kwargs:
            return fn
        return super().__call__(fn, **kwargs)


class CloudpickleWrapper(metaclass=_WrapOnce):
    """Wraps ``fn`` so that pickling sends it by value with cloudpickle.

    Lambdas, local functions and bound methods (e.g. ``env.rand_action``) cannot be
    pickled by reference; wrapped, they can be handed to multiprocess collectors and
    batched envs. Calling the wrapper calls ``fn(*args, **kwargs, **bound_kwargs)``
    (bound keywords win); the wrapper carries ``fn``'s name and docstring (of
    ``fn.forward`` for a module).

    Args:
        fn: the callable (not an ``EnvCreator``: that one shares tensors between
            processes, which pickling by value would break).
        **kwargs: keyword arguments bound to every call.

    Raises:
        RuntimeError: if ``fn`` is an ``EnvCreator``.

    Example:
        >>> import pickle
        >>> double = CloudpickleWrapper(lambda x, k=1: 2 * x * k, k=3)
        >>> pickle.loads(pickle.dumps(double))(5)
        30
    """

    def __init__(self, fn: Callable[..., Any], **kwargs: Any) -> None:
        if type(fn).__name__ == "EnvCreator":
            raise RuntimeError(
                "CloudpickleWrapper(EnvCreator(...)) would break the EnvCreator's shared "
                "tensors; pass the EnvCreator itself (it pickles on its own)."
            )
        self.fn = fn
        self.kwargs = kwargs
        functools.update_wrapper(self, getattr(fn, "forward", fn))

    def __getstate__(self) -> bytes:
        return cloudpickle.dumps((self.fn, self.kwargs))

    def __setstate__(self, state: bytes) -> None:
        self.fn, self.kwargs = cloudpickle.loads(state)
        functools.update_wrapper(self, getattr(self.fn, "forward", self.fn))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **{**kwargs, **self.kwargs})
