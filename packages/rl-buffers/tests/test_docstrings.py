"""Every docstring example of the package runs and prints what it shows."""

import doctest
import importlib
import pkgutil

import pytest

import rl_buffers

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(rl_buffers.__path__, "rl_buffers.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False,
                             extraglobs={"torch": importlib.import_module("torch")})  # fmt: skip
    assert result.failed == 0
