"""Dreamer's two hot paths: ours vs TorchRL 0.14's components at the same sizes.

1. World-model update: ``DreamerModelLoss`` forward + backward on ``[B=16, T=64]`` sequences
   of 64x64 RGB pixels (conv encoder, Gaussian RSSM rolled over T with state 30 / belief 200 /
   hidden 200, conv decoder, reward MLP), as in Dreamer's paper and TorchRL's recipe.
2. The RSSM rollout alone on precomputed embeddings (the sequential part of 1.).
3. Imagination: ``DreamerEnv.rollout`` of ``H=15`` steps from ``B*T = 1024`` start latents
   with a ``DreamerActor`` + ``TanhNormal`` policy, then backward of the imagined return
   (what ``DreamerActorLoss`` does).

Both columns build the same architectures from their own library (same sizes, same seed) and
run interleaved in one process; times are medians of CPU time (``time.thread_time``). Our ``RSSMRollout(compile_step=True)``
(``torch.compile`` of the prior + posterior step) is timed too (``--no-compile`` skips it).
Without torchrl installed its column is skipped and says so.

    OMP_NUM_THREADS=1 .venv-bench/bin/python benchmarks/bench_dreamer.py
    .venv/bin/python benchmarks/bench_dreamer.py --batch 4 --time 16   # quick, ours only
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
    set_interaction_type,
)
from torch import nn

STATE, BELIEF, HIDDEN, CHANNELS, ACT = 30, 200, 200, 32, 6


def world_model_parts(lib: Any, compile_step: bool = False) -> tuple[Any, Any, Any]:
    """``(world_model, prior_net, reward_net)`` built from ``lib`` (rl_modules or torchrl.modules)."""
    nxt = "next"
    encoder = TensorDictModule(
        lib.ObsEncoder(channels=CHANNELS, in_channels=3),
        in_keys=[(nxt, "pixels")],
        out_keys=[(nxt, "encoded_latents")],
    )
    prior_net = lib.RSSMPrior(
        None if lib.__name__ == "rl_modules" else _ActionSpec(),
        hidden_dim=HIDDEN,
        rnn_hidden_dim=BELIEF,
        state_dim=STATE,
        action_dim=ACT,
    )
    prior = TensorDictModule(
        prior_net,
        in_keys=["state", "belief", "action"],
        out_keys=[(nxt, "prior_mean"), (nxt, "prior_std"), "_", (nxt, "belief")],
    )
    posterior = TensorDictModule(
        lib.RSSMPosterior(
            hidden_dim=HIDDEN, state_dim=STATE, rnn_hidden_dim=BELIEF, obs_embed_dim=CHANNELS * 32
        ),
        in_keys=[(nxt, "belief"), (nxt, "encoded_latents")],
        out_keys=[(nxt, "posterior_mean"), (nxt, "posterior_std"), (nxt, "state")],
    )
    rollout = (
        lib.RSSMRollout(prior, posterior, compile_step=True)
        if compile_step
        else lib.RSSMRollout(prior, posterior)
    )
    decoder = TensorDictModule(
        lib.ObsDecoder(channels=CHANNELS, latent_dim=STATE + BELIEF),
        in_keys=[(nxt, "state"), (nxt, "belief")],
        out_keys=[(nxt, "reco_pixels")],
    )
    reward_net = nn.Sequential(
        nn.Linear(STATE + BELIEF, HIDDEN), nn.ELU(), nn.Linear(HIDDEN, HIDDEN), nn.ELU(),
        nn.Linear(HIDDEN, 1),
    )  # fmt: skip
    reward = TensorDictModule(
        _Cat(reward_net), in_keys=[(nxt, "state"), (nxt, "belief")], out_keys=[(nxt, "reward")]
    )
    world_model = lib.WorldModelWrapper(TensorDictSequential(encoder, rollout, decoder), reward)
    return world_model, prior_net, reward_net


class _ActionSpec:
    shape = torch.Size([ACT])


class _Cat(nn.Module):
    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat(xs, -1))


def sequence_batch(b: int, t: int) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    return TensorDict(
        {
            "state": torch.zeros(b, t, STATE),
            "belief": torch.zeros(b, t, BELIEF),
            "action": torch.rand(b, t, ACT, generator=g) * 2 - 1,
            ("next", "pixels"): torch.rand(b, t, 3, 64, 64, generator=g) - 0.5,
            ("next", "reward"): torch.randn(b, t, 1, generator=g),
        },
        [b, t],
    )


def model_update(loss_module: Any, data: TensorDict) -> Callable[[], None]:
    params = list(loss_module.parameters())

    def run() -> None:
        losses, _ = loss_module(data)
        total = sum(v.sum() for k, v in losses.items() if k.startswith("loss"))
        for p in params:
            p.grad = None
        total.backward()

    return run


def _rssm_only(world_model: Any, data: TensorDict) -> Callable[[], None]:
    """Forward + backward of the world model's ``RSSMRollout`` on precomputed embeddings."""
    rollout = world_model.get_transition_model_operator().module[1]
    b, t = data.batch_size
    g = torch.Generator().manual_seed(2)
    seq = data.exclude(("next", "pixels")).clone()
    seq.set(("next", "encoded_latents"), torch.randn(b, t, CHANNELS * 32, generator=g))
    params = list(rollout.parameters())

    def run() -> None:
        out = rollout(seq.clone())
        loss = out["next", "state"].square().mean() + out["next", "belief"].square().mean()
        for p in params:
            p.grad = None
        loss.backward()

    return run


