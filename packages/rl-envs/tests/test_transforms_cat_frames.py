import pytest
import torch
from tensordict import TensorDict

from rl_envs import CatFrames, PendulumEnv, StepCounter, TransformedEnv, check_env_specs


def test_in_env_stacks_last_frames():
    env = TransformedEnv(PendulumEnv(batch_size=[2]), StepCounter(max_steps=3))
    env.append_transform(CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["stack"]))
    assert env.observation_spec["stack"].shape == (2, 9)
    r = env.rollout(6, break_when_any_done=False)
    obs, nobs = r["observation"], r["next", "observation"]
    # hand-built expectation for row 0, step 1 (second step of the first episode)
    expected = torch.cat([obs[0, 0], obs[0, 0], nobs[0, 0], nobs[0, 1]][1:], -1)
    torch.testing.assert_close(r["next", "stack"][0, 1], expected)
    # after the reset at step 3 the buffer is refilled with the first frame
    torch.testing.assert_close(r["stack"][0, 3], obs[0, 3].repeat(3))
    check_env_specs(env)


@pytest.mark.parametrize("padding", ["same", "constant"])
def test_on_trajectories_respects_episode_ends(padding):
    obs = torch.arange(1.0, 6.0).reshape(1, 5, 1)  # frames 1..5
    done = torch.tensor([[False, True, False, False, False]]).unsqueeze(-1)
    td = TensorDict(obs=obs, next=TensorDict(done=done, batch_size=[1, 5]), batch_size=[1, 5])
    out = CatFrames(N=2, dim=-1, in_keys=["obs"], padding=padding)(td)["obs"][0]
    pad = 1.0 if padding == "same" else 0.0
    first_of_ep2 = 3.0 if padding == "same" else 0.0
    expected = torch.tensor([[pad, 1.0], [1.0, 2.0], [first_of_ep2, 3.0], [3.0, 4.0], [4.0, 5.0]])
    torch.testing.assert_close(out, expected)


def test_errors():
    with pytest.raises(ValueError, match="negative"):
        CatFrames(N=2, dim=1)
    with pytest.raises(KeyError, match="'pixels'"):
        CatFrames(N=2, dim=-3)._reset(TensorDict(), TensorDict(obs=torch.zeros(1)))
