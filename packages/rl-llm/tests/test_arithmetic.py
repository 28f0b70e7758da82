"""The arithmetic task: exact answers, reproducible draws, clear errors."""

from __future__ import annotations

import re

import pytest

from rl_llm import make_arithmetic_problems


@pytest.mark.parametrize("operations", ["+", "-", "*", "+-*"])
def test_answers_are_exact(operations):
    problems = make_arithmetic_problems(200, max_operand=15, operations=operations, seed=3)
    for p in problems:
        a, op, b = re.fullmatch(r"(\d+)([+\-*])(\d+)=", p["query"]).groups()
        a, b = int(a), int(b)
        assert p["answer"] == str({"+": a + b, "-": a - b, "*": a * b}[op])
        assert 0 <= a <= 15 and 0 <= b <= 15 and op in operations
    assert len({p["query"] for p in problems}) > 50


def test_same_seed_same_problems():
    assert make_arithmetic_problems(20, seed=1) == make_arithmetic_problems(20, seed=1)
    assert make_arithmetic_problems(20, seed=1) != make_arithmetic_problems(20, seed=2)


@pytest.mark.parametrize("kwargs", [{"operations": "/"}, {"operations": ""}, {"num_problems": 0}])
def test_errors(kwargs):
    kwargs = {"num_problems": 3, **kwargs}
    with pytest.raises(ValueError):
        make_arithmetic_problems(**kwargs)
