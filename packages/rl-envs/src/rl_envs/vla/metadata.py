"""``RobotDatasetMetadata``: what a robot dataset's actions mean and how to normalise them."""

from __future__ import annotations

import json
from typing import Any, Literal, get_args

import torch
from tensordict import TensorClass
from tensordict.utils import NestedKey

from rl_envs.specs import Bounded, Unbounded
from rl_envs.vla.schema import ACTION_KEY, INSTRUCTION_KEY, STATE_KEY

__all__ = ["ActionSpace", "GripperMode", "RobotDatasetMetadata"]

ActionSpace = Literal[
    "joint_delta", "joint_position", "eef_delta", "eef_pose", "velocity", "mixed", "unknown"
]
"""What an action vector commands."""
GripperMode = Literal["continuous", "binary", "none", "unknown"]
"""How the gripper entry of an action is encoded."""

_STATS = ("action_mean", "action_std", "action_low", "action_high")
_KEYS = ("state_key", "instruction_key", "action_key")


class RobotDatasetMetadata(TensorClass["nocast"]):
    """The facts about a robot dataset that specs, normalisation and prompts need.

    A tensorclass: the per-dimension statistics (``action_mean`` / ``action_std`` or
    ``action_low`` / ``action_high``, ``[action_dim]`` float32) are tensors that move with
    ``.to()``; the rest are plain values. ``ActionScaling`` and ``UniformActionTokenizer``
    read the statistics; :meth:`make_action_spec` builds the action spec; JSON round-trips
    with :meth:`to_json` / :meth:`from_json`.

    Args:
        dataset_id: the dataset's name (e.g. ``"bridge"``).
        embodiment_id: the robot's name.
        action_dim: the action size (a positive int).
        action_names: one name per action dimension.
        action_space: one of :data:`ActionSpace` (``"unknown"``).
        gripper_mode: one of :data:`GripperMode` (``"unknown"``).
        control_frequency_hz: the control rate.
        camera_keys: the keys of the camera frames.
        state_key, instruction_key, action_key: where the state, the instruction and the
            action live (the VLA keys by default).
        action_mean, action_std, action_low, action_high: the action statistics.
        license, source_url: provenance.

    Example:
        >>> meta = RobotDatasetMetadata("bridge", action_dim=2, action_low=[-1.0, 0.0],
        ...     action_high=[1.0, 2.0])
        >>> meta.make_action_spec().space.high
        tensor([1., 2.])
        >>> RobotDatasetMetadata.from_json(meta.to_json()).action_dim
        2
    """

    dataset_id: str
    embodiment_id: str | None = None
    action_dim: int | None = None
    action_names: tuple[str, ...] | None = None
    action_space: str = "unknown"
    gripper_mode: str = "unknown"
    control_frequency_hz: float | None = None
    camera_keys: tuple[NestedKey, ...] = ()
    state_key: NestedKey | None = STATE_KEY
    instruction_key: NestedKey | None = INSTRUCTION_KEY
    action_key: NestedKey = ACTION_KEY
    action_mean: torch.Tensor | None = None
    action_std: torch.Tensor | None = None
    action_low: torch.Tensor | None = None
    action_high: torch.Tensor | None = None
    license: str | None = None
    source_url: str | None = None

    def __post_init__(self) -> None:
        # Also runs when tensordict rebuilds the record (==, .to, clone), with fields that
        # are no longer user input (== gives bools): each check looks at the type first.
        for name, allowed in (("action_space", ActionSpace), ("gripper_mode", GripperMode)):
            value = getattr(self, name)
            if isinstance(value, str) and value not in get_args(allowed):
                raise ValueError(f"{name} must be one of {get_args(allowed)}, got {value!r}.")
        dim = self.action_dim
        user_dim = dim is not None and not isinstance(dim, torch.Tensor | bool)
        if user_dim and (not isinstance(dim, int) or dim < 1):
            raise ValueError(f"action_dim must be a positive int, got {dim!r}.")
        # JSON gives lists where keys and names are tuples
        if isinstance(self.camera_keys, list | tuple):
            self.camera_keys = tuple(
                tuple(k) if isinstance(k, list) else k for k in self.camera_keys
            )
        if isinstance(self.action_names, list):
            self.action_names = tuple(self.action_names)
        for name in _KEYS:
            if isinstance(getattr(self, name), list):
                setattr(self, name, tuple(getattr(self, name)))
        for name in _STATS:
            value = getattr(self, name)
            if value is not None and not isinstance(value, torch.Tensor):
                setattr(self, name, torch.as_tensor(value, dtype=torch.float32))
        if user_dim:
            for name in _STATS:
                value = getattr(self, name)
                if isinstance(value, torch.Tensor) and value.shape[-1:] != (dim,):
                    raise ValueError(
                        f"{name} must have action_dim={dim} entries, got shape {tuple(value.shape)}."
                    )

    def make_action_spec(self, *, shape_prefix: tuple[int, ...] = (), device: Any = None) -> Any:
        """``Bounded(action_low, action_high)`` when both are known, else ``Unbounded``, of
        shape ``(*shape_prefix, action_dim)`` (float32)."""
        if self.action_dim is None:
            raise ValueError(
                f"metadata {self.dataset_id!r}: set action_dim to build an action spec."
            )
        shape = (*shape_prefix, self.action_dim)
        if self.action_low is None or self.action_high is None:
            return Unbounded(shape=shape, dtype=torch.float32, device=device)
        return Bounded(
            low=self.action_low.expand(shape).clone(),
            high=self.action_high.expand(shape).clone(),
            shape=shape,
            dtype=torch.float32,
            device=device,
        )

    def to_json(self, path: str | None = None) -> str:
        """The record as JSON (tensors and tuples as lists); also written to ``path``."""
        out: dict[str, Any] = {}
        for key, value in self.to_dict().items():
            if isinstance(value, torch.Tensor):
                value = value.detach().cpu().tolist()
            elif isinstance(value, tuple):
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            out[key] = value
        text = json.dumps(out, indent=2)
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text

    @classmethod
    def from_json(cls, source: str) -> RobotDatasetMetadata:
        """From a JSON string or a file path; unknown fields (a newer writer) are ignored."""
        if source.lstrip().startswith("{"):
            data = json.loads(source)
        else:
            with open(source) as f:
                data = json.load(f)
        fields = set(cls.__annotations__)
        return cls(**{k: v for k, v in data.items() if k in fields})
