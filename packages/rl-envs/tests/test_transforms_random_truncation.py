import pytest
import torch

from rl_envs import (
    Compose,
    PendulumEnv,
    RandomTruncationTransform,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    check_env_specs,
)


def _env(n, **kwargs):
    t = RandomTruncationTransform(**kwargs)
    return TransformedEnv(SerialEnv(n, PendulumEnv), Compose(StepCounter(), t)), t


def test_each_env_stops_at_its_own_horizon():
    torch.manual_seed(0)
    env, t = _env(6, min_horizon=2, max_horizon=7, prob=1.0)
    td = env.reset()
    horizons = t._horizons.squeeze(-1).clone()  # redrawn when an env resets
    r = env.rollout(6, break_when_any_done=False, auto_reset=False, tensordict=td)
    assert ((horizons >= 1) & (horizons <= 7)).all() and horizons.unique().numel() > 1
    count, truncated = r["next", "step_count"].squeeze(-1), r["next", "truncated"].squeeze(-1)
    # the first episode ends exactly when the count reaches the env's horizon
    first = (count >= horizons[:, None]).float().argmax(-1)
    for i in range(6):
        if horizons[i] <= 6:
            assert truncated[i, first[i]] and not truncated[i, : first[i]].any()
        else:
            assert not truncated[i].any()
    check_env_specs(env)


def test_later_resets_use_the_full_horizon_when_prob_is_zero():
    torch.manual_seed(0)
    env, t = _env(4, min_horizon=1, max_horizon=3, prob=0.0)
    env.rollout(8, break_when_any_done=False)
    reset = ~t._first_episode.squeeze(-1)
    assert reset.any() and (t._horizons.squeeze(-1)[reset] == 3).all()


def test_needs_a_step_counter_and_valid_arguments():
    with pytest.raises(RuntimeError, match="requires a StepCounter"):
        TransformedEnv(PendulumEnv(), RandomTruncationTransform(1, 5))
    with pytest.raises(ValueError, match="prob must be in"):
        RandomTruncationTransform(1, 5, prob=1.5)
    with pytest.raises(ValueError, match="must be <= max_horizon"):
        RandomTruncationTransform(6, 5)
    with pytest.raises(NotImplementedError):
        RandomTruncationTransform(1, 5)(None)
