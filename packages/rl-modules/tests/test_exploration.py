"""Exploration modules: empirical epsilon, masks, annealing, noise and its state."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import pytest
import torch
from tensordict import TensorDict

from rl_modules import (
    AdditiveGaussianModule,
    ConsistentDropoutModule,
    EGreedyModule,
    ExplorationType,
    OrnsteinUhlenbeckProcessModule,
    set_exploration_modules_spec_from_env,
    set_exploration_type,
)

_spec = importlib.util.spec_from_file_location(
    "_specs", pathlib.Path(__file__).with_name("_specs.py")
)
specs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(specs)


@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0])
def test_egreedy_empirical_epsilon(eps):
    torch.manual_seed(0)
    n, batch = 4, 40_000
    module = EGreedyModule(specs.Categorical(n), eps_init=eps, eps_end=eps)
    greedy = torch.zeros(batch, dtype=torch.long)
    out = module(TensorDict(action=greedy.clone(), batch_size=[batch]))["action"]
    changed = (out != greedy).float().mean().item()
    # A random action equals the greedy one with probability 1/n.
    expected = eps * (1 - 1 / n)
    assert abs(changed - expected) < 4 * math.sqrt(expected * (1 - expected) / batch) + 1e-9


def test_egreedy_annealing_and_deterministic_mode():
    module = EGreedyModule(specs.Categorical(3), eps_init=1.0, eps_end=0.1, annealing_num_steps=10)
    module.step(5)
    assert float(module.eps) == pytest.approx(0.55)
    module.step(100)
    assert float(module.eps) == pytest.approx(0.1)
    module.eps.fill_(1.0)
    td = TensorDict(action=torch.zeros(100, dtype=torch.long), batch_size=[100])
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        assert (module(td.clone())["action"] == 0).all()


@pytest.mark.parametrize("one_hot", [False, True])
def test_egreedy_respects_action_mask(one_hot):
    torch.manual_seed(0)
    spec = specs.OneHot(5) if one_hot else specs.Categorical(5)
    module = EGreedyModule(spec, eps_init=1.0, eps_end=1.0, action_mask_key="action_mask")
    mask = torch.zeros(2000, 5, dtype=torch.bool)
    mask[:, 1] = mask[:, 3] = True
    action = (
        torch.nn.functional.one_hot(torch.full((2000,), 1), 5)
        if one_hot
        else torch.ones(2000, dtype=torch.long)
    )
    out = module(TensorDict(action=action, action_mask=mask, batch_size=[2000]))["action"]
    idx = out.argmax(-1) if one_hot else out
    assert set(idx.unique().tolist()) == {1, 3}
    if one_hot:
        assert (out.sum(-1) == 1).all()


def test_egreedy_errors():
    with pytest.raises(TypeError, match="rand"):
        EGreedyModule(specs.ShapeOnly())
    module = EGreedyModule(specs.Categorical(3), action_mask_key="mask")
    with pytest.raises(KeyError, match="mask"):
        module(TensorDict(action=torch.zeros(2, dtype=torch.long), batch_size=[2]))


def test_additive_gaussian_noise_scale_and_projection():
    torch.manual_seed(0)
    box = specs.BoxSpec(-torch.ones(2) * 100, torch.ones(2) * 100)
    module = AdditiveGaussianModule(box, sigma_init=0.5, sigma_end=0.5)
    out = module(TensorDict(action=torch.zeros(50_000, 2), batch_size=[50_000]))["action"]
    assert out.std().item() == pytest.approx(0.5, rel=0.02)
    tight = AdditiveGaussianModule(specs.BoxSpec(-torch.ones(2) * 0.1, torch.ones(2) * 0.1))
    out = tight(TensorDict(action=torch.zeros(100, 2), batch_size=[100]))["action"]
    assert out.abs().max() <= 0.1
    tight.step(1000)
    assert float(tight.sigma) == pytest.approx(0.1)


def test_ou_noise_state_in_tensordict_and_reset():
    torch.manual_seed(0)
    box = specs.BoxSpec(-torch.ones(2) * 100, torch.ones(2) * 100)
    module = OrnsteinUhlenbeckProcessModule(box, theta=0.5, sigma=0.3, dt=0.1)
    td = TensorDict(
        action=torch.zeros(3, 2), is_init=torch.ones(3, 1, dtype=torch.bool), batch_size=[3]
    )
    td = module(td)
    first = td["_ou_prev_noise"].clone()
    torch.testing.assert_close(td["action"], first)  # eps = 1, action was 0
    assert (td["_ou_steps"] == 1).all()
    # Next step: the process continues from the stored noise (except where is_init).
    nxt = TensorDict(
        action=torch.zeros(3, 2),
        is_init=torch.tensor([[False], [True], [False]]),
        _ou_prev_noise=first,
        _ou_steps=td["_ou_steps"],
        batch_size=[3],
    )
    torch.manual_seed(1)
    nxt = module(nxt)
    torch.manual_seed(1)
    eps = torch.randn(3, 2)
    prev = first.clone()
    prev[1] = 0.0
    expected = prev + 0.5 * (0.0 - prev) * 0.1 + 0.3 * math.sqrt(0.1) * eps
    torch.testing.assert_close(nxt["_ou_prev_noise"], expected)
    assert nxt["_ou_steps"].squeeze(-1).tolist() == [2, 1, 2]


def test_egreedy_spec_can_come_later_and_shape_is_checked():
    td = TensorDict(action=torch.zeros(5, 4), batch_size=[5])
    module = EGreedyModule(spec=None, eps_init=1.0, eps_end=1.0)
    with pytest.raises(RuntimeError, match="spec must be provided"):
        module(td.clone())
    # with a mask, no spec is needed
    masked = EGreedyModule(spec=None, eps_init=1.0, eps_end=1.0, action_mask_key="mask")
    mask = torch.zeros(5, 3, dtype=torch.bool)
    mask[:, 2] = True
    out = masked(TensorDict(action=torch.zeros(5, dtype=torch.long), mask=mask, batch_size=[5]))
    assert (out["action"] == 2).all()
    module.spec = specs.BoxSpec(-torch.ones(3), torch.ones(3))
    with pytest.raises(ValueError, match="Action spec shape does not match the action shape"):
        module(td.clone())
    module.spec = specs.BoxSpec(-torch.ones(4), torch.ones(4))
    assert (module(td.clone())["action"] != 0).all()


def test_noise_modules_take_a_device_and_ou_needs_a_spec():
    box = specs.BoxSpec(-torch.ones(2), torch.ones(2))
    assert AdditiveGaussianModule(box, device="meta").sigma.device.type == "meta"
    assert OrnsteinUhlenbeckProcessModule(box, device="meta").eps.device.type == "meta"
    with pytest.raises(RuntimeError, match="spec cannot be None"):
        OrnsteinUhlenbeckProcessModule(spec=None)


def test_noise_modules_project_with_the_action_entry_of_a_composite_spec():
    box = specs.BoxSpec(-torch.ones(2), torch.ones(2))
    td = TensorDict(action=torch.full((4, 2), 5.0), batch_size=[4])
    out = AdditiveGaussianModule(specs.Composite(action=box))(td.clone())
    assert out["action"].abs().max() <= 1
    ou = OrnsteinUhlenbeckProcessModule(specs.Composite(action=box))
    assert ou(td.clone())["action"].abs().max() <= 1
    egreedy = EGreedyModule(specs.Composite(action=box), eps_init=1.0, eps_end=1.0)
    assert egreedy(td.clone())["action"].abs().max() <= 1
    with pytest.raises(KeyError, match="no entry 'action'"):
        AdditiveGaussianModule(specs.Composite(other=box))(td.clone())


def test_consistent_dropout_reuses_the_stored_mask():
    torch.manual_seed(0)
    p = 0.3
    m = ConsistentDropoutModule(p, in_keys="h")
    x = torch.randn(20_000, 4)
    td = m(TensorDict(h=x.clone(), batch_size=[20_000]))
    (mask_key,) = [k for k in m.out_keys if isinstance(k, str) and k.startswith("mask_")]
    mask = td[mask_key]
    # F.dropout of ones: 0 or 1 / (1 - p), dropped with probability p
    kept = torch.tensor(1 / (1 - p))
    assert ((mask == 0) | (mask == kept)).all()
    assert abs(float((mask == 0).float().mean()) - p) < 0.01
    torch.testing.assert_close(td["h"], x * mask)
    again = m(td.clone().set("h", x.clone()))
    assert torch.equal(again["h"], td["h"]) and torch.equal(again[mask_key], mask)
    m.eval()
    assert torch.equal(m(TensorDict(h=x.clone(), batch_size=[20_000]))["h"], x)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        ConsistentDropoutModule(1.0, in_keys="h")


def test_ou_noise_is_real_valued_for_integer_actions():
    torch.manual_seed(0)
    ou = OrnsteinUhlenbeckProcessModule(None, safe=False, sigma=1.0, dt=1.0)
    td = ou(TensorDict(action=torch.zeros(3, 2, dtype=torch.int8), batch_size=[3]))
    assert td["_ou_prev_noise"].dtype == torch.get_default_dtype()
    torch.testing.assert_close(td["action"], td["_ou_prev_noise"])  # 0 + eps (1.0) * noise


def test_noise_modules_leave_the_action_unprojected_when_its_entry_is_declared_without_spec():
    # TorchRL: Composite({"action": None}) declares the key; safe projection skips it.
    td = TensorDict(action=torch.full((4, 2), 5.0), batch_size=[4])
    for module in (
        OrnsteinUhlenbeckProcessModule(specs.Composite(action=None)),
        AdditiveGaussianModule(specs.Composite(action=None)),
    ):
        out = module(td.clone())
        assert out["action"].abs().max() > 1  # noisy 5.0s, not clipped into any box


def test_consistent_dropout_primer_draws_a_fresh_mask_per_call():
    torch.manual_seed(0)
    p = 0.5
    m = ConsistentDropoutModule(p, in_keys="h", input_shape=(64,), input_dtype=torch.float64)
    primer = m.make_tensordict_primer()
    (key,) = list(primer)
    assert key == m.in_keys[1] and primer.expand_specs is False
    assert primer[key].shape == (64,) and primer[key].dtype == torch.float64
    first, second = primer.default_value(), primer.default_value()
    assert first.shape == (64,) and first.dtype == torch.float64
    assert ((first == 0) | (first == 1 / (1 - p))).all()
    assert not torch.equal(first, second)
    with pytest.raises(RuntimeError, match="input_shape"):
        ConsistentDropoutModule(p, in_keys="h").make_tensordict_primer()


def test_gaussian_spec_set_later_from_an_env():
    class Env:
        action_spec = specs.BoxSpec(-torch.ones(3, 2), torch.ones(3, 2))  # batched: 3 envs
        action_spec_unbatched = specs.BoxSpec(-0.1 * torch.ones(2), 0.1 * torch.ones(2))

    class PlainEnv:
        action_spec = specs.BoxSpec(-torch.ones(2), torch.ones(2))

    lazy = AdditiveGaussianModule(None, sigma_init=10.0)
    preset = specs.BoxSpec(-5 * torch.ones(2), 5 * torch.ones(2))
    fixed = AdditiveGaussianModule(preset, sigma_init=10.0)
    td = TensorDict(action=torch.zeros(64, 2), batch_size=[64])
    with pytest.raises(RuntimeError, match="spec has not been set"):
        lazy(td.clone())
    policy = torch.nn.Sequential(lazy, fixed)
    set_exploration_modules_spec_from_env(policy, Env())
    assert lazy.spec is Env.action_spec_unbatched and fixed.spec is preset
    assert lazy(td.clone())["action"].abs().max() <= 0.1
    other = AdditiveGaussianModule(None)
    set_exploration_modules_spec_from_env(other, PlainEnv())
    assert other.spec is PlainEnv.action_spec
