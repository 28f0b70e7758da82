"""Attitude macros for a satellite steered by control moment gyros (CMGs).

A policy names the attitude it wants (a quaternion); :class:`SatelliteAttitudeTransform`
turns it into a gimbal-rate command with a proportional-derivative law on the attitude
error, mapped through the CMG cluster's Jacobian (Wie, "Space Vehicle Dynamics and
Control", ch. 7), and spreads it over a macro of ``T`` low-level steps.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_envs.specs import Categorical, Composite, Unbounded
from rl_envs.transforms.macro_primitive import (
    MacroPrimitive,
    MacroPrimitiveTransform,
    TargetMacroAction,
    first_int,
    has_field,
    is_structured,
)

__all__ = [
    "SatelliteAttitudeTransform",
    "SatelliteMacroAction",
    "cmg_geometry",
    "cmg_jacobian",
    "quat_error_vector",
]

OBSERVATIONS = ("bus_quat", "bus_omega", "gimbal_angles")


def _unit_or_identity(q: torch.Tensor) -> torch.Tensor:
    norm = q.norm(dim=-1, keepdim=True)
    identity = torch.zeros_like(q)
    identity[..., 0] = 1.0
    return torch.where(norm > 1e-12, q / norm.clamp_min(1e-12), identity)


def _quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        -1,
    )


def quat_error_vector(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The rotation vector (axis * angle, body frame, shortest way) from ``q`` to ``target``,
    both ``(w, x, y, z)`` unit quaternions ``[..., 4]``.

    Example:
        >>> q = torch.tensor([1.0, 0.0, 0.0, 0.0])
        >>> t = torch.tensor([math.cos(0.25), 0.0, 0.0, math.sin(0.25)])  # 0.5 rad about z
        >>> quat_error_vector(q, t)
        tensor([0.0000, 0.0000, 0.5000])
    """
    conj = q * q.new_tensor([1.0, -1.0, -1.0, -1.0])
    err = _quat_mul(conj, target)
    err = torch.where(err[..., :1] < 0, -err, err)
    v = err[..., 1:]
    sin_half = v.norm(dim=-1, keepdim=True)
    angle = 2.0 * torch.atan2(sin_half, err[..., :1])
    return torch.where(sin_half > 1e-12, v / sin_half.clamp_min(1e-12) * angle, 2.0 * v)


