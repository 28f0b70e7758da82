"""The dependency-rule checker finds sibling imports and accepts own-package imports."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "check_rule", ROOT / "scripts/check_dependency_rule.py"
)
check_rule = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_rule)


def _package(root: Path, name: str, source: str) -> None:
    src = root / "packages" / name / "src" / name.replace("-", "_")
    src.mkdir(parents=True)
    (src / "__init__.py").write_text(textwrap.dedent(source))


def test_repository_obeys_the_rule() -> None:
    problems, n_packages, _ = check_rule.violations(ROOT)
    assert problems == []
    assert n_packages == 8


def test_sibling_imports_are_found_in_every_form(tmp_path: Path) -> None:
    _package(tmp_path, "rl-envs", "import rl_envs.specs\nfrom rl_envs import x\n")
    _package(
        tmp_path,
        "rl-collectors",
        """
        import importlib
        import rl_envs
        def lazy():
            from rl_modules.actors import Actor
            return importlib.import_module("rl_buffers")
        """,
    )
    _package(tmp_path, "rl-modules", "# import rl_envs  (a comment is not an import)\n")
    _package(tmp_path, "rl-buffers", "")
    problems, _, n_files = check_rule.violations(tmp_path)
    assert n_files == 4
    assert len(problems) == 3
    assert all("rl-collectors" in p for p in problems)
    assert {p.split("imports ")[1].split(";")[0] for p in problems} == {
        "'rl_envs'",
        "'rl_modules.actors'",
        "'rl_buffers'",
    }