def actor(lib: Any) -> Any:
    net = lib.DreamerActor(ACT, depth=2, num_cells=HIDDEN)
    module = ProbabilisticTensorDictSequential(
        TensorDictModule(net, in_keys=["state", "belief"], out_keys=["loc", "scale"]),
        ProbabilisticTensorDictModule(
            in_keys=["loc", "scale"],
            out_keys=["action"],
            distribution_class=lib.TanhNormal,
            default_interaction_type=InteractionType.RANDOM,
        ),
    )
    module(TensorDict(state=torch.zeros(1, STATE), belief=torch.zeros(1, BELIEF), batch_size=[1]))
    return module


def imagination_env(
    envs: Any, lib: Any, prior_net: nn.Module, reward_net: nn.Module, n: int
) -> Any:
    transition = TensorDictModule(
        prior_net, in_keys=["state", "belief", "action"], out_keys=["_", "_", "state", "belief"]
    )
    reward = TensorDictModule(_Cat(reward_net), in_keys=["state", "belief"], out_keys=["reward"])
    wm = lib.WorldModelWrapper(transition, reward)
    env = envs.DreamerEnv(wm, prior_shape=(STATE,), belief_shape=(BELIEF,), batch_size=[n])
    if hasattr(env, "set_batch_size"):  # ours
        env.action_spec_unbatched = envs.Bounded(-1.0, 1.0, shape=(ACT,))
    else:  # TorchRL: the specs its recipe gets from set_specs_from_env
        latent = envs.Composite(
            state=envs.Unbounded((n, STATE)), belief=envs.Unbounded((n, BELIEF)), shape=(n,)
        )
        env.observation_spec = latent
        env.state_spec = latent.clone()
        env.action_spec = envs.Bounded(-1.0, 1.0, shape=(n, ACT))
        env.reward_spec = envs.Unbounded((n, 1))
    return env


def imagine(env: Any, policy: Any, n: int, horizon: int) -> Callable[[], None]:
    g = torch.Generator().manual_seed(1)
    start = TensorDict(
        state=torch.randn(n, STATE, generator=g), belief=torch.randn(n, BELIEF, generator=g),
        batch_size=[n],
    )  # fmt: skip
    params = list(policy.parameters())

    def run() -> None:
        with set_interaction_type(InteractionType.RANDOM):
            root = env.reset(start.clone())
            fake = env.rollout(horizon, policy, auto_reset=False, tensordict=root)
        for p in params:
            p.grad = None
        fake["next", "reward"].sum().backward()

    return run


