import pytest
import torch
from tensordict import TensorDict

from rl_envs import ExpandAs, PendulumEnv, TransformedEnv


def test_expands_to_the_right_like_unsqueeze_expand():
    done = torch.tensor([[True], [False]])
    obs = torch.zeros(2, 3, 4)
    out = ExpandAs("done", "obs", "wide")(TensorDict(done=done, obs=obs, batch_size=[2]))
    assert torch.equal(out["wide"], done.unsqueeze(-1).expand(2, 3, 4))
    with pytest.raises(KeyError, match="obs"):
        ExpandAs("done", "obs")(TensorDict(done=done, batch_size=[2]))


def test_in_an_env_a_renamed_done_becomes_an_observation():
    env = TransformedEnv(PendulumEnv(), ExpandAs("done", "observation", "done_obs"))
    assert env.observation_spec["done_obs"].shape == (3,)
    assert env.observation_spec["done_obs"].dtype == torch.bool
    td = env.reset()
    assert td["done_obs"].shape == (3,) and not td["done_obs"].any()
    r = env.rollout(3)
    assert torch.equal(r["next", "done_obs"], r["next", "done"].expand(3, 3))
