"""The python example of the README's "Multi-agent envs" section runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_multi_agent_section_example_runs():
    pytest.importorskip("vmas")
    pytest.importorskip("mpe2")
    text = README.read_text()
    start = text.index("\n## Multi-agent envs\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"```python\n(.*?)```", text[start:end], re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__readme__"})