def median_times(fns: dict[str, Callable[[], None]], repeats: int, warmup: int) -> dict[str, float]:
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():  # interleaved
            start = time.thread_time()  # CPU time: the shared machine's load does not count
            fn()
            times[name].append(time.thread_time() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--time", type=int, default=64)
    parser.add_argument("--horizon", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    parser.add_argument(
        "--no-world-model",
        action="store_true",
        help="skip the (slow, conv-bound) world-model update",
    )
    args = parser.parse_args()

    import rl_envs
    import rl_modules
    import rl_objectives

    try:
        import torchrl.envs.model_based.dreamer as trl_dreamer_env
        import torchrl.modules as trl_modules
        import torchrl.objectives as trl_objectives
        from torchrl import data as trl_data

        have_torchrl = True
    except ImportError:
        have_torchrl = False
        print("torchrl is not installed: its columns are skipped (run in .venv-bench).")

    b, t, n = args.batch, args.time, args.batch * args.time
    data = sequence_batch(b, t)
    print(f"world-model update: B={b}, T={t}, 64x64 RGB; imagination: N={n}, H={args.horizon}")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")

    torch.manual_seed(0)
    ours_wm, ours_prior, ours_reward = world_model_parts(rl_modules)
    fns = {"ours": model_update(rl_objectives.DreamerModelLoss(ours_wm), data)}
    if not args.no_compile:
        torch.manual_seed(0)
        comp_wm, _, _ = world_model_parts(rl_modules, compile_step=True)
        fns["ours + compile_step"] = model_update(rl_objectives.DreamerModelLoss(comp_wm), data)
    if have_torchrl:
        torch.manual_seed(0)
        trl_wm, trl_prior, trl_reward = world_model_parts(trl_modules)
        fns["torchrl 0.14"] = model_update(trl_objectives.DreamerModelLoss(trl_wm), data)
    if not args.no_world_model:
        report("world-model update (forward + backward)", median_times(fns, args.repeats, warmup=2))

    # the RSSM alone (no convolutions): where the per-step overhead of a rollout shows
    rollouts = {"ours": _rssm_only(ours_wm, data)}
    if not args.no_compile:
        rollouts["ours + compile_step"] = _rssm_only(comp_wm, data)
    if have_torchrl:
        rollouts["torchrl 0.14"] = _rssm_only(trl_wm, data)
    report("RSSM rollout only (forward + backward)", median_times(rollouts, args.repeats, warmup=2))

    class _Envs:
        DreamerEnv = rl_envs.DreamerEnv
        Bounded = rl_envs.Bounded

    fns = {
        "ours": imagine(
            imagination_env(_Envs, rl_modules, ours_prior, ours_reward, n),
            actor(rl_modules),
            n,
            args.horizon,
        )
    }
    if have_torchrl:

        class _TrlEnvs:
            DreamerEnv = trl_dreamer_env.DreamerEnv
            Bounded = trl_data.Bounded
            Unbounded = trl_data.Unbounded
            Composite = trl_data.Composite

        env = imagination_env(_TrlEnvs, trl_modules, trl_prior, trl_reward, n)
        fns["torchrl 0.14"] = imagine(env, actor(trl_modules), n, args.horizon)
    report(
        f"imagination H={args.horizon} (rollout + backward)",
        median_times(fns, args.repeats, warmup=1),
    )


def report(title: str, times: dict[str, float]) -> None:
    print(f"\n{title}")
    base = times.get("torchrl 0.14")
    for name, sec in times.items():
        ratio = f"  torchrl/this = {base / sec:.2f}x" if base is not None else ""
        print(f"  {name:<22} {sec * 1e3:9.1f} ms{ratio}")


if __name__ == "__main__":
    main()
