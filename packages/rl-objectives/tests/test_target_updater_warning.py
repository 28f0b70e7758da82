"""TorchRL's warning: a loss with target parameters and no target updater warns at each call."""

from __future__ import annotations

import warnings

import pytest
from objectives_testlib import make_action_value, make_normal_actor, make_qvalue, transitions
from tensordict import TensorDict

from rl_objectives import DQNLoss, HardUpdate, REDQLoss, SACLoss, SoftUpdate
from rl_objectives.common import rl_warnings

MATCH = "No target network updater has been associated with this loss module"


def _dqn(delay_value: bool) -> DQNLoss:
    return DQNLoss(make_action_value(), action_space="categorical", delay_value=delay_value)


def _td() -> TensorDict:
    return transitions(4, action="categorical")


def test_a_loss_with_targets_and_no_updater_warns_at_each_call():
    loss = _dqn(delay_value=True)
    for _ in range(2):
        with pytest.warns(UserWarning, match=MATCH):
            loss(_td())


@pytest.mark.parametrize("updater", [SoftUpdate, HardUpdate])
def test_an_updater_silences_the_warning(updater):
    loss = _dqn(delay_value=True)
    updater(loss, eps=0.5) if updater is SoftUpdate else updater(loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss(_td())


def test_no_targets_no_warning_and_rl_warnings_off(monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _dqn(delay_value=False)(_td())
        monkeypatch.setenv("RL_WARNINGS", "False")
        assert not rl_warnings()
        _dqn(delay_value=True)(_td())


def test_losses_with_their_own_target_storage_warn_too():
    # SAC's targets come from convert_to_functional, REDQ stacks its critics' targets itself
    for loss in (
        SACLoss(make_normal_actor(), make_qvalue(), num_qvalue_nets=2),
        REDQLoss(make_normal_actor(), make_qvalue(), num_qvalue_nets=3),
    ):
        with pytest.warns(UserWarning, match=MATCH):
            loss(transitions(4))
        SoftUpdate(loss, eps=0.5)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loss(transitions(4))
