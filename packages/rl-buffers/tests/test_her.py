import pytest
import torch
from tensordict import TensorDict

from rl_buffers import HERReplayBuffer, LazyTensorStorage


def _episodes():
    # two episodes of 4 and 3 steps; achieved goals are distinct numbers
    done = torch.tensor([0, 0, 0, 1, 0, 0, 1], dtype=torch.bool).unsqueeze(-1)
    achieved = torch.arange(7.0).unsqueeze(-1) * 10
    return TensorDict({"desired_goal": torch.full((7, 1), -1.0), "achieved_goal": achieved - 10,
                       "next": {"achieved_goal": achieved, "reward": torch.zeros(7, 1), "done": done}},
                      batch_size=[7])  # fmt: skip


def reward_fn(td):
    return (td["next", "achieved_goal"] == td["desired_goal"]).float()


@pytest.mark.parametrize("strategy", ["final", "future", "episode", "random"])
def test_relabelling_against_reference(strategy):
    torch.manual_seed(0)
    rb = HERReplayBuffer(reward_fn, her_ratio=1.0, strategy=strategy, storage=LazyTensorStorage(20))
    rb.extend(_episodes())
    s = rb.sample(500)
    episode = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    first, last = torch.tensor([0, 4]), torch.tensor([3, 6])
    goal_step = (s["desired_goal"].squeeze(-1) / 10).long()
    i = s["index"]
    if strategy == "final":
        assert torch.equal(goal_step, last[episode[i]])
    elif strategy == "future":
        assert ((goal_step >= i) & (goal_step <= last[episode[i]])).all()
    elif strategy == "episode":
        assert ((goal_step >= first[episode[i]]) & (goal_step <= last[episode[i]])).all()
    else:
        assert goal_step.unique().numel() == 7
    expected = (goal_step == i).float().unsqueeze(-1)
    assert torch.equal(s["next", "reward"], expected)


def test_her_ratio_zero_keeps_goals():
    rb = HERReplayBuffer(reward_fn, her_ratio=0.0, storage=LazyTensorStorage(20))
    rb.extend(_episodes())
    s = rb.sample(50)
    assert (s["desired_goal"] == -1).all() and not s["her_relabelled"].any()
    with pytest.raises(ValueError, match="her_ratio"):
        HERReplayBuffer(reward_fn, her_ratio=1.5, storage=LazyTensorStorage(20))


def test_relabels_the_first_her_ratio_of_the_batch_and_names_missing_goals():
    rb = HERReplayBuffer(reward_fn, her_ratio=0.75, strategy="final", storage=LazyTensorStorage(20))
    rb.extend(_episodes())
    assert rb.sample(8)["her_relabelled"].tolist() == [True] * 6 + [False] * 2
    assert "final" in repr(rb) and "desired_goal" in repr(rb)
    bad = HERReplayBuffer(reward_fn, goal_key="goal", storage=LazyTensorStorage(20))
    bad.extend(_episodes())
    with pytest.raises(KeyError, match="goal_key"):
        bad.sample(4)
