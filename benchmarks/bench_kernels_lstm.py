"""LSTM with resets inside the sequences, forward + backward: rl_kernels vs the alternatives.

Run: ``.venv-bench/bin/python benchmarks/bench_kernels_lstm.py`` (torchrl is imported
only here; without it its column is skipped and the script says so).

CPU rows, one thread, ``[B=64, T=128]``, 128 -> 128 units, one layer, a reset about
every 40 steps of every row (``is_init``), forward then ``y.sum().backward()``:

- ``rl_kernels LSTMModule``: sequence mode on the torch fallback (rl_kernels' CPU path).
- ``nn.LSTM per segment``: the batch cut into reset-free segments, packed, one
  ``nn.LSTM`` call, unpacked (the textbook exact way with torch's own kernel).
- ``rl_modules LSTMModule`` and ``torchrl 0.14 LSTMModule`` (its default backend).
- ``nn.LSTM, no resets``: one call on the whole batch, a lower bound that ignores resets.

The CUDA rows (only where a GPU exists) time the Triton kernels against rl_kernels'
torch path, TorchRL's LSTMModule and cuDNN without resets. Times are medians.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from tensordict import TensorDict
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import rl_kernels
import rl_modules

try:
    import torchrl.modules as trl
except ImportError:  # the bench venv has it; the dev venv does not
    trl = None

B, T, F, H = 64, 128, 128, 128


def timeit(fn: Callable[[], object], repeats: int = 5, sync: Callable[[], None] = lambda: None) -> float:  # fmt: skip
    """Median seconds per call over ``repeats`` calls, after two warm-up calls."""
    fn()
    fn()
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def data(device: str) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    is_init = torch.rand(B, T, 1, generator=g) < 1 / 40
    is_init[:, 0] = True
    return TensorDict(
        obs=torch.randn(B, T, F, generator=g),
        is_init=is_init,
        recurrent_state_h=torch.zeros(B, T, 1, H),
        recurrent_state_c=torch.zeros(B, T, 1, H),
        batch_size=[B, T],
    ).to(device)


def per_segment(lstm: nn.LSTM, x: torch.Tensor, is_init: torch.Tensor) -> torch.Tensor:
    """Exact reset handling with ``nn.LSTM``: every reset-free segment is one packed sequence."""
    n, t = is_init.shape[:2]
    start = is_init[..., 0].clone()
    start[:, 0] = True
    flat = start.reshape(-1)
    seg = flat.long().cumsum(0) - 1
    starts = flat.nonzero().squeeze(1)
    lengths = torch.diff(torch.cat([starts, starts.new_tensor([n * t])]))
    pos = torch.arange(n * t, device=x.device) - starts[seg]
    padded = x.new_zeros(len(starts), int(lengths.max()), x.shape[-1])
    padded = padded.index_put((seg, pos), x.reshape(n * t, -1))
    packed = pack_padded_sequence(padded, lengths.cpu(), batch_first=True, enforce_sorted=False)
    y, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True)
    return y[seg, pos].reshape(n, t, -1)


def fwd_bwd(get_y: Callable[[], torch.Tensor], x: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        x.grad = None
        get_y().sum().backward()

    return run


def bench(device: str) -> dict[str, float]:
    td = data(device)
    torch.manual_seed(0)
    ours = rl_kernels.LSTMModule(F, H, in_key="obs", out_key="feat", device=device)
    lstm = ours.lstm
    theirs = rl_modules.LSTMModule(lstm=lstm, in_key="obs", out_key="feat")
    x = td["obs"].requires_grad_()
    is_init = td["is_init"]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def module_y(module, mode) -> Callable[[], torch.Tensor]:
        def y() -> torch.Tensor:
            with mode(True):
                return module(td.clone(False))["feat"]

        return y

    cases: dict[str, Callable[[], torch.Tensor]] = {}
    if device == "cuda":
        ours_torch = rl_kernels.LSTMModule(lstm=lstm, in_key="obs", out_key="feat", backend="torch")  # fmt: skip
        cases["rl_kernels LSTMModule (triton)"] = module_y(ours, rl_kernels.set_recurrent_mode)
        cases["rl_kernels LSTMModule (torch)"] = module_y(ours_torch, rl_kernels.set_recurrent_mode)
    else:
        cases["rl_kernels LSTMModule"] = module_y(ours, rl_kernels.set_recurrent_mode)
    cases["nn.LSTM per segment"] = lambda: per_segment(lstm, x, is_init)
    cases["rl_modules LSTMModule"] = module_y(theirs, rl_modules.set_recurrent_mode)
    if trl is not None:
        trl_module = trl.LSTMModule(lstm=lstm, in_key="obs", out_key="feat")
        cases["torchrl 0.14 LSTMModule"] = module_y(trl_module, trl.set_recurrent_mode)
        if device == "cuda":
            trl_triton = trl.LSTMModule(lstm=lstm, in_key="obs", out_key="feat", recurrent_backend="triton")  # fmt: skip
            cases["torchrl 0.14 LSTMModule (triton)"] = module_y(trl_triton, trl.set_recurrent_mode)
    cases["nn.LSTM, no resets (lower bound)"] = lambda: lstm(x)[0]

    with torch.no_grad():  # every exact path gives the same outputs before anything is timed
        want = cases["nn.LSTM per segment"]()
        for name, y in cases.items():
            if "no resets" not in name:
                torch.testing.assert_close(y(), want, rtol=1e-4, atol=1e-5, msg=name)
    return {name: timeit(fwd_bwd(y, x), sync=sync) for name, y in cases.items()}


def report(device: str, res: dict[str, float]) -> None:
    first = next(iter(res))
    print(f"\n{device}: LSTM [B={B}, T={T}, {F}->{H}], resets ~1/40 steps, forward + backward")
    print(f"{'implementation':36s} {'ms':>9s} {'x ' + first.split(' (')[0]:>26s}")
    for name, sec in res.items():
        print(f"{name:36s} {sec * 1e3:9.1f} {sec / res[first]:25.2f}x")


def main() -> None:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, CPU rows on 1 thread")
    if trl is None:
        print("torchrl is not importable here: its column is skipped.")
    report("cpu", bench("cpu"))
    if torch.cuda.is_available():
        report("cuda", bench("cuda"))
    else:
        print("\nno CUDA device: the Triton rows are skipped.")


if __name__ == "__main__":
    main()
