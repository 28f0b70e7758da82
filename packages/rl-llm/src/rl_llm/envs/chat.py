"""``ChatEnv``: an env whose observation is a conversation and whose action is the policy's reply."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict, TensorDictBase, lazy_stack

from rl_llm.data.history import History
from rl_llm.envs.transform import LLMTransform
from rl_llm.modules.containers import ChatHistory

NestedKey = str | tuple[str, ...]

POLICY_KEYS = ("history", "text", "tokens", "log_probs", "masks")
"""Root entries a policy writes for one turn; they are not carried to the next turn's root."""


def as_strings(value: Any, n: int, where: str) -> list[str]:
    """``value`` (a str, a list of str, a non-tensor entry) as ``n`` strings, or a clear error."""
    if isinstance(value, (NonTensorData, NonTensorStack)):
        value = value.tolist()
    if isinstance(value, str):
        value = [value] * n
    if not isinstance(value, (list, tuple)) or len(value) != n:
        raise ValueError(f"{where}: expected {n} strings (one per env), got {value!r}.")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise TypeError(f"{where}[{i}] must be a str, got {type(item).__name__}: {item!r}.")
    return list(value)


def _messages(history: History) -> tuple[tuple[str, str], ...]:
    """One conversation as ``((role, content), ...)``."""
    return tuple(zip(_as_list(history.role), _as_list(history.content), strict=True))


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (NonTensorData, NonTensorStack)):
        value = value.tolist()
    return list(value)


