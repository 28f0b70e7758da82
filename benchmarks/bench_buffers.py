"""Replay-buffer speed: rl_buffers vs TorchRL 0.14 vs the raw limit, in one process.

Run: ``.venv-bench/bin/python benchmarks/bench_buffers.py`` (TorchRL is imported only here).

Workload: 1M transitions (observation 17 float32, action 6 float32, reward,
done, next observation), written in chunks of 1000; ``sample(256)`` loops from
a LazyTensorStorage and a LazyMemmapStorage; prioritized ``sample(256)`` +
``update_priority`` with 1M entries. The raw limit is preallocated tensors,
slice copies for writes and ``torch.randint`` + ``index_select`` for reads.

Threads: ``--threads 1`` by default, for every contender. TorchRL reads and
writes with advanced indexing (``tensor[index]``, ``tensor[index] = value``),
which enters an OpenMP parallel region even for 256 rows; on a shared machine
whose cores are busy, each region waits for a descheduled worker thread, and
TorchRL's sample went from ~0.6 ms (1 thread) to 15-56 ms (2 threads) in one
measurement. ``index_select`` (ours, raw) stays serial at this size. One
thread measures the work, not the machine's load; ``--threads 0`` keeps
torch's default. The load average is printed with the table.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time

import torch
from tensordict import TensorDict

N, CHUNK, BATCH = 1_000_000, 1000, 256


def make_chunk(n: int) -> TensorDict:
    return TensorDict(
        {
            "observation": torch.randn(n, 17),
            "action": torch.randn(n, 6),
            "next": {
                "observation": torch.randn(n, 17),
                "reward": torch.randn(n, 1),
                "done": torch.zeros(n, 1, dtype=torch.bool),
            },
        },
        batch_size=[n],
    )


def per_call(fn, iters: int, repeats: int = 5) -> float:
    """Median seconds per call over ``repeats`` runs of ``iters`` calls."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter() - start) / iters)
    return statistics.median(times)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Raw:
    """The limit: preallocated tensors, slice writes, randint + index_select reads."""

    def __init__(self, chunk: TensorDict) -> None:
        self.keys = [k for k in chunk.keys(True, True)]
        self.buffers = [
            torch.empty((N, *chunk.get(k).shape[1:]), dtype=chunk.get(k).dtype) for k in self.keys
        ]
        self.cursor = 0

    def extend(self, chunk: TensorDict) -> None:
        n = chunk.shape[0]
        for buf, k in zip(self.buffers, self.keys, strict=False):
            buf[self.cursor : self.cursor + n] = chunk.get(k)
        self.cursor = (self.cursor + n) % N

    def sample(self) -> list[torch.Tensor]:
        index = torch.randint(N, (BATCH,))
        return [buf.index_select(0, index) for buf in self.buffers]

    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers)


def fill(extend, chunks) -> float:
    return timed(lambda: [extend(c) for c in chunks])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    import torchrl
    import torchrl.data as trl

    import rl_buffers as ours

    chunks = [make_chunk(CHUNK) for _ in range(N // CHUNK)]
    rows: list[tuple[str, float, float | None, float]] = []

    raw = Raw(chunks[0])
    raw_extend = fill(raw.extend, chunks)
    raw_sample = per_call(raw.sample, args.iters)

    # -- uniform, LazyTensorStorage and LazyMemmapStorage -----------------------------------
    results = {}
    for name, make_ours, make_trl in [
        ("LazyTensorStorage", lambda: ours.LazyTensorStorage(N), lambda: trl.LazyTensorStorage(N)),
        ("LazyMemmapStorage", lambda: ours.LazyMemmapStorage(N, scratch_dir=tempfile.mkdtemp()),
         lambda: trl.LazyMemmapStorage(N, scratch_dir=tempfile.mkdtemp())),
    ]:  # fmt: skip
        rb = ours.TensorDictReplayBuffer(storage=make_ours(), batch_size=BATCH)
        ext = fill(rb.extend, chunks)
        smp = per_call(rb.sample, args.iters)
        if name == "LazyTensorStorage":
            results["nbytes"] = rb.storage.nbytes()
        del rb
        gc.collect()
        trb = trl.TensorDictReplayBuffer(storage=make_trl(), batch_size=BATCH)
        t_ext = fill(trb.extend, chunks)
        t_smp = per_call(trb.sample, args.iters)
        del trb
        gc.collect()
        rows.append((f"extend 1M in chunks of 1000 ({name})", ext, t_ext, raw_extend))
        rows.append((f"sample({BATCH}) ({name})", smp, t_smp, raw_sample))

    # -- prioritized ------------------------------------------------------------------------
    def prio_loop(rb, key):
        def step():
            s = rb.sample(BATCH)
            rb.update_priority(s["index"], torch.rand(BATCH) + 0.01)

        return step

    rb = ours.TensorDictPrioritizedReplayBuffer(
        alpha=0.7, beta=0.5, storage=ours.LazyTensorStorage(N)
    )
    ext = fill(rb.extend, chunks)
    smp = per_call(prio_loop(rb, "priority_weight"), args.iters)
    backend = rb.sampler.backend
    del rb
    gc.collect()
    trb = trl.TensorDictPrioritizedReplayBuffer(
        alpha=0.7, beta=0.5, storage=trl.LazyTensorStorage(N)
    )
    t_ext = fill(trb.extend, chunks)
    t_smp = per_call(prio_loop(trb, "priority_weight"), args.iters)
    rows.append(("prioritized extend 1M in chunks of 1000", ext, t_ext, raw_extend))
    rows.append((f"prioritized sample({BATCH}) + update_priority", smp, t_smp, raw_sample))

    print(f"torch {torch.__version__}, torchrl {torchrl.__version__}, threads {torch.get_num_threads()}, "
          f"segment-tree backend: {backend}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")  # fmt: skip
    print(
        f"{'workload':<52} {'ours':>10} {'TorchRL':>10} {'raw':>10} {'TorchRL/ours':>13} {'ours/raw':>9}"
    )
    for label, o, t, r in rows:
        unit, scale = ("s", 1.0) if o > 0.1 else ("us", 1e6)
        print(f"{label:<52} {o * scale:>8.1f}{unit:>2} {t * scale:>8.1f}{unit:>2} {r * scale:>8.1f}{unit:>2} "
              f"{t / o:>12.2f}x {o / r:>8.2f}x")  # fmt: skip
    raw_bytes = raw.nbytes()
    print(f"LazyTensorStorage memory: ours {results['nbytes'] / 2**20:.1f} MiB, raw {raw_bytes / 2**20:.1f} MiB "
          f"({results['nbytes'] / raw_bytes:.3f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
