"""The python example of the README's "Native MuJoCo envs" section runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_native_mujoco_section_example_runs():
    pytest.importorskip("mujoco")
    pytest.importorskip("gymnasium")
    text = README.read_text()
    start = text.index("\n## Native MuJoCo envs\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"```python\n(.*?)```", text[start:end], re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__readme__"})
