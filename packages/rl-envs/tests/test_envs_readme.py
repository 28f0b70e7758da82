"""The python examples of the README's "Environments" section run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _section_blocks() -> list[str]:
    text = README.read_text()
    start = text.index("\n## Environments\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_environments_section_examples_run():
    pytest.importorskip("gymnasium")
    blocks = _section_blocks()
    assert len(blocks) == 3
    for code in blocks:
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
