import pytest
import torch
from tensordict import TensorDict

from rl_envs import ActionScaling, Bounded, PendulumEnv, TransformedEnv, Unbounded


def test_from_stats_and_the_two_ranges_match_the_affine_formulas():
    mean, std = torch.tensor([2.0, -1.0]), torch.tensor([3.0, 0.5])
    t = ActionScaling.from_stats(mean=mean, std=std)
    a = torch.tensor([[5.0, -1.5], [2.0, 0.0]])
    torch.testing.assert_close(t.normalize(a), (a - mean) / std)
    torch.testing.assert_close(t.denormalize(t.normalize(a)), a)
    low, high = torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 10.0])
    r = ActionScaling.from_stats(low=low, high=high, standard_normal=False)
    torch.testing.assert_close(
        r.normalize(torch.stack([low, high])), torch.tensor([[0.0, 0], [1, 1]])
    )
    with pytest.raises(ValueError, match="exactly one"):
        ActionScaling.from_stats()
    with pytest.raises(ValueError, match="together"):
        ActionScaling.from_stats(mean=mean)


def test_env_spec_derived_or_mapped_and_forward_normalises_samples():
    base = PendulumEnv()  # action in [-2, 2]
    derived = TransformedEnv(base, ActionScaling(standard_normal=False))
    assert (
        derived.action_spec.space.low.item() == 0.0 and derived.action_spec.space.high.item() == 1.0
    )
    mapped = TransformedEnv(PendulumEnv(), ActionScaling(loc=0.0, scale=4.0))
    assert mapped.action_spec.space.high.item() == 0.5  # 2 / 4
    unbounded = PendulumEnv()
    unbounded.action_spec = Unbounded(shape=(1,))
    kept = TransformedEnv(unbounded, ActionScaling(loc=1.0, scale=3.0))
    assert isinstance(kept.action_spec, Unbounded)
    sample = ActionScaling(loc=1.0, scale=2.0)(TensorDict(action=torch.tensor([3.0])))
    assert sample["action"].item() == 1.0


def test_argument_errors():
    with pytest.raises(ValueError, match="loc and scale"):
        ActionScaling(loc=1.0)
    with pytest.raises(ValueError, match="zeros"):
        ActionScaling(loc=0.0, scale=0.0)
    with pytest.raises(ValueError, match="single action key"):
        ActionScaling(in_keys_inv=["a", "b"])
    with pytest.raises(ValueError, match="forward-only"):
        ActionScaling(in_keys_inv=[])
    spec = Bounded(low=float("-inf"), high=1.0, shape=(1,))
    env = PendulumEnv()
    env.action_spec = spec
    with pytest.raises(RuntimeError, match="finite"):
        TransformedEnv(env, ActionScaling())
