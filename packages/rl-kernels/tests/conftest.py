"""Run every Triton kernel through Triton's interpreter on CPU tensors.

``TRITON_INTERPRET=1`` must be set before ``triton`` is imported (its ``@jit``
reads it at decoration time), so it is set here, before any test module imports
``rl_kernels``. A value already in the environment wins (set it to ``0`` on a GPU
machine to test the compiled kernels). The helper modules of this folder are made
importable under ``--import-mode=importlib``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parent))
