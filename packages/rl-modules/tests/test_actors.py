"""Actors, value operators, actor-critic containers and exploration types."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from rl_modules import (
    MLP,
    Actor,
    ActorCriticOperator,
    ActorCriticWrapper,
    ActorValueOperator,
    ExplorationType,
    IndependentNormal,
    ProbabilisticActor,
    SafeModule,
    TanhDelta,
    TanhNormal,
    TruncatedNormal,
    ValueOperator,
    set_exploration_type,
)

_spec = importlib.util.spec_from_file_location(
    "_specs", pathlib.Path(__file__).with_name("_specs.py")
)
specs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(specs)


def _tanh_actor(spec=None, **kwargs):
    torch.manual_seed(0)
    net = nn.Sequential(MLP(in_features=3, out_features=4, num_cells=[16]), NormalParamExtractor())
    return ProbabilisticActor(
        TensorDictModule(net, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        spec=spec,
        distribution_class=TanhNormal,
        **kwargs,
    )


def test_probabilistic_actor_bounds_from_spec_and_log_prob():
    spec = specs.BoxSpec(torch.tensor([0.0, -5.0]), torch.tensor([1.0, 5.0]))
    actor = _tanh_actor(spec, return_log_prob=True)
    td = TensorDict(observation=torch.randn(2000, 3) * 3, batch_size=[2000])
    with set_exploration_type(ExplorationType.RANDOM):
        td = actor(td)
    a = td["action"]
    assert spec.is_in(a)
    assert a[:, 1].abs().max() > 1.0  # really uses the spec's wider bound
    # log-prob written under action_log_prob, equal to the change-of-variables density.
    loc, scale = td["loc"].double(), td["scale"].double()
    low, high = spec.space.low.double(), spec.space.high.double()
    u = (2 * a.double() - (high + low)) / (high - low)
    x = torch.atanh(u.clamp(-1 + 1e-7, 1 - 1e-7))
    ref = (
        torch.distributions.Normal(loc, scale).log_prob(x)
        - torch.log((high - low) / 2 * (1 - u**2))
    ).sum(-1)
    ok = u.abs().max(-1).values < 0.999  # away from float32 saturation
    torch.testing.assert_close(td["action_log_prob"].double()[ok], ref[ok], rtol=1e-3, atol=1e-3)


def test_probabilistic_actor_exploration_types():
    actor = _tanh_actor(distribution_kwargs={"low": -2.0, "high": 2.0})
    td = TensorDict(observation=torch.randn(4, 3), batch_size=[4])
    det = actor(td.clone())["action"]  # default: DETERMINISTIC
    torch.testing.assert_close(det, 2 * torch.tanh(actor(td.clone())["loc"]))
    with set_exploration_type(ExplorationType.MODE):
        torch.testing.assert_close(actor(td.clone())["action"], det)
    with set_exploration_type(ExplorationType.RANDOM):
        r1, r2 = actor(td.clone())["action"], actor(td.clone())["action"]
    assert not torch.equal(r1, r2)
    with set_exploration_type(ExplorationType.MEAN):
        mean = actor(td.clone())["action"]
    assert not torch.equal(mean, det)  # E[tanh(x)] differs from tanh(E[x])


class _RecordInteraction(nn.Module):
    """Params of a Normal that also record the interaction type they ran under."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(3, 4)
        self.seen: list[object] = []

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        from tensordict.nn.probabilistic import interaction_type  # tensordict 0.14 and 0.15

        self.seen.append(interaction_type())
        loc, log_scale = self.net(obs).chunk(2, -1)
        return loc, log_scale.exp()


@pytest.mark.parametrize("return_log_prob", [True, False])
@pytest.mark.parametrize("etype", [None, ExplorationType.RANDOM, ExplorationType.DETERMINISTIC])
def test_probabilistic_actor_direct_call_matches_the_generic_sequence(return_log_prob, etype):
    """A documented actor is called as parameter module then sampler, skipping the
    sequence's generic layers: the same entries, bit for bit, as tensordict's
    ProbabilisticTensorDictSequential.forward, and the same interaction type for the
    parameter module (the sampler's default outside any block)."""
    from contextlib import nullcontext

    from tensordict.nn import ProbabilisticTensorDictSequential, set_skip_existing

    torch.manual_seed(0)
    params = _RecordInteraction()
    actor = ProbabilisticActor(
        TensorDictModule(params, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": torch.tensor([-2.0, 0.0]), "high": torch.tensor([2.0, 3.0])},
        return_log_prob=return_log_prob,
    )
    assert actor._plain()
    td = TensorDict(observation=torch.randn(5, 3), batch_size=[5])
    block = set_exploration_type(etype) if etype is not None else nullcontext()
    with block:
        torch.manual_seed(1)
        fast = actor(td.clone())
        fast_seen = params.seen[:]
        params.seen.clear()
        torch.manual_seed(1)
        generic = ProbabilisticTensorDictSequential.forward(actor, td.clone())
    assert fast_seen == params.seen
    assert set(fast.keys(True, True)) == set(generic.keys(True, True))
    for key in generic.keys(True, True):
        assert torch.equal(fast[key], generic[key]), key
    # anything beyond the documented shape takes tensordict's own path
    with set_skip_existing(True):
        assert not actor._plain()
    actor.inplace = False
    assert not actor._plain()


@pytest.mark.parametrize("dist", [TruncatedNormal, TanhDelta])
def test_other_bounded_distributions_read_spec(dist):
    spec = specs.BoxSpec(torch.tensor([3.0]), torch.tensor([4.0]))
    module = TensorDictModule(nn.Linear(3, 2), ["observation"], ["p"])
    if dist is TanhDelta:
        keys = {"param": "p"}
    else:
        module = TensorDictModule(
            nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()),
            ["observation"],
            ["loc", "scale"],
        )
        keys = ["loc", "scale"]
    actor = ProbabilisticActor(module, in_keys=keys, spec=spec, distribution_class=dist)
    with set_exploration_type(ExplorationType.RANDOM):
        a = actor(TensorDict(observation=torch.randn(50, 3), batch_size=[50]))["action"]
    assert spec.is_in(a)


