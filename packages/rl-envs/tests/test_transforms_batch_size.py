"""BatchSizeTransform: reshaped batch dims, or a fixed batch for a batch-unlocked env."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    BatchSizeTransform,
    Composite,
    EnvBase,
    PendulumEnv,
    SerialEnv,
    TransformedEnv,
    Unbounded,
    check_env_specs,
)


class Stateless(EnvBase):
    """Batch-unlocked: observation = the action repeated 3 times, reward = -action."""

    batch_locked = False

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(3))
        self.action_spec = Unbounded(1)

    def _reset(self, tensordict, **kwargs):
        batch = tensordict.batch_size if tensordict is not None else torch.Size([])
        out = self.observation_spec.zero(batch)
        out.update(self.full_done_spec.zero(batch))
        return out

    def _step(self, tensordict):
        action = tensordict["action"]
        out = TensorDict(
            observation=action.expand(*action.shape[:-1], 3), batch_size=tensordict.batch_size
        )
        out["reward"] = -action
        out.update(self.full_done_spec.zero(tensordict.batch_size))
        return out

    def _set_seed(self, seed):
        return None


@pytest.mark.parametrize(
    "make_base, fn, expected",
    [
        (PendulumEnv, lambda x: x.reshape(1, 1), (1, 1)),
        (PendulumEnv, lambda x: x.unsqueeze(0), (1,)),
        (lambda: SerialEnv(2, PendulumEnv), lambda x: x.unflatten(0, (1, 2)), (1, 2)),
        (lambda: SerialEnv(1, PendulumEnv), lambda x: x.squeeze(0), ()),
    ],
)
def test_reshape_fn_sets_batch_specs_and_data(make_base, fn, expected):
    env = TransformedEnv(make_base(), BatchSizeTransform(reshape_fn=fn))
    assert env.batch_size == torch.Size(expected)
    assert env.full_observation_spec.shape == torch.Size(expected)
    assert env.full_action_spec["action"].shape == torch.Size([*expected, 1])
    check_env_specs(env)
    assert env.rollout(3).shape == torch.Size([*expected, 3])


def test_reshape_fn_actions_reach_the_inner_env_in_its_layout():
    base = SerialEnv(2, PendulumEnv)
    env = TransformedEnv(base, BatchSizeTransform(reshape_fn=lambda x: x.reshape(2, 1)))
    td = env.reset()
    td["action"] = torch.tensor([[[1.0]], [[-2.0]]])
    seen = {}
    step = base._step

    def spy(tensordict):
        seen["action"] = tensordict["action"].clone()
        return step(tensordict)

    base._step = spy
    out = env.step(td)
    assert torch.equal(seen["action"], torch.tensor([[1.0], [-2.0]]))
    assert out["next", "observation"].shape == torch.Size([2, 1, 3])


def test_batch_size_expands_a_stateless_env():
    env = TransformedEnv(Stateless(), BatchSizeTransform(batch_size=[4]))
    assert env.batch_size == torch.Size([4])
    data = env.rollout(2, policy=lambda td: td.set("action", torch.arange(4.0).view(4, 1)))
    assert data.shape == torch.Size([4, 2])
    assert torch.equal(data["next", "reward"][:, 0], -torch.arange(4.0).view(4, 1))
    check_env_specs(env)


def test_reset_func_builds_the_reset_output():
    calls = []

    def reset_func(tensordict, tensordict_reset, env):
        calls.append(env)
        out = env.full_observation_spec.zero()
        out.update(env.full_done_spec.zero())
        return out

    t = BatchSizeTransform(batch_size=[3], reset_func=reset_func, env_kwarg=True)
    env = TransformedEnv(Stateless(), t)
    assert env.reset().batch_size == torch.Size([3])
    assert calls == [env]


def test_outside_an_env_and_errors():
    t = BatchSizeTransform(reshape_fn=lambda x: x.reshape(1, -1))
    td = TensorDict(a=torch.zeros(6), batch_size=[6])
    assert t(td).batch_size == torch.Size([1, 6])
    assert t.inv(td).batch_size == torch.Size([6])
    with pytest.raises(ValueError, match="one and only one"):
        BatchSizeTransform()
    with pytest.raises(ValueError, match="one and only one"):
        BatchSizeTransform(batch_size=[2], reshape_fn=lambda x: x)
