"""The python example of the README's "Transforms and batched envs" section runs."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_transforms_section_example_runs():
    text = README.read_text()
    start = text.index("\n## Transforms and batched envs\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__readme__"})
