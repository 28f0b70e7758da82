import pytest
import torch
from tensordict import TensorDict

from rl_envs import Composite, DiscreteActionProjection, EnvBase, OneHot, TransformedEnv, Unbounded


class ThreeActions(EnvBase):
    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(shape=(1,)))
        self.action_spec = OneHot(3)
        self.seen = []

    def _reset(self, td):
        return TensorDict(observation=torch.zeros(1))

    def _step(self, td):
        self.seen.append(td["action"].clone())
        return TensorDict(
            observation=torch.zeros(1), reward=torch.zeros(1), done=torch.zeros(1, dtype=bool)
        )

    def _set_seed(self, seed):
        return seed


def test_inverse_keeps_valid_actions_and_redraws_the_others():
    torch.manual_seed(0)
    index = torch.randint(8, (500,))
    wide = torch.nn.functional.one_hot(index, 8)
    out = DiscreteActionProjection(5, 8).inv(TensorDict(action=wide, batch_size=[500]))["action"]
    assert out.shape == (500, 5) and (out.sum(-1) == 1).all()
    kept = index < 5
    assert torch.equal(out[kept].argmax(-1), index[kept])
    redrawn = out[~kept].argmax(-1)
    assert set(redrawn.tolist()) == set(range(5))  # uniform among the valid actions


def test_forward_widens_and_env_sees_narrow_actions():
    narrow = torch.nn.functional.one_hot(torch.tensor([2, 0]), 3)
    out = DiscreteActionProjection(3, 6)(TensorDict(action=narrow, batch_size=[2]))["action"]
    assert torch.equal(out, torch.nn.functional.one_hot(torch.tensor([2, 0]), 6))
    kept = DiscreteActionProjection(3, 6, include_forward=False)(TensorDict(action=narrow))
    assert kept["action"].shape == (2, 3)
    base = ThreeActions()
    env = TransformedEnv(base, DiscreteActionProjection(3, 6))
    assert env.action_spec.space.n == 6
    td = env.reset().set("action", torch.nn.functional.one_hot(torch.tensor(1), 6))
    env.step(td)
    assert torch.equal(base.seen[-1], torch.tensor([0, 1, 0])) and td["action"].shape == (6,)
    with pytest.raises(RuntimeError, match="max_actions"):
        DiscreteActionProjection(4, 3)
    with pytest.raises(RuntimeError, match="must match"):
        env.transform.inv(TensorDict(action=torch.zeros(3)))
