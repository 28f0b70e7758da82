"""No package of the workspace has an import cycle (rl-envs' own test runs the check on every one)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = sorted(p for p in ROOT.glob("packages/*/src/*") if (p / "__init__.py").is_file())
_spec = importlib.util.spec_from_file_location(
    "rl_envs_import_cycles", ROOT / "packages/rl-envs/tests/test_import_cycles.py"
)
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_no_import_cycles(package: Path) -> None:
    graph = check.import_graph(package)
    assert len(graph) > 1
    found = check.cycles(graph)
    assert not found, (
        f"import cycles in {package.name}: {found}. Move what both modules need into a third "
        "one, hand it over as an argument, or look it up when called (rl_envs.specs._registry)."
    )


def test_every_package_is_checked() -> None:
    assert len(PACKAGES) == 8
