"""Runs the code sections of one TorchRL tutorial with its imports mapped onto rl_* packages.

Used by ``tests/test_seed_tutorials.py`` in a subprocess:
``python seed_tutorial_driver.py sections.json results.json``. ``sections.json`` holds
``[[name, code], ...]``; every section runs, in order, in one shared namespace (a
tutorial's later sections use what the earlier ones built), each under its own alarm.
Only ``from torchrl... import`` statements change: each imported name comes from the
first package of DESIGN.md's table for that path that exports it.
"""

from __future__ import annotations

import ast
import importlib
import json
import signal
import sys
import time
import traceback
from types import FrameType
from typing import Any

# torchrl import path (longest prefix first) -> our packages, in lookup order (DESIGN.md).
IMPORT_MAP: list[tuple[str, tuple[str, ...]]] = [
    ("torchrl.data.replay_buffers", ("rl_buffers",)),
    ("torchrl.data", ("rl_envs", "rl_buffers")),
    ("torchrl.envs.utils", ("rl_envs", "rl_modules")),
    ("torchrl.envs", ("rl_envs",)),
    ("torchrl.modules", ("rl_modules",)),
    ("torchrl.collectors", ("rl_collectors",)),
    ("torchrl.objectives.value", ("rl_objectives.value",)),
    ("torchrl.objectives", ("rl_objectives",)),
]
SECTION_TIMEOUT_S = 60


def _home(module: str, name: str) -> str:
    """The rl_* module a ``from <module> import <name>`` of TorchRL maps to."""
    for prefix, packages in IMPORT_MAP:
        if module == prefix or module.startswith(prefix + "."):
            for package in packages:
                if hasattr(importlib.import_module(package), name):
                    return package
            return packages[0]  # the ImportError then names the missing name
    return module


class _MapImports(ast.NodeTransformer):
    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        if not (node.module or "").startswith("torchrl"):
            return node
        by_home: dict[str, list[ast.alias]] = {}
        for alias in node.names:
            by_home.setdefault(_home(node.module, alias.name), []).append(alias)
        return [ast.ImportFrom(module=m, names=names, level=0) for m, names in by_home.items()]


def _timeout(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError(f"section ran past {SECTION_TIMEOUT_S}s")


def main(sections_path: str, results_path: str) -> None:
    with open(sections_path) as f:
        sections = json.load(f)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    results: dict[str, dict[str, str]] = {}
    t0 = time.perf_counter()
    # Imports are not part of a section's budget (a loaded machine takes long to load torch).
    for package in {p for _, packages in IMPORT_MAP for p in packages}:
        importlib.import_module(package)
    signal.signal(signal.SIGALRM, _timeout)
    for name, code in sections:
        print(f"---- section {name}", flush=True)
        start = time.perf_counter()
        try:
            tree = ast.fix_missing_locations(_MapImports().visit(ast.parse(code)))
            signal.alarm(SECTION_TIMEOUT_S)
            try:
                exec(compile(tree, f"<seed section {name}>", "exec"), namespace)
            finally:
                signal.alarm(0)
            results[name] = {"status": "ok", "error": ""}
        except BaseException as error:  # a section's failure must not stop the others
            lines = traceback.format_exception(type(error), error, error.__traceback__)
            results[name] = {"status": "error", "error": "".join(lines[-12:])}
        results[name]["seconds"] = f"{time.perf_counter() - start:.2f}"
        results["_total"] = {
            "status": "ok",
            "error": "",
            "seconds": f"{time.perf_counter() - t0:.2f}",
        }
        with open(results_path, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
