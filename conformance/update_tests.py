"""Copy TorchRL's in-scope test files (``scope.py``) from the local git mirror.

Run: ``uv run --no-sync python conformance/update_tests.py [/path/to/pytorch/rl/git]``. It
overwrites ``conformance/torchrl_tests/`` files, the licence, ``torchrl_modules.txt`` (TorchRL's
module tree, so the shim can tell a sub-module from a name) and stamps the commit in
``torchrl_tests/SOURCE``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scope import AREAS, BRANCH, HELPERS, TESTING  # noqa: E402

MIRROR = "/work/.mirror/pytorch+rl/repo"


def main() -> None:
    git = ["git", "-C", sys.argv[1] if len(sys.argv) > 1 else MIRROR]
    out = HERE / "torchrl_tests"

    def copy(src: str, dst: Path) -> None:
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(subprocess.check_output([*git, "show", f"{BRANCH}:{src}"]))

    for rel in [f for files in AREAS.values() for f in files] + HELPERS:
        copy(f"test/{rel}", out / rel)
    for rel in TESTING:
        copy(f"torchrl/testing/{rel}", out / "_torchrl_testing" / rel)
    copy("LICENSE", out / "LICENSE")
    files = subprocess.check_output([*git, "ls-tree", "-r", "--name-only", BRANCH, "torchrl/"])
    modules = set()
    for path in files.decode().split():
        if path.endswith(".py"):
            parts = path[: -len(".py")].split("/")
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    (HERE / "torchrl_modules.txt").write_text("\n".join(sorted(modules)) + "\n")
    commit = subprocess.check_output([*git, "rev-parse", BRANCH]).decode().strip()
    (out / "SOURCE").write_text(f"pytorch/rl branch {BRANCH} commit {commit}\n")
    print(f"copied TorchRL tests from {BRANCH} @ {commit} into {out}")


if __name__ == "__main__":
    main()
