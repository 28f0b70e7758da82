"""The random-action rollout of :class:`~rl_envs.PendulumEnv` on plain tensors (private).

The generic loop builds three TensorDicts per step (the step output, ``"next"``
and the ``step_mdp`` root), runs a partial ``reset`` round trip when episodes end
and stacks the TensorDicts at the end; for a batch of 1024 pendulums that
bookkeeping costs more than the dynamics. Here the state stays in two float64
tensors, each step is ``PendulumEnv._dynamics`` plus the observation, the
per-step tensors go into one list per key, and each key is stacked once.

It produces exactly what the generic loop produces: actions are drawn up front
with the same ``spec.rand((T,))`` call; finished entries are reset with the same
generator draws as ``PendulumEnv._reset`` (full-batch ``th`` then ``thdot``,
merged under the done mask); root done flags are ``False`` after the first step.
It applies (:func:`supports`) to random actions with ``break_when_any_done`` or
auto-reset rollouts (``mode`` ``"any"`` / ``"none"``) from a root holding only the
observation and the done flags. ``PendulumEnv`` offers it as its ``"pendulum"``
rollout backend and hands over its simulator (:class:`Simulator`): this module reads
no attribute of the env's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

_ROOT_KEYS = {"observation", "done", "terminated", "truncated"}

_State = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # th, thdot, step count


@dataclass
class Simulator:
    """What the loop needs of a ``PendulumEnv``: its state and its physics.

    Attributes:
        state: ``(th, thdot, count)`` at the start; the loop replaces it with the final one.
        dynamics: ``(th, thdot, action) -> (th', thdot', reward [*B, 1])``.
        draw_initial: ``() -> (th0, thdot0)`` of the whole batch (the env's generator).
        observation: ``(th, thdot) -> [*B, 3]`` float32.
        horizon: the episode length (truncation).
    """

    state: _State
    dynamics: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], _State]
    draw_initial: Callable[[], tuple[torch.Tensor, torch.Tensor]]
    observation: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    horizon: int


def supports(root: TensorDictBase, policy: Any, mode: str) -> bool:
    """Random actions, mode ``"any"`` or ``"none"``, a root of observation and flags only."""
    return policy is None and mode in ("any", "none") and set(root.keys(True, True)) == _ROOT_KEYS


def run(
    sim: Simulator,
    root: TensorDictBase,
    actions: torch.Tensor,
    mode: str,
    batch_size: torch.Size,
    device: torch.device,
) -> TensorDictBase:
    """The stacked rollout (batch_size ``[*B, T]``); ``sim.state`` ends as the env's state."""
    nb = len(batch_size)
    max_steps = actions.shape[0]
    observation = sim.observation
    obs_root: list[torch.Tensor] = [root.get("observation")]
    obs_next: list[torch.Tensor] = []
    rewards: list[torch.Tensor] = []
    truncs: list[torch.Tensor] = []
    th, thdot, count = sim.state
    horizon = sim.horizon
    n = max_steps
    for t in range(max_steps):
        th, thdot, reward = sim.dynamics(th, thdot, actions[t])
        count = count + 1
        done = count >= horizon
        obs = observation(th, thdot)
        obs_next.append(obs)
        rewards.append(reward)
        truncs.append(done.unsqueeze(-1))
        if t == max_steps - 1:
            break
        if bool(done.any()):
            if mode == "any":
                n = t + 1
                break
            th0, thdot0 = sim.draw_initial()
            th = torch.where(done, th0, th)
            thdot = torch.where(done, thdot0, thdot)
            count = torch.where(done, torch.zeros_like(count), count)
            obs = observation(th, thdot)
        obs_root.append(obs)
    sim.state = (th, thdot, count)

    def stack(values: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack(values, nb)

    trunc = stack(truncs)
    flags = torch.zeros_like(trunc)
    first_flags = {k: flags.clone() for k in ("done", "terminated", "truncated")}
    for key, value in first_flags.items():
        value.select(nb, 0).copy_(root.get(key))
    out = TensorDict(batch_size=(*batch_size, n), device=device)
    out.set("observation", stack(obs_root))
    out.set("action", stack(list(actions[:n].unbind(0))))
    for key, value in first_flags.items():
        out.set(key, value)
    out.set(("next", "observation"), stack(obs_next))
    out.set(("next", "reward"), stack(rewards))
    out.set(("next", "terminated"), flags)
    out.set(("next", "truncated"), trunc)
    out.set(("next", "done"), trunc.clone())
    return out