class ChatEnv:
    """A batch of conversations: reset starts them from prompts, step appends the policy's reply.

    The env follows the env contract of ``docs/contract.md`` with a conversation as
    observation: ``reset`` returns a TensorDict of batch ``[B]`` holding
    ``("history", "prompt")`` (a :class:`~rl_llm.History` per row: the optional
    system prompt, then the user's query), ``"done"``, ``"terminated"``,
    ``"truncated"`` (bool ``[B, 1]``), ``"turn"`` (int64 ``[B, 1]``, replies so far)
    and the reset's data entries (``"query"``, and e.g. ``"answer"``). The action is
    ``("history", "full")``, the prompt followed by the policy's reply, as written by
    :class:`~rl_llm.TransformersWrapper`; ``step`` adds ``("next", "history", "prompt")``
    (the full conversation, to be extended by tool transforms),
    ``("next", "reward")`` (float ``[B, 1]``, zero unless a reward transform writes it),
    the done flags and the root's other entries (the query's data, e.g. ``"answer"``,
    so that a generic ``step_mdp`` carries them to the next turn). The episode is
    truncated after ``max_turns`` replies, and terminated when a transform says so
    (e.g. a reward parser that found an answer).

    The env owns the conversation: it remembers what it handed out for each row (and
    the turn count and done flag), and a step whose ``("history", "full")`` changes any
    earlier message, appends anything but the policy's reply, or uses an unknown role
    raises, so a caller cannot rewrite the prompt the next turn is built from.

    Partial resets (``"_reset"`` ``[B, 1]``) restart only the flagged rows.
    Transforms (:class:`~rl_llm.envs.LLMTransform`) are appended with
    :meth:`append_transform` and run, in order, after each reset and step.

    Args:
        input_mode: ``"history"`` (the only mode implemented here).
        batch_size: ``(B,)``, the number of conversations. Defaults to ``(1,)``.
        system_prompt: a system message put before each query.
        tokenizer: kept for transforms that render text (not used by the env itself).
        template_kwargs: kept for transforms that render text.
        system_role, user_role, policy_role: roles of the system prompt, the query and
            the policy's replies.
        data_key: the reset input's entry holding the query. Defaults to ``"query"``.
        device: the device of the env's tensors.
        max_turns: truncate after this many replies (``None``: never; TorchRL's ChatEnv
            leaves ending an episode to transforms).

    Examples:
        >>> from tensordict import TensorDict
        >>> env = ChatEnv(batch_size=(2,), system_prompt="Answer briefly.", max_turns=1)
        >>> td = env.reset(TensorDict(query=["1+1=", "2+2="], batch_size=[2]))
        >>> list(td["history"].prompt[0].role)
        ['system', 'user']
        >>> full = td["history"].prompt.append(
        ...     History(role=["assistant"] * 2, content=["2", "4"], batch_size=[2]), inplace=False)
        >>> td["history"].full = full
        >>> out = env.step(td)
        >>> out["next", "done"].tolist(), list(out["next", "history"].prompt[1].content)
        ([[True], [True]], ['Answer briefly.', '2+2=', '4'])
    """

    data_key: str = "query"
    reward_keys: tuple[str, ...] = ("reward",)
    done_keys: tuple[str, ...] = ("done", "terminated", "truncated")
    action_keys: tuple[NestedKey, ...] = (("history", "full"),)

    def __init__(
        self,
        *,
        input_mode: str = "history",
        batch_size: Sequence[int] | int | None = None,
        system_prompt: str | None = None,
        tokenizer: Any = None,
        template_kwargs: dict[str, Any] | None = None,
        system_role: str = "system",
        user_role: str = "user",
        policy_role: str = "assistant",
        data_key: str | None = None,
        device: torch.device | str | None = None,
        max_turns: int | None = None,
    ) -> None:
        if input_mode != "history":
            raise ValueError(
                f"ChatEnv: input_mode={input_mode!r} is not implemented here; use 'history' "
                "(the policy wrapper renders text and tokens from the History itself)."
            )
        if batch_size is None:
            batch_size = (1,)
        if isinstance(batch_size, int):
            batch_size = (batch_size,)
        batch_size = torch.Size(batch_size)
        if len(batch_size) != 1 or batch_size[0] <= 0:
            raise ValueError(
                f"ChatEnv: batch_size must be (B,) with B > 0; got {tuple(batch_size)}."
            )
        if max_turns is not None and max_turns <= 0:
            raise ValueError(f"ChatEnv: max_turns must be None or > 0; got {max_turns}.")
        self.input_mode = input_mode
        self.batch_size = batch_size
        self.device = torch.device(device) if device is not None else None
        self.system_prompt = system_prompt
        self.tokenizer = tokenizer
        self.template_kwargs = dict(template_kwargs or {})
        self.system_role = system_role
        self.user_role = user_role
        self.policy_role = policy_role
        if data_key is not None:
            self.data_key = data_key
        self.max_turns = max_turns
        self.transforms: list[LLMTransform] = []
        # Per row: (the conversation handed out, its turn, done), set by reset and step.
        self._state: list[tuple[tuple[tuple[str, str], ...], int, bool] | None] = []

    # -- transforms -------------------------------------------------------------------------
    def append_transform(self, transform: LLMTransform) -> ChatEnv:
        """Adds a transform run after those already appended; returns the env."""
        if not isinstance(transform, LLMTransform):
            raise TypeError(
                f"{type(self).__name__}.append_transform expects an rl_llm LLMTransform; got "
                f"{type(transform).__name__} (rl_envs transforms do not apply to chat envs)."
            )
        transform.set_container(self)
        self.transforms.append(transform)
        return self

    # -- reset ------------------------------------------------------------------------------
    def _reset_data(
        self, tensordict: TensorDictBase | None, rows: list[int]
    ) -> list[dict[str, Any]]:
        """The data of each row to reset: ``{data_key: query, other entries...}``."""
        if tensordict is None or self.data_key not in tensordict.keys():  # noqa: SIM118
            got = "None" if tensordict is None else sorted(map(str, tensordict.keys()))
            raise KeyError(
                f"{type(self).__name__}.reset needs a TensorDict holding the queries under "
                f"{self.data_key!r}; got {got}. Pass TensorDict({self.data_key}=[...], batch_size="
                f"{list(self.batch_size)}) or use DatasetChatEnv to draw them from a dataset."
            )
        n = self.batch_size[0]
        queries = as_strings(tensordict.get(self.data_key), n, f"reset input {self.data_key!r}")
        return [{self.data_key: queries[i]} for i in rows]

    def _prompt(self, query: str, row: int) -> History:
        if not query.strip():
            raise ValueError(
                f"{type(self).__name__}.reset: the query of row {row} is empty; a prompt needs text."
            )
        messages = []
        if self.system_prompt is not None:
            messages.append({"role": self.system_role, "content": self.system_prompt})
        messages.append({"role": self.user_role, "content": query})
        return History.from_chats(messages)

    def _fresh_row(self, data: dict[str, Any], row: int) -> TensorDict:
        out = TensorDict(
            {
                "history": ChatHistory(
                    prompt=self._prompt(data[self.data_key], row), batch_size=[]
                ),
                "done": torch.zeros(1, dtype=torch.bool),
                "terminated": torch.zeros(1, dtype=torch.bool),
                "truncated": torch.zeros(1, dtype=torch.bool),
                "turn": torch.zeros(1, dtype=torch.int64),
            },
            batch_size=[],
        )
        for key, value in data.items():
            out.set_non_tensor(key, value)
        return out

    def reset(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Starts the conversations (all, or the rows flagged by ``"_reset"``).

        Args:
            tensordict: holds the queries under ``data_key`` (``ChatEnv``; drawn from the
                dataset by ``DatasetChatEnv``) and optionally ``"_reset"`` (``[B, 1]``).

        Returns:
            The root TensorDict of the first turn (see the class docstring).
        """
        n = self.batch_size[0]
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            rows = list(range(n))
        else:
            if tuple(mask.shape) != (n, 1) or mask.dtype != torch.bool:
                raise ValueError(
                    f"'_reset' must be a bool tensor of shape ({n}, 1); got {mask.dtype} {tuple(mask.shape)}."
                )
            rows = mask.reshape(-1).nonzero().flatten().tolist()
        data = iter(self._reset_data(tensordict, rows))
        reset_rows = set(rows)
        out_rows = []
        env_keys = ("_reset", "next", "turn", *self.done_keys, *self.reward_keys, *POLICY_KEYS)
        for i in range(n):
            if i in reset_rows:
                row = self._fresh_row(next(data), i)
                if tensordict is not None:
                    # Entries given with the queries (e.g. "answer") ride along, unless the
                    # reset's own data (a dataset sample) has them.
                    for key, value in tensordict[i].exclude(*env_keys).items():
                        if key not in row.keys():  # noqa: SIM118
                            row.set(key, value)
                out_rows.append(row)
            else:
                out_rows.append(tensordict[i].exclude("_reset", "next", *self.reward_keys))
        out = lazy_stack(out_rows)
        for transform in self.transforms:
            out = transform._reset(tensordict, out)
        self._record(out, rows)
        return self._to_device(out)

    # -- the env's own record of each conversation ------------------------------------------
    def _record(self, out: TensorDictBase, rows: list[int]) -> None:
        """Remembers the conversation, turn and done flag the env handed out for ``rows``."""
        if len(self._state) != self.batch_size[0]:
            self._state = [None] * self.batch_size[0]
        prompts = out.get(("history", "prompt"))
        turns = out.get("turn").reshape(-1).tolist()
        done = out.get("done").reshape(-1).tolist()
        for i in rows:
            self._state[i] = (_messages(prompts[i]), int(turns[i]), bool(done[i]))

    def known_roles(self) -> set[str]:
        """The roles a conversation of this env may hold: system, user, policy, and tools."""
        roles = {self.system_role, self.user_role, self.policy_role}
        roles.update(t.tool_role for t in self.transforms if hasattr(t, "tool_role"))
        return roles

    def _check_reply(self, i: int, full: History) -> None:
        """Row ``i``'s action must be the conversation handed out plus the policy's reply."""
        state = self._state[i] if i < len(self._state) else None
        if state is None:
            raise RuntimeError(
                f"{type(self).__name__}.step: row {i} was never reset; call env.reset(...) first."
            )
        handed_out, _, done = state
        if done:
            raise RuntimeError(
                f"{type(self).__name__}.step: row {i} is done; reset it first (env.reset(td) "
                "with '_reset', or step_and_maybe_reset)."
            )
        messages = _messages(full)
        for k, (given, expected) in enumerate(zip(messages, handed_out, strict=False)):
            if given != expected:
                raise ValueError(
                    f"row {i}: ('history', 'full') rewrites message {k} of the conversation "
                    f"(expected role {expected[0]!r} with the text the env handed out, got role "
                    f"{given[0]!r}). The env owns the conversation: a step may only append the "
                    "policy's reply to the prompt it returned."
                )
        if len(messages) <= len(handed_out):
            raise ValueError(
                f"row {i}: ('history', 'full') has {len(messages)} messages, no more than the "
                f"prompt's {len(handed_out)}: the policy wrote no reply. A reply is a message "
                "appended to the prompt."
            )
        known = self.known_roles()
        for role, _ in messages[len(handed_out) :]:
            if role not in known:
                raise ValueError(
                    f"row {i}: the reply has a message of unknown role {role!r}; the roles of "
                    f"this env are {sorted(known)}."
                )
            if role != self.policy_role:
                raise ValueError(
                    f"row {i}: the reply appends a message of role {role!r}; a step may only "
                    f"append the policy's reply (role {self.policy_role!r})."
                )

    # -- step -------------------------------------------------------------------------------
    def _reply_rows(self, tensordict: TensorDictBase) -> list[History]:
        full = tensordict.get(("history", "full"), None)
        if full is None:
            raise KeyError(
                f"{type(self).__name__}.step needs the policy's reply under ('history', 'full') (the "
                "prompt followed by the reply, as TransformersWrapper writes it); got keys "
                f"{sorted(map(str, tensordict.keys()))}."
            )
        fulls = list(full.unbind(0))
        for i, f in enumerate(fulls):
            if f.batch_dims != 1:
                raise ValueError(
                    f"('history', 'full') row {i} must be one conversation (1 dim); got batch_size {tuple(f.batch_size)}."
                )
            self._check_reply(i, f)
        return fulls

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Appends the policy's reply and writes ``"next"`` (see the class docstring).

        Raises:
            RuntimeError: a row was never reset, or is done (reset it first).
            KeyError, ValueError: the reply is missing, is not a reply, rewrites the
                conversation the env handed out, or has a role that is not the policy's.
        """
        if tuple(tensordict.batch_size) != tuple(self.batch_size):
            raise ValueError(
                f"{type(self).__name__}.step: batch_size {tuple(tensordict.batch_size)} != the env's "
                f"{tuple(self.batch_size)}."
            )
        done = tensordict.get("done", None)
        if done is not None and done.any():
            rows = done.reshape(-1).nonzero().flatten().tolist()
            raise RuntimeError(
                f"{type(self).__name__}.step: rows {rows} are done; reset them first (env.reset(td) "
                "with '_reset', or step_and_maybe_reset)."
            )
        fulls = self._reply_rows(tensordict)
        # The turn count is the env's own, whatever the caller's "turn" entry says.
        turn = torch.tensor([[state[1]] for state in self._state], dtype=torch.int64)
        next_turn = turn + 1
        truncated = (
            next_turn >= self.max_turns
            if self.max_turns is not None
            else torch.zeros_like(next_turn, dtype=torch.bool)
        )
        rows = [
            TensorDict(
                {
                    "history": ChatHistory(prompt=full.clone(), batch_size=[]),
                    "reward": torch.zeros(1),
                    "done": truncated[i].clone(),
                    "terminated": torch.zeros(1, dtype=torch.bool),
                    "truncated": truncated[i].clone(),
                    "turn": next_turn[i],
                },
                batch_size=[],
            )
            for i, full in enumerate(fulls)
        ]
        nxt = lazy_stack(rows)
        # The query's data ("query", "answer"...) also goes to "next", so that any step_mdp
        # (which moves "next" up and may keep tensor entries only) hands it to the next turn.
        env_keys = {"next", "_reset", "turn", *self.done_keys, *self.reward_keys, *POLICY_KEYS}
        for key in tensordict.keys():  # noqa: SIM118 (iterating a TensorDict iterates its first dim)
            if key not in env_keys:
                nxt.set(key, tensordict.get(key))
        for transform in self.transforms:
            nxt = transform._step(tensordict, nxt)
        nxt.set("done", nxt.get("done") | nxt.get("terminated") | nxt.get("truncated"))
        self._record(nxt, list(range(len(fulls))))
        tensordict.set("next", self._to_device(nxt))
        return tensordict

    # -- loops ------------------------------------------------------------------------------
    def next_root(self, transition: TensorDictBase) -> TensorDictBase:
        """The root of the next turn, with the layout of the transition's root.

        Entries of ``"next"`` that the root also has (the conversation, the done flags,
        ``"turn"``, a policy version) move up; step outputs the root lacks (rewards,
        ``"success"``...) stay behind, so every root has the layout of a reset output;
        the root's other entries (``"query"``, ``"answer"``...) are carried, and the
        policy's outputs (``"text"``, ``"tokens"``, ``"log_probs"``...) are dropped.
        """
        nxt = transition.get("next")
        root_keys = set(transition.keys())
        keep = [key for key in nxt.keys() if key in root_keys and key not in self.reward_keys]  # noqa: SIM118
        # A new structure (leaves shared): the policy writes into the root's containers
        # (e.g. ("history", "full")) and must not write into the stored transition.
        root = nxt.select(*keep).clone(False)
        history = root.get("history", None)
        if history is not None:
            root.set("history", type(history)(prompt=history.prompt, batch_size=history.batch_size))
        skip = {"next", "_reset", *POLICY_KEYS, *self.reward_keys, *keep}
        for key in transition.keys():  # noqa: SIM118 (iterating a TensorDict iterates its first dim)
            if key not in skip:
                root.set(key, transition.get(key))
        return root

    def _post_step_mdp_hooks(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Marks, per docs/contract.md, that a stored transition lacks what the next root needs.

        The next root carries the conversation (non-tensor) and the query's data, which a
        collector that stores tensor leaves only does not keep; such collectors therefore
        build each root with :meth:`step_and_maybe_reset` (which uses :meth:`next_root`)
        rather than from a stored transition. The hook itself leaves the root unchanged.
        """
        return tensordict

    def step_and_maybe_reset(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        """One step, then the next root with the done rows reset (docs/contract.md)."""
        transition = self.step(tensordict)
        return transition, self._root_after(transition)

    def _root_after(self, transition: TensorDictBase) -> TensorDictBase:
        root = self.next_root(transition)
        done = root.get("done")
        if done.any():
            root.set("_reset", done.clone())
            root = self.reset(root)
        return root

    def rollout(
        self,
        max_steps: int,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        auto_reset: bool = True,
        tensordict: TensorDictBase | None = None,
        break_when_any_done: bool = True,
    ) -> TensorDictBase:
        """Up to ``max_steps`` turns with ``policy``; a ``[B, T]`` TensorDict (time last).

        Args:
            max_steps: the number of turns.
            policy: writes ``("history", "full")``; required (a chat env has no random action).
            auto_reset: start with ``reset()``; otherwise from ``tensordict`` (rows that are
                done are reset first).
            tensordict: the root to start from when ``auto_reset=False``.
            break_when_any_done: stop after the first turn where a row is done; otherwise
                done rows are reset and the rollout goes on.
        """
        if policy is None:
            raise ValueError(
                f"{type(self).__name__}.rollout needs a policy: a chat env has no random reply."
            )
        if auto_reset:
            root = self.reset(tensordict)
        else:
            if tensordict is None:
                raise ValueError(
                    "rollout(auto_reset=False) needs the root to start from (tensordict=...)."
                )
            root = tensordict
            done = root.get("done", None)
            if done is not None and done.any():
                root = root.clone(False)
                root.set("_reset", done.clone())
                root = self.reset(root)
        steps = []
        for _ in range(max_steps):
            out = policy(root)
            root = root if out is None else out
            transition = self.step(root)
            steps.append(transition)
            if break_when_any_done and transition.get(("next", "done")).any():
                break
            root = (
                self.next_root(transition) if break_when_any_done else self._root_after(transition)
            )
        return lazy_stack(steps, dim=len(self.batch_size))

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seeds the env's own randomness (none in ``ChatEnv``); returns the next seed."""
        return seed if static_seed else seed + 1

    def close(self) -> None:
        """Closes the transforms (sandboxes, files)."""
        for transform in self.transforms:
            transform.close()

    def _to_device(self, td: TensorDictBase) -> TensorDictBase:
        return td if self.device is None else td.to(self.device)

    def __repr__(self) -> str:
        transforms = ", ".join(type(t).__name__ for t in self.transforms)
        return f"{type(self).__name__}(batch_size={tuple(self.batch_size)}, max_turns={self.max_turns}, transforms=[{transforms}])"
