"""rl-modules vs TorchRL 0.14 vs plain torch, in one process.

Run: ``.venv-bench/bin/python benchmarks/bench_modules.py`` (torchrl is
imported only here). Rows:

- ``ProbabilisticActor(TanhNormal)``: [1024] batch, MLP 17-256-256-12, sample
  + log_prob (exploration RANDOM), no grad.
- ``QValueActor``: [1024] batch, MLP 17-256-256-6, argmax + chosen value, no grad.
- ``LSTMModule`` sequence mode: [B=64, T=128], 32 -> 64 units, resets inside
  the sequences (~1 per 40 steps), forward, and forward + backward.
  The plain-torch limit is one ``nn.LSTM`` call with no resets (a lower bound).

Times are medians of repeated runs, one CPU thread.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

import rl_modules as ours

torch.set_num_threads(1)
try:
    import torchrl.modules as trl
    from torchrl.envs.utils import ExplorationType as TrlExplorationType
    from torchrl.envs.utils import set_exploration_type as trl_set_exploration_type
except ImportError:  # pragma: no cover - the bench venv has it
    trl = None


def timeit(fn: Callable[[], object], min_time: float = 0.5, repeats: int = 7) -> float:
    """Median seconds per call."""
    fn()
    fn()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < 0.1:
        fn()
        n += 1
    per = (time.perf_counter() - t0) / n
    inner = max(1, int(min_time / repeats / per))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def mlp(n_in: int, n_out: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(n_in, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, n_out)
    )


def bench_tanh_normal() -> dict[str, float]:
    obs = torch.randn(1024, 17)
    net = mlp(17, 12)
    extractor = NormalParamExtractor()
    low, high = -torch.ones(6) * 2, torch.ones(6) * 2

    def plain() -> torch.Tensor:
        loc, scale = extractor(net(obs))
        x = loc + scale * torch.randn_like(loc)
        y = torch.tanh(x) * 2
        lp = (
            -((x - loc) ** 2) / (2 * scale**2)
            - scale.log()
            - 0.5 * math.log(2 * math.pi)
            - 2 * (math.log(2) - x - nn.functional.softplus(-2 * x))
            - math.log(2)
        ).sum(-1)
        return y, lp

    actor = ours.ProbabilisticActor(
        TensorDictModule(nn.Sequential(net, extractor), ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=ours.TanhNormal,
        distribution_kwargs={"low": low, "high": high},
        return_log_prob=True,
    )

    def run_ours() -> TensorDict:
        with ours.set_exploration_type(ours.ExplorationType.RANDOM):
            return actor(TensorDict(observation=obs, batch_size=[1024]))

    out = {"plain torch": timeit(plain), "rl_modules": timeit(run_ours)}
    if trl is not None:
        trl_actor = trl.ProbabilisticActor(
            TensorDictModule(nn.Sequential(net, extractor), ["observation"], ["loc", "scale"]),
            in_keys=["loc", "scale"],
            distribution_class=trl.TanhNormal,
            distribution_kwargs={"low": low, "high": high},
            return_log_prob=True,
        )

        def run_trl() -> TensorDict:
            with trl_set_exploration_type(TrlExplorationType.RANDOM):
                return trl_actor(TensorDict(observation=obs, batch_size=[1024]))

        out["torchrl 0.14"] = timeit(run_trl)
    return out


def bench_qvalue() -> dict[str, float]:
    obs = torch.randn(1024, 17)
    net = mlp(17, 6)

    def plain() -> tuple[torch.Tensor, torch.Tensor]:
        values = net(obs)
        action = values.argmax(-1)
        return action, values.gather(-1, action.unsqueeze(-1))

    actor = ours.QValueActor(net, in_keys=["observation"], action_space="categorical")
    out = {
        "plain torch": timeit(plain),
        "rl_modules": timeit(lambda: actor(TensorDict(observation=obs, batch_size=[1024]))),
    }
    if trl is not None:
        trl_actor = trl.QValueActor(net, in_keys=["observation"], action_space="categorical")
        out["torchrl 0.14"] = timeit(
            lambda: trl_actor(TensorDict(observation=obs, batch_size=[1024]))
        )
    return out


def lstm_data(b: int = 64, t: int = 128, f: int = 32, h: int = 64) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    is_init = torch.rand(b, t, 1, generator=g) < 1 / 40
    is_init[:, 0] = True
    return TensorDict(
        embed=torch.randn(b, t, f, generator=g),
        is_init=is_init,
        recurrent_state_h=torch.zeros(b, t, 1, h),
        recurrent_state_c=torch.zeros(b, t, 1, h),
        batch_size=[b, t],
    )


def bench_lstm(backward: bool) -> dict[str, float]:
    data = lstm_data()
    torch.manual_seed(0)
    module = ours.LSTMModule(32, 64, in_key="embed", out_key="features")
    raw = module.lstm
    x = data["embed"].clone().requires_grad_(backward)
    ctx = torch.enable_grad if backward else torch.no_grad

    def plain() -> None:
        with ctx():
            y, _ = raw(x)
            if backward:
                y.sum().backward()

    def run_ours() -> None:
        with ctx(), ours.set_recurrent_mode(True):
            y = module(data.clone(False))["features"]
            if backward:
                y.sum().backward()

    out = {"plain torch (no resets)": timeit(plain), "rl_modules": timeit(run_ours)}
    if trl is not None:
        trl_module = trl.LSTMModule(lstm=raw, in_key="embed", out_key="features")

        def run_trl() -> None:
            with ctx(), trl.set_recurrent_mode(True):
                y = trl_module(data.clone(False))["features"]
                if backward:
                    y.sum().backward()

        # Same outputs first: both implement resets at is_init.
        with torch.no_grad(), ours.set_recurrent_mode(True), trl.set_recurrent_mode(True):
            a = module(data.clone(False))["features"]
            b = trl_module(data.clone(False))["features"]
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        out["torchrl 0.14"] = timeit(run_trl)
    return out


def main() -> None:
    rows = [
        ("ProbabilisticActor(TanhNormal) [1024]", bench_tanh_normal()),
        ("QValueActor [1024]", bench_qvalue()),
        ("LSTMModule [64, 128] resets, fwd", bench_lstm(backward=False)),
        ("LSTMModule [64, 128] resets, fwd+bwd", bench_lstm(backward=True)),
    ]
    print(f"torch {torch.__version__}, 1 thread; times in microseconds (median)")
    header = f"{'case':40s} {'plain torch':>12s} {'rl_modules':>11s} {'torchrl':>10s} {'ours/plain':>11s} {'torchrl/ours':>13s}"
    print(header)
    print("-" * len(header))
    for name, res in rows:
        plain = next(v for k, v in res.items() if k.startswith("plain"))
        mine = res["rl_modules"]
        other = res.get("torchrl 0.14", float("nan"))
        print(
            f"{name:40s} {plain * 1e6:12.1f} {mine * 1e6:11.1f} {other * 1e6:10.1f} "
            f"{mine / plain:10.2f}x {other / mine:12.2f}x"
        )


if __name__ == "__main__":
    main()
