"""Enforce the one dependency rule: no package's source imports a sibling package.

Every file under ``packages/rl-<name>/src`` may import ``rl_<name>`` and
third-party libraries, never another ``rl_*`` package of this repository. The
check parses the source (``import x``, ``from x import y``, and
``importlib.import_module("x")`` with a literal name), so a commented-out
import does not count and a lazy import inside a function does.

Example:
    $ python scripts/check_dependency_rule.py
    dependency rule holds: 7 packages, 12 source files checked
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def violations(root: Path = ROOT) -> tuple[list[str], int, int]:
    """Return (violations, number of packages, number of files) for ``root``."""
    packages = sorted(p for p in (root / "packages").iterdir() if (p / "src").is_dir())
    own_modules = {p.name.replace("-", "_") for p in packages}
    problems: list[str] = []
    n_files = 0
    for package in packages:
        own = package.name.replace("-", "_")
        for file in sorted((package / "src").rglob("*.py")):
            n_files += 1
            tree = ast.parse(file.read_text(), filename=str(file))
            for lineno, module in _imported_modules(tree):
                top = module.split(".")[0]
                if top in own_modules and top != own:
                    problems.append(
                        f"{file.relative_to(root)}:{lineno}: imports {module!r}; "
                        f"{package.name} may not depend on a sibling. Talk through the "
                        "TensorDict contract (docs/contract.md) or duck-typed specs instead."
                    )
    return problems, len(packages), n_files


def main() -> int:
    problems, n_packages, n_files = violations()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(f"dependency rule holds: {n_packages} packages, {n_files} source files checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
