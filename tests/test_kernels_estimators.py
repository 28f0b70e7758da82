"""rl_kernels' estimators are drop-ins for rl_objectives': same arguments, keys and results."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)

import rl_kernels
import rl_kernels.scans as kernel_scans
import rl_objectives
import rl_objectives.value.functional as objective_scans

# The Triton kernels run here on CPU tensors only through Triton's interpreter
# (``TRITON_INTERPRET=1 pytest tests/test_kernels_estimators.py``); rl-kernels' own
# tests always run them that way.

BACKENDS = [
    "torch",
    pytest.param(
        "triton",
        marks=pytest.mark.skipif(
            os.environ.get("TRITON_INTERPRET") != "1" or importlib.util.find_spec("triton") is None,
            reason="Triton on CPU tensors needs triton and TRITON_INTERPRET=1",
        ),
    ),
]


def _trajectories(batch=(3,), steps=9, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shape = (*batch, steps)
    done = torch.rand((*shape, 1), generator=gen) < 0.3
    done[..., 0, :] = True
    done[..., -1, :] = True
    terminated = done & (torch.rand((*shape, 1), generator=gen) < 0.5)
    obs = torch.randn((*shape, 4), generator=gen)
    nxt = torch.randn((*shape, 4), generator=gen)
    nxt[..., :-1, :] = torch.where(done[..., :-1, :], nxt[..., :-1, :], obs[..., 1:, :])
    return TensorDict(
        {
            "observation": obs,
            "action": torch.randint(2, shape, generator=gen),
            "action_log_prob": torch.randn((*shape, 1), generator=gen) * 0.1 - 0.7,
            ("next", "observation"): nxt,
            ("next", "reward"): torch.randn((*shape, 1), generator=gen),
            ("next", "done"): done,
            ("next", "terminated"): terminated,
        },
        batch_size=shape,
    )


def _critic():
    torch.manual_seed(0)
    return TensorDictModule(torch.nn.Linear(4, 1), ["observation"], ["state_value"])


def _actor():
    torch.manual_seed(1)
    return ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(4, 2), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            ["logits"], ["action"], distribution_class=torch.distributions.Categorical
        ),
    )


def _assert_same_outputs(ours, theirs, keys):
    for key in keys:
        torch.testing.assert_close(ours[key], theirs[key], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("options", [{}, {"shifted": True}, {"average_gae": True}])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_gae_is_interchangeable(batch, options, backend):
    td = _trajectories(batch)
    critic = _critic()
    kwargs = {"gamma": 0.95, "lmbda": 0.9, "value_network": critic, **options}
    ours = rl_kernels.GAE(**kwargs, backend=backend)(td.clone())
    theirs = rl_objectives.GAE(**kwargs)(td.clone())
    _assert_same_outputs(ours, theirs, ["advantage", "value_target", "state_value"])


def test_gae_set_keys_and_differentiable_are_interchangeable():
    td = _trajectories()
    td.rename_key_(("next", "reward"), ("next", "r"))
    outs = []
    for module in (rl_kernels.GAE, rl_objectives.GAE):
        critic = _critic()
        est = module(gamma=0.9, lmbda=0.9, value_network=critic, differentiable=True)
        est.set_keys(reward="r", advantage="adv", value_target="target", value="state_value")
        data = td.clone()
        obs = data["observation"].requires_grad_()
        out = est(data)
        out["target"].sum().backward()
        # gradients reach the data, never the critic's parameters (TorchRL's hold_out_net)
        assert critic.module.weight.grad is None
        outs.append((out, obs.grad.clone()))
    _assert_same_outputs(outs[0][0], outs[1][0], ["adv", "target"])
    torch.testing.assert_close(outs[0][1], outs[1][1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("average_rewards", [False, True])
def test_td_lambda_is_interchangeable(average_rewards, backend):
    td = _trajectories()
    kwargs = {
        "gamma": 0.95,
        "lmbda": 0.7,
        "value_network": _critic(),
        "average_rewards": average_rewards,
    }
    ours = rl_kernels.TDLambdaEstimator(**kwargs, backend=backend)(td.clone())
    theirs = rl_objectives.TDLambdaEstimator(**kwargs)(td.clone())
    _assert_same_outputs(ours, theirs, ["advantage", "value_target"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_vtrace_is_interchangeable(backend):
    td = _trajectories()
    kwargs = {"gamma": 0.95, "actor_network": _actor(), "value_network": _critic()}
    ours = rl_kernels.VTrace(**kwargs, c_thresh=0.8, backend=backend)(td.clone())
    theirs = rl_objectives.VTrace(**kwargs, c_thresh=0.8)(td.clone())
    _assert_same_outputs(ours, theirs, ["advantage", "value_target"])


@pytest.mark.parametrize("time_dim", [-2, 0])
def test_functional_scans_agree(time_dim):
    gen = torch.Generator().manual_seed(3)
    shape = (40, 5, 1) if time_dim == 0 else (5, 40, 1)
    v, nv, r, lp, lm = (torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(5))
    done = torch.rand(shape, generator=gen) < 0.2
    term = done & (torch.rand(shape, generator=gen) < 0.5)
    pairs = [
        (
            kernel_scans.generalized_advantage_estimate(
                0.9, 0.8, v, nv, r, done, term, time_dim=time_dim
            ),
            objective_scans.generalized_advantage_estimate(
                0.9, 0.8, v, nv, r, done, term, time_dim=time_dim
            ),
        ),
        (
            (
                kernel_scans.td_lambda_return_estimate(
                    0.9, 0.8, nv, r, done, term, time_dim=time_dim
                ),
            ),
            (
                objective_scans.td_lambda_return_estimate(
                    0.9, 0.8, nv, r, done, term, time_dim=time_dim
                ),
            ),
        ),
        (
            kernel_scans.vtrace_advantage_estimate(
                0.9, lp, lm, v, nv, r, done, term, 1.0, 0.9, time_dim=time_dim
            ),
            objective_scans.vtrace_advantage_estimate(
                0.9, lp, lm, v, nv, r, done, term, 1.0, 0.9, time_dim=time_dim
            ),
        ),
        (
            (kernel_scans.reward2go(r, done, 0.9, time_dim=time_dim),),
            (objective_scans.reward2go(r, done, 0.9, time_dim=time_dim),),
        ),
    ]
    for ours, theirs in pairs:
        for a, b in zip(ours, theirs, strict=True):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)


def test_ppo_loss_runs_on_kernel_advantages():
    td = _trajectories()
    critic, actor = _critic(), _actor()
    rl_kernels.GAE(gamma=0.99, lmbda=0.95, value_network=critic)(td)
    loss = rl_objectives.ClipPPOLoss(actor, critic)
    out = loss(td.reshape(-1))
    assert torch.isfinite(out["loss_objective"]) and torch.isfinite(out["loss_critic"])


def _load_recipe(name: str) -> ModuleType:
    """The recipe ``recipes/<name>.py`` as a module (tests/conftest.py puts recipes/ on sys.path)."""
    return importlib.import_module(name)


def _losses(run: Path) -> list[float]:
    rows = (run / "metrics.csv").read_text().splitlines()[1:]
    return [float(r.split(",")[2]) for r in rows if r.split(",")[1] == "loss"]


def test_ppo_recipe_with_kernels_matches_without(tmp_path: Path):
    ppo = _load_recipe("ppo")
    args = ["--smoke", "--total-frames", "2048", "--eval-every", "2048"]
    ppo.main([*args, "--output-dir", str(tmp_path / "objectives")])
    ppo.main([*args, "--kernels", "--output-dir", str(tmp_path / "kernels")])
    ours, theirs = _losses(tmp_path / "kernels"), _losses(tmp_path / "objectives")
    assert len(ours) == len(theirs) == 2
    torch.testing.assert_close(torch.tensor(ours), torch.tensor(theirs), rtol=1e-4, atol=1e-4)
