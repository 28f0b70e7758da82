"""Choosing a loss's value estimator (``value_estimator=``) and the read-only registry."""

from __future__ import annotations

import pytest
import torch
from objectives_testlib import make_action_value, make_categorical_actor, make_value
from tensordict import TensorDict

from rl_objectives import A2CLoss, ClipPPOLoss, DQNLoss, KLPENPPOLoss
from rl_objectives.value import (
    GAE,
    TD0Estimator,
    TD1Estimator,
    TDLambdaEstimator,
    ValueEstimators,
    build_value_estimator,
    register_value_estimator,
    registered_value_estimators,
)

# These checks build losses with target parameters and no updater (their numerics do not
# need one): TorchRL's warning about it is tested in test_target_updater_warning.py.
pytestmark = pytest.mark.filterwarnings("ignore:No target network updater:UserWarning")


def _transitions(n: int = 6) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    return TensorDict(
        {
            "observation": torch.randn(n, 3, generator=g),
            "action": torch.randint(4, (n,), generator=g),
            ("next", "observation"): torch.randn(n, 3, generator=g),
            ("next", "reward"): torch.randn(n, 1, generator=g),
            ("next", "done"): torch.zeros(n, 1, dtype=torch.bool),
            ("next", "terminated"): torch.zeros(n, 1, dtype=torch.bool),
        },
        batch_size=[n],
    )


def test_an_instance_given_to_the_constructor_is_used_as_is():
    critic = make_value()
    est = GAE(gamma=0.5, lmbda=0.25, value_network=critic)
    loss = ClipPPOLoss(make_categorical_actor(), critic, value_estimator=est)
    assert loss.value_estimator is est
    # the losses built on PPOLoss forward it too
    assert (
        KLPENPPOLoss(make_categorical_actor(), critic, value_estimator=est).value_estimator is est
    )


@pytest.mark.parametrize("choice", [ValueEstimators.TDLambda, "tdlambda", "TDLambda"])
def test_an_enum_member_or_its_name_builds_with_the_loss_gamma(choice):
    loss = A2CLoss(make_categorical_actor(), make_value(), gamma=0.7, value_estimator=choice)
    est = loss.value_estimator
    assert isinstance(est, TDLambdaEstimator) and est.gamma == 0.7


def test_the_constructor_choice_gives_the_same_targets_as_make_value_estimator():
    net = make_action_value()
    a = DQNLoss(net, action_space="categorical", gamma=0.9, value_estimator=TD0Estimator(gamma=0.9))
    b = DQNLoss(net, action_space="categorical", gamma=0.9)
    td = _transitions()
    torch.testing.assert_close(a(td.clone())["loss"], b(td.clone())["loss"])
    # a different discount in the given estimator changes the target: it is really used
    c = DQNLoss(net, action_space="categorical", gamma=0.9, value_estimator=TD0Estimator(gamma=0))
    reward = td["next", "reward"].squeeze(-1)
    q = net(td.clone())["action_value"].gather(-1, td["action"].unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(c(td.clone())["loss"], (q - reward).pow(2).mean())


def test_unknown_or_unsupported_choices_fail_at_construction():
    with pytest.raises(KeyError, match="unknown value estimator"):
        A2CLoss(make_categorical_actor(), make_value(), value_estimator="nope")
    with pytest.raises(NotImplementedError, match="does not support"):
        DQNLoss(make_action_value(), action_space="categorical", value_estimator="gae")


def test_the_value_estimator_setter_takes_modules_only():
    loss = DQNLoss(make_action_value(), action_space="categorical")
    est = TD0Estimator(gamma=0.1)
    loss.value_estimator = est
    assert loss.value_estimator is est
    with pytest.raises(TypeError, match="make_value_estimator"):
        loss.value_estimator = "td0"


def test_the_registry_is_read_only():
    view = registered_value_estimators()
    assert view[ValueEstimators.GAE] is GAE
    with pytest.raises(TypeError):
        view[ValueEstimators.GAE] = TD0Estimator  # type: ignore[index]

    class MyGAE(GAE):
        pass

    # a built-in entry can never be replaced, under its member or its name in any case
    with pytest.raises(ValueError, match="cannot be replaced"):
        register_value_estimator(ValueEstimators.GAE)(MyGAE)
    with pytest.raises(ValueError, match="shadow the built-in"):
        register_value_estimator("GAE")(MyGAE)
    assert registered_value_estimators()[ValueEstimators.GAE] is GAE
    assert type(build_value_estimator("gae")) is GAE
    # a new name registers once; registering it again to another class fails
    register_value_estimator("test_registry_my_gae")(MyGAE)
    assert registered_value_estimators()["test_registry_my_gae"] is MyGAE
    register_value_estimator("test_registry_my_gae")(MyGAE)  # the same class again: no-op
    with pytest.raises(ValueError, match="already registered to MyGAE"):
        register_value_estimator("test_registry_my_gae")(GAE)


def test_make_value_estimator_takes_an_estimator_class_and_keeps_value_type():
    loss = A2CLoss(make_categorical_actor(), make_value(), gamma=0.7)
    assert loss.value_type is ValueEstimators.GAE  # the default, before any estimator is built
    assert loss.make_value_estimator(TD1Estimator) is loss
    assert isinstance(loss.value_estimator, TD1Estimator) and loss.value_type is TD1Estimator
    assert loss.value_estimator.gamma == 0.7 and loss.value_estimator.value_network is not None
    loss.make_value_estimator(GAE, gamma=0.5, lmbda=0.9, value_network=None)
    assert loss.value_estimator.gamma == 0.5 and loss.value_estimator.value_network is None
    loss.make_value_estimator("td0")
    assert loss.value_type is ValueEstimators.TD0
