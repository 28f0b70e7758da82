import pytest
import torch

from rl_envs import (
    Categorical,
    Composite,
    PendulumEnv,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    check_env_specs,
)


def make_counted(max_episode_steps=200):
    return TransformedEnv(PendulumEnv(max_episode_steps=max_episode_steps), StepCounter())


def test_specs_and_check():
    with SerialEnv(3, PendulumEnv) as env:
        assert env.batch_size == (3,)
        assert env.observation_spec["observation"].shape == (3, 3)
        assert env.action_spec.shape == (3, 1)
        check_env_specs(env)


def test_mixed_episode_lengths_auto_reset():
    horizons = [2, 3, 5]
    env = SerialEnv(3, make_counted, [{"max_episode_steps": h} for h in horizons])
    r = env.rollout(12, break_when_any_done=False)
    for row, h in enumerate(horizons):
        # plain reference: the count restarts after each episode of length h
        expected = torch.tensor([(t % h) + 1 for t in range(12)])
        assert torch.equal(r["next", "step_count"][row].squeeze(-1), expected)
        assert torch.equal(r["next", "done"][row].squeeze(-1), expected == h)
        assert torch.equal(r["step_count"][row].squeeze(-1), expected - 1)
    env.close()


def test_seeds_are_distinct_and_reproducible():
    env = SerialEnv(3, PendulumEnv)
    assert env.set_seed(10) == 13
    obs = env.reset()["observation"]
    for i in range(3):
        ref = PendulumEnv()
        ref.set_seed(10 + i)
        torch.testing.assert_close(obs[i], ref.reset()["observation"])
    assert not torch.equal(obs[0], obs[1])


def test_partial_reset_only_touches_flagged_envs():
    env = SerialEnv(2, make_counted)
    td = env.rand_step(env.reset())
    from rl_envs import step_mdp

    root = step_mdp(td)
    root["_reset"] = torch.tensor([[False], [True]])
    out = env.reset(root)
    assert out["step_count"].squeeze(-1).tolist() == [1, 0]
    torch.testing.assert_close(out["observation"][0], root["observation"][0])


def test_update_kwargs_close_and_context():
    env = SerialEnv(2, PendulumEnv, {"max_episode_steps": 3})
    env.update_kwargs({"max_episode_steps": 2})
    r = env.rollout(5, break_when_any_done=False)
    assert r["next", "done"][0].squeeze(-1).tolist() == [False, True, False, True, False]
    env.close()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_missing_action_is_named():
    env = SerialEnv(2, PendulumEnv)
    td = env.reset()
    with pytest.raises(KeyError, match="action"):
        env._step(td)


def _generic(env, steps, **kw):
    return env.rollout(steps, backend="generic", **kw)


@pytest.mark.parametrize("break_when_any_done", [False, True])
def test_fast_rollout_matches_generic_loop(break_when_any_done):
    env = SerialEnv(3, make_counted, [{"max_episode_steps": h} for h in (2, 3, 4)])
    env.set_seed(1)
    torch.manual_seed(1)
    fast = env.rollout(9, break_when_any_done=break_when_any_done)
    env.set_seed(1)
    torch.manual_seed(1)
    slow = _generic(env, 9, break_when_any_done=break_when_any_done)
    assert fast.shape == slow.shape
    assert set(fast.keys(True, True)) == set(slow.keys(True, True))
    assert (fast == slow).all()


def test_gym_numpy_step_matches_generic_step():
    pytest.importorskip("gymnasium")
    import functools

    from rl_envs import GymEnv

    env = SerialEnv(2, functools.partial(GymEnv, "Pendulum-v1", max_episode_steps=5))
    assert all(s is not None for s in env._group.steppers)
    env.set_seed(0)
    torch.manual_seed(0)
    fast = env.rollout(12, break_when_any_done=False)
    env._group.steppers = [None, None]  # force GymWrapper._step
    env.set_seed(0)
    torch.manual_seed(0)
    slow = env.rollout(12, break_when_any_done=False)
    assert (fast == slow).all()


def test_close_twice_raises_only_with_raise_if_closed():
    env = SerialEnv(2, PendulumEnv)
    assert not env.is_closed
    env.close()
    assert env.is_closed
    env.close(raise_if_closed=False)
    with pytest.raises(RuntimeError, match="trying to close a closed environment"):
        env.close(raise_if_closed=True)


def test_share_individual_td_is_accepted_and_changes_nothing():
    with SerialEnv(2, PendulumEnv, share_individual_td=True) as env:
        assert env.share_individual_td is True
        env.set_seed(0)
        torch.manual_seed(0)
        a = env.rollout(3)
    with SerialEnv(2, PendulumEnv) as env:
        env.set_seed(0)
        torch.manual_seed(0)
        torch.testing.assert_close(env.rollout(3)["observation"], a["observation"])


class _GradCounter(PendulumEnv):
    """Pendulum whose observations come out of a parameter (they require grad)."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(()))

    def _step(self, td):
        out = super()._step(td)
        return out.set("observation", out["observation"] * self.scale)


def test_sub_env_outputs_that_require_grad_are_copied_as_data():
    with SerialEnv(2, _GradCounter) as env:
        r = env.rollout(3)  # the buffers hold the values, not the graph
    assert (
        r["next", "observation"].shape == (2, 3, 3) and not r["next", "observation"].requires_grad
    )


class _AgentsOnlyDone(PendulumEnv):
    """Pendulum whose done flags live under ("agents", ...) only."""

    def __init__(self):
        super().__init__(max_episode_steps=2)
        self.done_spec = Composite(
            agents=Composite(done=Categorical(2, shape=(1,), dtype=torch.bool))
        )

    def _reset(self, td):
        out = super()._reset(td)
        return out.exclude("done", "terminated", "truncated")

    def _step(self, td):
        out = super()._step(td)
        return out.set(("agents", "done"), out.pop("done")).exclude("terminated", "truncated")


def test_fast_rollout_with_nested_done_flags_only():
    with SerialEnv(2, _AgentsOnlyDone) as env:
        r = env.rollout(5, break_when_any_done=False)
    assert r["next", "agents", "done"][0].squeeze(-1).tolist() == [False, True, False, True, False]


def test_mp_start_method_is_accepted_and_unused():
    with SerialEnv(2, PendulumEnv, mp_start_method="spawn") as env:
        assert env.reset().batch_size == (2,)


def test_a_gymenv_subclass_overriding_step_is_stepped_through_its_override():
    pytest.importorskip("gymnasium")
    from rl_envs import GymEnv

    class DoubledReward(GymEnv):
        def _step(self, tensordict):
            out = super()._step(tensordict)
            out["reward"] = out["reward"] * 2
            return out

    rewards = []
    for cls in (GymEnv, DoubledReward):
        env = SerialEnv(2, lambda cls=cls: cls("Pendulum-v1"))
        env.set_seed(0)
        td = env.reset()
        td["action"] = torch.full((2, 1), 0.5)
        rewards.append(env.step(td)["next", "reward"])
        env.close()
    torch.testing.assert_close(rewards[1], 2 * rewards[0])
