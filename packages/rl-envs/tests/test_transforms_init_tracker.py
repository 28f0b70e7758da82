import torch

from rl_envs import InitTracker, PendulumEnv, StepCounter, TransformedEnv, check_env_specs


def test_marks_first_step_of_each_trajectory():
    env = TransformedEnv(PendulumEnv(batch_size=[2]), StepCounter(max_steps=3))
    env.append_transform(InitTracker())
    r = env.rollout(7, break_when_any_done=False)
    expected = torch.tensor([True, False, False, True, False, False, True]).expand(2, 7)
    assert torch.equal(r["is_init"].squeeze(-1), expected)
    assert not r["next", "is_init"].any()
    assert env.observation_spec["is_init"].dtype == torch.bool
    check_env_specs(env)


def test_partial_reset_marks_only_reset_entries():
    env = TransformedEnv(PendulumEnv(batch_size=[3]), InitTracker())
    td = env.reset()
    td = env.rand_step(td)
    from rl_envs import step_mdp

    root = step_mdp(td)
    root.set("_reset", torch.tensor([[False], [True], [False]]))
    out = env.reset(root)
    assert out["is_init"].squeeze(-1).tolist() == [False, True, False]
