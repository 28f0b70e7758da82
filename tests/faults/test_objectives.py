"""Fault suite of rl-objectives: hostile hyperparameters and non-finite inputs.

Every hyperparameter of an estimator or a loss is range-checked when it is set (at
construction, or a later ``loss.gamma = ...``), with a message naming the owner, the name,
the range and the value. Non-finite *inputs* are a documented choice: by default they
propagate (a per-call check would sync the device on every step); with ``debug=True`` they
raise, naming the entry.
"""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import nn
from torch.distributions import Normal

from rl_envs import Bounded
from rl_objectives import (
    GAE,
    ClipPPOLoss,
    DQNLoss,
    HardUpdate,
    IQLLoss,
    SoftUpdate,
    TD3BCLoss,
)
from rl_objectives.value import TD0Estimator, TDLambdaEstimator, VTrace
from rl_objectives.value.functional import (
    generalized_advantage_estimate,
    td0_return_estimate,
    td_lambda_return_estimate,
)

BAD_UNIT = [-0.5, 1.5, math.nan, math.inf]


def critic() -> TensorDictModule:
    return TensorDictModule(nn.Linear(3, 1), ["observation"], ["state_value"])


def actor() -> ProbabilisticTensorDictSequential:
    params = TensorDictModule(
        nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()), ["observation"], ["loc", "scale"]
    )
    head = ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"], out_keys=["action"], distribution_class=Normal,
        return_log_prob=True,
    )  # fmt: skip
    return ProbabilisticTensorDictSequential(params, head)


def qvalue() -> TensorDictModule:
    class Q(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 1)

        def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
            return self.lin(torch.cat([obs, act], -1))

    return TensorDictModule(Q(), ["observation", "action"], ["state_action_value"])


def trajectory(t: int = 6, reward: float = 1.0) -> TensorDict:
    return TensorDict(
        {
            "observation": torch.randn(t, 3),
            ("next", "observation"): torch.randn(t, 3),
            ("next", "reward"): torch.full((t, 1), reward),
            ("next", "done"): torch.zeros(t, 1, dtype=torch.bool),
            ("next", "terminated"): torch.zeros(t, 1, dtype=torch.bool),
        },
        batch_size=[t],
    )


# -- estimators ----------------------------------------------------------------------


@pytest.mark.parametrize("gamma", BAD_UNIT)
@pytest.mark.parametrize("estimator", ["gae", "td0", "tdlambda"])
def test_estimators_refuse_a_discount_outside_0_1(estimator: str, gamma: float) -> None:
    build = {
        "gae": lambda: GAE(gamma=gamma, lmbda=0.95, value_network=critic()),
        "td0": lambda: TD0Estimator(gamma=gamma, value_network=critic()),
        "tdlambda": lambda: TDLambdaEstimator(gamma=gamma, lmbda=0.9, value_network=critic()),
    }[estimator]
    with pytest.raises(ValueError, match=r"gamma must be a number in \[0, 1\], got"):
        build()


@pytest.mark.parametrize("lmbda", [-1.0, 2.0, math.nan])
@pytest.mark.parametrize("cls", [GAE, TDLambdaEstimator])
def test_estimators_refuse_a_lambda_outside_0_1(cls: type, lmbda: float) -> None:
    with pytest.raises(ValueError, match=rf"{cls.__name__}: lmbda must be a number in \[0, 1\]"):
        cls(gamma=0.99, lmbda=lmbda, value_network=critic())


def test_estimator_refuses_a_bad_discount_assigned_later() -> None:
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=critic())
    with pytest.raises(ValueError, match="GAE: gamma must be"):
        gae.gamma = 1.5
    assert gae.gamma == 0.99  # the bad value was not kept


def test_estimator_checks_every_entry_of_a_tensor_discount() -> None:
    gamma = torch.full((6, 1), 0.9)
    gamma[3] = 1.2
    with pytest.raises(ValueError, match=r"every entry of the tensor gamma .* got 1.2"):
        TD0Estimator(gamma=gamma, value_network=critic())
    TD0Estimator(gamma=torch.full((6, 1), 0.9), value_network=critic())  # in range: accepted


