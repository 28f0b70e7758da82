"""rl_objectives calls the recipes' rl_modules networks directly: one eligibility rule, checked
against the plain module call (bit-equal outputs and distributions)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from rl_modules import MLP, Actor, ProbabilisticActor, SafeModule, TanhNormal, ValueOperator
from rl_objectives._nets import direct_call_eligible, dist_of, output_of


class _Box:
    """A spec-like bounded box."""

    shape = torch.Size([2])
    dtype = torch.float32
    device = torch.device("cpu")
    space = type("Space", (), {"low": -torch.ones(2), "high": torch.ones(2)})()

    def project(self, value: torch.Tensor) -> torch.Tensor:
        return value.clamp(-1, 1)


def _data(n: int = 5) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    return TensorDict(
        observation=torch.randn(n, 3, generator=g) * 5,
        action=torch.rand(n, 2, generator=g) * 2 - 1,
        batch_size=[n],
    )


def _modules() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    return {
        "TensorDictModule": TensorDictModule(nn.Linear(3, 1), ["observation"], ["state_value"]),
        "ValueOperator": ValueOperator(MLP(3, 1, num_cells=[8]), in_keys=["observation"]),
        "ValueOperator(s, a)": ValueOperator(
            MLP(5, 1, num_cells=[8]), in_keys=["observation", "action"]
        ),
        "Actor": Actor(MLP(3, 2, num_cells=[8])),
        "SafeModule": SafeModule(nn.Linear(3, 2), ["observation"], ["action"], spec=_Box()),
    }


@pytest.mark.parametrize("name", list(_modules()))
def test_rl_modules_networks_are_eligible_and_bit_equal_to_the_module_call(name):
    module = _modules()[name]
    assert direct_call_eligible(module)
    td = _data()
    key = module.out_keys[0]
    expected = module(td.clone())[key]
    assert torch.equal(output_of(module, td, key), expected)
    # an override (a fresh action) replaces the data's entry in both paths
    if "action" in module.in_keys:
        fresh = torch.zeros(5, 2)
        expected = module(td.clone().set("action", fresh))[key]
        assert torch.equal(output_of(module, td, key, overrides={"action": fresh}), expected)


def test_a_recipe_actor_is_eligible_and_its_distribution_is_the_get_dist_one():
    torch.manual_seed(0)
    body = nn.Sequential(MLP(3, 4, num_cells=[8]), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(body, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        spec=_Box(),
        return_log_prob=True,
    )
    assert direct_call_eligible(actor)
    td = _data()
    direct, plain = dist_of(actor, td), actor.get_dist(td.clone())
    assert type(direct) is type(plain)
    action = td["action"].clamp(-0.99, 0.99)
    assert torch.equal(direct.log_prob(action), plain.log_prob(action))
    assert torch.equal(direct.deterministic_sample, plain.deterministic_sample)


def test_modules_that_change_their_outputs_run_their_own_forward():
    safe = ValueOperator(MLP(3, 1, num_cells=[8]))
    safe_projecting = SafeModule(
        nn.Linear(3, 2), ["observation"], ["action"], spec=_Box(), safe=True
    )
    assert not direct_call_eligible(safe_projecting)
    td = _data()
    # the projection happens: the result is the module's own, inside the box
    out = output_of(safe_projecting, td, "action")
    assert torch.equal(out, safe_projecting(td.clone())["action"])
    assert out.abs().max() <= 1

    class Doubled(TensorDictModule):
        def forward(self, tensordict):
            out = super().forward(tensordict)
            return out.set("state_value", 2 * out["state_value"])

    doubled = Doubled(nn.Linear(3, 1), ["observation"], ["state_value"])
    assert not direct_call_eligible(doubled)
    assert torch.equal(output_of(doubled, td, "state_value"), doubled(td.clone())["state_value"])
    # a forward hook makes a module ineligible too
    handle = safe.register_forward_hook(lambda mod, args, out: out)
    assert not direct_call_eligible(safe)
    handle.remove()
    assert direct_call_eligible(safe)
