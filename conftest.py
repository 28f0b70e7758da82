"""Shared pytest hooks for every test folder: ``gpu`` tests skip where no CUDA device is.

Test runs leave nothing in the repository: Hypothesis keeps its example database, and
MuJoCo its warning log (``MUJOCO_LOG.TXT``, which it would write into the working
directory), under ``~/.cache/rl-tests/`` (``$XDG_CACHE_HOME`` when set).

Triton kernels run through Triton's interpreter in tests (``TRITON_INTERPRET=1``; a value
already in the environment wins, ``0`` tests the compiled kernels on a GPU). Triton reads
it once, when it is imported, and ``tensordict`` imports it: so it is set here, in the
first conftest pytest loads, before any package's test folder imports tensordict.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rl-tests"


def pytest_configure(config: pytest.Config) -> None:
    with contextlib.suppress(ImportError):  # not every package's test group installs it
        import hypothesis

        hypothesis.configuration.set_hypothesis_home_dir(CACHE / "hypothesis")


def _log_mujoco_warning(message: str) -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "MUJOCO_LOG.TXT", "a") as log:
        log.write(f"{time.ctime()}: {message}\n")


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Only once a test module imported MuJoCo: importing it here would fix its OpenGL
    # backend before a module sets MUJOCO_GL (test_dm_control.py does, at import).
    mujoco = sys.modules.get("mujoco")
    if mujoco is not None and mujoco.get_mju_user_warning() is not _log_mujoco_warning:
        mujoco.set_mju_user_warning(_log_mujoco_warning)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; none is present")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
