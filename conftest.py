"""Shared pytest hooks for every test folder: ``gpu`` tests skip where no CUDA device is.

Triton kernels run through Triton's interpreter in tests (``TRITON_INTERPRET=1``; a value
already in the environment wins, ``0`` tests the compiled kernels on a GPU). Triton reads
it once, when it is imported, and ``tensordict`` imports it: so it is set here, in the
first conftest pytest loads, before any package's test folder imports tensordict.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; none is present")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
