"""MAPPOLoss forward + backward: ours vs TorchRL 0.14's vs the same loss written in plain torch.

Sizes of VMAS navigation: 3 agents, 18 observation features, 2 continuous actions, a
batch of ``num_envs x 32`` team steps for 64 and 512 vectorised envs. The three columns
use the very same networks (an actor MLP shared by the agents and a critic MLP over
all agents' observations, 64 hidden units) and the same loss: clipped surrogate per
agent-step, advantage standardised per agent, entropy bonus, smooth-L1 critic loss.
Times are medians of interleaved repeats in one process; the ratio to plain torch is the
figure of merit (target <= 1.3x). Without torchrl installed its column is skipped.

    OMP_NUM_THREADS=1 .venv-bench/bin/python benchmarks/bench_marl_losses.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from tensordict import TensorDict
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import distributions as D
from torch import nn
from torch.nn import functional as F

N_AGENTS, OBS, ACT, HIDDEN, STEPS = 3, 18, 2, 64, 32
EPS, ENT = 0.2, 0.01
KEYS = {
    "action": ("agents", "action"),
    "sample_log_prob": ("agents", "action_log_prob"),
    "value": ("agents", "state_value"),
    "advantage": ("agents", "advantage"),
    "value_target": ("agents", "value_target"),
}


class LocScale(nn.Module):
    """Shared actor MLP: ``[..., n, obs] -> loc, scale`` of ``[..., n, act]``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 2 * ACT))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc, scale = self.net(obs).chunk(2, -1)
        return loc, F.softplus(scale) + 1e-4


class CentralCritic(nn.Module):
    """One value from all agents' observations, given to every agent: ``[..., n, 1]``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(N_AGENTS * OBS, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        value = self.net(obs.flatten(-2)).unsqueeze(-2)
        return value.expand(*value.shape[:-2], N_AGENTS, 1)


def normal(loc: torch.Tensor, scale: torch.Tensor) -> D.Distribution:
    return D.Independent(D.Normal(loc, scale), 1)


def make_modules(actor_net: nn.Module, critic_net: nn.Module):
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(
            actor_net, [("agents", "observation")], [("agents", "loc"), ("agents", "scale")]
        ),
        ProbabilisticTensorDictModule(
            [("agents", "loc"), ("agents", "scale")],
            [("agents", "action")],
            distribution_class=normal,
        ),
    )
    critic = TensorDictModule(critic_net, [("agents", "observation")], [("agents", "state_value")])
    return actor, critic


def make_data(n: int) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    agents = TensorDict(
        {
            "observation": torch.randn(n, N_AGENTS, OBS, generator=g),
            "action": torch.randn(n, N_AGENTS, ACT, generator=g),
            "action_log_prob": -torch.rand(n, N_AGENTS, generator=g) - 2,
            "advantage": torch.randn(n, N_AGENTS, 1, generator=g),
            "value_target": torch.randn(n, N_AGENTS, 1, generator=g),
        },
        [n, N_AGENTS],
    )
    return TensorDict({"agents": agents}, [n])


def plain_loss(actor_net: nn.Module, critic_net: nn.Module, td: TensorDict) -> torch.Tensor:
    obs = td["agents", "observation"]
    loc, scale = actor_net(obs)
    dist = normal(loc, scale)
    log_weight = dist.log_prob(td["agents", "action"]) - td["agents", "action_log_prob"]
    adv = td["agents", "advantage"]
    adv = ((adv - adv.mean((0, 2), keepdim=True)) / adv.std((0, 2), keepdim=True)).squeeze(-1)
    ratio = log_weight.exp()
    gain = torch.minimum(ratio * adv, ratio.clamp(1 - EPS, 1 + EPS) * adv)
    value = critic_net(obs)
    critic = F.smooth_l1_loss(value, td["agents", "value_target"])
    return -gain.mean() - ENT * dist.entropy().mean() + critic


def timed(fn: Callable[[TensorDict], torch.Tensor], td: TensorDict) -> float:
    start = time.perf_counter()
    fn(td).backward()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    actor_net, critic_net = LocScale(), CentralCritic()
    actor, critic = make_modules(actor_net, critic_net)

    import rl_objectives

    losses: dict[str, Callable[[TensorDict], torch.Tensor]] = {
        "plain torch": lambda td: plain_loss(actor_net, critic_net, td)
    }

    def wrap(loss_module):
        loss_module.set_keys(**KEYS)

        def run(td):
            out = loss_module(td)
            return out["loss_objective"] + out["loss_entropy"] + out["loss_critic"]

        return run

    common = {"entropy_coeff": ENT, "clip_epsilon": EPS, "normalize_advantage": True}
    losses["ours"] = wrap(rl_objectives.MAPPOLoss(actor, critic, **common))
    try:
        import torchrl.objectives

        losses["torchrl 0.14"] = wrap(torchrl.objectives.MAPPOLoss(actor, critic, **common))
    except ImportError:
        print("torchrl is not installed: its column is skipped.")

    print(f"MAPPOLoss forward+backward, {N_AGENTS} agents x num_envs x {STEPS} steps, 1 thread")
    print(f"{'num_envs':>8} {'frames':>7} " + " ".join(f"{k:>14}" for k in losses) + "  ratios")
    for num_envs in (64, 512):
        td = make_data(num_envs * STEPS)
        # the same value from every implementation before timing
        ref = losses["plain torch"](td).item()
        for name, fn in losses.items():
            got = fn(td).item()
            if abs(got - ref) > 1e-4 * max(1.0, abs(ref)):
                raise SystemExit(f"{name} gives {got}, plain torch {ref}: not the same loss")
        times: dict[str, list[float]] = {k: [] for k in losses}
        for _ in range(3):  # warm-up
            for fn in losses.values():
                timed(fn, td)
        for _ in range(args.repeats):
            for name, fn in losses.items():
                times[name].append(timed(fn, td))
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        base = med["plain torch"]
        ratios = ", ".join(
            f"{k}/plain {v / base:.2f}x" for k, v in med.items() if k != "plain torch"
        )
        cells = " ".join(f"{v:>11.2f} ms" for v in med.values())
        print(f"{num_envs:>8} {num_envs * STEPS:>7} {cells}  {ratios}")


if __name__ == "__main__":
    main()
