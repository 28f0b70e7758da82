"""torch.compile: the functionals capture in one graph; the loss forwards have no graph break.

Kept small: dynamo tracing only (``backend="eager"`` / ``explain``), no inductor codegen.
"""

from __future__ import annotations

import pytest
import torch
from objectives_testlib import (
    make_action_value,
    make_categorical_actor,
    make_qvalue,
    make_tanh_actor,
    make_value,
    transitions,
)

from rl_objectives import ClipPPOLoss, DQNLoss, SACLoss
from rl_objectives.value import functional as F
from rl_objectives.value._scan import DOUBLING_MAX_NUMEL, reverse_linear_scan

pytestmark = [
    # tensordict 0.14 reads a torch config flag that torch 2.15 deprecates; harmless, not ours
    pytest.mark.filterwarnings(
        "ignore:torch._dynamo.config.inline_inbuilt_nn_modules is deprecated:FutureWarning"
    ),
    # the losses here hold target parameters and no updater (compilation does not need one):
    # TorchRL's warning about it is tested in test_target_updater_warning.py
    pytest.mark.filterwarnings("ignore:No target network updater:UserWarning"),
]


@pytest.fixture(autouse=True)
def _reset_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_functionals_compile_fullgraph():
    shape = (4, 20, 1)
    v, nv, r = torch.randn(shape), torch.randn(shape), torch.randn(shape)
    done = torch.rand(shape) < 0.2
    term = done & (torch.rand(shape) < 0.5)

    def all_estimates(v, nv, r, done, term):
        adv, tgt = F.generalized_advantage_estimate(0.99, 0.95, v, nv, r, done, term)
        lam = F.td_lambda_return_estimate(0.99, 0.9, nv, r, done, term)
        vt, _ = F.vtrace_advantage_estimate(0.99, -r.abs(), -v.abs(), v, nv, r, done, term)
        return adv, tgt, lam, vt

    compiled = torch.compile(all_estimates, fullgraph=True, backend="eager")
    for got, ref in zip(
        compiled(v, nv, r, done, term), all_estimates(v, nv, r, done, term), strict=True
    ):
        torch.testing.assert_close(got, ref)


@pytest.mark.parametrize("batch", [4, DOUBLING_MAX_NUMEL // 100 + 1], ids=["doubling", "blocked"])
def test_scan_compiles_fullgraph_on_both_paths(batch):
    x = torch.randn(batch, 100, dtype=torch.float64)
    g = torch.rand(batch, 100, dtype=torch.float64) * (torch.rand(batch, 100) > 0.05)
    compiled = torch.compile(reverse_linear_scan, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x, g), reverse_linear_scan(x, g))


def _ppo():
    td = transitions(8, action="categorical")
    td["action_log_prob"] = -torch.rand(8)
    td["advantage"] = torch.randn(8, 1)
    td["value_target"] = torch.randn(8, 1)
    return ClipPPOLoss(make_categorical_actor(), make_value()), td


@pytest.mark.parametrize(
    "case",
    [
        lambda: (DQNLoss(make_action_value(), action_space="categorical", gamma=0.9), transitions(8, action="categorical")),
        lambda: (SACLoss(make_tanh_actor(), make_qvalue(), target_entropy=-2.0, gamma=0.9), transitions(8)),
        _ppo,
    ],
    ids=["dqn", "sac", "clip_ppo"],
)  # fmt: skip
def test_loss_forward_has_no_graph_break(case):
    loss, td = case()
    loss(td.clone())  # builds the value estimator eagerly
    explanation = torch._dynamo.explain(loss)(td.clone())
    assert explanation.graph_break_count == 0, explanation.break_reasons
