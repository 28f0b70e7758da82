"""SatelliteAttitudeTransform: attitude targets -> CMG gimbal-rate macros, against a
finite-difference Jacobian and the closed-form rotation vector."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from rl_envs import Bounded, Composite, SatelliteAttitudeTransform, SatelliteMacroAction, Unbounded
from rl_envs.transforms.satellite_attitude import cmg_geometry, cmg_jacobian, quat_error_vector


def _axis_angle(axis, angle):
    axis = torch.tensor(axis, dtype=torch.float64)
    axis = axis / axis.norm()
    return torch.cat([torch.tensor([math.cos(angle / 2)]), math.sin(angle / 2) * axis])


def _rotate(v, axis, angle):  # full Rodrigues formula, axial term included
    k = axis / axis.norm()
    return (
        v * math.cos(angle)
        + torch.linalg.cross(k, v) * math.sin(angle)
        + k * (k @ v) * (1 - math.cos(angle))
    )


def test_error_vector_is_axis_times_angle():
    identity = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    target = _axis_angle([1.0, 2.0, -2.0], 0.7)
    expected = torch.tensor([1.0, 2.0, -2.0], dtype=torch.float64) / 3.0 * 0.7
    torch.testing.assert_close(quat_error_vector(identity, target), expected)
    # q and -q are the same attitude: the shortest rotation either way
    torch.testing.assert_close(quat_error_vector(identity, -target), expected)
    # error in the body frame: rotate the body first, the remaining rotation stays 0.7 about the axis
    start = _axis_angle([0.0, 0.0, 1.0], 0.4)
    both = torch.tensor(
        [math.cos(0.55), 0.0, 0.0, math.sin(0.55)], dtype=torch.float64
    )  # 1.1 rad about z
    torch.testing.assert_close(
        quat_error_vector(start, both), torch.tensor([0.0, 0.0, 0.7], dtype=torch.float64)
    )


@pytest.mark.parametrize("n", [4, 6])
def test_jacobian_matches_finite_differences(n):
    gimbal, rotor = cmg_geometry(n, torch.float64)
    angles = torch.linspace(-0.8, 0.9, n, dtype=torch.float64)

    def momentum(a):
        return sum(_rotate(rotor[:, i], gimbal[:, i], float(a[i])) for i in range(n)) * 2.0

    jac = cmg_jacobian(angles, gimbal, rotor, rotor_h=2.0)
    eps = 1e-6
    for i in range(n):
        step = torch.zeros(n, dtype=torch.float64)
        step[i] = eps
        fd = (momentum(angles + step) - momentum(angles - step)) / (2 * eps)
        torch.testing.assert_close(jac[:, i], fd, atol=1e-8, rtol=1e-6)


def _td(target, omega=(0.0, 0.0, 0.0), n=6):
    angles = torch.zeros(1, n, dtype=torch.float64)
    return TensorDict(
        action=target,
        bus_quat=torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64),
        bus_omega=torch.tensor([omega], dtype=torch.float64),
        gimbal_angles=torch.cat([angles.sin(), angles.cos()], -1),
        batch_size=[1],
    )


def test_command_produces_the_pd_torque():
    t = SatelliteAttitudeTransform(num_cmgs=6, action_scale=10.0, macro_steps=2, settle_steps=1)
    target = _axis_angle([0.0, 1.0, 1.0], 0.2).unsqueeze(0)
    omega = (0.01, -0.02, 0.03)
    seq = t.inv(_td(target, omega))["action"]
    assert seq.shape == (1, 3, 6) and seq.dtype == torch.float64
    rate = seq[0, -1] * 10.0
    gimbal, rotor = cmg_geometry(6, torch.float64)
    torque = -cmg_jacobian(torch.zeros(6, dtype=torch.float64), gimbal, rotor) @ rate
    err = torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64) / math.sqrt(2) * 0.2
    torch.testing.assert_close(torque, 5.0 * err - 8.0 * torch.tensor(omega, dtype=torch.float64))
    torch.testing.assert_close(seq[0, 0], seq[0, -1] / 2)  # ramped from zero


def test_identity_wait_and_structured_targets():
    t = SatelliteAttitudeTransform(num_cmgs=6, macro_steps=2, settle_steps=0)
    identity = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    assert t.inv(_td(identity))["action"].abs().sum() == 0
    turn = _axis_angle([1.0, 0.0, 0.0], 1.0).unsqueeze(0)
    assert t.inv(_td(turn))["action"].abs().sum() > 0
    wait = TensorDict(mode=torch.tensor([[0]]), target=turn, batch_size=[1])
    assert t.inv(_td(wait))["action"].abs().sum() == 0
    slew = SatelliteMacroAction.slew_attitude(2 * turn, steps=3, settle_steps=2)
    torch.testing.assert_close(slew.target, turn)
    assert t.inv(_td(slew))["action"].shape == (1, 5, 6)


def test_errors_and_spec_dtype():
    t = SatelliteAttitudeTransform(num_cmgs=4)
    with pytest.raises(RuntimeError, match="gimbal_angles"):
        t.inv(TensorDict(action=torch.ones(1, 4), bus_quat=torch.ones(1, 4), batch_size=[1]))
    with pytest.raises(ValueError, match="shape"):
        t.inv(_td(torch.ones(1, 3), n=4))
    with pytest.raises(ValueError, match="num_cmgs"):
        SatelliteAttitudeTransform(num_cmgs=5)
    spec = t.transform_input_spec(
        Composite(
            full_action_spec=Composite(action=Bounded(-1.0, 1.0, (2, 4)), shape=(2,)),
            full_observation_spec=Composite(
                bus_quat=Unbounded((2, 4), dtype=torch.float64), shape=(2,)
            ),
            shape=(2,),
        )
    )["full_action_spec"]
    assert spec["action", "target"].dtype == torch.float64
    assert spec["action", "mode"].n == 2