def test_probabilistic_actor_errors():
    with pytest.raises(TypeError, match="space"):
        _tanh_actor(specs.ShapeOnly())
    with pytest.raises(TypeError, match="TensorDictModule"):
        ProbabilisticActor(nn.Linear(3, 2), in_keys=["loc", "scale"])
    actor = _tanh_actor()
    with pytest.raises(KeyError, match="'observation'"):
        actor(TensorDict(obs=torch.zeros(2, 3), batch_size=[2]))


def test_independent_normal_actor_nested_keys():
    module = TensorDictModule(
        nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()),
        [("agents", "observation")],
        [("agents", "loc"), ("agents", "scale")],
    )
    actor = ProbabilisticActor(
        module,
        in_keys={"loc": ("agents", "loc"), "scale": ("agents", "scale")},
        out_keys=[("agents", "action")],
        distribution_class=IndependentNormal,
        return_log_prob=True,
    )
    td = TensorDict({"agents": {"observation": torch.randn(5, 3)}}, batch_size=[5])
    with set_exploration_type(ExplorationType.RANDOM):
        td = actor(td)
    assert td["agents", "action_log_prob"].shape == (5,)


def test_actor_value_operator_and_safe_module():
    spec = specs.BoxSpec(-torch.ones(2), torch.ones(2))
    actor = Actor(nn.Linear(3, 2), spec=spec, safe=True)
    td = actor(TensorDict(observation=torch.randn(10, 3) * 100, batch_size=[10]))
    assert td["action"].abs().max() <= 1
    with pytest.raises(ValueError, match="needs a spec"):
        SafeModule(nn.Linear(3, 2), ["observation"], ["action"], safe=True)
    with pytest.raises(TypeError, match="project"):
        Actor(nn.Linear(3, 2), spec=specs.ShapeOnly(), safe=True)(
            TensorDict(observation=torch.zeros(1, 3), batch_size=[1])
        )
    v = ValueOperator(nn.Linear(3, 1))
    assert v.out_keys == ["state_value"]
    q = ValueOperator(
        MLP(in_features=5, out_features=1, num_cells=[4]), in_keys=["observation", "action"]
    )
    assert q.out_keys == ["state_action_value"]
    out = q(TensorDict(observation=torch.randn(4, 3), action=torch.randn(4, 2), batch_size=[4]))
    assert out["state_action_value"].shape == (4, 1)


def test_actor_critic_containers_share_parameters():
    trunk = TensorDictModule(nn.Linear(3, 8), ["observation"], ["hidden"])
    pi = TensorDictModule(nn.Linear(8, 2), ["hidden"], ["action"])
    v = TensorDictModule(nn.Linear(8, 1), ["hidden"], ["state_value"])
    op = ActorValueOperator(trunk, pi, v)
    td = TensorDict(observation=torch.randn(4, 3), batch_size=[4])
    full = op(td.clone())
    torch.testing.assert_close(op.get_policy_operator()(td.clone())["action"], full["action"])
    torch.testing.assert_close(
        op.get_value_operator()(td.clone())["state_value"], full["state_value"]
    )
    assert op.get_policy_operator().module[0] is trunk
    q = TensorDictModule(
        MLP(in_features=10, out_features=1, num_cells=[4]),
        ["hidden", "action"],
        ["state_action_value"],
    )
    aco = ActorCriticOperator(trunk, pi, q)
    assert "state_action_value" in aco.get_critic_operator()(td.clone())
    assert "state_action_value" not in aco.get_policy_operator()(td.clone())
    pi2 = TensorDictModule(nn.Linear(3, 2), ["observation"], ["action"])
    v2 = TensorDictModule(nn.Linear(3, 1), ["observation"], ["state_value"])
    acw = ActorCriticWrapper(pi2, v2)
    assert acw.get_policy_operator() is pi2 and acw.get_value_operator() is v2
    assert set(acw(td.clone()).keys()) >= {"action", "state_value"}


def test_exploration_type_aliases():
    from tensordict.nn import InteractionType, set_interaction_type

    assert ExplorationType is InteractionType
    assert set_exploration_type is set_interaction_type
    assert math.isfinite(1.0)


@pytest.mark.parametrize("name_map", [None, {"normal": ("action", "normal")}])
def test_probabilistic_actor_composite_distribution_out_keys(name_map):
    from tensordict.nn import CompositeDistribution

    module = TensorDictModule(
        lambda x: (x[..., :2], x[..., 2:4].exp(), x[..., 4:]),
        in_keys=["x"],
        out_keys=[
            ("params", "normal", "loc"),
            ("params", "normal", "scale"),
            ("params", "c", "logits"),
        ],
    )
    kwargs = {
        "distribution_map": {
            "normal": torch.distributions.Normal,
            "c": torch.distributions.Categorical,
        }
    }
    if name_map:
        kwargs["name_map"] = name_map
    actor = ProbabilisticActor(
        module,
        in_keys=["params"],
        distribution_class=CompositeDistribution,
        distribution_kwargs=kwargs,
    )
    normal_key = ("action", "normal") if name_map else "normal"
    assert actor.out_keys[-2:] == [normal_key, "c"]
    td = actor(TensorDict(x=torch.rand(7), batch_size=[]))
    assert td[normal_key].shape == (2,) and td["c"].shape == ()
