"""LLMCollector, AsyncLLMCollector and TransformersUpdater, with scripted and real (tiny) policies."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import torch
from tensordict import TensorDictBase

from rl_llm.collectors import AsyncLLMCollector, LLMCollector, TransformersUpdater
from rl_llm.data import History
from rl_llm.envs import DatasetChatEnv
from rl_llm.transforms import AnswerRewardParser, KLRewardTransform, PolicyVersion

ROWS = [{"query": f"{i}+{i}=", "answer": str(2 * i)} for i in range(6)]


class ScriptedPolicy:
    """Replies ``reply(query row index, turn)``; counts its calls."""

    def __init__(self, reply: Callable[[str], str] = lambda text: "<answer>0</answer>") -> None:
        self.reply = reply
        self.calls = 0

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        self.calls += 1
        prompt = td["history"].prompt
        contents = [self.reply(row[-1].content) for row in prompt.unbind(0)]
        response = History(
            role=["assistant"] * len(contents), content=contents, batch_size=[len(contents)]
        )
        td["history"].full = prompt.append(response, inplace=False)
        return td


def _right_answer(text: str) -> str:
    a = int(text.split("+")[0])
    return f"<answer>{2 * a}</answer>"


def _env(num_envs: int = 2, max_turns: int | None = 1, **kwargs) -> DatasetChatEnv:
    env = DatasetChatEnv(
        dataset=ROWS, num_envs=num_envs, shuffle=False, max_turns=max_turns, **kwargs
    )
    return env.append_transform(AnswerRewardParser(set_done_if_answer=False))


def test_batches_of_turns_have_shape_b_t_and_traj_ids():
    collector = LLMCollector(
        _env(max_turns=2), policy=ScriptedPolicy(), dialog_turns_per_batch=6, total_dialog_turns=12
    )
    batches = list(collector)
    assert [b.batch_size for b in batches] == [torch.Size([2, 3])] * 2
    first, second = batches
    # two turns per conversation, new ids after each, continuing across batches
    assert first["collector", "traj_ids"].tolist() == [[0, 0, 2], [1, 1, 3]]
    assert second["collector", "traj_ids"].tolist() == [[2, 4, 4], [3, 5, 5]]
    assert first["next", "done"].squeeze(-1).tolist() == [
        [False, True, False],
        [False, True, False],
    ]
    # the conversation carried over between batches goes on where it stopped
    assert second[0, 0]["history"].prompt.content == [ROWS[2]["query"], "<answer>0</answer>"]


def test_rewards_come_from_the_env_transforms():
    collector = LLMCollector(
        _env(), policy=ScriptedPolicy(_right_answer), dialog_turns_per_batch=6, total_dialog_turns=6
    )
    (batch,) = list(collector)
    assert batch["next", "reward"].flatten().tolist() == [1.0] * 6
    assert batch["query"] == [
        [ROWS[i]["query"] for i in (0, 2, 4)],
        [ROWS[i]["query"] for i in (1, 3, 5)],
    ]


def test_flatten_data_and_replay_buffer():
    class ListBuffer:
        def __init__(self):
            self.batches = []

        def extend(self, data):
            self.batches.append(data)

    buffer = ListBuffer()
    collector = LLMCollector(
        _env(),
        policy=ScriptedPolicy(),
        dialog_turns_per_batch=4,
        total_dialog_turns=8,
        replay_buffer=buffer,
    )
    assert list(collector) == [None, None]
    assert [b.batch_size for b in buffer.batches] == [torch.Size([4])] * 2


def test_completed_trajectories_are_contiguous_and_whole():
    # Row i's conversation lasts (i % 2) + 1 turns: a transform terminates it.
    env = DatasetChatEnv(dataset=ROWS, num_envs=2, shuffle=False, max_turns=2)
    policy = ScriptedPolicy(
        lambda text: "<answer>0</answer>" if text.startswith(("0+", "2+", "4+")) else "thinking"
    )
    env.append_transform(AnswerRewardParser())
    collector = LLMCollector(
        env,
        policy=policy,
        dialog_turns_per_batch=3,
        total_dialog_turns=9,
        yield_completed_trajectories=True,
    )
    batches = list(collector)
    for batch in batches:
        assert batch.batch_dims == 1 and batch.batch_size[0] >= 3
        ids = batch["collector", "traj_ids"].tolist()
        # each trajectory is contiguous and ends with done
        for traj in set(ids):
            where = [i for i, t in enumerate(ids) if t == traj]
            assert where == list(range(where[0], where[-1] + 1))
            assert batch[where[-1]]["next", "done"].item()
            assert not any(batch[i]["next", "done"].item() for i in where[:-1])
    assert sum(b.numel() for b in batches) >= 9


def test_yield_only_last_steps_keeps_final_turns():
    env = DatasetChatEnv(dataset=ROWS, num_envs=2, shuffle=False, max_turns=3)
    collector = LLMCollector(
        env,
        policy=ScriptedPolicy(),
        dialog_turns_per_batch=2,
        total_dialog_turns=4,
        yield_only_last_steps=True,
    )
    batches = list(collector)
    assert [b.batch_size for b in batches] == [torch.Size([2])] * 2
    for batch in batches:
        assert batch["next", "done"].all()
        assert batch["turn"].flatten().tolist() == [2, 2]


def test_policy_versions_follow_weight_updates():
    collector = LLMCollector(
        _env(),
        policy=ScriptedPolicy(),
        dialog_turns_per_batch=2,
        total_dialog_turns=6,
        track_policy_version=True,
    )
    versions = []
    for batch in collector:
        versions.append(batch["policy_version"].flatten().tolist())
        collector.update_policy_weights_()
    assert versions == [[0, 0], [1, 1], [2, 2]]
    assert collector.policy_version == 3


def test_track_policy_version_accepts_a_tracker():
    tracker = PolicyVersion()
    LLMCollector(
        _env(), policy=ScriptedPolicy(), dialog_turns_per_batch=2, track_policy_version=tracker
    ).update_policy_weights_()
    assert tracker.version == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({}, ValueError, "dialog_turns_per_batch is required"),
        ({"dialog_turns_per_batch": 3}, ValueError, "must be a multiple of the env's batch size"),
        (
            {"dialog_turns_per_batch": 2, "total_dialog_turns": 0},
            ValueError,
            "total_dialog_turns must be",
        ),
        (
            {
                "dialog_turns_per_batch": 2,
                "yield_only_last_steps": True,
                "yield_completed_trajectories": False,
            },
            ValueError,
            "needs yield_completed_trajectories",
        ),
        (
            {
                "dialog_turns_per_batch": 2,
                "yield_completed_trajectories": True,
                "flatten_data": True,
            },
            ValueError,
            "do not apply",
        ),
    ],
)
def test_collector_argument_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        LLMCollector(_env(), policy=ScriptedPolicy(), **kwargs)


def test_collector_needs_one_policy_and_an_updater_for_weights():
    with pytest.raises(ValueError, match="exactly one of policy= and policy_factory="):
        LLMCollector(_env(), dialog_turns_per_batch=2)
    collector = LLMCollector(_env(), policy_factory=ScriptedPolicy, dialog_turns_per_batch=2)
    with pytest.raises(RuntimeError, match="no weight_updater"):
        collector.update_policy_weights_({"w": torch.zeros(1)})


# -- async ----------------------------------------------------------------------------------------


def test_async_collector_generates_in_a_worker_thread():
    threads = []

    def reply(text: str) -> str:
        threads.append(threading.current_thread().name)
        return "<answer>0</answer>"

    with AsyncLLMCollector(
        _env(),
        policy=ScriptedPolicy(reply),
        dialog_turns_per_batch=2,
        total_dialog_turns=6,
        track_policy_version=True,
        queue_size=1,
    ) as collector:
        batches = list(collector)
    assert [b.batch_size for b in batches] == [torch.Size([1 * 2, 1])] * 3
    assert set(threads) == {"AsyncLLMCollector"}


def test_async_collector_versions_never_mix_within_a_turn_and_lag_is_bounded():
    with AsyncLLMCollector(
        _env(num_envs=2),
        policy=ScriptedPolicy(),
        dialog_turns_per_batch=2,
        total_dialog_turns=20,
        track_policy_version=True,
        queue_size=2,
    ) as collector:
        seen = []
        for i, batch in enumerate(collector):
            versions = batch["policy_version"].flatten().tolist()
            assert len(set(versions)) == 1  # one version per turn
            seen.append(versions[0])
            # at most queue_size + 1 batches were generated before this update
            assert i - versions[0] <= collector.queue_size + 1
            collector.update_policy_weights_()
    assert seen == sorted(seen) and len(seen) == 10


def test_async_collector_reraises_worker_errors():
    def reply(text: str) -> str:
        raise ValueError("boom in the policy")

    collector = AsyncLLMCollector(
        _env(), policy=ScriptedPolicy(reply), dialog_turns_per_batch=2, total_dialog_turns=4
    )
    with pytest.raises(RuntimeError, match="the generation worker failed") as info:
        next(iter(collector))
    assert isinstance(info.value.__cause__, ValueError)
    collector.shutdown()


def test_async_collector_shutdown_stops_an_endless_worker():
    collector = AsyncLLMCollector(
        _env(), policy=ScriptedPolicy(), dialog_turns_per_batch=2, queue_size=1
    )
    iterator = iter(collector)
    next(iterator)
    collector.shutdown()
    assert not collector._thread.is_alive()
    with pytest.raises(ValueError, match="queue_size must be > 0"):
        AsyncLLMCollector(_env(), policy=ScriptedPolicy(), dialog_turns_per_batch=2, queue_size=0)


# -- weight updates with a real (tiny) transformers model ----------------------------------------


@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("transformers")
    from rl_llm.modules import TransformersWrapper
    from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer

    tok = tiny_tokenizer()
    return tok, tiny_causal_lm, TransformersWrapper


def test_transformers_updater_copies_weights_in_place(tiny):
    tok, make_model, _ = tiny
    generator, trainer = make_model(tok, seed=0), make_model(tok, seed=1)
    weight = generator.transformer.wte.weight
    updater = TransformersUpdater(generator)
    updater.push_weights(trainer)
    assert updater.num_updates == 1
    assert generator.transformer.wte.weight is weight  # same tensor, new values
    for (name, a), b in zip(
        generator.state_dict().items(), trainer.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    ids = torch.tensor([[3, 4, 5]])
    assert torch.equal(generator(ids).logits, trainer(ids).logits)


def test_transformers_updater_casts_and_accepts_tensordict_and_state_dict(tiny):
    from tensordict import TensorDict

    tok, make_model, _ = tiny
    generator, trainer = make_model(tok, seed=0), make_model(tok, seed=1).double()
    TransformersUpdater(generator).push_weights(TensorDict.from_module(trainer))
    assert generator.transformer.h[0].mlp.c_fc.weight.dtype == torch.float32
    assert torch.allclose(
        generator.transformer.h[0].mlp.c_fc.weight, trainer.transformer.h[0].mlp.c_fc.weight.float()
    )
    partial = {"lm_head.weight": torch.zeros_like(generator.lm_head.weight)}
    with pytest.raises(KeyError, match="the weights lack"):
        TransformersUpdater(generator).push_weights(partial)
    TransformersUpdater(generator, strict=False).push_weights(partial)
    assert generator.lm_head.weight.abs().sum() == 0


def test_transformers_updater_errors(tiny):
    tok, make_model, _ = tiny
    generator = make_model(tok)
    with pytest.raises(KeyError, match="are not in the generating model"):
        TransformersUpdater(generator).push_weights({"nope.weight": torch.zeros(1)})
    with pytest.raises(ValueError, match="has shape"):
        TransformersUpdater(generator, strict=False).push_weights(
            {"lm_head.weight": torch.zeros(2, 2)}
        )
    with pytest.raises(TypeError, match="needs the generating model"):
        TransformersUpdater(object())
    with pytest.raises(TypeError, match=r"expects an nn\.Module, a state_dict"):
        TransformersUpdater(generator).push_weights(3)


def test_end_to_end_with_the_tiny_model_kl_and_weight_sync(tiny):
    from rl_llm.data import make_arithmetic_problems

    tok, make_model, Wrapper = tiny
    policy = Wrapper(make_model(tok, seed=0), tokenizer=tok, generate_kwargs={"max_new_tokens": 4})
    ref = Wrapper(make_model(tok, seed=0), tokenizer=tok, generate=False, input_mode="tokens")
    env = DatasetChatEnv(
        dataset=make_arithmetic_problems(8), num_envs=2, repeats=2, group_repeats=True, max_turns=1
    )
    env.append_transform(AnswerRewardParser(method="last_number"))
    env.append_transform(KLRewardTransform(ref, coef=1.0))
    collector = LLMCollector(
        env,
        policy=policy,
        dialog_turns_per_batch=2,
        total_dialog_turns=4,
        track_policy_version=True,
    )
    assert isinstance(collector.weight_updater, TransformersUpdater)
    batches = []
    for batch in collector:
        batches.append(batch)
        collector.update_policy_weights_(make_model(tok, seed=5))
    first, second = batches
    # same weights as the reference: the KL penalty is zero up to float error
    assert first["next", "kl_penalty"].abs().max() < 1e-3
    # after the update the policy differs from the reference, and the versions say so
    assert second["next", "kl_penalty"].abs().max() > 1e-2
    assert first["policy_version"].flatten().tolist() == [0, 0]
    assert second["policy_version"].flatten().tolist() == [1, 1]
    assert first["query"][0] == first["query"][1]  # a GRPO group shares its prompt
    assert torch.equal(policy.model.lm_head.weight, make_model(tok, seed=5).lm_head.weight)


def test_async_collector_with_the_tiny_model_generates_with_each_pushed_version(tiny):
    from rl_llm.data import make_arithmetic_problems

    tok, make_model, Wrapper = tiny
    policy = Wrapper(make_model(tok, seed=0), tokenizer=tok, generate_kwargs={"max_new_tokens": 3})
    trainer = make_model(tok, seed=0)
    scorer = Wrapper(trainer, tokenizer=tok, generate=False, input_mode="tokens")
    env = DatasetChatEnv(dataset=make_arithmetic_problems(8), num_envs=2, max_turns=1)
    collector = AsyncLLMCollector(
        env,
        policy=policy,
        dialog_turns_per_batch=2,
        total_dialog_turns=8,
        track_policy_version=True,
        queue_size=1,
    )
    snapshots = {0: {k: v.clone() for k, v in trainer.state_dict().items()}}
    with collector:
        for batch in collector:
            version = batch["policy_version"].flatten().tolist()
            assert len(set(version)) == 1
            # the sampled log-probs are those of the weights of that version, token for token
            current = {k: v.clone() for k, v in trainer.state_dict().items()}
            trainer.load_state_dict(snapshots[version[0]])
            with torch.no_grad():
                scored = scorer(batch[:, 0].copy())
            for row, ref in zip(batch[:, 0].unbind(0), scored.unbind(0), strict=True):
                reply = row["masks", "all_assistant_mask"]  # the score mode also scores the prompt
                assert reply.any()
                torch.testing.assert_close(
                    row["log_probs", "full"][reply],
                    ref["log_probs", "full"][reply],
                    atol=1e-4,
                    rtol=1e-4,
                )
            trainer.load_state_dict(current)
            with torch.no_grad():  # a "training step"
                for p in trainer.parameters():
                    p.add_(torch.randn_like(p) * 0.05)
            snapshots[collector.policy_version + 1] = {
                k: v.clone() for k, v in trainer.state_dict().items()
            }
            collector.update_policy_weights_(trainer)
    assert collector.policy_version == 4
    assert torch.equal(policy.model.lm_head.weight, trainer.lm_head.weight)
