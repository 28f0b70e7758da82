"""The examples in the spec modules' docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest
import torch

MODULES = [
    "_dtypes",
    "_base",
    "_spaces",
    "_registry",
    "_mask",
    "unbounded",
    "bounded",
    "categorical",
    "one_hot",
    "binary",
    "multi_categorical",
    "multi_one_hot",
    "non_tensor",
    "composite",
    "from_td",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"rl_envs.specs.{name}")
    torch.manual_seed(0)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE, report=True)
    assert result.attempted > 0
    assert result.failed == 0