def cmg_geometry(
    num_cmgs: int, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(gimbal_axes, rotor_axes_at_zero)``, each ``[3, num_cmgs]`` (columns per CMG).

    4: the pyramid cluster (gimbal axes in the body xy plane, rotors tilted by
    ``arctan(sqrt(2))`` from +z towards each face: a spherical momentum envelope).
    6: one CMG per face, two rotors along each body axis at zero gimbal angle.

    Example:
        >>> [t.shape for t in cmg_geometry(4)]
        [torch.Size([3, 4]), torch.Size([3, 4])]
    """
    if num_cmgs == 4:
        c, s = 1.0 / math.sqrt(3.0), math.sqrt(2.0 / 3.0)  # cos, sin of arctan(sqrt(2))
        gimbal = [[0.0, -1.0, 0.0, 1.0], [1.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
        rotor = [[s, 0.0, -s, 0.0], [0.0, s, 0.0, -s], [c, c, c, c]]
    elif num_cmgs == 6:
        gimbal = [[0, 0, 0, 1, 1, 0], [1, 0, 0, 0, 0, 1], [0, 1, 1, 0, 0, 0]]
        rotor = [[0, 0, 1, 0, 0, 1], [0, 1, 0, 0, 1, 0], [1, 0, 0, 1, 0, 0]]
    else:
        raise ValueError(f"num_cmgs must be 4 (pyramid) or 6 (one per face), got {num_cmgs}.")
    return torch.tensor(gimbal, dtype=dtype), torch.tensor(rotor, dtype=dtype)


def cmg_jacobian(
    angles: torch.Tensor, gimbal: torch.Tensor, rotor0: torch.Tensor, rotor_h: float = 1.0
) -> torch.Tensor:
    """``d(cluster momentum) / d(gimbal angles)``, ``[..., 3, n]``: column ``i`` is
    ``h * g_i x r_i(angle_i)`` with ``r_i`` the rotor axis turned by ``angle_i`` about ``g_i``.

    Example:
        >>> g, r = cmg_geometry(6)
        >>> cmg_jacobian(torch.zeros(6), g, r).shape
        torch.Size([3, 6])
    """
    cos, sin = angles.cos().unsqueeze(-2), angles.sin().unsqueeze(-2)
    g_x_r = torch.linalg.cross(gimbal, rotor0, dim=0)
    # Rodrigues; g . r0 = 0 for these clusters, so the axial term vanishes
    rotor = cos * rotor0 + sin * g_x_r
    return rotor_h * torch.linalg.cross(gimbal.expand_as(rotor), rotor, dim=-2)


class SatelliteMacroAction(TargetMacroAction):
    """A :class:`TargetMacroAction` whose target is the desired attitude ``(w, x, y, z)``.

    Example:
        >>> SatelliteMacroAction.slew_attitude(torch.tensor([2.0, 0, 0, 0])).target
        tensor([[1., 0., 0., 0.]])
    """

    @classmethod
    def slew_attitude(
        cls, target_quat: torch.Tensor, *, steps: int = 36, settle_steps: int = 8
    ) -> SatelliteMacroAction:
        """Turn to ``target_quat`` (normalised; a zero quaternion means the identity)."""
        if target_quat.ndim == 0 or target_quat.shape[-1] != 4:
            raise ValueError(
                f"target_quat must end with 4 entries (w, x, y, z), got {tuple(target_quat.shape)}."
            )
        return cls.move(_unit_or_identity(target_quat), steps=steps, settle_steps=settle_steps)


class SatelliteAttitudeTransform(MacroPrimitiveTransform):
    """Desired attitude -> ``[*B, T, num_cmgs]`` normalised gimbal-rate commands.

    Reads ``bus_quat`` (4), ``bus_omega`` (3, body rates) and ``gimbal_angles``
    (``[sin, cos]`` of each gimbal angle, ``2 * num_cmgs``). The wanted body acceleration
    ``attitude_gain * e - angular_rate_gain * omega`` (``e``: the rotation vector to the
    target) gives the gimbal rates ``-pinv(J) @ accel``, divided by ``action_scale`` and
    clipped to ``[-1, 1]``; the macro ramps from zero to that command. The action is a
    :class:`SatelliteMacroAction`, a TensorDict with ``target`` (or ``attitude``), or a raw
    ``[*B, 4]`` quaternion; ``mode=WAIT`` commands zero.

    Args:
        num_cmgs: 4 (pyramid) or 6 (see :func:`cmg_geometry`).
        action_scale: physical gimbal rate of a unit command (default: the parent env's
            ``action_scale``, else 3.0).
        attitude_gain, angular_rate_gain: the PD gains (5.0, 8.0).
        jacobian_rotor_h: rotor momentum used in the Jacobian (1.0).
        action_key, macro_steps, settle_steps, **execution: see
            :class:`MacroPrimitiveTransform` (``execute=True`` returns a ``Compose``).

    Example:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(action=torch.tensor([[1.0, 0, 0, 0]]), bus_quat=torch.tensor([[1.0, 0, 0, 0]]),
        ...     bus_omega=torch.zeros(1, 3), gimbal_angles=torch.cat([torch.zeros(1, 4), torch.ones(1, 4)], -1),
        ...     batch_size=[1])
        >>> SatelliteAttitudeTransform(macro_steps=2, settle_steps=0).inv(td)["action"].abs().sum()
        tensor(0.)
    """

    def __init__(
        self,
        *,
        num_cmgs: Literal[4, 6] = 4,
        action_scale: float | None = None,
        attitude_gain: float = 5.0,
        angular_rate_gain: float = 8.0,
        jacobian_rotor_h: float = 1.0,
        action_key: NestedKey = "action",
        macro_steps: int = 36,
        settle_steps: int = 8,
        **execution: Any,
    ) -> None:
        gimbal, rotor = cmg_geometry(num_cmgs)
        super().__init__(
            action_key=action_key,
            macro_steps=macro_steps,
            settle_steps=settle_steps,
            action_dim=num_cmgs,
            **execution,
        )
        self.num_cmgs = num_cmgs
        self.action_scale = action_scale
        self.attitude_gain = float(attitude_gain)
        self.angular_rate_gain = float(angular_rate_gain)
        self.jacobian_rotor_h = float(jacobian_rotor_h)
        self.gimbal_axes, self.rotor_axes_ref = gimbal, rotor

    def _resolve(
        self, tensordict: TensorDictBase, action: Any
    ) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        steps, settle, mode = self.macro_steps, self.settle_steps, None
        if isinstance(action, torch.Tensor):
            quat = action
        elif is_structured(action):
            name = next((k for k in ("target", "attitude") if has_field(action, k)), None)
            if name is None:
                raise RuntimeError(
                    f"{type(self).__name__} expected a 'target' attitude quaternion under "
                    f"{self.action_key!r}, got keys {list(action.keys())}."
                )
            quat = action.get(name)
            steps = first_int(action, "steps", steps)
            settle = first_int(action, "settle_steps", settle)
            mode = action.get("mode") if has_field(action, "mode") else None
        else:
            raise TypeError(
                f"{type(self).__name__} expected a SatelliteMacroAction, a TensorDict or a "
                f"[*B, 4] quaternion, got {type(action).__name__}."
            )
        batch = tensordict.batch_size
        if tuple(quat.shape) != (*batch, 4):
            raise ValueError(
                f"{type(self).__name__} expected a target quaternion of shape "
                f"{(*batch, 4)}, got {tuple(quat.shape)}."
            )
        target = self.attitude_action_target(tensordict, quat)
        start = torch.zeros_like(target)
        if mode is not None:
            target = torch.where(mode.reshape(*batch, 1) == int(MacroPrimitive.WAIT), start, target)
        return start, target, steps, settle

    def attitude_action_target(
        self, tensordict: TensorDictBase, target_quat: torch.Tensor
    ) -> torch.Tensor:
        """The normalised gimbal-rate command ``[*B, num_cmgs]`` towards ``target_quat``."""
        missing = [k for k in OBSERVATIONS if tensordict.get(k, None) is None]
        if missing:
            raise RuntimeError(
                f"{type(self).__name__} reads the observations {OBSERVATIONS}; missing "
                f"{missing}. Use it on a CMG satellite env that writes them."
            )
        q = tensordict.get("bus_quat")
        like = dict(dtype=q.dtype, device=q.device)
        err = quat_error_vector(_unit_or_identity(q), _unit_or_identity(target_quat.to(**like)))
        omega = tensordict.get("bus_omega").to(**like)
        sincos = tensordict.get("gimbal_angles").to(**like)
        n = self.num_cmgs
        angles = torch.atan2(sincos[..., :n], sincos[..., n:])
        jac = cmg_jacobian(
            angles,
            self.gimbal_axes.to(**like),
            self.rotor_axes_ref.to(**like),
            self.jacobian_rotor_h,
        )
        accel = self.attitude_gain * err - self.angular_rate_gain * omega
        rate = -(torch.linalg.pinv(jac) @ accel.unsqueeze(-1)).squeeze(-1)
        return (rate / self._action_scale()).clamp(-1.0, 1.0)

    def _action_scale(self) -> float:
        if self.action_scale is not None:
            return float(self.action_scale)
        env = self.parent
        while env is not None:
            if hasattr(env, "action_scale"):
                return float(env.action_scale)
            env = getattr(env, "base_env", None)
        return 3.0

    def _attitude_spec(self, action_spec: Any, dtype: torch.dtype) -> Any:
        shape, device = action_spec.shape, action_spec.device
        out = Composite(shape=shape, device=device)
        out[self.action_key] = Composite(
            mode=Categorical(
                n=len(MacroPrimitive), shape=(*shape, 1), dtype=torch.long, device=device
            ),
            target=Unbounded(shape=(*shape, 4), dtype=dtype, device=device),
            shape=shape,
            device=device,
        )
        return out

    def _dtype(self, observation_spec: Any, action_spec: Any) -> torch.dtype:
        if observation_spec is not None and "bus_quat" in observation_spec.keys(True, True):
            return observation_spec["bus_quat"].dtype
        leaf = self._leaf(action_spec)
        return getattr(leaf, "dtype", None) or torch.get_default_dtype()

    def transform_specs(self, specs: Any) -> Any:
        dtype = self._dtype(specs.observation, specs.action)
        specs.action = self._attitude_spec(specs.action, dtype)
        return specs

    def transform_action_spec(self, action_spec: Any) -> Any:
        return self._attitude_spec(action_spec, self._dtype(None, action_spec))

    def transform_input_spec(self, input_spec: Any) -> Any:
        input_spec = input_spec.clone()
        action_spec = input_spec.get("full_action_spec", None)
        if action_spec is None:
            action_spec = Composite(shape=input_spec.shape, device=input_spec.device)
        obs = input_spec.get("full_observation_spec", None)
        input_spec["full_action_spec"] = self._attitude_spec(
            action_spec, self._dtype(obs, action_spec)
        )
        return input_spec
