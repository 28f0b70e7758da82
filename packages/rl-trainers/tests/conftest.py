"""Make the shared local fixtures (``trainers_testlib``) importable under importlib mode."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
