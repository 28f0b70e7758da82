"""``ToyVLAEnv``: a pure-torch env with the vision-language-action observation layout.

For wiring VLA policies, chunked execution and batched envs without a simulator:
``("observation", "image")`` (random ``uint8`` frames), ``("observation", "state")``
and a constant ``language_instruction`` (non-tensor).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import NonTensorStack, TensorDict, TensorDictBase

from rl_envs.env_base import EnvBase
from rl_envs.specs import Bounded, Categorical, Composite, NonTensor, Unbounded

__all__ = ["ToyVLAEnv"]

DEFAULT_INSTRUCTION = "push the T-shaped block onto the target"


class ToyVLAEnv(EnvBase):
    """A synthetic VLA task: the state echoes the last action; optionally track a target.

    Observation: ``("observation", "image")`` ``uint8 [*B, *image_shape]`` (noise standing
    in for a camera), ``("observation", "state")`` ``[*B, state_dim]`` whose first
    ``action_dim`` entries are the action just executed (zero after a reset), and
    ``language_instruction`` (a string per env). Action: ``[-1, 1]^action_dim``.

    Echo mode (``success_steps=None``): reward ``-||a||``, never done. Tracking mode
    (``success_steps=k``): a target ``U(-0.5, 0.5)^action_dim`` is drawn per episode and
    shown at ``state[action_dim:2 * action_dim]``; reward ``-||a - target||``; ``success``
    (and ``terminated``) once the action stayed within ``success_tol`` of the target
    (max-norm) ``k`` steps in a row. An oracle copying the target succeeds in ``k`` steps; a
    uniform random policy hits the tolerance box with probability ``success_tol **
    action_dim`` per step. With a ``"_step"`` mask (a partial step), unstepped entries keep
    their streak and get a zero reward.

    Args:
        action_dim: action size (4).
        state_dim: state size, ``>= action_dim`` (``>= 2 * action_dim`` when tracking) (6).
        image_shape: ``(C, H, W)`` of the image ((3, 16, 16)).
        instruction: the language instruction.
        success_steps: consecutive in-tolerance steps for success (None: echo mode).
        success_tol: the tolerance, in ``(0, 0.5]`` (0.25).
        batch_size, device: as :class:`EnvBase`.
        seed: seed of the images and targets.

    Example:
        >>> env = ToyVLAEnv(action_dim=2, state_dim=4, success_steps=2, seed=0)
        >>> td = env.reset()
        >>> for _ in range(2):
        ...     td["action"] = td["observation", "state"][2:4]  # the oracle
        ...     td = env.step(td)["next"]
        >>> bool(td["success"]), bool(td["done"]), td["language_instruction"]
        (True, True, 'push the T-shaped block onto the target')
    """

    def __init__(
        self,
        action_dim: int = 4,
        state_dim: int = 6,
        image_shape: Sequence[int] = (3, 16, 16),
        instruction: str = DEFAULT_INSTRUCTION,
        *,
        success_steps: int | None = None,
        success_tol: float = 0.25,
        batch_size: Sequence[int] | torch.Size | None = None,
        device: torch.device | str | None = None,
        seed: int | None = None,
    ) -> None:
        tracking = success_steps is not None
        need = 2 * action_dim if tracking else action_dim
        if state_dim < need:
            raise ValueError(
                f"ToyVLAEnv: state_dim ({state_dim}) must be at least {need}: the state holds "
                "the executed action" + (" then the target action" if tracking else "") + "."
            )
        if tracking and success_steps < 1:
            raise ValueError(f"ToyVLAEnv: success_steps must be >= 1, got {success_steps}.")
        if tracking and not 0.0 < success_tol <= 0.5:
            raise ValueError(
                f"ToyVLAEnv: success_tol must be in (0, 0.5] (targets lie in [-0.5, 0.5]), "
                f"got {success_tol}."
            )
        super().__init__(device=device, batch_size=batch_size)
        self.action_dim, self.state_dim = int(action_dim), int(state_dim)
        self.image_shape = tuple(int(d) for d in image_shape)
        self.instruction = str(instruction)
        self.success_steps = success_steps
        self.success_tol = float(success_tol)
        b, d = self.batch_size, self.device
        self.observation_spec = Composite(
            observation=Composite(
                image=Unbounded(shape=(*b, *self.image_shape), dtype=torch.uint8),
                state=Unbounded(shape=(*b, self.state_dim), dtype=torch.float32),
                shape=b,
            ),
            language_instruction=NonTensor(shape=b, example_data=self.instruction),
            shape=b,
        )
        if tracking:
            self.observation_spec["success"] = Categorical(2, shape=(*b, 1), dtype=torch.bool)
        self.action_spec = Bounded(-1.0, 1.0, shape=(*b, self.action_dim), dtype=torch.float32)
        self.reward_spec = Unbounded(shape=(*b, 1), dtype=torch.float32)
        self._generator = torch.Generator()
        self._set_seed(seed)
        self._target = torch.zeros(*b, self.action_dim, device=d)
        self._streak = torch.zeros(*b, 1, dtype=torch.int64, device=d)

    def _obs(self, action: torch.Tensor | None) -> TensorDict:
        b, d = self.batch_size, self.device
        state = torch.zeros(*b, self.state_dim, device=d)
        if action is not None:
            state[..., : self.action_dim] = action
        if self.success_steps is not None:
            state[..., self.action_dim : 2 * self.action_dim] = self._target
        image = torch.randint(
            0, 256, (*b, *self.image_shape), dtype=torch.uint8, generator=self._generator
        )
        instruction: Any = self.instruction
        if len(b):
            instruction = NonTensorStack(*([self.instruction] * b.numel())).reshape(b)
        return TensorDict(
            observation=TensorDict(image=image.to(d), state=state, batch_size=b),
            language_instruction=instruction,
            batch_size=b,
            device=d,
        )

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        if self.success_steps is None:
            return self._obs(None)
        b, d = self.batch_size, self.device
        mask = None if tensordict is None else tensordict.get("_reset", None)
        mask = (
            torch.ones(*b, 1, dtype=torch.bool, device=d) if mask is None else mask.reshape(*b, 1)
        )
        draw = torch.rand(*b, self.action_dim, generator=self._generator).to(d) - 0.5
        self._target = torch.where(mask, draw, self._target)
        self._streak = torch.where(mask, 0, self._streak)
        out = self._obs(None)
        out["success"] = torch.zeros(*b, 1, dtype=torch.bool, device=d)
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action")
        out = self._obs(action)
        if self.success_steps is None:
            out["reward"] = -action.norm(dim=-1, keepdim=True)
            return out
        error = action - self._target
        reward = -error.norm(dim=-1, keepdim=True)
        streak = torch.where(
            (error.abs() <= self.success_tol).all(-1, keepdim=True), self._streak + 1, 0
        )
        stepped = tensordict.get("_step", None)
        if stepped is not None:  # a partial step: the others keep their streak, earn nothing
            stepped = stepped.reshape(self._streak.shape)
            streak = torch.where(stepped, streak, self._streak)
            reward = torch.where(stepped, reward, 0.0)
        self._streak = streak
        success = streak >= self.success_steps
        out.update(
            {"reward": reward, "success": success, "terminated": success, "done": success.clone()}
        )
        return out

    def _set_seed(self, seed: int | None) -> None:
        if seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(seed)
