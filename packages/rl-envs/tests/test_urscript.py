"""URScriptPrimitiveTransform: arm / gripper macros of a 6-joint arm -> [*B, T, 7]."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    CartesianSolver,
    PendulumEnv,
    RobotMacroAction,
    RobotMacroActionMode,
    TransformedEnv,
    URScriptPrimitive,
    URScriptPrimitiveTransform,
)


def _td(action, qpos=None, grip=0.0, batch=1):
    qpos = torch.zeros(batch, 6) if qpos is None else qpos
    return TensorDict(
        action=action,
        robot_qpos=qpos,
        gripper_qpos=torch.full((batch, 2), grip),
        batch_size=[batch],
    )


def _endpoint_solver(calls):
    def solver(target_pose, start_action):
        calls.append(target_pose)
        out = start_action.clone()
        out[..., :3] = target_pose[..., :3]
        return out

    return solver


def test_enums():
    assert [int(p) for p in URScriptPrimitive] == [0, 1, 2, 3, 4]
    assert str(URScriptPrimitive.CLOSE_GRIPPER) == "close_gripper"
    assert int(RobotMacroActionMode.REACH_POSE) == int(URScriptPrimitive.MOVEL)


def test_reach_joints_interpolates_from_the_observed_arm():
    qpos = torch.arange(6.0).unsqueeze(0)
    t = URScriptPrimitiveTransform(macro_steps=9)
    action = RobotMacroAction.reach_joints(joints=torch.full((6,), 10.0), steps=2, settle_steps=1)
    out = t.inv(_td(action, qpos, grip=0.3))["action"]
    assert out.shape == (1, 3, 7)
    torch.testing.assert_close(out[0, 0, :6], (qpos[0] + 10.0) / 2)
    torch.testing.assert_close(out[0, 2, :6], torch.full((6,), 10.0))
    torch.testing.assert_close(out[0, :, 6], torch.full((3,), 0.3))  # gripper "keep"


def test_reach_pose_calls_the_solver_and_holds_the_gripper_command():
    calls = []
    t = URScriptPrimitiveTransform(cartesian_solver=_endpoint_solver(calls))
    action = RobotMacroAction.reach_pose(
        position=torch.tensor([1.0, 2.0, 3.0]), gripper="closed", steps=4
    )
    out = t.inv(_td(action))["action"]
    assert len(calls) == 1 and calls[0].shape == (1, 7)
    torch.testing.assert_close(calls[0][0, 3:], torch.zeros(4))  # no quaternion: free
    torch.testing.assert_close(out[0, -1, :3], torch.tensor([1.0, 2.0, 3.0]))
    torch.testing.assert_close(out[0, :, 6], torch.full((4,), 255.0))  # held, not ramped


def test_reach_pose_solver_keywords():
    calls = []

    def solver(target_pose, start_action, *, orientation_mask=None, waypoints=None):
        calls.append((orientation_mask, waypoints))
        if waypoints is None:
            return start_action.clone()
        path = start_action.unsqueeze(-2).repeat(1, waypoints, 1)
        path[..., 0] = torch.arange(1.0, waypoints + 1)
        return path

    assert isinstance(solver, CartesianSolver)
    t = URScriptPrimitiveTransform(cartesian_solver=solver)
    action = RobotMacroAction.reach_pose(
        position=torch.zeros(3),
        orientation_mask=(1.0, 1.0, 0.0),
        path="cartesian",
        steps=3,
        settle_steps=1,
    )
    out = t.inv(_td(action))["action"]
    assert [w for _, w in calls] == [None, 3]
    torch.testing.assert_close(calls[0][0], torch.tensor([[1.0, 1.0, 0.0]]))
    assert out[0, :, 0].tolist() == [1.0, 2.0, 3.0, 3.0]  # the solver's path, then held


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"orientation_mask": (1.0, 0.0, 0.0)}, "orientation_mask"),
        ({"path": "cartesian"}, "waypoints"),
    ],
)
def test_two_argument_solver_cannot_honour_constraints(kwargs, match):
    t = URScriptPrimitiveTransform(cartesian_solver=_endpoint_solver([]))
    action = RobotMacroAction.reach_pose(position=torch.zeros(3), steps=2, **kwargs)
    with pytest.raises(TypeError, match=match):
        t.inv(_td(action))


def test_reach_pose_without_a_solver_raises():
    action = RobotMacroAction.reach_pose(position=torch.zeros(3), steps=2)
    with pytest.raises(TypeError, match="no Cartesian solver"):
        URScriptPrimitiveTransform().inv(_td(action))
    with pytest.raises(ValueError, match="path must be"):
        RobotMacroAction.reach_pose(position=torch.zeros(3), path="linear")


def test_gripper_commands_keep_the_arm():
    qpos = torch.arange(6.0).unsqueeze(0)
    t = URScriptPrimitiveTransform(close_gripper_ctrl=200.0)
    out = t.inv(_td(RobotMacroAction.close_gripper(steps=2), qpos))["action"]
    torch.testing.assert_close(out[0, :, :6], qpos.expand(2, 6))
    assert out[0, :, 6].tolist() == [100.0, 200.0]  # ramped
    out = t.inv(_td(RobotMacroAction.close_gripper(command=50.0, steps=2), qpos))["action"]
    assert out[0, -1, 6] == 50.0
    out = t.inv(_td(RobotMacroAction.open_gripper(steps=2), qpos, grip=80.0))["action"]
    assert out[0, :, 6].tolist() == [40.0, 0.0]


def test_reset_goes_to_the_parent_env_home_and_opens():
    class Robot(PendulumEnv):
        robot_home_qpos = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)

    env = TransformedEnv(Robot(), URScriptPrimitiveTransform(macro_steps=2))
    t = env.transform
    out = t.inv(_td(RobotMacroAction.RESET, grip=100.0))["action"]
    torch.testing.assert_close(out[0, -1], torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0]))
    with pytest.raises(RuntimeError, match="robot_home_qpos"):
        URScriptPrimitiveTransform().inv(_td(RobotMacroAction.RESET))


def test_raw_target_low_level_action_and_spec():
    t = URScriptPrimitiveTransform(macro_steps=2)
    out = t.inv(_td(torch.full((1, 7), 2.0)))["action"]
    assert out[0, 0].tolist() == [1.0] * 7
    low = t.low_level_action(torch.ones(2, 6), gripper=0.5)
    assert low.tolist() == [[1.0] * 6 + [0.5]] * 2
    spec = TransformedEnv(PendulumEnv(), URScriptPrimitiveTransform()).full_action_spec
    assert spec["action", "mode"].n == len(RobotMacroActionMode)
    assert spec["action", "joints"].shape == (6,)
    with pytest.raises(TypeError, match="RobotMacroAction"):
        t.inv(_td("move"))
