"""Installs the torchrl -> rl_* import shim in every interpreter that has this folder on its path
and ``CONFORMANCE_SHIM=1`` (the pytest run and the worker processes it spawns)."""

import os

if os.environ.get("CONFORMANCE_SHIM") == "1":
    import torchrl_shim

    torchrl_shim.install()
