"""Make the toy env importable by name, so spawned / forked workers and Ray actors can unpickle it."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
