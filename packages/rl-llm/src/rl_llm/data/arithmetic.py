"""A verifiable arithmetic task generated in code: prompts with exact answers."""

from __future__ import annotations

import random

_OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def make_arithmetic_problems(
    num_problems: int,
    *,
    max_operand: int = 9,
    operations: str = "+",
    seed: int = 0,
) -> list[dict[str, str]]:
    """Draws ``a op b =`` problems with their exact integer answers.

    Args:
        num_problems: how many problems.
        max_operand: operands are drawn uniformly from ``0..max_operand``.
        operations: the operators to draw from, among ``"+"``, ``"-"``, ``"*"``.
        seed: seed of the draw (same seed, same problems).

    Returns:
        A list of ``{"query": "12+7=", "answer": "19"}`` dicts.

    Raises:
        ValueError: for an unknown operator or a non-positive count.

    Examples:
        >>> make_arithmetic_problems(2, seed=0)
        [{'query': '6+6=', 'answer': '12'}, {'query': '4+8=', 'answer': '12'}]
    """
    unknown = set(operations) - set(_OPERATIONS)
    if unknown or not operations:
        raise ValueError(
            f"operations must be drawn from {sorted(_OPERATIONS)}, got {operations!r}."
        )
    if num_problems <= 0 or max_operand < 0:
        raise ValueError(
            f"num_problems must be > 0 and max_operand >= 0, got {num_problems} and {max_operand}."
        )
    rng = random.Random(seed)
    problems = []
    for _ in range(num_problems):
        a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
        op = rng.choice(operations)
        problems.append({"query": f"{a}{op}{b}=", "answer": str(_OPERATIONS[op](a, b))})
    return problems
