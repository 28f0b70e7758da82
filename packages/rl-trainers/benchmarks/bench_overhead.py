"""Overhead of the Trainer loop against a plain loop doing the same optimisation steps.

Both variants consume the same FakeCollector stream (same seed), draw the same
minibatch indices from the global torch RNG, clip the gradient norm and step
Adam identically; the script checks that they end with bit-identical
parameters, then reports wall-clock times (best and median of interleaved repeats).

    uv run --no-sync python packages/rl-trainers/benchmarks/bench_overhead.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from tensordict import TensorDict, TensorDictBase

from rl_trainers import FakeCollector, Trainer

OBS = 64


class Loss(torch.nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(OBS, hidden), torch.nn.Tanh(),
            torch.nn.Linear(hidden, hidden), torch.nn.Tanh(),
            torch.nn.Linear(hidden, 2),
        )  # fmt: skip

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        out = self.net(td["observation"])
        return TensorDict(
            loss_value=(out[..., :1] - td["next", "reward"]).pow(2).mean(),
            loss_entropy=-1e-3 * out[..., 1:].tanh().mean(),
        )


def _setup(args: argparse.Namespace) -> tuple[FakeCollector, Loss, torch.optim.Optimizer]:
    torch.manual_seed(0)
    collector = FakeCollector(
        {"observation": ((OBS,), torch.float32)},
        frames_per_batch=args.frames_per_batch,
        total_frames=args.batches * args.frames_per_batch,
        seed=0,
    )
    loss = Loss(args.hidden)
    return collector, loss, torch.optim.Adam(loss.parameters(), lr=3e-4)


def _minibatch(batch: TensorDictBase, size: int) -> TensorDictBase:
    return batch[torch.randint(batch.shape[0], (size,))]


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _elapsed(start: tuple[float, float]) -> tuple[float, float]:
    """Wall-clock and CPU seconds since ``start`` (CPU time is steadier on a shared machine)."""
    return time.perf_counter() - start[0], time.process_time() - start[1]


def run_plain(args: argparse.Namespace) -> tuple[float, Loss]:
    collector, loss_module, optimizer = _setup(args)
    params = list(loss_module.parameters())
    start = _clock()
    for batch in collector:
        for _ in range(args.optim_steps):
            sub = _minibatch(batch, args.minibatch)
            losses = loss_module(sub)
            total = losses["loss_value"] + losses["loss_entropy"]
            total.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            optimizer.zero_grad()
    return _elapsed(start), loss_module


def run_trainer(args: argparse.Namespace) -> tuple[float, Loss]:
    collector, loss_module, optimizer = _setup(args)
    trainer = Trainer(
        collector=collector,
        total_frames=args.batches * args.frames_per_batch,
        frame_skip=1,
        optim_steps_per_batch=args.optim_steps,
        loss_module=loss_module,
        optimizer=optimizer,
        clip_norm=1.0,
        progress_bar=False,
    )
    trainer.register_op("process_optim_batch", _minibatch, size=args.minibatch)
    start = _clock()
    trainer.train()
    return _elapsed(start), loss_module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--frames-per-batch", type=int, default=2048)
    parser.add_argument("--optim-steps", type=int, default=16)
    parser.add_argument("--minibatch", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    run_plain(args), run_trainer(args)  # warm-up
    times: dict[str, list[tuple[float, float]]] = {"plain": [], "trainer": []}
    variants = [("plain", run_plain), ("trainer", run_trainer)]
    for repeat in range(args.repeats):
        final = {}
        # alternate which variant goes first, so neither always inherits the other's warm caches
        for name, fn in variants if repeat % 2 == 0 else variants[::-1]:
            t, module = fn(args)
            times[name].append(t)
            final[name] = [p.detach().clone() for p in module.parameters()]
        same = all(torch.equal(a, b) for a, b in zip(final["plain"], final["trainer"], strict=True))
        assert same, "the Trainer and the plain loop diverged"
    steps = args.batches * args.optim_steps
    print(f"{steps} optimisation steps ({args.batches} batches x {args.optim_steps}), minibatch {args.minibatch}, "
          f"MLP {OBS}-{args.hidden}-{args.hidden}-2, torch threads {torch.get_num_threads()}; parameters identical")  # fmt: skip
    for clock, label in ((0, "wall"), (1, "cpu")):
        best = {name: min(t[clock] for t in ts) for name, ts in times.items()}
        med = {name: statistics.median(t[clock] for t in ts) for name, ts in times.items()}
        for name in times:
            print(f"{label:4s} {name:8s} best {best[name]:.3f}s  median {med[name]:.3f}s  "
                  f"({1e3 * best[name] / steps:.3f} ms/step)")  # fmt: skip
        print(f"{label:4s} trainer overhead: {100 * (best['trainer'] / best['plain'] - 1):+.1f}% (best), "
              f"{100 * (med['trainer'] / med['plain'] - 1):+.1f}% (median)")  # fmt: skip


if __name__ == "__main__":
    main()
