"""The python examples of the README's "Specs" section run."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _specs_section_blocks() -> list[str]:
    text = README.read_text()
    start = text.index("\n## Specs\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_specs_section_examples_run():
    blocks = _specs_section_blocks()
    assert blocks
    for code in blocks:
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
