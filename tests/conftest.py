"""Cross-package tests: the recipes' folder is importable, as it is for a recipe run as a script.

``uv run recipes/ppo.py`` puts ``recipes/`` first on ``sys.path``, which is how a recipe finds
its siblings (``from _common import ...``). The tests load recipes and those siblings the same
way, so no recipe and no test edits ``sys.path`` itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

RECIPES = str(Path(__file__).resolve().parent.parent / "recipes")
if RECIPES not in sys.path:
    sys.path.insert(0, RECIPES)
