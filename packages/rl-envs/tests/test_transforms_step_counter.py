import pytest
import torch
from tensordict import TensorDict

from rl_envs import PendulumEnv, StepCounter, TransformedEnv, check_env_specs


@pytest.mark.parametrize("batch", [(), (3,)])
def test_counts_and_truncates(batch):
    env = TransformedEnv(PendulumEnv(batch_size=batch), StepCounter(max_steps=4))
    env.set_seed(0)
    r = env.rollout(10, break_when_any_done=False)
    counts = r["next", "step_count"].reshape(*batch, 10)
    expected = torch.tensor([1, 2, 3, 4, 1, 2, 3, 4, 1, 2]).expand(*batch, 10)
    assert torch.equal(counts, expected)
    truncated = r["next", "truncated"].reshape(*batch, 10)
    assert torch.equal(truncated, expected == 4)
    assert torch.equal(r["next", "done"].reshape(*batch, 10), expected == 4)
    assert torch.equal(r["step_count"].reshape(*batch, 10), expected - 1)


def test_spec_and_check_env_specs():
    env = TransformedEnv(PendulumEnv(batch_size=[2]), StepCounter(max_steps=7))
    spec = env.observation_spec["step_count"]
    assert spec.dtype == torch.int64 and spec.shape == (2, 1)
    assert env.state_spec["step_count"].shape == (2, 1)
    check_env_specs(env)


def test_partial_reset_keeps_other_counts():
    env = TransformedEnv(PendulumEnv(batch_size=[2]), StepCounter())
    td = env.reset()
    for _ in range(3):
        td = env.rand_step(td)
        from rl_envs import step_mdp

        td = step_mdp(td)
    td.set("_reset", torch.tensor([[True], [False]]))
    out = env.reset(td)
    assert out["step_count"].squeeze(-1).tolist() == [0, 3]


def test_missing_step_count_names_key():
    t = StepCounter()
    with pytest.raises(KeyError, match="step_count"):
        t._step(TensorDict(), TensorDict(done=torch.zeros(1, dtype=torch.bool)))


def test_invalid_max_steps():
    with pytest.raises(ValueError, match="max_steps"):
        StepCounter(max_steps=0)
