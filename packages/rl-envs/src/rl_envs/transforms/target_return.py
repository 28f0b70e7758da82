"""``TargetReturn``: a return-to-go the policy reads (goal-conditioned RL, Decision Transformer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, as_key_list, masked_fill_reset
from rl_envs.transforms.transform import EnvSpecs, Transform


def _replace_last(key: NestedKey, name: str) -> NestedKey:
    return name if isinstance(key, str) else (*key[:-1], name)


class TargetReturn(Transform):
    """Writes a target return at reset and, in ``"reduce"`` mode, subtracts each step's reward.

    The target starts at ``target_return`` on every (partial) reset. Each step
    copies it from the step's input to ``"next"`` and, with ``mode="reduce"``,
    subtracts the reward just received (``"constant"`` keeps it unchanged).
    It is declared in the observation and state specs, since ``step_mdp``
    carries it to the next step as the policy's input.

    Args:
        target_return: the target at the start of an episode.
        mode: ``"reduce"`` (default) or ``"constant"``.
        in_keys: the reward entries (default: the env's reward keys).
        out_keys: the targets (default: each reward key with its last part
            replaced by ``"target_return"``).
        reset_key: kept for TorchRL parity; partial resets read ``"_reset"``.

    Raises:
        ValueError: an unknown ``mode``, or reward and target of different shapes.

    Example:
        >>> from rl_envs import PendulumEnv, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(), TargetReturn(10.0))
        >>> ro = env.rollout(3)
        >>> bool(((ro["target_return"] - ro["next", "reward"]) == ro["next", "target_return"]).all())
        True
    """

    MODES = ("reduce", "constant")

    def __init__(
        self,
        target_return: float,
        mode: str = "reduce",
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        reset_key: NestedKey | None = None,
    ) -> None:
        if mode not in self.MODES:
            raise ValueError(
                f"TargetReturn: mode can only be 'reduce' or 'constant', got {mode!r}."
            )
        keys = as_key_list(in_keys) if in_keys is not None else ["reward"]
        outs = (
            out_keys if out_keys is not None else [_replace_last(k, "target_return") for k in keys]
        )
        super().__init__(keys, outs)
        self._default_keys = in_keys is None, out_keys is None
        self.target_return = float(target_return)
        self.mode = mode
        self.reset_key = reset_key

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for out_key in self.out_keys:
            fresh = torch.full(
                (*tensordict_reset.batch_size, 1),
                self.target_return,
                dtype=torch.float32,
                device=tensordict_reset.device,
            )
            tensordict_reset.set(out_key, masked_fill_reset(tensordict, out_key, fresh))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            target = tensordict.get(out_key, None)
            if target is None:
                raise KeyError(
                    f"TargetReturn: the step's input has no {out_key!r}; start from env.reset()."
                )
            reward = next_tensordict.get(in_key)
            if self.mode == "reduce":
                if reward.shape != target.shape:
                    raise ValueError(
                        f"TargetReturn: the reward {in_key!r} (shape {tuple(reward.shape)}) and "
                        f"the target (shape {tuple(target.shape)}) must have the same shape."
                    )
                target = target - reward
            next_tensordict.set(out_key, target)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "TargetReturn cannot be executed without a parent env: it needs resets and "
            "steps: it only runs inside an env (a TransformedEnv), not on data."
        )

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        if self._default_keys[0]:
            self.in_keys = list(specs.reward.keys(True, True))
            if self._default_keys[1]:
                self.out_keys = [_replace_last(k, "target_return") for k in self.in_keys]
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            ref = specs.reward[in_key]
            specs.observation[out_key] = _unbounded(ref)
            specs.state[out_key] = _unbounded(ref)
        return specs


def _unbounded(ref: Any) -> Any:
    from rl_envs.specs import Unbounded

    return Unbounded(shape=ref.shape, device=ref.device, dtype=torch.float32)
