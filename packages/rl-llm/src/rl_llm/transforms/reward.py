"""Rewards for verifiable tasks: answer extraction, exact match and format rewards."""

from __future__ import annotations

import re

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase

from rl_llm.envs.transform import LLMTransform
from rl_llm.transforms._replies import reply_texts

_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


def extract_answer(text: str, *, method: str = "tag", tag: str = "answer") -> str | None:
    """The answer a reply gives, or ``None`` when it gives none.

    Args:
        text: the reply.
        method: ``"tag"``: the content of the first ``<tag>...</tag>`` block (stripped);
            ``"last_number"``: the last number in the text (``-3``, ``1,234``, ``2.5``).
        tag: the tag name for ``method="tag"``.

    Returns:
        The answer string, or ``None``.

    Examples:
        >>> extract_answer("<think>2+2</think><answer> 4 </answer>")
        '4'
        >>> extract_answer("so 3 + 4 = 7.", method="last_number")
        '7'
        >>> extract_answer("no idea") is None
        True
    """
    if method == "tag":
        match = re.search(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", text, re.DOTALL)
        return match.group(1).strip() if match else None
    if method == "last_number":
        numbers = _NUMBER.findall(text)
        return numbers[-1] if numbers else None
    raise ValueError(f"extract_answer: method must be 'tag' or 'last_number'; got {method!r}.")


def normalize_answer(answer: str) -> str:
    """Canonical form of a numeric answer: no spaces, commas, ``$`` or ``%``; ``"12.50"`` -> ``"12.5"``.

    Examples:
        >>> normalize_answer(" $1,200.00 ")
        '1200'
    """
    answer = answer.strip().replace(",", "").replace("$", "").replace("%", "").replace(" ", "")
    answer = answer.rstrip(".")
    if re.fullmatch(r"-?\d+\.\d*", answer):
        answer = answer.rstrip("0").rstrip(".")
    return answer


def _strings(value: object, n: int, key: str) -> list[str]:
    if isinstance(value, (NonTensorData, NonTensorStack)):
        value = value.tolist()
    if isinstance(value, str):
        value = [value] * n
    if not isinstance(value, list) or len(value) != n or not all(isinstance(v, str) for v in value):
        raise TypeError(f"the reference answers under {key!r} must be {n} strings; got {value!r}.")
    return value


class AnswerRewardParser(LLMTransform):
    """Exact-match reward: the answer extracted from the reply against the reference answer.

    The reward added to ``("next", "reward")`` is ``correct_reward`` when the
    normalized answers match, ``format_reward`` when the reply gives an answer that
    is wrong, and ``0`` when it gives none (TorchRL's GSM8K convention). It also
    writes ``("next", "reward_answer")`` (1.0 when an answer was found) and
    ``("next", "success")`` (bool). With ``set_done_if_answer`` a reply that gives an
    answer ends the episode (``terminated``).

    Args:
        answer_key: the root entry holding the reference answer (from the dataset).
        method, tag: how to extract the answer (see :func:`extract_answer`).
        correct_reward: reward of a correct answer.
        format_reward: reward of an answer that is given but wrong.
        set_done_if_answer: terminate the episode when the reply gives an answer.
        normalize: compare :func:`normalize_answer` forms (else the raw strings).

    Examples:
        >>> from rl_llm import ChatEnv, History
        >>> from tensordict import TensorDict
        >>> env = ChatEnv(batch_size=(2,)).append_transform(AnswerRewardParser())
        >>> td = env.reset(TensorDict(query=["1+1=", "2+2="], answer=["2", "4"], batch_size=[2]))
        >>> td["history"].full = td["history"].prompt.append(History(role=["assistant"] * 2,
        ...     content=["<answer>2</answer>", "<answer>5</answer>"], batch_size=[2]), inplace=False)
        >>> env.step(td)["next", "reward"].tolist()
        [[1.0], [0.0]]
    """

    def __init__(
        self,
        *,
        answer_key: str = "answer",
        method: str = "tag",
        tag: str = "answer",
        correct_reward: float = 1.0,
        format_reward: float = 0.0,
        set_done_if_answer: bool = True,
        normalize: bool = True,
    ) -> None:
        extract_answer("", method=method, tag=tag)  # validates the method
        self.answer_key = answer_key
        self.method = method
        self.tag = tag
        self.correct_reward = float(correct_reward)
        self.format_reward = float(format_reward)
        self.set_done_if_answer = set_done_if_answer
        self.normalize = normalize

    def score(self, reply: str, reference: str) -> tuple[float, bool, bool]:
        """``(reward, has_answer, correct)`` of one reply."""
        answer = extract_answer(reply, method=self.method, tag=self.tag)
        if answer is None:
            return 0.0, False, False
        norm = normalize_answer if self.normalize else str.strip
        correct = norm(answer) == norm(reference)
        return (self.correct_reward if correct else self.format_reward), True, correct

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        replies = reply_texts(tensordict, type(self).__name__)
        reference = tensordict.get(self.answer_key, None)
        if reference is None:
            raise KeyError(
                f"{type(self).__name__} needs the reference answer under {self.answer_key!r}; the step input "
                f"has keys {sorted(map(str, tensordict.keys()))}. Give it with the queries (e.g. a dataset "
                "column 'answer') or pass answer_key=..."
            )
        references = _strings(reference, len(replies), self.answer_key)
        scores = [self.score(r, a) for r, a in zip(replies, references, strict=True)]
        reward = torch.tensor([[s[0]] for s in scores], dtype=torch.float32)
        has_answer = torch.tensor([[s[1]] for s in scores])
        next_tensordict.set("reward", next_tensordict.get("reward") + reward)
        next_tensordict.set("reward_answer", has_answer.float())
        next_tensordict.set("success", torch.tensor([[s[2]] for s in scores]))
        if self.set_done_if_answer:
            next_tensordict.set("terminated", next_tensordict.get("terminated") | has_answer)
        return next_tensordict


class FormatReward(LLMTransform):
    """Adds ``reward`` to ``("next", "reward")`` when the whole reply matches ``pattern``.

    Args:
        pattern: a regular expression the stripped reply must match in full. Defaults to
            ``<think>...</think><answer>...</answer>`` (R1-style reasoning format).
        reward: the bonus for a well-formed reply.

    Examples:
        >>> FormatReward().matches("<think>2 and 2</think> <answer>4</answer>")
        True
        >>> FormatReward().matches("4")
        False
    """

    def __init__(
        self,
        pattern: str = r"<think>.*?</think>\s*<answer>.*?</answer>",
        reward: float = 0.1,
    ) -> None:
        self.pattern = re.compile(pattern, re.DOTALL)
        self.reward = float(reward)

    def matches(self, reply: str) -> bool:
        """Whether ``reply`` is well formed."""
        return self.pattern.fullmatch(reply.strip()) is not None

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        replies = reply_texts(tensordict, type(self).__name__)
        ok = torch.tensor([[self.matches(r)] for r in replies])
        next_tensordict.set("reward", next_tensordict.get("reward") + ok.float() * self.reward)
        next_tensordict.set("reward_format", ok.float())
        return next_tensordict