def test_estimator_refuses_a_boolean_or_text_discount() -> None:
    with pytest.raises(TypeError, match="gamma must be a number in"):
        GAE(gamma=True, lmbda=0.95, value_network=critic())
    with pytest.raises(TypeError, match=r"got '0\.99'"):
        GAE(gamma="0.99", lmbda=0.95, value_network=critic())


@pytest.mark.parametrize("name", ["rho_thresh", "c_thresh"])
@pytest.mark.parametrize("value", [0.0, -1.0, math.nan])
def test_vtrace_refuses_non_positive_thresholds(name: str, value: float) -> None:
    kwargs = {"rho_thresh": 1.0, "c_thresh": 1.0, name: value}
    # rho_thresh <= 0 is caught by V-trace's own rho_thresh >= c_thresh check first
    with pytest.raises(ValueError, match=f"{name}"):
        VTrace(gamma=0.99, actor_network=actor(), value_network=critic(), **kwargs)


@pytest.mark.parametrize(
    "call",
    [
        lambda g, v, r, d: generalized_advantage_estimate(g, 0.95, v, v, r, d),
        lambda g, v, r, d: generalized_advantage_estimate(0.99, g, v, v, r, d),
        lambda g, v, r, d: td0_return_estimate(g, v, r, d),
        lambda g, v, r, d: td_lambda_return_estimate(g, 0.9, v, r, d),
    ],
    ids=["gae-gamma", "gae-lmbda", "td0-gamma", "tdlambda-gamma"],
)
def test_functional_estimators_refuse_a_float_factor_outside_0_1(call) -> None:
    v, r = torch.zeros(4, 1), torch.ones(4, 1)
    d = torch.zeros(4, 1, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"must be a number in \[0, 1\], got nan"):
        call(math.nan, v, r, d)


def test_nan_rewards_propagate_by_default_and_raise_with_debug() -> None:
    # documented: no per-call check (it would sync the device); debug=True names the entry
    td = trajectory()
    td["next", "reward"][2] = math.nan
    with torch.no_grad():
        out = GAE(gamma=0.99, lmbda=0.95, value_network=critic())(td.clone())
    assert out["advantage"][:3].isnan().all() and out["advantage"][3:].isfinite().all()
    with pytest.raises(ValueError, match=r"'reward'\) holds 1 non-finite value"):
        GAE(gamma=0.99, lmbda=0.95, value_network=critic(), debug=True)(td.clone())


def test_infinite_values_raise_with_debug_naming_the_entry() -> None:
    td = trajectory()
    td["state_value"] = torch.zeros(6, 1)
    td["next", "state_value"] = torch.full((6, 1), math.inf)
    with pytest.raises(ValueError, match="state_value"):
        TD0Estimator(gamma=0.9, debug=True)(td)


