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


def collected(envs: int, steps: int, obs_dim: int, seed: int, lengths=(100, 1000)) -> TensorDict:
    """A [envs, steps] batch as a collector gives it: ``obs_dim`` float32 observations, episodes
    truncated at a length drawn in ``lengths`` or terminated at random (rate 1 / max length)."""
    g = torch.Generator().manual_seed(seed)
    lo, hi = lengths
    x = torch.randn(envs, obs_dim, generator=g)
    t = torch.zeros(envs, dtype=torch.long)
    limit = torch.randint(lo, hi + 1, (envs,), generator=g)
    obs, nxt, terms, truncs = [], [], [], []
    for _ in range(steps):
        n = x + 0.1 * torch.randn(envs, obs_dim, generator=g)
        t = t + 1
        term = torch.rand(envs, generator=g) < 1 / hi
        trunc = (t >= limit) & ~term
        done = term | trunc
        obs.append(x), nxt.append(n), terms.append(term), truncs.append(trunc)
        x = torch.where(done[:, None], torch.randn(envs, obs_dim, generator=g), n)
        t = torch.where(done, torch.zeros_like(t), t)
        limit = torch.where(done, torch.randint(lo, hi + 1, (envs,), generator=g), limit)
    term, trunc = torch.stack(terms, 1)[..., None], torch.stack(truncs, 1)[..., None]
    return TensorDict({
        "observation": torch.stack(obs, 1), "action": torch.randn(envs, steps, 6, generator=g),
        "next": {"observation": torch.stack(nxt, 1), "reward": torch.randn(envs, steps, 1, generator=g),
                 "done": term | trunc, "terminated": term, "truncated": trunc},
    }, batch_size=[envs, steps])  # fmt: skip
