"""UR-style arm macros: joint / Cartesian moves and gripper commands for a 6-joint arm.

The low-level action is 7 numbers: six joint-position targets and one gripper command.
:class:`RobotMacroAction` is what a policy or a script writes; :class:`URScriptPrimitiveTransform`
turns it into ``[*B, T, 7]`` with :class:`~rl_envs.MacroPrimitiveTransform`'s interpolation.
Cartesian targets need an inverse-kinematics callable (:class:`CartesianSolver`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from enum import IntEnum
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_envs.specs import Categorical, Composite, Unbounded
from rl_envs.transforms.macro_primitive import (
    MacroAction,
    MacroPrimitiveTransform,
    duration_fields,
    first_int,
    has_field,
    interpolate_macro,
    is_structured,
)

__all__ = [
    "CartesianSolver",
    "RobotMacroAction",
    "RobotMacroActionMode",
    "URScriptPrimitive",
    "URScriptPrimitiveTransform",
]

Gripper = Literal["keep", "open", "closed"]
_GRIPPER_CODES = {"keep": -1, "open": 0, "closed": 1}
_FEATURES = {
    "orientation_mask": "RobotMacroAction.reach_pose(orientation_mask=...)",
    "waypoints": "RobotMacroAction.reach_pose(path='cartesian')",
}


@runtime_checkable
class CartesianSolver(Protocol):
    """Inverse kinematics for ``reach_pose``: ``solver(target_pose, start_action, *,
    orientation_mask=None, waypoints=None)``.

    ``target_pose`` is ``[*B, 7]`` (position, then a ``(w, x, y, z)`` quaternion; an all-zero
    quaternion means "any orientation"); ``start_action`` ``[*B, 7]`` seeds the solve and
    its gripper entry is passed through. ``orientation_mask`` ``[*B, 3]`` weighs the
    rotation error about the world x, y, z axes (0: free). With ``waypoints=n`` the solver
    returns the ``[*B, n, 7]`` joint path along the straight Cartesian line, else the
    endpoint ``[*B, 7]``. A two-argument callable is a valid solver without those keywords.

    Example:
        >>> isinstance(lambda pose, start: start, CartesianSolver)
        True
    """

    def __call__(
        self,
        target_pose: torch.Tensor,
        start_action: torch.Tensor,
        *,
        orientation_mask: torch.Tensor | None = None,
        waypoints: int | None = None,
    ) -> torch.Tensor: ...


class URScriptPrimitive(IntEnum):
    """URScript-style primitive ids (``WAIT`` and ``MOVEJ`` are the generic WAIT / MOVE).

    Example:
        >>> int(URScriptPrimitive.MOVEL), str(URScriptPrimitive.OPEN_GRIPPER)
        (2, 'open_gripper')
    """

    WAIT = 0
    MOVEJ = 1
    MOVEL = 2
    OPEN_GRIPPER = 3
    CLOSE_GRIPPER = 4

    def __str__(self) -> str:
        return self.name.lower()


class RobotMacroActionMode(IntEnum):
    """The modes of :class:`RobotMacroAction`: the URScript ones plus ``RESET`` (go home).

    Example:
        >>> int(RobotMacroActionMode.RESET)
        5
    """

    WAIT = 0
    REACH_JOINTS = 1
    REACH_POSE = 2
    OPEN_GRIPPER = 3
    CLOSE_GRIPPER = 4
    RESET = 5


class _Reset:
    def __repr__(self) -> str:
        return "RobotMacroAction.RESET"


def _batched(value: torch.Tensor, dim: int, name: str) -> torch.Tensor:
    if value.ndim == 0 or value.shape[-1] != dim:
        raise ValueError(
            f"{name} must end with a dimension of size {dim}, got {tuple(value.shape)}."
        )
    return value.unsqueeze(0) if value.ndim == 1 else value


def _nan(shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=like.dtype, device=like.device)


class RobotMacroAction(MacroAction):
    """A readable arm command: reach a pose or joints, open / close the gripper, wait, reset.

    Fields (all ``[*B, ...]``): ``position`` (3), ``quaternion`` (4, zero = free),
    ``joints`` (6), ``gripper`` (code: -1 keep, 0 open, 1 closed), ``gripper_command``
    (a raw command overriding the code; NaN: none), ``orientation_mask`` (3; NaN: none),
    ``path`` (0 joint-space, 1 Cartesian), plus ``mode`` / ``steps`` / ``settle_steps``.
    ``RobotMacroAction.RESET`` (a marker, written as the action) asks for the parent env's
    ``robot_home_qpos``.

    Example:
        >>> RobotMacroAction.reach_joints(joints=torch.zeros(6), steps=4).joints.shape
        torch.Size([1, 6])
    """

    position: torch.Tensor
    quaternion: torch.Tensor
    joints: torch.Tensor
    gripper: torch.Tensor
    gripper_command: torch.Tensor
    orientation_mask: torch.Tensor
    path: torch.Tensor

    GRIPPER_KEEP: ClassVar[int] = -1
    GRIPPER_OPEN: ClassVar[int] = 0
    GRIPPER_CLOSED: ClassVar[int] = 1
    PATH_JOINT: ClassVar[int] = 0
    PATH_CARTESIAN: ClassVar[int] = 1
    RESET: ClassVar[_Reset] = _Reset()

    @classmethod
    def reach_pose(
        cls,
        *,
        position: torch.Tensor,
        quaternion: torch.Tensor | None = None,
        orientation_mask: torch.Tensor | tuple[float, float, float] | None = None,
        path: Literal["joint", "cartesian"] = "joint",
        gripper: Gripper = "keep",
        gripper_command: float | torch.Tensor | None = None,
        steps: int = 16,
        settle_steps: int = 0,
    ) -> RobotMacroAction:
        """Move the end effector to ``position`` (and ``quaternion``); ``path="cartesian"``
        keeps it on the straight line (the solver is asked for every waypoint)."""
        if path not in ("joint", "cartesian"):
            raise ValueError(f"path must be 'joint' or 'cartesian', got {path!r}.")
        position = _batched(position, 3, "position")
        quat = torch.zeros((*position.shape[:-1], 4), dtype=position.dtype)
        if quaternion is not None:
            quat = _batched(quaternion, 4, "quaternion")
        mask = None
        if orientation_mask is not None:
            mask = torch.as_tensor(orientation_mask, dtype=position.dtype)
            mask = _batched(mask, 3, "orientation_mask")
        return cls._make(
            RobotMacroActionMode.REACH_POSE,
            position=position,
            quaternion=quat,
            orientation_mask=mask,
            path=cls.PATH_CARTESIAN if path == "cartesian" else cls.PATH_JOINT,
            gripper=gripper,
            gripper_command=gripper_command,
            steps=steps,
            settle_steps=settle_steps,
        )

    @classmethod
    def reach_joints(
        cls,
        *,
        joints: torch.Tensor,
        gripper: Gripper = "keep",
        gripper_command: float | torch.Tensor | None = None,
        steps: int = 16,
        settle_steps: int = 0,
    ) -> RobotMacroAction:
        """Move the six joints to ``joints`` (``[6]`` or ``[*B, 6]``)."""
        joints = _batched(joints, 6, "joints")
        return cls._make(
            RobotMacroActionMode.REACH_JOINTS,
            joints=joints,
            gripper=gripper,
            gripper_command=gripper_command,
            steps=steps,
            settle_steps=settle_steps,
        )

    @classmethod
    def open_gripper(
        cls, *, steps: int = 16, settle_steps: int = 0, **batch: Any
    ) -> RobotMacroAction:
        """Open the gripper, arm still (``batch_size`` / ``dtype`` / ``device`` keywords)."""
        return cls._make(
            RobotMacroActionMode.OPEN_GRIPPER,
            gripper="open",
            steps=steps,
            settle_steps=settle_steps,
            **batch,
        )

    @classmethod
    def close_gripper(
        cls,
        *,
        command: float | torch.Tensor | None = None,
        steps: int = 16,
        settle_steps: int = 0,
        **batch: Any,
    ) -> RobotMacroAction:
        """Close the gripper (to ``command`` when given), arm still."""
        return cls._make(
            RobotMacroActionMode.CLOSE_GRIPPER,
            gripper="closed",
            gripper_command=command,
            steps=steps,
            settle_steps=settle_steps,
            **batch,
        )

    @classmethod
    def wait(
        cls,
        *,
        gripper: Gripper = "keep",
        gripper_command: float | torch.Tensor | None = None,
        steps: int = 1,
        settle_steps: int = 0,
        **batch: Any,
    ) -> RobotMacroAction:
        """Hold the arm for ``steps``."""
        return cls._make(
            RobotMacroActionMode.WAIT,
            gripper=gripper,
            gripper_command=gripper_command,
            steps=steps,
            settle_steps=settle_steps,
            **batch,
        )

    @classmethod
    def _make(
        cls,
        mode: RobotMacroActionMode,
        *,
        position: torch.Tensor | None = None,
        quaternion: torch.Tensor | None = None,
        joints: torch.Tensor | None = None,
        orientation_mask: torch.Tensor | None = None,
        path: int = 0,
        gripper: Gripper = "keep",
        gripper_command: float | torch.Tensor | None = None,
        steps: int = 16,
        settle_steps: int = 0,
        batch_size: Any = None,
        dtype: torch.dtype | None = None,
        device: Any = None,
    ) -> RobotMacroAction:
        if gripper not in _GRIPPER_CODES:
            raise ValueError(f"gripper must be 'keep', 'open' or 'closed', got {gripper!r}.")
        ref = position if position is not None else joints
        if ref is None:
            batch = torch.Size([1] if batch_size is None else batch_size)
            ref = torch.zeros((*batch, 3), dtype=dtype, device=device)
        batch = ref.shape[:-1]

        def full(dim: int, value: float) -> torch.Tensor:
            return torch.full((*batch, dim), value, dtype=ref.dtype, device=ref.device)

        identity = full(4, 0.0)
        identity[..., 0] = 1.0
        command = _nan((*batch, 1), ref)
        if gripper_command is not None:
            value = torch.as_tensor(gripper_command, dtype=ref.dtype, device=ref.device)
            command = (
                value.reshape(-1, 1).expand(*batch, 1).clone()
                if value.numel() == 1
                else (value.reshape(*batch, 1))
            )
        return cls(
            position=full(3, 0.0) if position is None else position,
            quaternion=identity if quaternion is None else quaternion.to(ref),
            joints=full(6, 0.0) if joints is None else joints,
            gripper=torch.full((*batch, 1), _GRIPPER_CODES[gripper], device=ref.device),
            gripper_command=command,
            orientation_mask=(
                _nan((*batch, 3), ref)
                if orientation_mask is None
                else orientation_mask.to(ref).expand(*batch, 3)
            ),
            path=torch.full((*batch, 1), int(path), device=ref.device),
            batch_size=batch,
            **duration_fields(int(mode), steps, settle_steps, batch, ref.device),
        )


def _unsupported_keywords(solver: Callable[..., Any], names: list[str]) -> list[str]:
    try:
        params = inspect.signature(solver).parameters.values()
    except (TypeError, ValueError):
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return []
    accepted = {p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    return [n for n in names if n not in accepted]


class URScriptPrimitiveTransform(MacroPrimitiveTransform):
    """Expands a :class:`RobotMacroAction` into ``[*B, T, 7]`` joint + gripper targets.

    The start is the observed arm (``robot_qpos_key``, 6 joints) and gripper
    (``gripper_qpos_key``, first entry). ``reach_joints`` targets the joints;
    ``reach_pose`` asks ``cartesian_solver`` (else the parent env's
    ``_cartesian_pose_to_joint_target``) for them; gripper commands map "open" / "closed"
    to ``open_gripper_ctrl`` / ``close_gripper_ctrl`` (a ``gripper_command`` overrides),
    "keep" holds the observed value. During an arm move the gripper command is held from
    the first step; an open / close ramps it. A raw ``[*B, 7]`` tensor is a direct target.

    Args:
        action_key: where the macro action is read and the sequence written.
        robot_qpos_key, gripper_qpos_key: the arm and gripper observations.
        macro_steps, settle_steps: durations when the action does not say (16, 0).
        action_dim: 6 joints + 1 gripper (7).
        cartesian_solver: a :class:`CartesianSolver`.
        open_gripper_ctrl, close_gripper_ctrl: the gripper commands (0, 255).
        **execution: ``execute`` and the ``MultiAction`` options of
            :class:`MacroPrimitiveTransform` (``execute=True`` returns a ``Compose``).

    Example:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(action=RobotMacroAction.close_gripper(steps=2),
        ...     robot_qpos=torch.zeros(1, 6), gripper_qpos=torch.zeros(1, 2), batch_size=[1])
        >>> URScriptPrimitiveTransform().inv(td)["action"][0, :, -1]
        tensor([127.5000, 255.0000])
    """

    primitive_enum = RobotMacroActionMode

    def __init__(
        self,
        *,
        action_key: NestedKey = "action",
        robot_qpos_key: NestedKey = "robot_qpos",
        gripper_qpos_key: NestedKey = "gripper_qpos",
        macro_steps: int = 16,
        settle_steps: int = 0,
        action_dim: int = 7,
        cartesian_solver: CartesianSolver | Callable[..., torch.Tensor] | None = None,
        open_gripper_ctrl: float = 0.0,
        close_gripper_ctrl: float = 255.0,
        **execution: Any,
    ) -> None:
        super().__init__(
            action_key=action_key,
            macro_steps=macro_steps,
            settle_steps=settle_steps,
            action_dim=action_dim,
            **execution,
        )
        self.robot_qpos_key = robot_qpos_key
        self.gripper_qpos_key = gripper_qpos_key
        self.cartesian_solver = cartesian_solver
        self.open_gripper_ctrl = float(open_gripper_ctrl)
        self.close_gripper_ctrl = float(close_gripper_ctrl)

    def low_level_action(
        self, robot_qpos: torch.Tensor, gripper: float | torch.Tensor | None = None
    ) -> torch.Tensor:
        """``[*B, 7]`` from joints ``[*B, 6]`` and a gripper command (default: open)."""
        out = torch.zeros(
            (*robot_qpos.shape[:-1], self.action_dim),
            dtype=robot_qpos.dtype,
            device=robot_qpos.device,
        )
        out[..., :-1] = robot_qpos[..., : self.action_dim - 1]
        value = self.open_gripper_ctrl if gripper is None else gripper
        value = torch.as_tensor(value, dtype=out.dtype, device=out.device)
        if value.numel() == 1:
            out[..., -1] = value.reshape(())
        else:
            out[..., -1:] = value.reshape(*out.shape[:-1], 1)
        return out

    def current_action(
        self,
        tensordict: TensorDictBase,
        batch_shape: torch.Size,
        device: torch.device,
        dtype: torch.dtype,
        action_dim: int,
    ) -> torch.Tensor:
        start = torch.zeros((*batch_shape, self.action_dim), dtype=dtype, device=device)
        qpos = tensordict.get(self.robot_qpos_key, None)
        if qpos is not None:
            start[..., :-1] = qpos[..., : self.action_dim - 1].to(start)
        grip = tensordict.get(self.gripper_qpos_key, None)
        if grip is not None:
            start[..., -1] = grip[..., 0].to(start)
        return start

    def _dtype(self, tensordict: TensorDictBase) -> torch.dtype:
        for key in (self.robot_qpos_key, self.gripper_qpos_key):
            value = tensordict.get(key, None)
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                return value.dtype
        return torch.get_default_dtype()

    def _read_action(self, tensordict: TensorDictBase) -> Any:
        action = super()._read_action(tensordict)
        if isinstance(getattr(action, "data", None), _Reset):  # a NonTensorData wrapper
            action = action.data
        if isinstance(action, _Reset):
            batch = tensordict.batch_size
            action = RobotMacroAction._make(
                RobotMacroActionMode.RESET,
                gripper="open",
                steps=self.macro_steps,
                settle_steps=self.settle_steps,
                batch_size=batch,
                dtype=self._dtype(tensordict),
                device=tensordict.device,
            )
        return action

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = self._read_action(tensordict)
        start, target, steps, settle = self._resolve(tensordict, action)
        seq = self._cartesian_path(tensordict, action, start, target, steps, settle)
        return tensordict.set(self.action_key, seq)

    def _resolve(
        self, tensordict: TensorDictBase, action: Any
    ) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        batch = tensordict.batch_size
        dtype = self._dtype(tensordict)
        device = action.device if action.device is not None else tensordict.device
        start = self.current_action(tensordict, batch, device, dtype, self.action_dim)
        if isinstance(action, torch.Tensor):
            target = action.to(start).reshape(*batch, self.action_dim)
            return start, target, self.macro_steps, self.settle_steps
        if not is_structured(action) or not has_field(action, "mode"):
            raise TypeError(
                f"{type(self).__name__} expected a RobotMacroAction (or a TensorDict with "
                f"'mode') or a [*B, {self.action_dim}] tensor under {self.action_key!r}, got "
                f"{type(action).__name__}."
            )
        mode = action.get("mode").reshape(*batch, 1)
        is_ = {m: mode == int(m) for m in RobotMacroActionMode}
        joints = self._field(action, "joints", batch, start, start[..., :-1])
        if bool(is_[RobotMacroActionMode.RESET].any()):
            home = self._home_qpos(batch, start)
            joints = torch.where(is_[RobotMacroActionMode.RESET], home, joints)
        target = start.clone()
        move_joints = is_[RobotMacroActionMode.REACH_JOINTS] | is_[RobotMacroActionMode.RESET]
        target[..., :-1] = torch.where(move_joints, joints, start[..., :-1])
        if bool(is_[RobotMacroActionMode.REACH_POSE].any()):
            pose_target = self._solve(self._pose(action, batch, start), start, action, batch)
            target = torch.where(is_[RobotMacroActionMode.REACH_POSE], pose_target, target)
        grip = self._gripper(action, mode, start, batch)
        target[..., -1:] = grip
        arm_move = ~(
            is_[RobotMacroActionMode.OPEN_GRIPPER] | is_[RobotMacroActionMode.CLOSE_GRIPPER]
        )
        start = start.clone()
        start[..., -1:] = torch.where(arm_move, grip, start[..., -1:])
        steps = first_int(action, "steps", self.macro_steps)
        settle = first_int(action, "settle_steps", self.settle_steps)
        return start, target, steps, settle

    @staticmethod
    def _field(
        action: Any, key: str, batch: torch.Size, like: torch.Tensor, default: torch.Tensor
    ) -> torch.Tensor:
        if not has_field(action, key):
            return default
        value = action.get(key)
        return value.to(like).reshape(*batch, value.shape[-1])

    def _pose(self, action: Any, batch: torch.Size, like: torch.Tensor) -> torch.Tensor:
        position = self._field(action, "position", batch, like, like.new_zeros((*batch, 3)))
        identity = like.new_zeros((*batch, 4))
        identity[..., 0] = 1.0
        quaternion = self._field(action, "quaternion", batch, like, identity)
        return torch.cat([position, quaternion], -1)

    def _gripper(
        self, action: Any, mode: torch.Tensor, start: torch.Tensor, batch: torch.Size
    ) -> torch.Tensor:
        keep = start[..., -1:]
        opened = torch.full_like(keep, self.open_gripper_ctrl)
        closed = torch.full_like(keep, self.close_gripper_ctrl)
        if has_field(action, "gripper"):
            code = action.get("gripper").reshape(*batch, 1)
        else:  # a plain TensorDict: the gripper modes say it
            code = torch.full_like(mode, RobotMacroAction.GRIPPER_KEEP)
            code = torch.where(mode == int(URScriptPrimitive.OPEN_GRIPPER), 0, code)
            code = torch.where(mode == int(URScriptPrimitive.CLOSE_GRIPPER), 1, code)
        value = torch.where(code == 0, opened, torch.where(code == 1, closed, keep))
        if has_field(action, "gripper_command"):
            command = action.get("gripper_command").to(keep).reshape(*batch, 1)
            value = torch.where(torch.isfinite(command), command, value)
        return value

    def _orientation_mask(self, action: Any, batch: torch.Size, like: torch.Tensor) -> Any:
        if not has_field(action, "orientation_mask"):
            return None
        mask = action.get("orientation_mask").to(like).reshape(*batch, 3)
        return mask if bool(torch.isfinite(mask).any()) else None

    def _solve(
        self,
        pose: torch.Tensor,
        start: torch.Tensor,
        action: Any,
        batch: torch.Size,
        waypoints: int | None = None,
    ) -> torch.Tensor:
        kwargs: dict[str, Any] = {}
        mask = self._orientation_mask(action, batch, start)
        if mask is not None:
            kwargs["orientation_mask"] = mask
        if waypoints is not None:
            kwargs["waypoints"] = waypoints
        solver = self.cartesian_solver or self._parent_attr("_cartesian_pose_to_joint_target")
        if solver is None:
            wanted = set(kwargs)
            if has_field(action, "path") and bool((action.get("path") == 1).any()):
                wanted.add("waypoints")
            needs = " and ".join(_FEATURES[k] for k in sorted(wanted)) or "reach_pose"
            raise TypeError(
                f"{type(self).__name__}: {needs} needs inverse kinematics but no Cartesian "
                "solver is set; pass cartesian_solver= (a CartesianSolver) or use a parent env "
                "with _cartesian_pose_to_joint_target."
            )
        unsupported = _unsupported_keywords(solver, list(kwargs))
        if unsupported:
            needs = " and ".join(_FEATURES[k] for k in sorted(unsupported))
            raise TypeError(
                f"{type(self).__name__}: the Cartesian solver does not accept {unsupported}, "
                f"which {needs} needs; extend its signature to the CartesianSolver contract."
            )
        return solver(pose, start, **kwargs)

    def _cartesian_path(
        self,
        tensordict: TensorDictBase,
        action: Any,
        start: torch.Tensor,
        target: torch.Tensor,
        steps: int,
        settle: int,
    ) -> torch.Tensor:
        seq = interpolate_macro(start, target, steps, settle)
        if not is_structured(action) or not has_field(action, "path"):
            return seq
        batch = tensordict.batch_size
        mode = action.get("mode").reshape(*batch, 1)
        path = action.get("path").reshape(*batch, 1)
        line = (mode == int(URScriptPrimitive.MOVEL)) & (path == RobotMacroAction.PATH_CARTESIAN)
        if not bool(line.any()):
            return seq
        joints = self._solve(self._pose(action, batch, start), start, action, batch, steps)
        joints = torch.cat([joints, joints[..., -1:, :].expand(*batch, settle, -1)], -2)
        seq = seq.clone()
        seq[..., :-1] = torch.where(line.unsqueeze(-1), joints[..., :-1], seq[..., :-1])
        return seq

    def _parent_attr(self, name: str) -> Any:
        env = self.parent
        seen: set[int] = set()
        while env is not None and id(env) not in seen:
            seen.add(id(env))
            if hasattr(env, name):
                return getattr(env, name)
            env = getattr(env, "base_env", None)
        return None

    def _home_qpos(self, batch: torch.Size, like: torch.Tensor) -> torch.Tensor:
        home = self._parent_attr("robot_home_qpos")
        if callable(home):
            home = home()
        if home is None:
            raise RuntimeError(
                "RobotMacroAction.RESET needs a parent env with `robot_home_qpos`; use "
                "RobotMacroAction.reach_joints(joints=home) when there is none."
            )
        home = torch.as_tensor(home).to(like)
        if home.shape[-1] != self.action_dim - 1:
            raise RuntimeError(
                f"`robot_home_qpos` must end with {self.action_dim - 1} joints, got "
                f"{tuple(home.shape)}."
            )
        return home.expand(*batch, self.action_dim - 1)

    def transform_action_spec(self, action_spec: Any) -> Any:
        shape, device = action_spec.shape, action_spec.device
        leaf = self._leaf(action_spec)
        dtype = getattr(leaf, "dtype", None) or torch.get_default_dtype()

        def box(dim: int) -> Any:
            return Unbounded(shape=(*shape, dim), dtype=dtype, device=device)

        out = Composite(shape=shape, device=device)
        out[self.action_key] = Composite(
            mode=Categorical(
                n=len(RobotMacroActionMode), shape=(*shape, 1), dtype=torch.long, device=device
            ),
            position=box(3),
            quaternion=box(4),
            joints=box(self.action_dim - 1),
            # codes 0 open, 1 closed, anything else keep: 3 values sample all three
            gripper=Categorical(n=3, shape=(*shape, 1), dtype=torch.long, device=device),
            shape=shape,
            device=device,
        )
        return out
