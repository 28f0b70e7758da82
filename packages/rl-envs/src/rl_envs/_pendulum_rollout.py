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
It applies to random actions with ``break_when_any_done`` or auto-reset rollouts
(``mode`` ``"any"`` / ``"none"``) from a root holding only the observation and
the done flags; otherwise it returns ``None`` and the generic loop runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDict, TensorDictBase

if TYPE_CHECKING:
    from rl_envs.pendulum import PendulumEnv

_ROOT_KEYS = {"observation", "done", "terminated", "truncated"}


def fast_rollout(
    env: PendulumEnv, root: TensorDictBase, max_steps: int, policy: Any, mode: str
) -> TensorDictBase | None:
    """The stacked rollout (batch_size ``[*B, T]``), or ``None`` for the generic loop."""
    from rl_envs.pendulum import _observation

    if policy is not None or mode not in ("any", "none"):
        return None
    if set(root.keys(True, True)) != _ROOT_KEYS:
        return None
    nb = len(env.batch_size)
    actions = env.full_action_spec["action"].rand((max_steps,))
    first = root.clone(False).set("action", actions[0])
    env._check_step_input(first)

    obs_root: list[torch.Tensor] = [root.get("observation")]
    obs_next: list[torch.Tensor] = []
    rewards: list[torch.Tensor] = []
    truncs: list[torch.Tensor] = []
    th, thdot, count = env._th, env._thdot, env._t
    horizon = env.max_episode_steps
    n = max_steps
    for t in range(max_steps):
        th, thdot, reward = env._dynamics(th, thdot, actions[t])
        count = count + 1
        done = count >= horizon
        obs = _observation(th, thdot)
        obs_next.append(obs)
        rewards.append(reward)
        truncs.append(done.unsqueeze(-1))
        if t == max_steps - 1:
            break
        if bool(done.any()):
            if mode == "any":
                n = t + 1
                break
            th0, thdot0 = env._draw_initial()
            th = torch.where(done, th0, th)
            thdot = torch.where(done, thdot0, thdot)
            count = torch.where(done, torch.zeros_like(count), count)
            obs = _observation(th, thdot)
        obs_root.append(obs)
    env._th, env._thdot, env._t = th, thdot, count

    def stack(values: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack(values, nb)

    trunc = stack(truncs)
    flags = torch.zeros_like(trunc)
    first_flags = {k: flags.clone() for k in ("done", "terminated", "truncated")}
    for key, value in first_flags.items():
        value.select(nb, 0).copy_(root.get(key))
    out = TensorDict(batch_size=(*env.batch_size, n), device=env.device)
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
