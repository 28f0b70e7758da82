"""No module reads a private name that another module of its package defines.

A leading underscore means "this module's own": ``from rl_envs.specs.categorical import
_check_mask`` in ``one_hot.py`` ties two files by a name neither advertises. What two
modules share goes into a private module (``_mask.py``) under a public name, which every
module of the package may import; private modules are package-internal already.

Read from the source with ``ast`` for the seven packages under ``packages/*/src``:
``from <same package> import _name`` (also in ``__init__`` re-exports and inside
functions), and ``mod._name`` where ``mod`` was bound to a module of the same package
(``from rl_envs.libs import _gym_spaces as gs`` then ``gs._gym()``). Importing a private
module itself (``from rl_envs import _checks``) is fine, and dunders (``__all__``) are not
private names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = sorted(p for p in ROOT.glob("packages/*/src/*") if (p / "__init__.py").is_file())


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def package_modules(package: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` for every module of ``package`` (a ``src/<name>`` dir)."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def private_reads(source: str, module: str, is_package: bool, modules: set[str]) -> list[str]:
    """The private names ``module`` (given as ``source``) reads from other modules of its package.

    Args:
        source: the module's code.
        module: its dotted name, e.g. ``"rl_envs.specs.one_hot"``.
        is_package: whether it is an ``__init__.py`` (relative imports start there).
        modules: every dotted module name of the package.

    Returns:
        One ``"line N: what"`` entry per offending import or attribute read.
    """
    top = module.split(".")[0]
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name -> module of the package it refers to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source_module = ".".join([*base, node.module] if node.module else base)
            else:
                source_module = node.module or ""
            if source_module.split(".")[0] != top:
                continue
            for alias in node.names:
                if f"{source_module}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{source_module}.{alias.name}"
                elif _is_private(alias.name):
                    found.append(f"line {node.lineno}: from {source_module} import {alias.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and _is_private(node.attr)
            and f"{bound[node.value.id]}.{node.attr}" not in modules
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_detector_finds_each_form() -> None:
    modules = {"pkg", "pkg.a", "pkg.b", "pkg._c", "pkg.sub", "pkg.sub.d"}
    source = (
        "from pkg.a import _x, y\n"
        "from . import _c\n"
        "from ._c import _z, w\n"
        "from pkg import b as bee\n"
        "import pkg.a as a_mod\n"
        "def f():\n"
        "    from .sub.d import _deferred\n"
        "    return bee._hidden + a_mod.public + _c._private\n"
    )
    assert sorted(private_reads(source, "pkg.mod", False, modules)) == [
        "line 1: from pkg.a import _x",
        "line 3: from pkg._c import _z",
        "line 7: from pkg.sub.d import _deferred",
        "line 8: _c._private",
        "line 8: bee._hidden",
    ]
    # an __init__ resolves ``.`` to itself; dunders, private modules and other packages pass
    init = (
        "from .a import _x\nfrom .sub import d\nfrom pkg.b import __all__\nfrom os import _exit\n"
    )
    assert private_reads(init, "pkg", True, modules) == ["line 1: from pkg.a import _x"]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_no_private_name_crosses_modules(package: Path) -> None:
    modules = package_modules(package)
    problems = [
        f"{path.relative_to(ROOT)} {hit}"
        for name, path in sorted(modules.items())
        for hit in private_reads(path.read_text(), name, path.name == "__init__.py", set(modules))
    ]
    assert not problems, (
        "private names read across modules:\n  " + "\n  ".join(problems) + "\nMove what "
        "both modules need into a private module (_name.py) under a public name, or keep "
        "it where it is used."
    )


def test_every_package_is_checked() -> None:
    assert len(PACKAGES) == 8
