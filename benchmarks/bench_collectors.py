"""Collector throughput: rl_collectors vs TorchRL 0.14 vs a hand-written loop (the limit).

Run: ``.venv-bench/bin/python benchmarks/bench_collectors.py [--frames N] [--quick]``

Every contender collects batches of 1000 frames with the same MLP policy
(obs -> 64 -> 64 -> action, tanh), one torch thread per process:

* raw: Gymnasium + the torch MLP on tensors + stacking the steps into tensors;
* ours: ``rl_collectors.Collector`` on ``rl_envs.GymEnv`` (and on a 30-line
  Gymnasium adapter, to show the collector's own cost apart from the env wrapper);
* torchrl: ``torchrl.collectors.Collector`` on ``torchrl.envs.GymEnv``;
* 2 workers: ``MultiSyncCollector`` vs TorchRL's ``MultiSyncCollector``.

Frames/s are measured after one warm-up batch (worker start-up excluded).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn

from rl_collectors import Collector, MultiSyncCollector

FRAMES_PER_BATCH = 1000
ENVS = ["Pendulum-v1", "HalfCheetah-v5"]


class _ToFloat(nn.Module):
    """Actions in float32 (the action spaces' dtype) whatever the observation dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float32)


def make_mlp(env_name: str) -> nn.Module:
    """obs -> 64 -> 64 -> action (tanh), in the observations' dtype (float64 for MuJoCo)."""
    env = gym.make(env_name)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    dtype = torch.float64 if env.observation_space.dtype == np.float64 else torch.float32
    env.close()
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(obs_dim, 64),
        nn.Tanh(),
        nn.Linear(64, 64),
        nn.Tanh(),
        nn.Linear(64, act_dim),
        nn.Tanh(),
    )
    return nn.Sequential(net.to(dtype), _ToFloat())


def td_policy(env_name: str) -> TensorDictModule:
    return TensorDictModule(make_mlp(env_name), in_keys=["observation"], out_keys=["action"])


