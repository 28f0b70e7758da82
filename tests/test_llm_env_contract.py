"""rl_llm's chat envs honour docs/contract.md: rl_collectors and rl_buffers work with them.

``rl_llm`` imports no sibling; this file checks from the outside that a
``DatasetChatEnv`` (with a verifiable reward) has the contract's layout, that
``rl_collectors.Collector`` collects from it, and that ``rl_buffers`` stores what
``LLMCollector`` hands out (conversations included) and samples it back.

What does not carry over, by design of the generic components (see the rl-llm README):
``Collector`` requires an ``"action"`` entry and stores tensor leaves only, so the
conversations themselves (non-tensor text) are not in its batches; use
``rl_llm.LLMCollector`` for those. ``Collector`` also merges partial resets in
place, which needs roots of one shape, so it suits single-turn chat envs.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDictBase

from rl_buffers import ListStorage, ReplayBuffer
from rl_collectors import Collector
from rl_llm import AnswerRewardParser, DatasetChatEnv, History, LLMCollector

ROWS = [{"query": f"{i}+{i}=", "answer": str(2 * i)} for i in range(6)]


def reply_two(td: TensorDictBase) -> TensorDictBase:
    """Answers 2 to every query; writes the reply and, for ``Collector``, an ``"action"``."""
    prompt = td["history"].prompt
    n = prompt.batch_size[0]
    reply = History(
        role=["assistant"] * n,
        content=["<answer>2</answer>"] * n,
        is_complete=torch.ones(n, dtype=torch.bool),
        batch_size=[n],
    )
    td["history"].full = prompt.append(reply, inplace=False)
    td.set("action", torch.ones(n, 1))  # Collector asks every policy for an "action" entry
    return td


def make_env(max_turns: int = 1) -> DatasetChatEnv:
    env = DatasetChatEnv(dataset=ROWS, num_envs=2, shuffle=False, max_turns=max_turns)
    return env.append_transform(AnswerRewardParser())


def test_reset_and_step_layout():
    env = make_env()
    root = env.reset()
    assert tuple(root.batch_size) == (2,)
    for key in ("done", "terminated", "truncated"):
        assert root[key].shape == (2, 1) and root[key].dtype == torch.bool and not root[key].any()
    transition = env.step(reply_two(root))
    nxt = transition["next"]
    assert nxt["reward"].shape == (2, 1) and nxt["reward"].dtype == torch.float32
    assert torch.equal(nxt["done"], nxt["terminated"] | nxt["truncated"])
    assert nxt["reward"].flatten().tolist() == [0.0, 1.0]  # 0+0 -> 0, 1+1 -> 2
    with pytest.raises(RuntimeError, match="are done; reset them first"):
        env.step(reply_two(env.next_root(transition)))


def test_collector_collects_rewards_done_flags_and_trajectory_ids():
    collector = Collector(make_env(), reply_two, frames_per_batch=4, total_frames=8)
    batches = list(collector)
    assert [tuple(b.batch_size) for b in batches] == [(2, 2), (2, 2)]
    first, second = batches
    # queries in order: row 0 gets 0+0, 2+2, 4+4, 0+0; row 1 gets 1+1, 3+3, 5+5, 1+1
    assert first["next", "reward"].squeeze(-1).tolist() == [[0.0, 0.0], [1.0, 0.0]]
    assert second["next", "reward"].squeeze(-1).tolist() == [[0.0, 0.0], [0.0, 1.0]]
    assert first["next", "done"].all() and second["next", "done"].all()
    assert first["collector", "traj_ids"].tolist() == [[0, 2], [1, 3]]
    assert second["collector", "traj_ids"].tolist() == [[4, 6], [5, 7]]


def test_replay_buffer_stores_and_samples_llm_collector_turns():
    collector = LLMCollector(
        make_env(),
        policy=reply_two,
        dialog_turns_per_batch=4,
        total_dialog_turns=8,
        flatten_data=True,
    )
    buffer = ReplayBuffer(storage=ListStorage(16), batch_size=8)
    for batch in collector:
        buffer.extend(batch)
    assert len(buffer) == 8
    sample = buffer.sample()
    assert tuple(sample.batch_size) == (8,)
    # every stored turn keeps its conversation, query, answer and reward together
    for i in range(8):
        turn = sample[i]
        chat = turn["next", "history"].prompt.to_chats()
        assert chat[0] == {"role": "user", "content": turn["query"]}
        assert chat[-1] == {"role": "assistant", "content": "<answer>2</answer>"}
        assert turn["next", "reward"].item() == float(turn["answer"] == "2")


def test_multi_turn_env_with_llm_collector_and_buffer():
    env = DatasetChatEnv(dataset=ROWS, num_envs=2, shuffle=False, max_turns=3)
    collector = LLMCollector(
        env,
        policy=reply_two,
        dialog_turns_per_batch=2,
        total_dialog_turns=6,
        yield_only_last_steps=True,
    )
    buffer = ReplayBuffer(storage=ListStorage(8))
    for batch in collector:
        buffer.extend(batch)
    assert len(buffer) == 6
    last_turns = buffer.sample(6)
    assert last_turns["turn"].flatten().tolist() == [2] * 6
    assert all(len(last_turns[i]["next", "history"].prompt.role) == 4 for i in range(6))


def test_rl_envs_step_mdp_carries_a_multi_turn_conversation():
    from rl_envs import step_mdp

    env = DatasetChatEnv(dataset=ROWS, num_envs=2, shuffle=False, max_turns=3)
    env.append_transform(AnswerRewardParser(set_done_if_answer=False))
    root = env.reset()
    for _ in range(3):
        transition = env.step(reply_two(root))
        assert transition["next", "reward"].flatten().tolist() == [
            0.0,
            1.0,
        ]  # the answers came along
        root = step_mdp(transition, action_keys=[("history", "full"), "action"])
    assert root["done"].all() and root["truncated"].all()
    assert (
        root["history"].prompt[1].to_chats()
        == [{"role": "user", "content": "1+1="}]
        + [{"role": "assistant", "content": "<answer>2</answer>"}] * 3
    )
