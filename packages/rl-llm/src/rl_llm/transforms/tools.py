"""``PythonInterpreter``: runs the Python code blocks of a reply in a sandbox, answers as a tool."""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase, lazy_stack

from rl_llm.data.history import History
from rl_llm.envs.transform import LLMTransform
from rl_llm.sandbox.python_sandbox import PythonSandbox
from rl_llm.transforms._replies import reply_texts

_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n`]*\n")
_CLOSE = re.compile(r"```")
PYTHON_TAGS = frozenset({"python", "py", "python3"})
"""Fence tags whose blocks run (compared lower-case)."""


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block of a reply.

    Attributes:
        language: the fence's tag, lower-case (``""`` when it has none).
        code: the block's text, with LF line ends.
        closed: whether a closing fence ends it (an unterminated block is never run).
    """

    language: str
    code: str
    closed: bool

    @property
    def runs(self) -> bool:
        """Whether :class:`PythonInterpreter` runs it: a closed Python block."""
        return self.closed and self.language in PYTHON_TAGS


def parse_code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block of ``text`` in order; CRLF and CR line ends are read as LF.

    Examples:
        >>> [(b.language, b.closed) for b in parse_code_blocks("```py\\r\\nx = 1\\r\\n```\\n```bash\\nls")]
        [('py', True), ('bash', False)]
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    blocks, position = [], 0
    while (opening := _FENCE.search(text, position)) is not None:
        closing = _CLOSE.search(text, opening.end())
        end = closing.start() if closing else len(text)
        language = opening.group(1).lower()
        blocks.append(CodeBlock(language, text[opening.end() : end], closing is not None))
        if closing is None:
            break
        position = closing.end()
    return blocks


def extract_python_code(text: str) -> list[str]:
    """The code of the blocks that run: closed fences tagged ``python``, ``py`` or ``python3``.

    Examples:
        >>> extract_python_code("try:\\n```python\\nprint(1)\\n```\\nand\\n```py\\nx = 2\\n```")
        ['print(1)\\n', 'x = 2\\n']
    """
    return [block.code for block in parse_code_blocks(text) if block.runs]


def _not_run(k: int, block: CodeBlock) -> str:
    if not block.closed:
        return f"Code block {k} was not run: it is not closed with ```."
    tag = f"language {block.language!r}" if block.language else "no language tag"
    return f"Code block {k} was not run ({tag}): only ```python blocks run."


class PythonInterpreter(LLMTransform):
    """Runs the Python blocks of each reply in a :class:`~rl_llm.sandbox.PythonSandbox`.

    After each step, every ```` ```python ... ``` ```` block of the reply runs in its
    own sandboxed subprocess (CPU, wall-time, memory, output and process limits, no
    network, a throw-away directory). The results are appended to the next prompt
    as one message of role ``tool_name``: ``"Code block k executed successfully:"``
    and the output, or ``"Code block k failed:"`` and the reason and error. Replies
    without code are left alone. Rows run in parallel threads (each in its own
    subprocess).

    Args:
        tokenizer: kept for TorchRL compatibility (unused).
        tool_name: the role of the result messages. Defaults to ``"tool"``.
        timeout: wall-time limit of one block, in seconds (also its CPU-time limit).
        sandbox: a configured :class:`PythonSandbox` (overrides ``timeout``).
        max_workers: parallel rows (default: the number of CPUs).

    Examples:
        >>> from rl_llm import ChatEnv, History
        >>> from tensordict import TensorDict
        >>> env = ChatEnv(batch_size=(1,)).append_transform(PythonInterpreter(timeout=5.0))
        >>> td = env.reset(TensorDict(query=["What is 6*7?"], batch_size=[1]))
        >>> td["history"].full = td["history"].prompt.append(History(role=["assistant"],
        ...     content=["```python\\nprint(6*7)\\n```"], batch_size=[1]), inplace=False)
        >>> env.step(td)["next", "history"].prompt[0, -1].content
        'Code block 1 executed successfully:\\n42\\n'
    """

    def __init__(
        self,
        tokenizer: Any = None,
        tool_name: str = "tool",
        timeout: float = 10.0,
        *,
        sandbox: PythonSandbox | None = None,
        max_workers: int | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.tool_role = tool_name
        self.sandbox = sandbox if sandbox is not None else PythonSandbox(timeout=timeout)
        self.max_workers = max_workers or os.cpu_count() or 1

    def run_reply(self, reply: str) -> str | None:
        """The tool message for one reply (``None`` when it holds no fenced block).

        Closed Python blocks run; any other block (another language, no tag, no closing
        fence) gets a line saying it was not run and why, so the model learns why.
        """
        blocks = parse_code_blocks(reply)
        if not blocks:
            return None
        parts = []
        for k, block in enumerate(blocks, start=1):
            if not block.runs:
                parts.append(_not_run(k, block))
                continue
            result = self.sandbox.run(block.code)
            if result.success:
                parts.append(f"Code block {k} executed successfully:\n{result.stdout}")
            else:
                parts.append(f"Code block {k} failed:\n{result.to_message()}")
        return "\n".join(parts)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        replies = reply_texts(tensordict, type(self).__name__)
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(replies))) as pool:
            messages = list(pool.map(self.run_reply, replies))
        if all(m is None for m in messages):
            return next_tensordict
        prompts = next_tensordict.get(("history", "prompt"))
        rows = []
        for prompt, message in zip(prompts.unbind(0), messages, strict=True):
            if message is not None:
                tool = History(role=self.tool_role, content=message, is_complete=torch.tensor(True))
                prompt = prompt.append(tool, inplace=False)
            rows.append(prompt)
        history = next_tensordict.get("history")
        history.prompt = lazy_stack(rows)
        next_tensordict.set("history", history)
        return next_tensordict
