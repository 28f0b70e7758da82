"""rl-kernels' advantage scans vs rl-objectives vs TorchRL 0.14 vs a plain loop, in one process.

Run: ``uv run --no-sync python benchmarks/bench_kernels_scans.py`` (TorchRL columns need
torchrl; without it they are skipped with a message).

CPU, single-threaded (``torch.set_num_threads(1)``: the machine may be shared, and one
thread keeps the ratios comparable):

* GAE on ``[B, T, 1]`` = [256, 1000], [1024, 256] and the small [8, 128] (1% dones, half
  of them terminations): rl_kernels' torch fallback, rl_objectives' ``generalized_advantage_estimate``,
  TorchRL's ``vec_generalized_advantage_estimate`` and a plain loop over time.
* TD(lambda) and V-trace on [256, 1000]: rl_kernels vs rl_objectives vs TorchRL.

CUDA (runs as-is where a GPU and Triton are present, skipped otherwise): GAE on
[256, 1000], [4096, 1000] and [1024, 4096]: rl_kernels' Triton kernel (blocked scan, the
default), the same kernel walking one step at a time (the reverse-loop formulation),
its torch path on the GPU, rl_objectives and TorchRL.

Each figure is the median (and the best) of the calls, made in turn with the other
contenders' (round robin), so load spikes hit every contender alike; on a busy shared
machine the best time is the steadier estimate of each contender's own cost.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from rl_kernels._backend import triton_available
from rl_kernels.scans import (
    generalized_advantage_estimate,
    td_lambda_return_estimate,
    vtrace_advantage_estimate,
)
from rl_objectives.value import functional as objectives

try:
    from torchrl.objectives.value import functional as torchrl_functional
except ImportError:
    torchrl_functional = None

GAMMA, LMBDA = 0.99, 0.95


def compare(
    fns: dict[str, Callable[[], object]], calls: int, sync: Callable[[], None] = lambda: None
) -> dict[str, tuple[float, float]]:
    """Median and best wall time (ms) per call of each function, calls interleaved round robin."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    sync()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(calls):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            sync()
            samples[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(s) * 1e3, min(s) * 1e3) for name, s in samples.items()}


