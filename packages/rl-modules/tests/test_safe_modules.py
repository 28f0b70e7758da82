"""Spec wrapping (as TorchRL) and the Safe* / Tanh / Random / gSDE modules."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_modules import (
    Actor,
    ExplorationType,
    IndependentNormal,
    LazygSDEModule,
    ProbabilisticActor,
    RandomPolicy,
    SafeModule,
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
    SafeSequential,
    TanhModule,
    gSDEModule,
    set_exploration_type,
)

# the spec fixtures live in a module of their own, registered as a library would be
_spec = importlib.util.spec_from_file_location(
    "_specs_safe", pathlib.Path(__file__).with_name("_specs.py")
)
specs = importlib.util.module_from_spec(_spec)
sys.modules["_specs_safe"] = specs
_spec.loader.exec_module(specs)
BoxSpec, Composite = specs.BoxSpec, specs.Composite


def _box(n=2, bound=1.0):
    return BoxSpec(-torch.ones(n) * bound, torch.ones(n) * bound)


def test_actor_wraps_a_bare_spec_in_the_specs_own_composite():
    spec = _box()
    actor = Actor(torch.nn.Linear(3, 2), spec=spec)
    assert isinstance(actor.spec, Composite) and actor.spec["action"] is spec
    composite = Composite(action=spec)
    assert Actor(torch.nn.Linear(3, 2), spec=composite).spec is composite
    with pytest.raises(RuntimeError, match="one spec for the 2 out_keys"):
        SafeModule(torch.nn.Linear(3, 2), ["observation"], ["a", "b"], spec=spec)


def test_safe_module_projects_through_the_wrapped_spec():
    actor = Actor(torch.nn.Linear(3, 2), spec=_box(bound=0.1), safe=True)
    td = actor(TensorDict(observation=torch.randn(50, 3) * 100, batch_size=[50]))
    assert td["action"].abs().max() <= 0.1


def test_safe_probabilistic_module_and_sequence():
    spec = _box(bound=0.5)
    prob = SafeProbabilisticModule(["param"], ["action"], spec=spec, safe=True)
    assert prob.spec["action"] is spec
    seq = SafeProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["param"]), prob
    )
    obs = torch.randn(20, 3) * 50
    out = seq(TensorDict(observation=obs, batch_size=[20]))
    ref = seq.module[0].module(obs).clamp(-0.5, 0.5)
    torch.testing.assert_close(out["action"], ref)
    assert seq.spec["action"] is spec
    with pytest.raises(RuntimeError, match="not a valid configuration"):
        SafeProbabilisticModule(["param"], ["action"], safe=True)


def test_safe_sequential_merges_specs():
    spec = _box()
    seq = SafeSequential(
        SafeModule(torch.nn.Linear(3, 4), ["observation"], ["hidden"]),
        SafeModule(torch.nn.Linear(4, 2), ["hidden"], ["action"], spec=spec),
    )
    assert isinstance(seq.spec, Composite) and seq.spec["action"] is spec
    assert seq(TensorDict(observation=torch.zeros(5, 3), batch_size=[5]))["action"].shape == (5, 2)
    assert SafeSequential(TensorDictModule(torch.nn.Linear(3, 4), ["x"], ["y"])).spec is None


def test_tanh_module_bounds_from_spec_or_arguments():
    x = torch.randn(7, 2) * 3
    spec = BoxSpec(torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 1.0]))
    m = TanhModule(["loc"], ["action"], spec=spec)
    out = m(TensorDict(loc=x, batch_size=[7]))["action"]
    torch.testing.assert_close(
        out, spec.space.low + (spec.space.high - spec.space.low) * (x.tanh() + 1) / 2
    )
    plain = TanhModule(["loc"])(TensorDict(loc=x, batch_size=[7]))["loc"]
    torch.testing.assert_close(plain, x.tanh())
    clamped = TanhModule(["loc"], clamp=True)(
        TensorDict(loc=torch.full((1,), 100.0), batch_size=[1])
    )
    assert clamped["loc"].item() < 1.0
    with pytest.raises(ValueError, match=r"The minimum value \(-3\) provided to TanhModule"):
        TanhModule(["act"], low=-3, spec=spec)
    with pytest.raises(ValueError, match="same length"):
        TanhModule(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="high < low"):
        TanhModule(["a"], low=1.0, high=-1.0)


def test_random_policy_draws_from_the_spec():
    torch.manual_seed(0)
    spec = _box(3, bound=0.2)
    td = RandomPolicy(spec)(TensorDict())
    assert spec.is_in(td["action"]) and td["action"].shape == (3,)
    td = RandomPolicy(Composite(act=spec, other=_box(1)))(TensorDict())
    assert set(td.keys()) == {"act", "other"}
    with pytest.raises(RuntimeError, match="action_spec is not set"):
        RandomPolicy()(TensorDict())


def test_gsde_noise_against_closed_form():
    torch.manual_seed(0)
    gsde = gSDEModule(action_dim=2, state_dim=3, sigma_init=0.5)
    sigma = torch.nn.functional.softplus(gsde.log_sigma.detach())
    torch.testing.assert_close(sigma, torch.full((2, 3), 0.5))
    mu, state, eps = torch.randn(4, 2), torch.randn(4, 3), torch.randn(4, 2, 3)
    with set_exploration_type(ExplorationType.RANDOM):
        _, scale, action, eps_out = gsde(mu, state, eps)
    ref = mu + torch.einsum("bij,bj->bi", sigma * eps, state)
    torch.testing.assert_close(action, ref)
    torch.testing.assert_close(scale, ((sigma * state[:, None]) ** 2).sum(-1).sqrt())
    assert eps_out is eps
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        assert torch.equal(gsde(mu, state, eps)[2], mu)
    with set_exploration_type(ExplorationType.RANDOM):  # zeros = reset marker: new noise
        new_eps = gsde(mu, state, torch.zeros(4, 1))[3]
    assert new_eps.shape == (4, 2, 3) and new_eps.abs().sum() > 0
    with pytest.raises(RuntimeError, match="batch dims"):
        gsde(torch.randn(5, 2), state, None)


@pytest.mark.parametrize("learn_sigma", [True, False])
@pytest.mark.parametrize("sigma_init", [None, 2.0])
def test_lazy_gsde_initial_scale_matches_sigma_init(learn_sigma, sigma_init):
    torch.manual_seed(0)
    state = torch.randn(5000, 6) * 3 - 1
    gsde = LazygSDEModule(sigma_init=sigma_init, learn_sigma=learn_sigma)
    with set_exploration_type(ExplorationType.RANDOM):
        _, scale, _, _ = gsde(torch.zeros(5000, 4), state, None)
    assert type(gsde) is gSDEModule
    assert abs(scale.mean().item() - (sigma_init or 1.0)) < 0.1


def test_gsde_in_a_probabilistic_actor_with_safe_projection():
    torch.manual_seed(0)
    spec = _box(2, bound=0.1)
    module = SafeSequential(
        SafeModule(torch.nn.Linear(3, 2), ["observation"], ["action"]),
        SafeModule(
            LazygSDEModule(),
            ["action", "observation", "_eps_gSDE"],
            ["loc", "scale", "action", "_eps_gSDE"],
        ),
    )
    actor = ProbabilisticActor(
        module, in_keys=["loc", "scale"], spec=spec, distribution_class=IndependentNormal, safe=True
    )
    # zeros under "_eps_gSDE" mark a reset (as an env's gSDENoise transform writes them)
    td = TensorDict(
        observation=torch.randn(16, 3) * 10, _eps_gSDE=torch.zeros(16, 1), batch_size=[16]
    )
    with set_exploration_type(ExplorationType.RANDOM):
        actor(td)
    assert spec.is_in(td["action"]) and td["_eps_gSDE"].shape == (16, 2, 3)


def test_probabilistic_actor_generator_makes_sampling_reproducible():
    from tensordict.nn import NormalParamExtractor

    from rl_modules import TanhNormal

    net = TensorDictModule(
        torch.nn.Sequential(torch.nn.Linear(3, 4), NormalParamExtractor()),
        ["observation"],
        ["loc", "scale"],
    )
    td = TensorDict(observation=torch.randn(5, 3), batch_size=[5])
    actions = []
    for _ in range(2):
        actor = ProbabilisticActor(
            net, in_keys=["loc", "scale"], distribution_class=TanhNormal, generator=7
        )
        with set_exploration_type(ExplorationType.RANDOM):
            actions.append(actor(td.clone())["action"])
    torch.testing.assert_close(actions[0], actions[1])


def test_tanh_module_exposes_torchrl_buffer_names():
    m = TanhModule([("a", "c")], low=-2.0, high=3.0)
    assert float(m.a_c_low) == -2.0 and float(m.a_c_high) == 3.0
    assert m.non_trivial == {("a", "c"): True}
    assert TanhModule(["x"]).non_trivial == {"x": False}


def test_safe_module_passes_none_for_a_missing_in_key():
    # a recurrent net takes hidden=None at the first step (TensorDictModule's convention)
    def net(obs, hidden):
        hidden = torch.zeros_like(obs) if hidden is None else hidden
        return obs + hidden, hidden + 1

    m = SafeModule(net, in_keys=["observation", "hidden"], out_keys=["out", ("next", "hidden")])
    td = m(TensorDict(observation=torch.ones(3, 2), batch_size=[3]))
    assert torch.equal(td["out"], torch.ones(3, 2)) and torch.equal(
        td["next", "hidden"], torch.ones(3, 2)
    )
    with pytest.raises(KeyError, match="observation"):
        SafeModule(torch.nn.Linear(2, 2), ["observation"], ["action"])(TensorDict(batch_size=[3]))
