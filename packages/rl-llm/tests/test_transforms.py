"""Chat-env transforms: answer rewards, format reward, KL penalty, policy versions, Python tool."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from rl_llm.data import History
from rl_llm.envs import ChatEnv
from rl_llm.sandbox import PythonSandbox
from rl_llm.transforms import (
    AnswerRewardParser,
    FormatReward,
    KLRewardTransform,
    PolicyVersion,
    PythonInterpreter,
    extract_answer,
    extract_python_code,
    normalize_answer,
)


def _step_with_replies(env: ChatEnv, replies: list[str], **data: list[str]) -> TensorDictBase:
    n = len(replies)
    td = env.reset(TensorDict({"query": [f"q{i}" for i in range(n)], **data}, batch_size=[n]))
    prompt = td["history"].prompt
    td["history"].full = prompt.append(
        History(role=["assistant"] * n, content=replies, batch_size=[n]), inplace=False
    )
    return env.step(td)


# -- answer extraction --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "method", "expected"),
    [
        ("<answer>42</answer>", "tag", "42"),
        ("<think>x</think><answer>\n -7 \n</answer> <answer>8</answer>", "tag", "-7"),
        ("answer: 42", "tag", None),
        ("<answer>unclosed", "tag", None),
        ("1 + 2 = 3, then 3 * 4 = 12", "last_number", "12"),
        ("total 1,234.50 dollars", "last_number", "1,234.50"),
        ("minus -5", "last_number", "-5"),
        ("none here", "last_number", None),
    ],
)
def test_extract_answer(text, method, expected):
    assert extract_answer(text, method=method) == expected


def test_extract_answer_custom_tag_and_bad_method():
    assert extract_answer("<final>x</final>", tag="final") == "x"
    with pytest.raises(ValueError, match="method must be 'tag' or 'last_number'"):
        extract_answer("1", method="first")


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("42", "42"),
        (" 42 ", "42"),
        ("1,000", "1000"),
        ("$5", "5"),
        ("12.50", "12.5"),
        ("3.0", "3"),
        ("7.", "7"),
        ("50%", "50"),
        ("abc", "abc"),
    ],
)
def test_normalize_answer(raw, normal):
    assert normalize_answer(raw) == normal


# -- AnswerRewardParser ---------------------------------------------------------------------------


def test_answer_reward_exact_match_format_and_termination():
    env = ChatEnv(batch_size=(4,), max_turns=3).append_transform(
        AnswerRewardParser(format_reward=0.1)
    )
    out = _step_with_replies(
        env,
        ["<answer>4</answer>", "<answer>5</answer>", "I think 4", "<answer> 1,000.0 </answer>"],
        answer=["4", "4", "4", "1000"],
    )
    nxt = out["next"]
    assert nxt["reward"].flatten().tolist() == pytest.approx([1.0, 0.1, 0.0, 1.0])
    assert nxt["success"].tolist() == [[True], [False], [False], [True]]
    assert nxt["reward_answer"].tolist() == [[1.0], [1.0], [0.0], [1.0]]
    # an answer ends the episode (terminated); the reply without one goes on
    assert nxt["terminated"].tolist() == [[True], [True], [False], [True]]
    assert nxt["done"].tolist() == [[True], [True], [False], [True]]


def test_answer_reward_last_number_without_termination():
    parser = AnswerRewardParser(method="last_number", set_done_if_answer=False)
    env = ChatEnv(batch_size=(2,)).append_transform(parser)
    nxt = _step_with_replies(env, ["2 + 2 = 4", "it is 5"], answer=["4", "4"])["next"]
    assert nxt["reward"].tolist() == [[1.0], [0.0]]
    assert not nxt["terminated"].any()


def test_answer_reward_needs_reference_answers():
    env = ChatEnv(batch_size=(1,)).append_transform(AnswerRewardParser())
    with pytest.raises(KeyError, match="needs the reference answer under 'answer'"):
        _step_with_replies(env, ["<answer>1</answer>"])


def test_rewards_add_up():
    env = ChatEnv(batch_size=(2,))
    env.append_transform(AnswerRewardParser()).append_transform(FormatReward(reward=0.25))
    nxt = _step_with_replies(
        env, ["<think>2+2</think><answer>4</answer>", "<answer>4</answer>"], answer=["4", "4"]
    )["next"]
    assert nxt["reward"].tolist() == [[1.25], [1.0]]
    assert nxt["reward_format"].tolist() == [[1.0], [0.0]]


def test_format_reward_matches_whole_reply():
    fmt = FormatReward()
    assert fmt.matches("<think>a\nb</think>\n<answer>c</answer>")
    assert not fmt.matches("<answer>c</answer>")
    assert not fmt.matches("<think>a</think><answer>c</answer> trailing")


# -- KLRewardTransform ------------------------------------------------------------------------------


class _ScoreModel:
    """A stand-in reference model in score mode: writes fixed per-row log-probs and masks."""

    generate = False

    def __init__(
        self, log_probs: list[torch.Tensor], masks: list[torch.Tensor] | None = None
    ) -> None:
        self.log_probs, self.masks = log_probs, masks

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        td.set(
            ("log_probs", "full"), torch.nn.utils.rnn.pad_sequence(self.log_probs, batch_first=True)
        )
        if self.masks is not None:
            td.set(
                ("masks", "all_assistant_mask"),
                torch.nn.utils.rnn.pad_sequence(self.masks, batch_first=True),
            )
        return td


def test_kl_reward_matches_a_hand_computed_penalty():
    policy_lp = [torch.tensor([-1.0, -2.0, -0.5, -0.1]), torch.tensor([-0.3, -0.3, 0.0, 0.0])]
    ref_lp = [torch.tensor([-1.5, -1.0, -0.5, -0.2]), torch.tensor([-0.1, -0.9, 0.0, 0.0])]
    masks = [torch.tensor([False, True, True, True]), torch.tensor([True, True, False, False])]
    kl = KLRewardTransform(_ScoreModel(ref_lp, masks), coef=0.5)
    env = ChatEnv(batch_size=(2,)).append_transform(kl)
    td = env.reset(TensorDict(query=["a", "b"], batch_size=[2]))
    td["history"].full = td["history"].prompt.append(
        History(role=["assistant"] * 2, content=["x", "y"], batch_size=[2]), inplace=False
    )
    td.set(("log_probs", "full"), torch.stack(policy_lp))
    nxt = env.step(td)["next"]
    # by hand: row 0 counts positions 1..3: (-2+1) + (-0.5+0.5) + (-0.1+0.2) = -0.9
    #          row 1 counts positions 0..1: (-0.3+0.1) + (-0.3+0.9) = 0.4
    assert nxt["kl_penalty"].flatten().tolist() == pytest.approx([-0.9, 0.4])
    assert nxt["reward"].flatten().tolist() == pytest.approx([0.45, -0.2])


def test_kl_reward_without_mask_counts_every_position_and_can_skip_reward():
    kl = KLRewardTransform(_ScoreModel([torch.tensor([-1.0, -1.0])]), add_to_reward=False)
    td = TensorDict({("log_probs", "full"): torch.tensor([[-0.5, -2.0]])}, [1])
    nxt = kl._step(td, TensorDict(reward=torch.ones(1, 1), batch_size=[1]))
    assert nxt["kl_penalty"].tolist() == [[-0.5]]
    assert nxt["reward"].tolist() == [[1.0]]


def test_kl_reward_errors():
    with pytest.raises(TypeError, match="ref_model must be callable"):
        KLRewardTransform(3)

    class Generating:
        generate = True

        def __call__(self, td):
            return td

    with pytest.raises(ValueError, match="in generate mode"):
        KLRewardTransform(Generating())
    kl = KLRewardTransform(_ScoreModel([torch.zeros(3)]))
    with pytest.raises(KeyError, match="the policy wrote no"):
        kl._step(TensorDict({}, [1]), TensorDict(reward=torch.zeros(1, 1), batch_size=[1]))
    td = TensorDict({("log_probs", "full"): torch.zeros(1, 2)}, [1])
    with pytest.raises(ValueError, match="row 0 has 2 policy log-probs but 3 from the reference"):
        kl._step(td, TensorDict(reward=torch.zeros(1, 1), batch_size=[1]))


def test_kl_reward_freezes_a_module_reference():
    class Ref(torch.nn.Module):
        generate = False

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, td):
            return td

    ref = Ref()
    KLRewardTransform(ref)
    assert not ref.w.requires_grad


# -- PolicyVersion ----------------------------------------------------------------------------------


def test_policy_version_stamps_resets_and_steps():
    version = PolicyVersion()
    env = ChatEnv(batch_size=(2,)).append_transform(version)
    td = env.reset(TensorDict(query=["a", "b"], batch_size=[2]))
    assert td["policy_version"].tolist() == [0, 0]  # [B] int64, as TorchRL's
    version.increment_version()
    td["history"].full = td["history"].prompt.append(
        History(role=["assistant"] * 2, content=["x", "y"], batch_size=[2]), inplace=False
    )
    assert env.step(td)["next", "policy_version"].tolist() == [1, 1]


def test_policy_version_uuid():
    version = PolicyVersion("uuid")
    first = version.version
    version.increment_version()
    assert isinstance(first, str) and len(first) == 36 and version.version != first
    env = ChatEnv(batch_size=(1,)).append_transform(version)
    assert env.reset(TensorDict(query=["a"], batch_size=[1]))["policy_version"] == [version.version]
    with pytest.raises(ValueError, match="version_type must be"):
        PolicyVersion(float)


def test_transform_belongs_to_one_env():
    version = PolicyVersion()
    ChatEnv().append_transform(version)
    with pytest.raises(RuntimeError, match="already appended to another env"):
        ChatEnv().append_transform(version)


# -- PythonInterpreter ------------------------------------------------------------------------------


def test_extract_python_code():
    text = "first\n```python\na = 1\nprint(a)\n```\nthen ```bash\nls\n``` and\n```python\nprint(2)\n```"
    assert extract_python_code(text) == ["a = 1\nprint(a)\n", "print(2)\n"]
    assert extract_python_code("no code") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```python\r\nprint(1)\r\n```", ["print(1)\n"]),  # CRLF
        ("```py\nx = 1\n```", ["x = 1\n"]),
        ("```python3\nx = 2\n```", ["x = 2\n"]),
        ("```Python\nx = 3\n```", ["x = 3\n"]),
        ("```python\rx = 4\r```", ["x = 4\n"]),  # old Mac line ends
        ("```python\nprint('never closed')\n", []),
        ("```bash\nrm -rf /\n```", []),
        ("```\nplain\n```", []),
    ],
)
def test_extract_python_code_reads_tags_and_line_ends(text, expected):
    assert extract_python_code(text) == expected


def test_blocks_that_do_not_run_are_reported_to_the_model():
    interpreter = PythonInterpreter(sandbox=PythonSandbox(timeout=20.0, cpu_time=1.0))
    message = interpreter.run_reply(
        "```bash\nls\n```\n```\nplain\n```\n```py\nprint(6 * 7)\n```\n```python\nprint("
    )
    assert message.splitlines() == [
        "Code block 1 was not run (language 'bash'): only ```python blocks run.",
        "Code block 2 was not run (no language tag): only ```python blocks run.",
        "Code block 3 executed successfully:",
        "42",
        "",
        "Code block 4 was not run: it is not closed with ```.",
    ]
    assert interpreter.run_reply("no fences at all") is None


def _interpreter() -> PythonInterpreter:
    return PythonInterpreter(
        sandbox=PythonSandbox(timeout=20.0, cpu_time=1.0, memory=256 << 20, max_output=200)
    )


def test_python_tool_result_goes_back_into_the_conversation():
    env = ChatEnv(batch_size=(3,), max_turns=2).append_transform(_interpreter())
    replies = [
        "Let me compute.\n```python\nprint(sum(range(10)))\n```",
        "No code here.",
        "```python\nx = 1\n```\n```python\nraise ValueError('nope')\n```",
    ]
    prompts = env.step_and_maybe_reset(_with_replies(env, replies))[1]["history"].prompt
    rows = prompts.unbind(0)
    assert rows[0].role == ["user", "assistant", "tool"]
    assert rows[0][-1].content == "Code block 1 executed successfully:\n45\n"
    assert rows[1].role == ["user", "assistant"]
    assert rows[2][-1].content.startswith(
        "Code block 1 executed successfully:\n\nCode block 2 failed:\nError:"
    )
    assert "ValueError: nope" in rows[2][-1].content


def _with_replies(env: ChatEnv, replies: list[str]) -> TensorDictBase:
    n = len(replies)
    td = env.reset(TensorDict(query=[f"q{i}" for i in range(n)], batch_size=[n]))
    td["history"].full = td["history"].prompt.append(
        History(role=["assistant"] * n, content=replies, batch_size=[n]), inplace=False
    )
    return td


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("while True:\n    pass", "limit of"),  # CPU time, or wall time on a loaded machine
        ("import os\nwhile True:\n    os.fork()", "creating processes is disabled"),
        ("x = bytearray(1 << 34)", "memory limit of 256 MiB exceeded"),
        ("print(open('/etc/hostname').read())", "outside the sandbox working directory"),
        ("import socket\nsocket.create_connection(('127.0.0.1', 9))", "network access is disabled"),
        ("while True:\n    print('z' * 1000)", "output truncated"),
    ],
)
def test_python_tool_contains_hostile_code_with_a_clear_message(code, message):
    env = ChatEnv(batch_size=(1,), max_turns=2).append_transform(_interpreter())
    out = env.step(_with_replies(env, [f"```python\n{code}\n```"]))
    tool_message = out["next", "history"].prompt[0, -1]
    assert tool_message.role == "tool"
    assert tool_message.content.startswith("Code block 1 failed:\nError:")
    assert message in tool_message.content
    assert len(tool_message.content) < 1000
    assert not out["next", "done"].any()
