"""Tiny local fixtures: transitions and a toy batched env rollout with terminations and truncations."""

import torch
from tensordict import TensorDict


def transitions(n: int, start: int = 0) -> TensorDict:
    obs = torch.arange(start, start + n, dtype=torch.float32).unsqueeze(-1).expand(n, 3).clone()
    return TensorDict(
        {
            "observation": obs,
            "action": torch.randn(n, 2),
            "next": {
                "observation": obs + 0.5,
                "reward": torch.randn(n, 1),
                "done": torch.zeros(n, 1, dtype=torch.bool),
                "terminated": torch.zeros(n, 1, dtype=torch.bool),
                "truncated": torch.zeros(n, 1, dtype=torch.bool),
            },
        },
        batch_size=[n],
    )


def rollout(envs: int, steps: int, seed: int, state: torch.Tensor | None = None):
    """A [envs, steps] rollout of a random walk that terminates at |x| > 3 and truncates every 7 steps."""
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(envs, 2) if state is None else state[0].clone()
    t = torch.zeros(envs, dtype=torch.long) if state is None else state[1].clone()
    rows = []
    for _ in range(steps):
        nxt = x + torch.randn(envs, 2, generator=g)
        t = t + 1
        term = nxt.abs().max(-1).values > 3
        trunc = (t % 7 == 0) & ~term
        done = term | trunc
        rows.append(TensorDict({
            "observation": x.clone(), "action": torch.randn(envs, 1, generator=g),
            "next": {"observation": nxt.clone(), "reward": -nxt.norm(dim=-1, keepdim=True),
                     "done": done.unsqueeze(-1), "terminated": term.unsqueeze(-1),
                     "truncated": trunc.unsqueeze(-1)},
        }, batch_size=[envs]))  # fmt: skip
        x = torch.where(done.unsqueeze(-1), torch.zeros_like(nxt), nxt)
        t = torch.where(done, torch.zeros_like(t), t)
    return torch.stack(rows, dim=1), (x, t)
