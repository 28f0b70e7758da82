"""rl_kernels' LSTMModule / GRUModule are drop-ins for rl_modules': same keys, weights, numbers.

And the recurrent PPO recipe gives the same first-batch losses with either package.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

import rl_kernels
import rl_modules

ROOT = Path(__file__).resolve().parent.parent
STATES = {
    "LSTMModule": ["recurrent_state_h", "recurrent_state_c"],
    "GRUModule": ["recurrent_state"],
}


def pair(name: str, **kwargs):
    kwargs = {"input_size": 3, "hidden_size": 8, "num_layers": 2, "in_key": "obs", "out_key": "feat", **kwargs}  # fmt: skip
    theirs = getattr(rl_modules, name)(**kwargs)
    ours = getattr(rl_kernels, name)(**kwargs)
    ours.load_state_dict(theirs.state_dict())  # same state_dict keys: lstm.weight_ih_l0, ...
    return ours, theirs


@pytest.mark.parametrize("name", ["LSTMModule", "GRUModule"])
def test_same_keys_and_sequence_mode_outputs(name: str) -> None:
    torch.manual_seed(0)
    ours, theirs = pair(name)
    assert ours.in_keys == theirs.in_keys and ours.out_keys == theirs.out_keys
    is_init = torch.rand(2, 3, 12, 1) < 0.2
    is_init[..., 0, :] = True
    is_init[0, 0, 5] = True
    td = TensorDict(obs=torch.randn(2, 3, 12, 3), is_init=is_init, batch_size=[2, 3, 12])
    for s in STATES[name]:  # a mid-trajectory start: the stored state is used where not is_init
        td[s] = torch.randn(2, 3, 12, 2, 8)
    td["is_init"][1, :, 0] = False
    with rl_kernels.set_recurrent_mode(True):
        a = ours(td.clone())
    with rl_modules.set_recurrent_mode(True):
        b = theirs(td.clone())
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in b.keys(True, True):
        torch.testing.assert_close(a[key], b[key], msg=f"{key} differs")


@pytest.mark.parametrize("name", ["LSTMModule", "GRUModule"])
def test_same_step_mode_outputs(name: str) -> None:
    torch.manual_seed(0)
    ours, theirs = pair(name)
    td = TensorDict(obs=torch.randn(5, 3), is_init=torch.tensor([[True], [False]] * 2 + [[True]]), batch_size=[5])  # fmt: skip
    for s in STATES[name]:
        td[s] = torch.randn(5, 2, 8)
    a, b = ours(td.clone()), theirs(td.clone())
    for key in b.keys(True, True):
        torch.testing.assert_close(a[key], b[key], msg=f"{key} differs")


def load_recipe():
    spec = importlib.util.spec_from_file_location("ppo_lstm", ROOT / "recipes" / "ppo_lstm.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ppo_lstm"] = module
    spec.loader.exec_module(module)
    return module


def first_batch_losses(recipe, modules: str) -> dict[str, torch.Tensor]:
    from rl_collectors import Collector

    cfg = recipe.Config(num_envs=4, frames_per_batch=128, modules=modules)
    torch.manual_seed(0)
    _, mode = recipe.recurrent_api(cfg)
    lstm, actor, critic = recipe.make_agent(cfg, 4, 2, recipe.GymEnv(cfg.env, categorical_action_encoding=True).action_spec_unbatched)  # fmt: skip
    env = recipe.make_env(cfg, cfg.num_envs, lstm)
    env.set_seed(0)
    collector = Collector(env, actor, frames_per_batch=128, total_frames=128)
    batch = next(iter(collector))
    collector.shutdown()
    assert batch["is_init"][:, 1:].any(), "the batch should hold resets inside the sequences"
    recipe.add_values(batch, critic, lstm, mode)
    recipe.GAE(gamma=cfg.gamma, lmbda=cfg.gae_lambda, value_network=None)(batch)
    loss_fn = recipe.ClipPPOLoss(actor, critic, entropy_coeff=cfg.entropy_coeff, loss_critic_type="l2")  # fmt: skip
    with mode(True):
        losses = loss_fn(batch)
    total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
    total.backward()
    grads = {n: p.grad for n, p in loss_fn.named_parameters()}
    return {**{k: v.detach() for k, v in losses.items()}, "advantage": batch["advantage"], **grads}


def test_recipe_first_batch_losses_equal_with_either_module() -> None:
    recipe = load_recipe()
    ours = first_batch_losses(recipe, "rl_kernels")
    theirs = first_batch_losses(recipe, "rl_modules")
    assert ours.keys() == theirs.keys()
    for key in theirs:
        torch.testing.assert_close(ours[key], theirs[key], rtol=1e-4, atol=1e-5, msg=f"{key} differs")  # fmt: skip
