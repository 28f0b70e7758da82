"""VMAS navigation collection: rl_envs.VmasEnv + rl_collectors.Collector vs the raw VMAS loop
vs TorchRL 0.14's VmasEnv + Collector.

Run: ``.venv/bin/python benchmarks/bench_vmas.py [--envs 64 512] [--rounds 3]``

Every contender collects batches of ``num_envs x 10`` frames on ``navigation`` with 3 agents
(``max_steps=25``, so every env resets twice per measured round), with the same policy: one
MLP shared by the agents (obs 18 -> 64 -> 64 -> 2, tanh), on one torch thread:

* raw: ``vmas.make_env`` + the MLP on the stacked observations + stacking each batch's
  observations, actions, rewards, done flags and next observations into tensors, with
  ``env.reset()`` / ``env.reset_at(i)`` on done envs;
* ours: ``rl_collectors.Collector`` on ``rl_envs.VmasEnv`` (a TensorDict per batch with
  the grouped keys ``("agents", ...)``, root done flags, ``("collector", "traj_ids")``);
* torchrl: ``torchrl.collectors.Collector`` on ``torchrl.envs.VmasEnv``.

Frames/s are the best of ``--rounds`` interleaved rounds (3 timed batches each, after a warm-up
batch). VMAS or TorchRL missing: their rows are skipped, with a line saying so.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

N_AGENTS = 3
STEPS_PER_BATCH = 10
TIMED_BATCHES = 3
MAX_STEPS = 25


def make_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(18, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2), nn.Tanh()
    )


# -- the limit: VMAS + torch + stacking ------------------------------------------------------
class RawLoop:
    """A hand-written collection loop over ``vmas.make_env`` (what a user would write)."""

    def __init__(self, num_envs: int) -> None:
        import vmas

        self.env = vmas.make_env(
            "navigation", num_envs=num_envs, n_agents=N_AGENTS, max_steps=MAX_STEPS, seed=0
        )
        self.policy = make_mlp()
        self.obs = torch.stack(self.env.reset(), 1)

    def batch(self) -> dict[str, torch.Tensor]:
        rows: dict[str, list[torch.Tensor]] = {k: [] for k in ("obs", "act", "rew", "done", "next")}
        for _ in range(STEPS_PER_BATCH):
            with torch.no_grad():
                action = self.policy(self.obs)
            obs, rews, done, _ = self.env.step(list(action.unbind(1)))
            next_obs = torch.stack(obs, 1)
            rows["obs"].append(self.obs)
            rows["act"].append(action)
            rows["rew"].append(torch.stack(rews, 1).unsqueeze(-1))
            rows["done"].append(done.unsqueeze(-1))
            rows["next"].append(next_obs)
            if bool(done.all()):
                next_obs = torch.stack(self.env.reset(), 1)
            elif bool(done.any()):
                next_obs = next_obs.clone()
                for i in done.nonzero().flatten().tolist():
                    next_obs[i] = torch.stack(self.env.reset_at(i), 0)
            self.obs = next_obs
        return {k: torch.stack(v, 1) for k, v in rows.items()}


# -- collectors -------------------------------------------------------------------------------
def _policy() -> Any:
    from tensordict.nn import TensorDictModule

    return TensorDictModule(
        make_mlp(), in_keys=[("agents", "observation")], out_keys=[("agents", "action")]
    )


def ours(num_envs: int) -> Any:
    from rl_collectors import Collector
    from rl_envs import VmasEnv

    env = VmasEnv("navigation", num_envs=num_envs, n_agents=N_AGENTS, max_steps=MAX_STEPS, seed=0)
    return Collector(env, _policy(), frames_per_batch=num_envs * STEPS_PER_BATCH, total_frames=-1)


def torchrl_collector(num_envs: int) -> Any:
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.envs import VmasEnv as TorchRLVmasEnv

    env = TorchRLVmasEnv(
        "navigation", num_envs=num_envs, n_agents=N_AGENTS, max_steps=MAX_STEPS, seed=0
    )
    return TorchRLCollector(
        env, _policy(), frames_per_batch=num_envs * STEPS_PER_BATCH, total_frames=-1
    )


class Contender:
    """One way of collecting: ``batch()`` returns one batch; ``frames`` per batch."""

    def __init__(self, name: str, batch: Callable[[], Any], frames: int) -> None:
        self.name, self.batch, self.frames = name, batch, frames
        self.batch()  # warm-up

    def time_round(self) -> float:
        start = time.perf_counter()
        for _ in range(TIMED_BATCHES):
            self.batch()
        return self.frames * TIMED_BATCHES / (time.perf_counter() - start)


def _from_collector(name: str, collector: Any, frames: int) -> Contender:
    iterator = iter(collector)
    contender = Contender(name, lambda: next(iterator), frames)
    contender.collector = collector
    return contender


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", type=int, nargs="*", default=[64, 512])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best kept)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    import tensordict

    print(f"torch {torch.__version__}, tensordict {tensordict.__version__}")
    if importlib.util.find_spec("vmas") is None:
        print("vmas not installed: nothing to measure (install the extra rl-envs[vmas]).")
        return
    import vmas

    print(f"vmas {vmas.__version__}")
    has_torchrl = importlib.util.find_spec("torchrl") is not None
    if has_torchrl:
        import torchrl

        print(f"torchrl {torchrl.__version__}")
    else:
        print("torchrl not installed: its rows are skipped (use .venv-bench with vmas added)")
    header = f"{'envs':>6}  {'contender':<34}{'frames/s':>10}{'vs torchrl':>12}{'vs raw':>9}"
    print(header)
    print("-" * len(header))
    for num_envs in args.envs:
        frames = num_envs * STEPS_PER_BATCH
        raw = RawLoop(num_envs)
        contenders = [
            Contender("raw loop (vmas + torch)", raw.batch, frames),
            _from_collector("ours Collector (rl_envs.VmasEnv)", ours(num_envs), frames),
        ]
        if has_torchrl:
            contenders.append(
                _from_collector("torchrl Collector (VmasEnv)", torchrl_collector(num_envs), frames)
            )
        best = {c.name: 0.0 for c in contenders}
        for _ in range(args.rounds):
            for c in contenders:
                best[c.name] = max(best[c.name], c.time_round())
        for c in contenders:
            if hasattr(c, "collector"):
                c.collector.shutdown()
        raw_fps = best["raw loop (vmas + torch)"]
        ref = best.get("torchrl Collector (VmasEnv)")
        for name, fps in best.items():
            ratio = f"{fps / ref:>11.2f}x" if ref else f"{'-':>12}"
            print(f"{num_envs:>6}  {name:<34}{fps:>10.0f}{ratio}{raw_fps / fps:>8.2f}x")
    print("vs raw = raw frames/s divided by the contender's (1.00x = as fast as the raw loop).")


if __name__ == "__main__":
    main()
