"""Partial steps (``"_step"``) and ``use_buffers=False`` of EnvBase, SerialEnv, ParallelEnv."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict import assert_close as assert_td_close

from rl_envs import Composite, EnvBase, ParallelEnv, SerialEnv, Unbounded
from rl_envs.specs import NonTensor


class Counter(EnvBase):
    """count += action; observation = count. Counts its ``_step`` calls."""

    def __init__(self, start=2.0, batch_size=()):
        super().__init__(batch_size=batch_size)
        self.observation_spec = Composite(observation=Unbounded(shape=(1,)))
        self.action_spec = Unbounded(shape=(1,))
        self.start = start
        self.count = torch.full((*self.batch_size, 1), start)
        self.calls = 0

    def _reset(self, td):
        self.count = torch.full((*self.batch_size, 1), self.start)
        return TensorDict(observation=self.count.clone(), batch_size=self.batch_size)

    def _step(self, td):
        self.calls += 1
        self.count = self.count + td["action"]
        return TensorDict(
            observation=self.count.clone(),
            reward=torch.ones(*self.batch_size, 1),
            terminated=torch.zeros(*self.batch_size, 1, dtype=torch.bool),
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


class Texts(Counter):
    """Counter with a non-tensor observation: only use_buffers=False can batch it."""

    def __init__(self):
        super().__init__()
        self.observation_spec["text"] = NonTensor(shape=())

    def _reset(self, td):
        return super()._reset(td).set_non_tensor("text", "start")

    def _step(self, td):
        return super()._step(td).set_non_tensor("text", f"at {int(self.count.item())}")


MASK = torch.tensor([False, True, False, True])


def test_all_false_mask_skips_the_step():
    env = Counter(batch_size=(4,))
    td = env.reset().set("action", torch.ones(4, 1)).set("_step", torch.zeros(4, dtype=bool))
    out = env.step(td)
    assert env.calls == 0
    assert torch.equal(out["next", "observation"], torch.full((4, 1), 2.0))
    assert torch.equal(out["next", "reward"], torch.zeros(4, 1))
    assert not out["next", "done"].any()
    assert "_step" not in out.keys()  # noqa: SIM118


def test_all_true_mask_is_a_plain_step():
    env = Counter(batch_size=(4,))
    out = env.step(env.reset().set("action", torch.ones(4, 1)).set("_step", ~MASK | MASK))
    assert env.calls == 1 and torch.equal(out["next", "observation"], torch.full((4, 1), 3.0))


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
@pytest.mark.parametrize("use_buffers", [True, False])
def test_batched_partial_step_steps_only_flagged_sub_envs(cls, use_buffers):
    with cls(4, Counter, use_buffers=use_buffers) as env:
        assert env.use_buffers is use_buffers
        td = env.reset().set("action", torch.ones(4, 1)).set("_step", MASK.clone())
        out, root = env.step_and_maybe_reset(td)
        # skipped rows: observation carried over, zero reward; stepped rows: 2 + 1
        assert out["next", "observation"].squeeze(-1).tolist() == [2.0, 3.0, 2.0, 3.0]
        assert out["next", "reward"].squeeze(-1).tolist() == [0.0, 1.0, 0.0, 1.0]
        assert "_step" not in root.keys()  # noqa: SIM118
        # the skipped sub-envs did not advance: a full step adds 1 to every count
        nxt = env.step(root.set("action", torch.ones(4, 1)))
        assert nxt["next", "observation"].squeeze(-1).tolist() == [3.0, 4.0, 3.0, 4.0]


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_unbuffered_rollout_equals_buffered(cls):
    outs = []
    for use_buffers in (True, False):
        with cls(3, Counter, use_buffers=use_buffers) as env:
            policy = lambda td: td.set("action", torch.arange(3.0).unsqueeze(-1))  # noqa: E731
            outs.append(env.rollout(4, policy))
    assert_td_close(outs[0], outs[1])
    # plain reference: row i counts 2 + i * t
    expected = 2.0 + torch.arange(3.0).unsqueeze(-1) * torch.arange(1.0, 5.0)
    assert torch.equal(outs[1]["next", "observation"].squeeze(-1), expected)


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
@pytest.mark.parametrize("use_buffers", [None, True])
def test_non_tensor_observations_never_use_buffers(cls, use_buffers):
    with cls(2, Texts, use_buffers=use_buffers) as env:
        assert env.use_buffers is False
        td = env.reset()
        assert td.batch_size == (2,) and td["text"] == ["start", "start"]
        td = env.step(td.set("action", torch.tensor([[1.0], [2.0]])))
        assert td["next", "text"] == ["at 3", "at 4"]
        assert isinstance(td["next"], TensorDict | LazyStackedTensorDict)


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_unbuffered_partial_reset_keeps_the_other_rows(cls):
    with cls(2, Texts) as env:
        td = env.step(env.reset().set("action", torch.tensor([[1.0], [4.0]])))
        root = td["next"].exclude("reward").set("_reset", torch.tensor([[True], [False]]))
        out = env.reset(root)
        assert out["text"] == ["start", "at 6"]
        assert out["observation"].squeeze(-1).tolist() == [2.0, 6.0]
