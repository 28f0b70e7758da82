"""Macro actions: one high-level command -> a fixed-length sequence of low-level actions.

``MacroPrimitiveTransform.inv`` reads a macro action (a :class:`TargetMacroAction`, a
TensorDict with the same fields, or a raw low-level target) and writes the sequence
``[*B, steps + settle_steps, action_dim]`` that moves linearly from a start action to the
target and then holds it. Domain presets (:class:`~rl_envs.URScriptPrimitiveTransform`,
:class:`~rl_envs.SatelliteAttitudeTransform`) override three hooks: ``_resolve`` (macro
action -> start, target, durations), ``current_action`` (the interpolation start) and
``transform_action_spec`` (what the policy writes). The sequence is executed by
:class:`~rl_envs.MacroActionEnv` (``MacroActionEnv(env, transform.expand, spec)``).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import torch
from tensordict import TensorClass, TensorDictBase
from tensordict.utils import NestedKey, unravel_key

from rl_envs.specs import Categorical, Composite, Unbounded
from rl_envs.transforms.compose import Compose
from rl_envs.transforms.multi_action import MultiAction
from rl_envs.transforms.transform import Transform

__all__ = [
    "HumanoidMacroAction",
    "MacroAction",
    "MacroPrimitive",
    "MacroPrimitiveTransform",
    "TargetMacroAction",
    "interpolate_macro",
]


class MacroPrimitive(IntEnum):
    """The generic primitives: hold the current action (``WAIT``) or move to a target.

    Example:
        >>> int(MacroPrimitive.MOVE), str(MacroPrimitive.WAIT)
        (1, 'wait')
    """

    WAIT = 0
    MOVE = 1

    def __str__(self) -> str:
        return self.name.lower()


def interpolate_macro(
    start: torch.Tensor, target: torch.Tensor, steps: int, settle_steps: int = 0
) -> torch.Tensor:
    """``[*B, steps + settle_steps, A]``: ``start + (i / steps) * (target - start)`` for
    ``i = 1..steps``, then the last of them (the target) repeated ``settle_steps`` times.

    Example:
        >>> interpolate_macro(torch.zeros(1, 1), torch.ones(1, 1), 2, 1).flatten().tolist()
        [0.5, 1.0, 1.0]
    """
    if steps < 1 or settle_steps < 0:
        raise ValueError(
            f"interpolate_macro: need steps >= 1 and settle_steps >= 0, got {steps}, "
            f"{settle_steps}."
        )
    frac = torch.arange(1, steps + 1, dtype=start.dtype, device=start.device) / steps
    path = start.unsqueeze(-2) + frac.unsqueeze(-1) * (target - start).unsqueeze(-2)
    # the hold repeats the last path row (not ``target``): no rounding step between them
    hold = path[..., -1:, :].expand(*path.shape[:-2], settle_steps, path.shape[-1])
    return torch.cat([path, hold], -2)


def duration_fields(
    mode: int, steps: int, settle_steps: int, batch_size: torch.Size, device: torch.device
) -> dict[str, torch.Tensor]:
    if steps < 1:
        raise ValueError(f"a macro action needs steps >= 1, got {steps}.")
    if settle_steps < 0:
        raise ValueError(f"a macro action needs settle_steps >= 0, got {settle_steps}.")
    return {
        name: torch.full((*batch_size, 1), int(value), dtype=torch.long, device=device)
        for name, value in (("mode", mode), ("steps", steps), ("settle_steps", settle_steps))
    }


class MacroAction(TensorClass["nocast"]):
    """A macro action: a primitive ``mode`` and its durations, each ``[*B, 1]`` (long).

    Example:
        >>> a = MacroAction(mode=torch.zeros(1, 1, dtype=torch.long),
        ...     steps=torch.full((1, 1), 4), settle_steps=torch.zeros(1, 1, dtype=torch.long),
        ...     batch_size=[1])
        >>> int(a.steps)
        4
    """

    mode: torch.Tensor
    steps: torch.Tensor
    settle_steps: torch.Tensor


class TargetMacroAction(MacroAction):
    """A macro action with one ``target`` ``[*B, D]`` that the transform interprets.

    Example:
        >>> TargetMacroAction.move(torch.ones(4), steps=2).target.shape
        torch.Size([1, 4])
    """

    target: torch.Tensor

    @classmethod
    def move(
        cls,
        target: torch.Tensor,
        *,
        steps: int = 16,
        settle_steps: int = 0,
        mode: int = MacroPrimitive.MOVE,
    ) -> TargetMacroAction:
        """Move to ``target`` (``[D]`` or ``[*B, D]``) over ``steps``, then hold it."""
        if target.ndim == 0:
            raise ValueError("a macro target needs a feature dimension, got a scalar.")
        target = target.unsqueeze(0) if target.ndim == 1 else target
        batch = target.shape[:-1]
        return cls(
            target=target,
            batch_size=batch,
            **duration_fields(int(mode), steps, settle_steps, batch, target.device),
        )

    @classmethod
    def wait(
        cls,
        *,
        action_dim: int,
        steps: int = 1,
        settle_steps: int = 0,
        batch_size: Any = None,
        dtype: torch.dtype | None = None,
        device: Any = None,
    ) -> TargetMacroAction:
        """Hold the current low-level action for ``steps`` (+ ``settle_steps``)."""
        if action_dim < 1:
            raise ValueError(f"TargetMacroAction.wait: action_dim must be >= 1, got {action_dim}.")
        batch = torch.Size([1] if batch_size is None else batch_size)
        target = torch.zeros((*batch, action_dim), dtype=dtype, device=device)
        return cls.move(target, steps=steps, settle_steps=settle_steps, mode=MacroPrimitive.WAIT)


class HumanoidMacroAction(TargetMacroAction):
    """A :class:`TargetMacroAction` whose target is an actuator-control vector.

    Example:
        >>> HumanoidMacroAction.reach_control(torch.zeros(1, 4), steps=2).target.shape
        torch.Size([1, 4])
    """

    @classmethod
    def reach_control(
        cls, target: torch.Tensor, *, steps: int = 16, settle_steps: int = 0
    ) -> HumanoidMacroAction:
        """Interpolate the controls to ``target`` over ``steps``, then hold."""
        return cls.move(target, steps=steps, settle_steps=settle_steps)


def is_structured(action: Any) -> bool:
    return isinstance(action, (TensorDictBase, MacroAction))


def has_field(action: Any, key: str) -> bool:
    return key in action.keys()  # noqa: SIM118 (a TensorClass has no __contains__)


def first_int(action: Any, key: str, default: int) -> int:
    if key not in action.keys(True, True):
        return default
    return int(action.get(key).reshape(-1)[0])


class MacroPrimitiveTransform(Transform):
    """Expands a macro action into ``[*B, T, action_dim]`` low-level actions on ``inv``.

    The macro action under ``action_key`` is a :class:`TargetMacroAction` (or a TensorDict
    with ``target`` and optional ``mode`` / ``steps`` / ``settle_steps``), or a raw tensor
    taken as a ``MOVE`` target. The sequence interpolates from :meth:`current_action` (zero
    by default: ``action_key`` holds the target, not the current action) to the target over
    ``steps`` and holds it ``settle_steps`` more (``WAIT`` targets the start). The policy-
    facing spec is ``Composite(mode=Categorical(len(primitive_enum)), target=Unbounded)``.

    Args:
        action_key: where the macro action is read and the sequence written.
        macro_steps: interpolation steps when the action does not say (16).
        settle_steps: held repeats when the action does not say (0).
        action_dim: the low-level action size (else read from the action spec).
        execute: return ``Compose(MultiAction(...), transform)`` instead, so that one step
            of the env runs the whole sequence (TorchRL's constructor).
        multi_action_dim, stack_rewards, stack_observations: that ``MultiAction``'s
            ``dim``, ``stack_rewards`` and ``stack_observations``.

    Example:
        >>> from tensordict import TensorDict
        >>> t = MacroPrimitiveTransform(action_dim=2, macro_steps=2)
        >>> t.inv(TensorDict(action=torch.ones(1, 2), batch_size=[1]))["action"][0, :, 0]
        tensor([0.5000, 1.0000])
    """

    primitive_enum: type[IntEnum] = MacroPrimitive

    def __new__(
        cls,
        *args: Any,
        execute: bool = False,
        multi_action_dim: int = 1,
        stack_rewards: bool = True,
        stack_observations: bool = False,
        **kwargs: Any,
    ) -> Any:
        if not execute:
            return super().__new__(cls)
        # TorchRL's constructor: the expansion and, before it, the MultiAction running it
        return Compose(
            MultiAction(
                dim=multi_action_dim,
                stack_rewards=stack_rewards,
                stack_observations=stack_observations,
            ),
            cls(*args, **kwargs),
        )

    def __init__(
        self,
        *,
        action_key: NestedKey = "action",
        macro_steps: int = 16,
        settle_steps: int = 0,
        action_dim: int | None = None,
        execute: bool = False,
        multi_action_dim: int = 1,
        stack_rewards: bool = True,
        stack_observations: bool = False,
    ) -> None:
        del execute, multi_action_dim, stack_rewards, stack_observations  # read by __new__
        super().__init__()
        if macro_steps < 1 or settle_steps < 0:
            raise ValueError(
                f"{type(self).__name__}: need macro_steps >= 1 and settle_steps >= 0, got "
                f"{macro_steps} and {settle_steps}."
            )
        if action_dim is not None and action_dim < 1:
            raise ValueError(f"{type(self).__name__}: action_dim must be >= 1, got {action_dim}.")
        self.action_key = unravel_key(action_key)
        self.macro_steps = int(macro_steps)
        self.settle_steps = int(settle_steps)
        self.action_dim = action_dim

    # ------------------------------------------------------------------ inverse
    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = self._read_action(tensordict)
        start, target, steps, settle = self._resolve(tensordict, action)
        return tensordict.set(self.action_key, interpolate_macro(start, target, steps, settle))

    def expand(self, action: Any, root: TensorDictBase) -> torch.Tensor:
        """The plan ``[T, *B, action_dim]`` of ``action`` given the observations ``root``:
        the ``expand`` argument of :class:`~rl_envs.MacroActionEnv` (which sums the rewards;
        ``execute=True`` stacks them)."""
        td = root.exclude(self.action_key).set(self.action_key, action)
        return self.inv(td).get(self.action_key).movedim(-2, 0)

    def _read_action(self, tensordict: TensorDictBase) -> Any:
        action = tensordict.get(self.action_key, None)
        if action is None:
            raise RuntimeError(
                f"{type(self).__name__} found no action under {self.action_key!r} to expand "
                f"(present: {list(tensordict.keys(True, True))}); write a macro action there."
            )
        return action

    def _resolve(
        self, tensordict: TensorDictBase, action: Any
    ) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        """``(start, target, steps, settle_steps)`` of ``action``; override per domain."""
        batch = tensordict.batch_size
        if isinstance(action, torch.Tensor):
            dtype = action.dtype if action.is_floating_point() else torch.get_default_dtype()
            target = action.to(dtype).reshape(*batch, action.shape[-1])
            return torch.zeros_like(target), target, self.macro_steps, self.settle_steps
        if not is_structured(action):
            raise TypeError(
                f"{type(self).__name__} cannot expand a {type(action).__name__}; write a "
                "TargetMacroAction, a TensorDict with 'target', or a low-level action tensor."
            )
        if "target" not in action.keys(True, True):
            raise RuntimeError(
                f"{type(self).__name__} expected a macro action with a 'target' under "
                f"{self.action_key!r}, got keys {list(action.keys(True, True))}."
            )
        raw = action.get("target")
        dtype = raw.dtype if raw.is_floating_point() else torch.get_default_dtype()
        target = raw.to(dtype).reshape(*batch, raw.shape[-1])
        start = self.current_action(tensordict, batch, target.device, dtype, target.shape[-1])
        if has_field(action, "mode"):
            mode = action.get("mode").reshape(*batch, 1)
            target = torch.where(mode == int(MacroPrimitive.WAIT), start, target)
        steps = first_int(action, "steps", self.macro_steps)
        settle = first_int(action, "settle_steps", self.settle_steps)
        return start, target, steps, settle

    def current_action(
        self,
        tensordict: TensorDictBase,
        batch_shape: torch.Size,
        device: torch.device,
        dtype: torch.dtype,
        action_dim: int,
    ) -> torch.Tensor:
        """The interpolation start: zero here; presets read the controlled state."""
        dim = self.action_dim if self.action_dim is not None else action_dim
        return torch.zeros((*batch_shape, dim), dtype=dtype, device=device)

    # -------------------------------------------------------------------- specs
    def _macro_spec(self, shape: torch.Size, device: Any, dtype: torch.dtype, dim: int) -> Any:
        return Composite(
            mode=Categorical(
                n=len(self.primitive_enum), shape=(*shape, 1), dtype=torch.long, device=device
            ),
            target=Unbounded(shape=(*shape, dim), dtype=dtype, device=device),
            shape=shape,
            device=device,
        )

    def _leaf(self, action_spec: Any) -> Any:
        if action_spec is None or self.action_key not in action_spec.keys(True, True):
            return None
        return action_spec[self.action_key]

    def transform_action_spec(self, action_spec: Any) -> Any:
        leaf = self._leaf(action_spec)
        dim = self.action_dim
        if dim is None and leaf is not None and len(leaf.shape):
            dim = int(leaf.shape[-1])
        if dim is None:
            raise RuntimeError(
                f"{type(self).__name__} cannot tell the low-level action size: pass action_dim=."
            )
        dtype = getattr(leaf, "dtype", None) or torch.get_default_dtype()
        out = Composite(shape=action_spec.shape, device=action_spec.device)
        out[self.action_key] = self._macro_spec(action_spec.shape, action_spec.device, dtype, dim)
        return out

    def transform_input_spec(self, input_spec: Any) -> Any:
        """TorchRL's hook: ``input_spec["full_action_spec"]`` becomes the macro spec."""
        input_spec = input_spec.clone()
        action_spec = input_spec.get("full_action_spec", None)
        if action_spec is None:
            action_spec = Composite(shape=input_spec.shape, device=input_spec.device)
        input_spec["full_action_spec"] = self.transform_action_spec(action_spec)
        return input_spec

    def extra_repr(self) -> str:
        return (
            f"action_key={self.action_key!r}, macro_steps={self.macro_steps}, "
            f"settle_steps={self.settle_steps}"
        )
