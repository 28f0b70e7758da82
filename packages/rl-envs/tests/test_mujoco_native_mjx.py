"""The ``"mjx"`` backend's checks (``mjx_checks.py``), run in a fresh pytest process.

JAX must never be imported into the main test process: its thread pools make every
later ``fork`` (ParallelEnv workers, multiprocess collectors) warn and risk a deadlock.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

CHECKS = Path(__file__).with_name("mjx_checks.py")


@pytest.mark.slow
def test_mjx_backend_matches_mujoco_in_a_fresh_process():
    for name in ("mujoco", "jax"):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed (pip install 'rl-envs[mjx]')")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(CHECKS)],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
