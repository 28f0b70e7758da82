import pytest
import torch
from tensordict import TensorDict

from rl_envs import ModuleTransform, PendulumEnv, TransformedEnv, Unbounded


class Affine(torch.nn.Module):
    """A TensorDict module: ``out = 2 * x + 1`` on one key."""

    def __init__(self, key_in, key_out):
        super().__init__()
        self.in_keys, self.out_keys = [key_in], [key_out]

    def forward(self, td):
        return td.set(self.out_keys[0], 2 * td[self.in_keys[0]] + 1)


def test_module_runs_on_outputs_and_specs_follow_the_edit():
    x = torch.randn(4, 3)
    out = ModuleTransform(module=Affine("x", "y"))(TensorDict(x=x, batch_size=[4]))
    torch.testing.assert_close(out["y"], 2 * x + 1)
    env = TransformedEnv(
        PendulumEnv(),
        ModuleTransform(
            module_factory=lambda: Affine("observation", "feat"),
            observation_spec_transform=lambda s: s.set("feat", Unbounded(shape=(3,))),
        ),
    )
    td = env.reset()
    torch.testing.assert_close(td["feat"], 2 * td["observation"] + 1)
    assert "feat" in env.observation_spec


def test_inverse_module_maps_actions_on_their_way_in():
    seen = []

    class Record(PendulumEnv):
        def _step(self, td):
            seen.append(td["action"].clone())
            return super()._step(td)

    env = TransformedEnv(Record(), ModuleTransform(module=Affine("action", "action"), inverse=True))
    td = env.reset().set("action", torch.tensor([0.25]))
    env.step(td)
    torch.testing.assert_close(seen[-1], torch.tensor([1.5]))
    assert td["action"].item() == 0.25  # the caller's action is left as it was


def test_exactly_one_of_module_or_factory():
    with pytest.raises(ValueError, match="exactly one"):
        ModuleTransform()
    with pytest.raises(ValueError, match="exactly one"):
        ModuleTransform(module=Affine("a", "b"), module_factory=lambda: Affine("a", "b"))
