"""``torchrl._utils`` for TorchRL's test helpers: the few private utilities they import.

These are test-environment helpers (a logger, a seed chain, a version switch, key helpers), not behaviour of
the ``rl_*`` packages. Written here from their documented purpose; anything else from
``torchrl._utils`` is absent and raises ``AttributeError`` (``ImportError`` on import).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
import math
import os
from typing import ClassVar

from packaging import version as _version

logger = logging.getLogger("torchrl")
RL_WARNINGS = os.environ.get("RL_WARNINGS", "1").lower() in ("1", "true", "yes")


def rl_warnings() -> bool:
    """Whether TorchRL-style warnings are enabled (``RL_WARNINGS`` environment variable)."""
    return RL_WARNINGS


def prod(sequence) -> int:
    """Product of a sequence of ints."""
    return math.prod(sequence)


def seed_generator(seed: int) -> int:
    """Next seed of a deterministic chain (a 64-bit LCG step kept below 2**32)."""
    return (6364136223846793005 * int(seed) + 1442695040888963407) % (2**64) % (2**32 - 1)


def _ends_with(key, ending: str) -> bool:
    """Whether ``key`` (a string or a tuple of strings) is ``ending`` or ends with it."""
    return (key[-1] if isinstance(key, tuple) else key) == ending


def _replace_last(key, new_ending: str):
    """``key`` (a string or a tuple of strings) with its last part replaced by ``new_ending``."""
    if isinstance(key, str):
        return new_ending
    return (*key[:-1], new_ending)


def _installed_version(module_name: str) -> str | None:
    try:
        return importlib.metadata.version(module_name)
    except importlib.metadata.PackageNotFoundError:
        try:
            return getattr(importlib.import_module(module_name), "__version__", None)
        except ImportError:
            return None


class implement_for:
    """Pick, among same-named functions, the one whose version range holds the installed module.

    ``@implement_for("gymnasium", "1.0.0", None)`` registers an implementation valid for
    ``1.0.0 <= gymnasium.__version__ < None``; calling the name runs the matching one.
    """

    _chosen: ClassVar[dict[str, object]] = {}

    def __init__(self, module_name, from_version=None, to_version=None, class_method=False):
        self.module_name = module_name if isinstance(module_name, str) else None
        self.from_version = from_version
        self.to_version = to_version
        self.class_method = class_method

    def _matches(self) -> bool:
        installed = _installed_version(self.module_name) if self.module_name else None
        if installed is None:
            return False
        v = _version.parse(installed)
        low = self.from_version is None or v >= _version.parse(self.from_version)
        high = self.to_version is None or v < _version.parse(self.to_version)
        return low and high

    def __call__(self, fn):
        key = f"{fn.__module__}.{fn.__qualname__}"
        if self._matches():
            implement_for._chosen[key] = fn

        def dispatch(*args, **kwargs):
            impl = implement_for._chosen.get(key)
            if impl is None:
                raise ModuleNotFoundError(f"no implementation of {key} for the installed versions")
            return impl(*args, **kwargs)

        return functools.update_wrapper(dispatch, fn)
