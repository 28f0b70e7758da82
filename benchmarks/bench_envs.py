"""Env rollout speed: rl_envs vs a raw Gymnasium loop (the limit) vs TorchRL 0.14.

Run: ``.venv-bench/bin/python benchmarks/bench_envs.py`` (needs torchrl 0.14 in the
venv; ``--quick`` divides the step counts by 10). Prints steps/s and ratios.

Cases (single env, auto-reset on done, as the raw loop does):
  * random actions: 20k steps of CartPole-v1 and Pendulum-v1, 5k of HalfCheetah-v5;
  * the same with a small MLP policy (obs -> 64 -> 64 -> action) in a
    TensorDictModule; the raw loop calls the same nn.Module on torch.from_numpy(obs);
  * PendulumEnv(batch_size=[1024]) vs TorchRL's PendulumEnv with a batch of 1024.
Each measurement is the best of ``--repeats`` runs, interleaved between contenders
(the machine is shared, so a single run is noisy).
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import gymnasium as gym
import torch
from tensordict.nn import TensorDictModule
from torch import nn

import rl_envs

warnings.filterwarnings("ignore")
torch.set_num_threads(1)


class Policy(nn.Module):
    """obs -> 64 -> 64 -> action; one-hot argmax for discrete, tanh * high for boxes."""

    def __init__(self, n_obs: int, n_act: int, discrete: bool, high: float = 1.0) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_obs, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n_act)
        )
        self.discrete, self.high = discrete, high

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.net(obs.to(torch.float32))
        if self.discrete:
            return nn.functional.one_hot(out.argmax(-1), out.shape[-1])
        return out.tanh() * self.high


def make_policy(name: str) -> Policy:
    env = gym.make(name)
    n_obs = env.observation_space.shape[0]
    space = env.action_space
    if isinstance(space, gym.spaces.Discrete):
        return Policy(n_obs, int(space.n), True)
    return Policy(n_obs, space.shape[0], False, float(space.high[0]))


def raw_loop(name: str, steps: int, policy: Policy | None) -> float:
    env = gym.make(name)
    obs, _ = env.reset(seed=0)
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    t0 = time.perf_counter()
    for _ in range(steps):
        if policy is None:
            action = env.action_space.sample()
        else:
            out = policy(torch.from_numpy(obs))
            action = int(out.argmax()) if discrete else out.numpy()
        obs, _, term, trunc, _ = env.step(action)
        if term or trunc:
            obs, _ = env.reset()
    return steps / (time.perf_counter() - t0)


def rollout_rate(env, steps: int, policy) -> float:
    env.reset()
    t0 = time.perf_counter()
    env.rollout(steps, policy, break_when_any_done=False)
    return steps / (time.perf_counter() - t0)


def best(fn: Callable[[], float], repeats: int) -> float:
    return max(fn() for _ in range(repeats))


def bench_single(name: str, steps: int, use_policy: bool, repeats: int) -> dict[str, float]:
    from torchrl.envs import GymEnv as TorchRLGymEnv

    ours, theirs = rl_envs.GymEnv(name), TorchRLGymEnv(name)
    policy = make_policy(name) if use_policy else None
    td_policy = TensorDictModule(policy, ["observation"], ["action"]) if policy else None
    rates: dict[str, list[float]] = {"raw": [], "ours": [], "torchrl": []}
    with torch.no_grad():
        for _ in range(repeats):
            rates["raw"].append(raw_loop(name, steps, policy))
            rates["ours"].append(rollout_rate(ours, steps, td_policy))
            # TorchRL is ~40x slower: a fraction of the steps gives the same rate
            rates["torchrl"].append(rollout_rate(theirs, max(steps // 10, 500), td_policy))
    return {k: max(v) for k, v in rates.items()}


def bench_pendulum_batch(batch: int, steps: int, repeats: int) -> dict[str, float]:
    from torchrl.envs import PendulumEnv as TorchRLPendulum

    ours = rl_envs.PendulumEnv(batch_size=[batch])
    theirs = TorchRLPendulum()
    out: dict[str, list[float]] = {"ours": [], "torchrl": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        ours.rollout(steps, break_when_any_done=False)
        out["ours"].append(steps * batch / (time.perf_counter() - t0))
        td = theirs.reset(theirs.gen_params(batch_size=[batch]))
        t0 = time.perf_counter()
        theirs.rollout(steps, auto_reset=False, tensordict=td, break_when_any_done=False)
        out["torchrl"].append(steps * batch / (time.perf_counter() - t0))
    return {k: max(v) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer steps")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    div = 10 if args.quick else 1
    cases = [("CartPole-v1", 20_000), ("Pendulum-v1", 20_000), ("HalfCheetah-v5", 5_000)]
    print(f"rl_envs {rl_envs.__version__}, torch {torch.__version__}, gymnasium {gym.__version__}")
    header = (
        f"{'case':34s} {'raw steps/s':>12s} {'ours':>10s} {'torchrl':>10s} "
        f"{'raw/ours':>9s} {'ours/torchrl':>13s}"
    )
    print(header)
    print("-" * len(header))
    for use_policy in (False, True):
        for name, steps in cases:
            r = bench_single(name, steps // div, use_policy, args.repeats)
            label = f"{name} {'MLP policy' if use_policy else 'random'} ({steps // div})"
            print(
                f"{label:34s} {r['raw']:12,.0f} {r['ours']:10,.0f} {r['torchrl']:10,.0f} "
                f"{r['raw'] / r['ours']:8.2f}x {r['ours'] / r['torchrl']:12.1f}x",
                flush=True,
            )
    r = bench_pendulum_batch(1024, 200 // div if div > 1 else 200, args.repeats)
    label = "PendulumEnv batch 1024 (frames/s)"
    print(
        f"{label:34s} {'-':>12s} {r['ours']:10,.0f} {r['torchrl']:10,.0f} "
        f"{'-':>9s} {r['ours'] / r['torchrl']:12.1f}x"
    )


if __name__ == "__main__":
    main()
