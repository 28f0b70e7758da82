"""ConditionalSkip: skipped steps leave the inner env and its transforms untouched."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Compose,
    ConditionalSkip,
    PendulumEnv,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    check_env_specs,
)


def _skip_odd(td):
    return td["step_count"] % 2 == 1


def test_skipped_steps_repeat_the_observation_and_do_not_count():
    inner = TransformedEnv(
        PendulumEnv(),
        Compose(StepCounter(step_count_key="inner_count"), ConditionalSkip(_skip_odd)),
    )
    env = TransformedEnv(inner, StepCounter(), auto_unwrap=False)
    check_env_specs(env)
    env.set_seed(0)
    r = env.rollout(8, policy=lambda td: td.set("action", torch.ones(1)))
    assert r["step_count"].flatten().tolist() == list(range(8))
    assert r["next", "inner_count"].flatten().tolist() == [1, 1, 2, 2, 3, 3, 4, 4]
    skipped = r["step_count"].flatten() % 2 == 1
    assert torch.equal(r["next", "observation"][skipped], r["observation"][skipped])
    assert (r["next", "reward"][skipped] == 0).all()
    assert not torch.equal(r["next", "observation"][~skipped], r["observation"][~skipped])


def test_batch_locked_env_steps_only_flagged_entries():
    base = SerialEnv(2, lambda: TransformedEnv(PendulumEnv(), StepCounter(step_count_key="inner")))

    def cond(td):  # env 0 skips odd steps, env 1 skips even ones
        return ((td["step_count"] + torch.tensor([[0], [1]])) % 2 == 1).squeeze(-1)

    env = TransformedEnv(
        TransformedEnv(base, ConditionalSkip(cond)), StepCounter(), auto_unwrap=False
    )
    r = env.rollout(6, policy=lambda td: td.set("action", torch.zeros(2, 1)))
    assert r["next", "inner"][0].flatten().tolist() == [1, 1, 2, 2, 3, 3]
    assert r["next", "inner"][1].flatten().tolist() == [0, 1, 1, 2, 2, 3]


def test_inverse_writes_the_step_mask_and_forward_refuses():
    t = ConditionalSkip(lambda td: torch.arange(td.numel()).view(td.shape) % 2 == 0)
    out = t._inv_call(TensorDict(batch_size=(2, 3)))
    assert out["_step"].tolist() == [[False, True, False], [True, False, True]]
    prior = TensorDict(_step=torch.tensor([True, False]), batch_size=[2])
    assert t._inv_call(prior)["_step"].tolist() == [False, False]
    with pytest.raises(NotImplementedError, match="parent environment"):
        Compose(t.clone())(TensorDict())
