"""Periodic evaluation rollouts (TorchRL's ``LogValidationReward``, formerly ``Recorder``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type

from rl_trainers.hooks import REWARD_KEY, TrainerHookBase

if TYPE_CHECKING:
    from rl_trainers.trainer import Trainer

__all__ = ["LogValidationReward", "Recorder", "episode_returns"]


def episode_returns(reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """Mean undiscounted return over the trajectories of a ``[*B, T]`` rollout.

    A trajectory ends at each ``done`` step and at the end of every row, as
    TorchRL's ``split_trajectories`` cuts them.

    Args:
        reward: ``[*B, T, 1]`` or ``[*B, T]`` rewards.
        done: done flags of the same shape.

    Returns:
        A scalar: total reward divided by the number of trajectories.
    """
    if reward.shape != done.shape:
        raise ValueError(
            f"reward {tuple(reward.shape)} and done {tuple(done.shape)} must have one shape"
        )
    if reward.ndim >= 2 and reward.shape[-1] == 1:
        reward, done = reward.squeeze(-1), done.squeeze(-1)
    rows = reward[..., 0].numel()
    n_traj = int(done[..., :-1].sum()) + rows
    return reward.float().sum() / n_traj


class LogValidationReward(TrainerHookBase):
    """``post_steps_log`` hook: every ``record_interval`` calls, roll the policy out in an env and log.

    The rollout runs under ``torch.inference_mode``, with the policy in eval mode
    and the interaction type set to ``exploration_type`` (deterministic by
    default); modes are restored afterwards. Logged: ``r_evaluation`` (mean
    reward per step, divided by ``frame_skip``), ``total_r_evaluation`` (mean
    return per trajectory) and any other ``log_keys`` (their mean).

    Args:
        record_interval: calls between two evaluations (one call per collected batch).
        record_frames: rollout length in env steps.
        frame_skip: frames per env step.
        policy_exploration: the policy (a TensorDict callable).
        environment: any env with ``rollout(max_steps, policy, auto_reset=, break_when_any_done=)``.
        exploration_type: ``InteractionType`` (TorchRL's ``ExplorationType``) during the rollout.
            TorchRL's code default is ``RANDOM`` although its docs say deterministic; here
            the default is ``DETERMINISTIC``.
        log_keys: rollout entries to log. Defaults to ``[("next", "reward")]``.
        out_keys: log names of ``log_keys``. Defaults to ``{("next", "reward"): "r_evaluation"}``.
        suffix: passed to ``environment.transform.dump(suffix=...)`` when the env records video.
        log_pbar: show the values on the progress bar.
    """

    def __init__(
        self,
        *,
        record_interval: int,
        record_frames: int,
        frame_skip: int = 1,
        policy_exploration: Callable[[TensorDictBase], TensorDictBase],
        environment: Any = None,
        exploration_type: InteractionType = InteractionType.DETERMINISTIC,
        log_keys: Sequence[NestedKey] | None = None,
        out_keys: Mapping[NestedKey, str] | None = None,
        suffix: str | None = None,
        log_pbar: bool = False,
        recorder: Any = None,
    ) -> None:
        if environment is not None and recorder is not None:
            raise ValueError(
                "pass the evaluation env as environment= (recorder= is its old name), not both"
            )
        environment = recorder if environment is None else environment
        if environment is None or not callable(getattr(environment, "rollout", None)):
            raise TypeError(
                "LogValidationReward needs environment=<an env with a rollout(max_steps, policy, ...) method>"
            )
        if record_interval < 1:
            raise ValueError(f"record_interval must be >= 1, got {record_interval}")
        self.record_interval = record_interval
        self.record_frames = record_frames
        self.frame_skip = frame_skip
        self.policy_exploration = policy_exploration
        self.environment = environment
        self.exploration_type = exploration_type
        self.log_keys = [REWARD_KEY] if log_keys is None else list(log_keys)
        self.out_keys = dict(out_keys or {})
        self.out_keys.setdefault(REWARD_KEY, "r_evaluation")
        self.suffix = suffix
        self.log_pbar = log_pbar
        self._count = 0

    def _name(self, key: NestedKey) -> str:
        return self.out_keys.get(key, key if isinstance(key, str) else "_".join(key))

    def __call__(self, batch: TensorDictBase | None = None) -> dict[str, Any] | None:
        out = None
        if self._count % self.record_interval == 0:
            rollout = self._rollout()
            out = {}
            for key in self.log_keys:
                value = rollout.get(key).float()
                if key == REWARD_KEY:
                    name = self._name(key)
                    out[name] = (value.mean() / self.frame_skip).item()
                    out[f"total_{name}"] = episode_returns(
                        value, rollout.get(("next", "done"))
                    ).item()
                else:
                    out[self._name(key)] = value.mean().item()
            out["log_pbar"] = self.log_pbar
        self._count += 1
        return out

    def _rollout(self) -> TensorDictBase:
        policy, env = self.policy_exploration, self.environment
        policy_training = policy.training if isinstance(policy, torch.nn.Module) else None
        env_training = getattr(env, "training", None)
        try:
            with torch.inference_mode(), set_interaction_type(self.exploration_type):
                if policy_training is not None:
                    policy.eval()
                if env_training is not None and callable(getattr(env, "eval", None)):
                    env.eval()
                rollout = env.rollout(
                    max_steps=self.record_frames,
                    policy=policy,
                    auto_reset=True,
                    break_when_any_done=False,
                )
            dump = getattr(getattr(env, "transform", None), "dump", None)
            if callable(dump):
                dump(suffix=self.suffix)
        finally:
            if policy_training is not None:
                policy.train(policy_training)
            if env_training is not None and callable(getattr(env, "train", None)):
                env.train(env_training)
        return rollout

    def state_dict(self) -> dict[str, Any]:
        env_state = getattr(self.environment, "state_dict", None)
        return {
            "_count": self._count,
            "recorder_state_dict": env_state() if callable(env_state) else {},
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._count = state_dict["_count"]
        load = getattr(self.environment, "load_state_dict", None)
        if callable(load) and state_dict.get("recorder_state_dict"):
            load(state_dict["recorder_state_dict"])

    def register(self, trainer: Trainer, name: str = "recorder") -> None:
        trainer.register_op("post_steps_log", self)
        trainer.register_module(name, self)


#: TorchRL's former name of ``LogValidationReward``.
Recorder = LogValidationReward
