"""Every docstring example of the package runs (doctest)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rl_modules

MODULES = sorted(m.name for m in pkgutil.walk_packages(rl_modules.__path__, prefix="rl_modules."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
