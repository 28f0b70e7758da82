import pytest
import torch
from tensordict import TensorDict

from rl_envs import Composite, EnvBase, Stack, TransformedEnv, Unbounded, check_env_specs


class TwoAgents(EnvBase):
    """Two agents with identical specs under different keys; records the actions it reads."""

    def __init__(self):
        super().__init__()
        agent = Composite(obs=Unbounded(shape=(3,)))
        self.observation_spec = Composite(a0=agent.clone(), a1=agent.clone())
        self.action_spec = Composite(
            a0=Composite(act=Unbounded(shape=(2,))), a1=Composite(act=Unbounded(shape=(2,)))
        )
        self.seen = []

    def _reset(self, td):
        return TensorDict({("a0", "obs"): torch.zeros(3), ("a1", "obs"): torch.ones(3)})

    def _step(self, td):
        self.seen.append((td["a0", "act"].clone(), td["a1", "act"].clone()))
        out = self._reset(td)
        out.set("reward", torch.zeros(1))
        out.set("done", torch.zeros(1, dtype=torch.bool))
        return out

    def _set_seed(self, seed):
        return seed


def test_stack_matches_torch_stack_and_inverts():
    a, b, c = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
    td = TensorDict(a=a, b=b, c=c, batch_size=[2])
    t = Stack(["a", "b"], "ab", in_key_inv="ab", out_keys_inv=["a", "b"], dim=-2)
    out = t(td.clone())
    assert torch.equal(out["ab"], torch.stack([a, b], -2)) and set(out.keys()) == {"ab", "c"}
    back = t.inv(out)
    assert torch.equal(back["a"], a) and torch.equal(back["b"], b) and "ab" not in back


def test_stacked_agents_in_an_env():
    base = TwoAgents()
    env = TransformedEnv(
        base, Stack(["a0", "a1"], "agents", in_key_inv="agents", out_keys_inv=["a0", "a1"])
    )
    # sub-TensorDicts stack along their batch dims: one row per agent
    assert env.observation_spec["agents", "obs"].shape == (2, 3)
    assert env.full_action_spec["agents", "act"].shape == (2, 2)
    td = env.reset()
    assert torch.equal(td["agents", "obs"], torch.stack([torch.zeros(3), torch.ones(3)]))
    assert "a0" not in td
    act = torch.arange(4.0).view(2, 2)
    env.step(td.set(("agents", "act"), act))
    assert torch.equal(base.seen[-1][0], act[0]) and torch.equal(base.seen[-1][1], act[1])
    check_env_specs(env)


def test_stack_argument_errors():
    with pytest.raises(ValueError, match="negative"):
        Stack(["a", "b"], "c", dim=0)
    with pytest.raises(ValueError, match="in_key_inv"):
        Stack(["a", "b"], "c", out_keys_inv=["a", "b"])
    with pytest.raises(ValueError, match="cannot be in in_keys"):
        Stack(["a", "b"], "a")
