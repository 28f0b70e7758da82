"""Keep TorchRL's test files out of the workspace's default pytest collection.

They run only through ``conformance/run.py`` (``nox -s conformance``), with the import shim.
"""

collect_ignore = ["torchrl_tests"]