def make_inputs(batch: int, steps: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    shape = (batch, steps, 1)
    done = torch.rand(shape, generator=gen) < 0.01
    terminated = done & (torch.rand(shape, generator=gen) < 0.5)
    data = {
        "value": torch.randn(shape, generator=gen),
        "next_value": torch.randn(shape, generator=gen),
        "reward": torch.randn(shape, generator=gen),
        "log_pi": torch.randn(shape, generator=gen) * 0.1,
        "log_mu": torch.randn(shape, generator=gen) * 0.1,
        "done": done,
        "terminated": terminated,
    }
    return {k: v.to(device) for k, v in data.items()}


def plain_loop_gae(d: dict[str, torch.Tensor]) -> torch.Tensor:
    """The textbook loop over time, vectorised over the batch only."""
    not_term = (~d["terminated"]).float()
    delta = d["reward"] + GAMMA * not_term * d["next_value"] - d["value"]
    discount = GAMMA * LMBDA * (~d["done"]).float()
    adv = torch.empty_like(delta)
    following = torch.zeros_like(delta[:, 0])
    for t in range(delta.shape[1] - 1, -1, -1):
        following = delta[:, t] + discount[:, t] * following
        adv[:, t] = following
    return adv


def gae_args(d: dict[str, torch.Tensor]) -> tuple:
    keys = ("value", "next_value", "reward", "done", "terminated")
    return (GAMMA, LMBDA, *(d[k] for k in keys))


def print_rows(title: str, times: dict[str, tuple[float, float]], base: str) -> None:
    print(f"  {title}")
    base_median, base_best = times[base]
    for name, (median, best) in times.items():
        print(
            f"    {name:<24} median {median:9.3f} ms ({median / base_median:5.2f}x {base})"
            f" | best {best:9.3f} ms ({best / base_best:5.2f}x)"
        )


def cpu_section() -> None:
    torch.set_num_threads(1)
    print("CPU, 1 thread")
    if torchrl_functional is None:
        print("  (torchrl is not installed: the TorchRL columns are skipped)")
    for batch, steps, calls in [(256, 1000, 30), (1024, 256, 30), (8, 128, 300)]:
        d = make_inputs(batch, steps)
        args = gae_args(d)
        fns = {
            "rl_kernels (torch)": lambda a=args: generalized_advantage_estimate(
                *a, backend="torch"
            ),
            "rl_objectives": lambda a=args: objectives.generalized_advantage_estimate(*a),
        }
        if torchrl_functional is not None:
            fns["torchrl vec_gae"] = lambda a=args: (
                torchrl_functional.vec_generalized_advantage_estimate(*a)
            )
        fns["plain loop"] = lambda d=d: plain_loop_gae(d)
        times = compare(fns, calls if steps * batch < 10**6 else calls // 3)
        print_rows(f"GAE [B={batch}, T={steps}]", times, "rl_objectives")

    d = make_inputs(256, 1000)
    td_args = (GAMMA, LMBDA, d["next_value"], d["reward"], d["done"], d["terminated"])
    fns = {
        "rl_kernels (torch)": lambda: td_lambda_return_estimate(*td_args, backend="torch"),
        "rl_objectives": lambda: objectives.td_lambda_return_estimate(*td_args),
    }
    if torchrl_functional is not None:
        fns["torchrl vec_td_lambda"] = lambda: torchrl_functional.vec_td_lambda_return_estimate(
            *td_args
        )
    print_rows("TD(lambda) return [B=256, T=1000]", compare(fns, 20), "rl_objectives")

    keys = ("log_pi", "log_mu", "value", "next_value", "reward", "done", "terminated")
    vt_args = (GAMMA, *(d[k] for k in keys))
    fns = {
        "rl_kernels (torch)": lambda: vtrace_advantage_estimate(*vt_args, backend="torch"),
        "rl_objectives": lambda: objectives.vtrace_advantage_estimate(*vt_args),
    }
    if torchrl_functional is not None:
        fns["torchrl vtrace (loop)"] = lambda: torchrl_functional.vtrace_advantage_estimate(
            *vt_args
        )
    print_rows("V-trace [B=256, T=1000]", compare(fns, 10), "rl_objectives")


def cuda_section() -> None:
    if not torch.cuda.is_available():
        print("CUDA: skipped (no CUDA device here)")
        return
    if not triton_available():
        print("CUDA: skipped (triton is not installed)")
        return
    from rl_kernels.scans._triton_scan import triton_gae

    print(f"CUDA ({torch.cuda.get_device_name()})")
    sync = torch.cuda.synchronize
    for batch, steps in [(256, 1000), (4096, 1000), (1024, 4096)]:
        d = make_inputs(batch, steps, "cuda")
        args = gae_args(d)
        rows = [d[k].squeeze(-1) for k in ("value", "next_value", "reward", "done", "terminated")]
        fns = {
            "rl_kernels (triton)": lambda a=args: generalized_advantage_estimate(
                *a, backend="triton"
            ),
            "triton reverse loop": lambda r=rows: triton_gae(*r, GAMMA, LMBDA, block=1),
            "rl_kernels (torch)": lambda a=args: generalized_advantage_estimate(
                *a, backend="torch"
            ),
            "rl_objectives": lambda a=args: objectives.generalized_advantage_estimate(*a),
        }
        if torchrl_functional is not None:
            fns["torchrl vec_gae"] = lambda a=args: (
                torchrl_functional.vec_generalized_advantage_estimate(*a)
            )
        compiled = generalized_advantage_estimate(*args, backend="triton")[0]
        looped = triton_gae(*rows, GAMMA, LMBDA, block=1)[0].unsqueeze(-1)
        fallback = generalized_advantage_estimate(*args, backend="torch")[0]
        print(
            f"  GAE [B={batch}, T={steps}]: max |triton - torch| "
            f"{(compiled - fallback).abs().max().item():.2e}, "
            f"|reverse loop - torch| {(looped - fallback).abs().max().item():.2e}"
        )
        print_rows(f"GAE [B={batch}, T={steps}]", compare(fns, 50, sync), "rl_objectives")


if __name__ == "__main__":
    cpu_section()
    cuda_section()
