"""``PendulumEnv``: Gymnasium's Pendulum-v1 in pure torch, batched, on any device.

The dynamics are those of ``gymnasium.envs.classic_control.PendulumEnv``
(``g=10``, ``m=l=1``, ``dt=0.05``, max speed 8, max torque 2), including its
mixed precision: the state is float64, the torque float32, and the terms that
Gymnasium computes in float32 are computed in float32 here too. The episode is
truncated after ``max_episode_steps`` (200, as ``gymnasium.make`` does).

It is also the model for a user's own env: specs in ``__init__``, then
``_reset`` / ``_step`` / ``_set_seed`` on plain tensors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs import _pendulum_rollout
from rl_envs.env_base import EnvBase
from rl_envs.rollout_backend import RolloutBackend
from rl_envs.specs import Bounded, Composite, Unbounded

__all__ = ["PendulumEnv"]


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """Maps an angle to ``[-pi, pi)``, as Gymnasium's ``angle_normalize``."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


def _observation(th: torch.Tensor, thdot: torch.Tensor) -> torch.Tensor:
    """``[cos th, sin th, thdot]`` as float32, shape ``[*B, 3]``."""
    return torch.stack([th.cos(), th.sin(), thdot], -1).to(torch.float32)


class PendulumEnv(EnvBase):
    """Pendulum swing-up, Gymnasium's Pendulum-v1 dynamics, batched.

    Observation ``"observation"``: ``[cos th, sin th, thdot]`` (float32, ``[*B, 3]``);
    action ``"action"``: torque in ``[-2, 2]`` (float32, ``[*B, 1]``); reward
    ``-(th^2 + 0.1 thdot^2 + 0.001 u^2)`` with ``th`` normalized to ``[-pi, pi)``.
    The action is clipped to ``[-2, 2]`` before use, as in Gymnasium.

    ``reset(td)`` accepts optional ``"th"`` and ``"thdot"`` entries (float64,
    shape ``[*B]``) to start from a given state instead of a random one.

    Args:
        batch_size: batch dims (default ``()``).
        device: device of the state and outputs.
        g: gravity (Gymnasium's default 10.0).
        max_episode_steps: truncation horizon (200).
        validate_actions: see :class:`~rl_envs.EnvBase`.

    Example:
        >>> env = PendulumEnv(batch_size=[4])
        >>> env.set_seed(0)
        1
        >>> env.rollout(10).batch_size
        torch.Size([4, 10])
    """

    max_speed = 8.0
    max_torque = 2.0
    dt = 0.05
    m = 1.0
    length = 1.0
    requires_reset = True

    def __init__(
        self,
        batch_size: Sequence[int] | torch.Size | None = None,
        device: torch.device | str | None = None,
        g: float = 10.0,
        max_episode_steps: int = 200,
        validate_actions: bool = False,
    ) -> None:
        super().__init__(device=device, batch_size=batch_size, validate_actions=validate_actions)
        self.g = g
        self.max_episode_steps = max_episode_steps
        b, d = self.batch_size, self.device
        self.observation_spec = Composite(
            observation=Bounded(
                low=torch.tensor([-1.0, -1.0, -self.max_speed]),
                high=torch.tensor([1.0, 1.0, self.max_speed]),
                shape=(3,),
                dtype=torch.float32,
            ),
        )
        self.action_spec = Bounded(
            low=-self.max_torque, high=self.max_torque, shape=(1,), dtype=torch.float32
        )
        self.reward_spec = Unbounded(shape=(1,), dtype=torch.float32)
        self._generator = torch.Generator(device=d)
        self._generator.seed()
        self._th = torch.zeros(b, dtype=torch.float64, device=d)
        self._thdot = torch.zeros(b, dtype=torch.float64, device=d)
        self._t = torch.zeros(b, dtype=torch.int64, device=d)

    def _obs(self) -> torch.Tensor:
        return _observation(self._th, self._thdot)

    def _draw_initial(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Gymnasium's initial state: th ~ U(-pi, pi), thdot ~ U(-1, 1) (th drawn first)."""
        b, d, gen = self.batch_size, self.device, self._generator
        th = (2 * torch.rand(b, dtype=torch.float64, device=d, generator=gen) - 1) * math.pi
        thdot = 2 * torch.rand(b, dtype=torch.float64, device=d, generator=gen) - 1
        return th, thdot

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        b, d = self.batch_size, self.device
        th = thdot = None
        mask = None
        if tensordict is not None:
            th, thdot = tensordict.get("th", None), tensordict.get("thdot", None)
            mask = tensordict.get("_reset", None)
        for name, value in (("th", th), ("thdot", thdot)):
            if value is not None and not bool(torch.isfinite(value).all()):
                raise ValueError(
                    f"PendulumEnv.reset(): the input's {name!r} must be finite, got "
                    f"{value.flatten()[:6].tolist()}. Pass finite start angles / velocities, "
                    f"or leave {name!r} out for Gymnasium's random initial state."
                )
        if th is None or thdot is None:
            th0, thdot0 = self._draw_initial()
            th = th0 if th is None else th
            thdot = thdot0 if thdot is None else thdot
        th = th.to(device=d, dtype=torch.float64).reshape(b)
        thdot = thdot.to(device=d, dtype=torch.float64).reshape(b)
        if mask is None:
            self._th, self._thdot = th, thdot
            self._t = torch.zeros_like(self._t)
        else:
            m = mask.reshape(b)
            self._th = torch.where(m, th, self._th)
            self._thdot = torch.where(m, thdot, self._thdot)
            self._t = torch.where(m, torch.zeros_like(self._t), self._t)
        return TensorDict({"observation": self._obs()}, batch_size=b, device=d)

    def _dynamics(
        self, th: torch.Tensor, thdot: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of Gymnasium's Pendulum-v1: ``(th', thdot', reward [*B, 1] float32)``."""
        u = action.clamp(-self.max_torque, self.max_torque).reshape(self.batch_size)
        # Gymnasium multiplies the float32 torque by Python floats: float32 math.
        cost_u = (0.001 * (u * u)).to(torch.float64)
        torque = (3.0 / (self.m * self.length**2) * u).to(torch.float64)
        costs = angle_normalize(th).square_().add_(thdot.square().mul_(0.1)).add_(cost_u)
        gravity = torch.sin(th).mul_(3 * self.g / (2 * self.length))
        newthdot = (gravity.add_(torque).mul_(self.dt).add_(thdot)).clamp_(
            -self.max_speed, self.max_speed
        )
        return th + newthdot * self.dt, newthdot, costs.neg_().to(torch.float32).unsqueeze(-1)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action")
        # clamp() keeps NaN and the state would stay NaN from here on: refuse it. A sum is
        # non-finite when any entry is (or when finite entries overflow: checked exactly
        # then); one op and a read, where isfinite().all() costs several. Huge finite
        # torques are clamped, as in Gymnasium.
        if not math.isfinite(action.sum().item()) and not bool(torch.isfinite(action).all()):
            raise ValueError(
                "PendulumEnv: expected a finite action (a torque, clamped to "
                f"[-{self.max_torque}, {self.max_torque}]), got NaN or inf: "
                f"{action.flatten()[:6].tolist()}. The env was not stepped. Check the "
                "policy's output (e.g. a diverged network)."
            )
        self._th, self._thdot, reward = self._dynamics(self._th, self._thdot, action)
        self._t = self._t + 1
        truncated = (self._t >= self.max_episode_steps).unsqueeze(-1)
        return TensorDict(
            {
                "observation": self._obs(),
                "reward": reward,
                "terminated": torch.zeros_like(truncated),
                "truncated": truncated,
                "done": truncated.clone(),
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def get_state(self) -> dict[str, Any]:
        """The exact state: angles, velocities, step counters and the RNG (picklable).

        Example:
            >>> env = PendulumEnv(batch_size=[2])
            >>> _ = env.reset()
            >>> state = env.get_state()
            >>> fresh = PendulumEnv(batch_size=[2])
            >>> fresh.set_state(state)  # steps like env from here
        """
        return {
            "env_class": type(self).__name__,
            "th": self._th.cpu().clone(),
            "thdot": self._thdot.cpu().clone(),
            "t": self._t.cpu().clone(),
            "generator": self._generator.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` result (the batch size must match)."""
        if tuple(state["th"].shape) != tuple(self.batch_size):
            raise ValueError(
                f"PendulumEnv.set_state(): the state is for batch_size "
                f"{tuple(state['th'].shape)}, this env has {tuple(self.batch_size)}. Build "
                "the env with the batch_size of the env the state was taken from."
            )
        d = self.device
        self._th = state["th"].to(device=d, dtype=torch.float64).clone()
        self._thdot = state["thdot"].to(device=d, dtype=torch.float64).clone()
        self._t = state["t"].to(device=d, dtype=torch.int64).clone()
        self._generator.set_state(state["generator"])
        self._awaiting_reset = False

    def _set_seed(self, seed: int | None) -> None:
        if seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(seed)


def _backend_supports(env: EnvBase, root: TensorDictBase, policy: Any, mode: str) -> bool:
    # exact type: a subclass overriding a hook gets the generic loop, which calls it
    return type(env) is PendulumEnv and _pendulum_rollout.supports(root, policy, mode)


def _backend_run(
    env: PendulumEnv,
    root: TensorDictBase,
    max_steps: int,
    policy: Any,
    mode: str,
    actions: dict[Any, torch.Tensor] | None,
) -> TensorDictBase:
    """Random-action rollouts on plain tensors (see ``rl_envs._pendulum_rollout``)."""
    assert actions is not None  # supports() asked for random actions
    sim = _pendulum_rollout.Simulator(
        state=(env._th, env._thdot, env._t),
        dynamics=env._dynamics,
        draw_initial=env._draw_initial,
        observation=_observation,
        horizon=env.max_episode_steps,
    )
    out = _pendulum_rollout.run(sim, root, actions["action"], mode, env.batch_size, env.device)
    env._th, env._thdot, env._t = sim.state
    return out


PendulumEnv.rollout_backends = (RolloutBackend("pendulum", _backend_supports, _backend_run),)