# -- the limit: Gymnasium + torch + stacking -------------------------------------------------
def raw_loop(env_name: str, frames: int) -> float:
    env, policy = gym.make(env_name), make_mlp(env_name)
    obs, _ = env.reset(seed=0)

    def batch() -> dict[str, torch.Tensor]:
        nonlocal obs
        rows: dict[str, list[torch.Tensor]] = {
            k: [] for k in ("obs", "act", "rew", "next", "term", "trunc")
        }
        for _ in range(FRAMES_PER_BATCH):
            obs_t = torch.as_tensor(obs)
            with torch.no_grad():
                action = policy(obs_t)
            next_obs, reward, term, trunc, _ = env.step(action.numpy())
            rows["obs"].append(obs_t)
            rows["act"].append(action)
            rows["rew"].append(torch.tensor([reward], dtype=torch.float32))
            rows["next"].append(torch.as_tensor(next_obs))
            rows["term"].append(torch.tensor([term]))
            rows["trunc"].append(torch.tensor([trunc]))
            obs = env.reset()[0] if term or trunc else next_obs
        return {k: torch.stack(v) for k, v in rows.items()}

    batch()
    start = time.perf_counter()
    for _ in range(frames // FRAMES_PER_BATCH):
        batch()
    return frames / (time.perf_counter() - start)


# -- a minimal contract env over Gymnasium (no rl_envs) ---------------------------------------
class _Box:
    def __init__(self, space: Any) -> None:
        self.low = torch.as_tensor(space.low, dtype=torch.float32)
        self.high = torch.as_tensor(space.high, dtype=torch.float32)
        self.shape, self.dtype, self.device = self.low.shape, torch.float32, torch.device("cpu")

    def rand(self, shape: tuple[int, ...] = ()) -> torch.Tensor:
        return self.low + (self.high - self.low) * torch.rand((*shape, *self.shape))


class MinimalGymEnv:
    """Just what docs/contract.md asks of an env (unbatched), over a Gymnasium env."""

    batch_size = torch.Size([])
    device = torch.device("cpu")

    def __init__(self, env_name: str) -> None:
        self._env = gym.make(env_name)
        self.action_spec = _Box(self._env.action_space)
        self._false = torch.zeros(1, dtype=torch.bool)

    def reset(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        obs, _ = self._env.reset()
        f = self._false
        return TensorDict(
            {"observation": torch.as_tensor(obs), "done": f, "terminated": f, "truncated": f},
            batch_size=[],
        )

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        obs, reward, term, trunc, _ = self._env.step(tensordict.get("action").numpy())
        term_t, trunc_t = torch.tensor([term]), torch.tensor([trunc])
        nxt = TensorDict(
            {"observation": torch.as_tensor(obs),
             "reward": torch.tensor([reward], dtype=torch.float32),
             "done": term_t | trunc_t, "terminated": term_t, "truncated": trunc_t},
            batch_size=[],
        )  # fmt: skip
        tensordict.set("next", nxt)
        return tensordict

    def close(self) -> None:
        self._env.close()


def _rl_envs_gym(env_name: str) -> Any:
    from rl_envs import GymEnv

    return GymEnv(env_name, validate_actions=False)


# -- collector timing -------------------------------------------------------------------------
def time_collector(make: Callable[[int], Any], frames: int) -> float:
    collector = make(frames + FRAMES_PER_BATCH)
    iterator = iter(collector)
    next(iterator)  # warm-up batch (and worker start-up)
    start = time.perf_counter()
    collected = 0
    for batch in iterator:
        collected += batch.numel()
    elapsed = time.perf_counter() - start
    collector.shutdown()
    return collected / elapsed


def ours(env_name: str, adapter: bool) -> Callable[[int], Any]:
    env_fn = (lambda: MinimalGymEnv(env_name)) if adapter else (lambda: _rl_envs_gym(env_name))
    return lambda total: Collector(
        env_fn(), td_policy(env_name), frames_per_batch=FRAMES_PER_BATCH, total_frames=total
    )


def torchrl_single(env_name: str) -> Callable[[int], Any]:
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.envs import GymEnv as TorchRLGymEnv

    return lambda total: TorchRLCollector(
        TorchRLGymEnv(env_name),
        td_policy(env_name),
        frames_per_batch=FRAMES_PER_BATCH,
        total_frames=total,
    )


class EnvFactory:
    """Picklable env constructor for the worker processes."""

    def __init__(self, env_name: str, torchrl: bool = False) -> None:
        self.env_name, self.torchrl = env_name, torchrl

    def __call__(self) -> Any:
        if self.torchrl:
            from torchrl.envs import GymEnv as TorchRLGymEnv

            return TorchRLGymEnv(self.env_name)
        return _rl_envs_gym(self.env_name)


def ours_multi(env_name: str) -> Callable[[int], Any]:
    return lambda total: MultiSyncCollector(
        [EnvFactory(env_name)] * 2,
        td_policy(env_name),
        frames_per_batch=FRAMES_PER_BATCH,
        total_frames=total,
    )


def torchrl_multi(env_name: str) -> Callable[[int], Any]:
    from torchrl.collectors import MultiSyncCollector as TorchRLMulti

    return lambda total: TorchRLMulti(
        [EnvFactory(env_name, torchrl=True)] * 2,
        td_policy(env_name),
        frames_per_batch=FRAMES_PER_BATCH,
        total_frames=total,
        cat_results="stack",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--frames", type=int, default=3000, help="timed frames per contender (after warm-up)"
    )
    parser.add_argument("--envs", nargs="*", default=ENVS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import tensordict

    print(
        f"torch {torch.__version__}, tensordict {tensordict.__version__}, gymnasium {gym.__version__}"
    )
    try:
        import torchrl

        print(f"torchrl {torchrl.__version__}")
    except ImportError:
        torchrl = None
        print("torchrl not installed: its rows are skipped (use .venv-bench)")
    header = f"{'env':<16}{'contender':<34}{'frames/s':>10}{'vs torchrl':>12}{'vs raw':>9}"
    print(header)
    print("-" * len(header))
    for env_name in args.envs:
        rows: dict[str, float] = {"raw loop (gymnasium + torch)": raw_loop(env_name, args.frames)}
        rows["ours Collector (rl_envs.GymEnv)"] = time_collector(
            ours(env_name, adapter=False), args.frames
        )
        rows["ours Collector (minimal adapter)"] = time_collector(
            ours(env_name, adapter=True), args.frames
        )
        if torchrl is not None:
            rows["torchrl Collector"] = time_collector(torchrl_single(env_name), args.frames)
        rows["ours MultiSync, 2 workers"] = time_collector(ours_multi(env_name), args.frames)
        if torchrl is not None:
            rows["torchrl MultiSync, 2 workers"] = time_collector(
                torchrl_multi(env_name), args.frames
            )
        raw = rows["raw loop (gymnasium + torch)"]
        for name, fps in rows.items():
            reference = rows.get(
                "torchrl MultiSync, 2 workers" if "MultiSync" in name else "torchrl Collector"
            )
            ratio = f"{fps / reference:>11.2f}x" if reference else f"{'-':>12}"
            print(f"{env_name:<16}{name:<34}{fps:>10.0f}{ratio}{raw / fps:>8.2f}x")
    print(
        "vs raw = raw frames/s divided by the contender's (1.00x = as fast as the hand-written loop)."
    )


if __name__ == "__main__":
    main()
