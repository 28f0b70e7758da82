"""Tool-call cost: ``PythonSandbox`` (OS boundary) vs a bare ``python -I`` subprocess (the raw limit).

A GRPO step with a Python tool runs one sandboxed interpreter per code block, so what
matters is the latency of one short call and the calls per second a pool of threads
sustains (``PythonInterpreter`` runs a batch's rows in threads). Rows:

- ``raw``: ``subprocess.run([python, "-I", "-B", "-c", code])``: a fresh interpreter, no
  isolation at all (TorchRL's ``PythonInterpreter`` runs code this way, unsandboxed);
- ``sandbox``: ``PythonSandbox().run(code)`` with every layer (namespaces, read-only
  view, tmpfs quota, seccomp, limits, audit hook);
- ``sandbox (before)``: with ``--before DIR``, an older ``python_sandbox.py`` (e.g. from
  ``git show <commit>:packages/rl-llm/src/rl_llm/sandbox/python_sandbox.py``, with its
  ``_child.py`` beside it) for a before/after comparison.

Wall-clock medians over ``--calls`` calls, alternating the contenders; the machine is
shared, so compare the ratios of one run.

    uv run --no-sync python benchmarks/bench_sandbox.py --calls 40 --threads 2 4
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rl_llm.sandbox import PythonSandbox

CODE = "import math\nprint(math.factorial(20))\n"


def raw(code: str) -> None:
    out = subprocess.run(
        [sys.executable, "-I", "-B", "-c", code], capture_output=True, timeout=30, check=True
    )
    assert out.stdout.strip() == b"2432902008176640000"


def sandboxed(sandbox: object) -> Callable[[str], None]:
    def call(code: str) -> None:
        result = sandbox.run(code)
        assert result.stdout.strip() == "2432902008176640000", result

    return call


def load_before(directory: Path) -> object:
    spec = importlib.util.spec_from_file_location("before_sandbox", directory / "python_sandbox.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.PythonSandbox(timeout=30.0)


def latency(calls: dict[str, Callable[[str], None]], n: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(n):
        for name, call in calls.items():
            start = time.perf_counter()
            call(CODE)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def throughput(call: Callable[[str], None], threads: int, n: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(call, [CODE] * n))
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="calls per contender")
    parser.add_argument("--threads", type=int, nargs="+", default=[2], help="pool sizes")
    parser.add_argument("--before", type=Path, help="directory of an older python_sandbox.py")
    args = parser.parse_args()

    start = time.perf_counter()
    sandbox = PythonSandbox(timeout=30.0)
    startup = time.perf_counter() - start
    print(f"PythonSandbox() construction (probes the layers once): {startup * 1e3:.0f} ms")
    print(f"layers in force: {sorted(k for k, v in sandbox.available.items() if v)}")
    calls = {"raw": raw, "sandbox": sandboxed(sandbox)}
    if args.before is not None:
        calls["sandbox (before)"] = sandboxed(load_before(args.before))
    medians = latency(calls, args.calls)
    print("\n| contender | median latency per call (ms) | vs raw |\n|---|---|---|")
    for name, value in medians.items():
        print(f"| {name} | {value * 1e3:.1f} | {value / medians['raw']:.2f}x |")
    print("\n| contender | threads | calls / s |\n|---|---|---|")
    for threads in args.threads:
        for name, call in calls.items():
            print(f"| {name} | {threads} | {throughput(call, threads, args.calls):.1f} |")


if __name__ == "__main__":
    main()