# -- losses --------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [-1.0, 1.5, math.nan])
def test_dqn_loss_refuses_a_bad_discount(gamma: float) -> None:
    net = TensorDictModule(nn.Linear(3, 2), ["observation"], ["action_value"])
    with pytest.raises(ValueError, match=r"DQNLoss: gamma must be a number in \[0, 1\]"):
        DQNLoss(net, action_space="categorical", gamma=gamma)
    loss = DQNLoss(net, action_space="categorical")
    with pytest.raises(ValueError, match=r"gamma must be a number in \[0, 1\]"):
        loss.make_value_estimator(gamma=gamma)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"clip_epsilon": math.nan}, r"clip_epsilon must give 0 <= eps_low"),
        ({"clip_epsilon": -0.2}, r"clip_epsilon must give 0 <= eps_low"),
        ({"clip_epsilon": (0.1, math.inf)}, r"clip_epsilon\[1\] must be a number >= 0"),
        ({"entropy_coeff": -0.01}, r"entropy_coeff must be a number >= 0"),
        ({"critic_coeff": math.nan}, r"critic_coeff must be a number >= 0, got nan"),
        ({"gamma": 1.5}, r"gamma must be a number in \[0, 1\]"),
    ],
)
def test_ppo_loss_refuses_hostile_coefficients(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClipPPOLoss(actor(), critic(), **kwargs)


def test_loss_refuses_a_bad_coefficient_assigned_later() -> None:
    loss = ClipPPOLoss(actor(), critic())
    with pytest.raises(ValueError, match="ClipPPOLoss: entropy_coeff must be"):
        loss.entropy_coeff = math.inf


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"expectile": 1.0}, r"expectile must be a number in \(0, 1\)"),
        ({"expectile": 0.0}, r"expectile must be a number in \(0, 1\)"),
        ({"temperature": 0.0}, r"temperature must be a number > 0"),
        ({"temperature": -3.0}, r"temperature must be a number > 0"),
    ],
)
def test_iql_loss_refuses_a_degenerate_expectile_or_temperature(kwargs: dict, message: str) -> None:
    v = TensorDictModule(nn.Linear(3, 1), ["observation"], ["state_value"])
    with pytest.raises(ValueError, match=message):
        IQLLoss(actor(), qvalue(), v, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": -2.5}, r"alpha must be a number >= 0"),
        ({"policy_noise": -0.2}, r"policy_noise must be a number >= 0"),
        ({"noise_clip": math.nan}, r"noise_clip must be a number >= 0, got nan"),
    ],
)
def test_td3_bc_loss_refuses_negative_noise_or_weight(kwargs: dict, message: str) -> None:
    det = TensorDictModule(nn.Sequential(nn.Linear(3, 1), nn.Tanh()), ["observation"], ["action"])
    spec = Bounded(-1.0, 1.0, shape=(1,))
    with pytest.raises(ValueError, match=message):
        TD3BCLoss(det, qvalue_for(1), action_spec=spec, **kwargs)


def qvalue_for(action_dim: int) -> TensorDictModule:
    class Q(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3 + action_dim, 1)

        def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
            return self.lin(torch.cat([obs, act], -1))

    return TensorDictModule(Q(), ["observation", "action"], ["state_action_value"])


@pytest.mark.parametrize("alpha_init", [0.0, -1.0, math.nan])
def test_sac_temperature_refuses_a_non_positive_initial_alpha(alpha_init: float) -> None:
    from rl_objectives import SACLoss

    # before: alpha_init=0 or < 0 died in math.log with "math domain error"
    with pytest.raises(ValueError, match=r"Temperature: alpha_init must be a number > 0"):
        SACLoss(actor(), qvalue(), alpha_init=alpha_init)


@pytest.mark.parametrize("tau", [-0.1, 1.5, math.nan])
def test_soft_update_refuses_tau_outside_0_1(tau: float) -> None:
    net = TensorDictModule(nn.Linear(3, 2), ["observation"], ["action_value"])
    loss = DQNLoss(net, action_space="categorical", delay_value=True)
    with pytest.raises(ValueError, match=r"SoftUpdate: tau must be a number in \[0, 1\]"):
        SoftUpdate(loss, tau=tau)


@pytest.mark.parametrize("interval", [math.nan, 2.5, -1])
def test_hard_update_refuses_a_non_integer_interval(interval: float) -> None:
    # before: nan was accepted and the target network was never copied again
    net = TensorDictModule(nn.Linear(3, 2), ["observation"], ["action_value"])
    loss = DQNLoss(net, action_space="categorical", delay_value=True)
    with pytest.raises(ValueError, match=r"value_network_update_interval must be an integer >= 0"):
        HardUpdate(loss, value_network_update_interval=interval)


def test_loss_with_debug_names_a_nan_input_entry() -> None:
    net = TensorDictModule(nn.Linear(3, 2), ["observation"], ["action_value"])
    loss = DQNLoss(net, action_space="categorical", debug=True, delay_value=False)
    td = trajectory(4)
    td["action"] = torch.zeros(4, dtype=torch.long)
    td["next", "reward"][0] = math.nan
    with pytest.raises(ValueError, match="reward"):
        loss(td)
