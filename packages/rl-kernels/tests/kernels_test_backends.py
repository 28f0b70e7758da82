"""The backends the scan tests run on: Triton only where it is installed."""

from __future__ import annotations

import pytest

try:
    import triton  # noqa: F401
except ImportError:
    HAS_TRITON = False
else:
    HAS_TRITON = True

needs_triton = pytest.mark.skipif(
    not HAS_TRITON, reason='triton is not installed (pip install "rl-kernels[triton]")'
)

BACKENDS = ["torch", pytest.param("triton", marks=needs_triton)]
