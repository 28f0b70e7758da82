"""The README's first python block runs as written (the others need user-defined envs)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def test_readme_example_runs(capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "readme"})
    lines = capsys.readouterr().out.strip().splitlines()
    # Trajectory ids keep counting across batches.
    assert lines == [
        "torch.Size([6]) [0, 0, 0, 1, 1, 1] True",
        "torch.Size([6]) [2, 2, 2, 3, 3, 3] True",
    ]


def test_readme_other_blocks_compile() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    for block in blocks[1:]:
        compile(block, str(README), "exec")
