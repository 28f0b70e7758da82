"""PPO wall-clock per 100k frames: the same script on TorchRL 0.14 and on our packages.

The training loop below is written once against TorchRL's names; it runs on
either library by swapping the import namespace, which is exactly how a
TorchRL user ports a script. Configuration: InvertedDoublePendulum-v5, 8 envs
(one Gymnasium vector env), 2048 frames per batch, 10 epochs of minibatches of
512, GAE, ClipPPOLoss, one torch thread.

    .venv-bench/bin/python benchmarks/bench_ppo.py --frames 20480
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import torch
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
from torch import nn


def _ours() -> SimpleNamespace:
    import rl_buffers
    import rl_collectors
    import rl_envs
    import rl_modules
    import rl_objectives

    return SimpleNamespace(
        envs=rl_envs,
        modules=rl_modules,
        collectors=rl_collectors,
        buffers=rl_buffers,
        objectives=rl_objectives,
        scale=AddStateIndependentNormalScale,
    )


def _torchrl() -> SimpleNamespace:
    import torchrl.collectors
    import torchrl.data
    import torchrl.envs
    import torchrl.modules
    import torchrl.objectives

    return SimpleNamespace(
        envs=torchrl.envs,
        modules=torchrl.modules,
        collectors=torchrl.collectors,
        buffers=torchrl.data,
        objectives=torchrl.objectives,
        scale=AddStateIndependentNormalScale,
    )


def train(lib: SimpleNamespace, frames: int, seed: int = 0) -> float:
    """Seconds to collect and learn from ``frames`` frames of PPO."""
    torch.manual_seed(seed)
    E, M, B, C, L = lib.envs, lib.modules, lib.buffers, lib.collectors, lib.objectives
    env = E.TransformedEnv(
        E.GymEnv("InvertedDoublePendulum-v5", num_envs=8),
        E.Compose(E.DoubleToFloat(), E.StepCounter(), E.RewardSum()),
    )
    env.set_seed(seed)
    spec = env.action_spec_unbatched
    obs_dim = env.observation_spec["observation"].shape[-1]
    body = M.MLP(in_features=obs_dim, out_features=1, num_cells=[64, 64], activation_class=nn.Tanh)
    actor = M.ProbabilisticActor(
        TensorDictModule(
            nn.Sequential(body, lib.scale(spec.shape[-1])),
            in_keys=["observation"],
            out_keys=["loc", "scale"],
        ),
        in_keys=["loc", "scale"],
        distribution_class=M.TanhNormal,
        distribution_kwargs={"low": spec.space.low, "high": spec.space.high},
        spec=spec,
        return_log_prob=True,
    )
    critic = M.ValueOperator(
        M.MLP(in_features=obs_dim, out_features=1, num_cells=[64, 64], activation_class=nn.Tanh),
        in_keys=["observation"],
    )
    loss_fn = L.ClipPPOLoss(actor, critic, entropy_coeff=0.0, loss_critic_type="l2")
    gae = L.value.GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
    optim = torch.optim.Adam(loss_fn.parameters(), lr=3e-4)
    buffer = B.ReplayBuffer(
        storage=B.LazyTensorStorage(2048), sampler=B.SamplerWithoutReplacement(), batch_size=512
    )
    collector = C.Collector(env, actor, frames_per_batch=2048, total_frames=frames)
    start = time.perf_counter()
    for batch in collector:
        for _ in range(10):
            with torch.no_grad():
                gae(batch)
            buffer.extend(batch.reshape(-1))
            for _ in range(2048 // 512):
                minibatch = buffer.sample()
                losses = loss_fn(minibatch)
                total = losses["loss_objective"] + losses["loss_critic"]
                optim.zero_grad()
                total.backward()
                optim.step()
        collector.update_policy_weights_()
    elapsed = time.perf_counter() - start
    collector.shutdown()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=20_480)
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {}
    for name, make in (("ours", _ours), ("torchrl", _torchrl)):
        train(make(), 2048)  # warm-up: imports, first-call paths, extension builds
        results[name] = train(make(), args.frames)
    per_100k = {k: v * 100_000 / args.frames for k, v in results.items()}
    print(f"PPO InvertedDoublePendulum-v5, {args.frames} frames, 1 thread")
    print(f"{'':10}{'s / 100k frames':>18}{'frames/s':>12}")
    for name, seconds in per_100k.items():
        print(f"{name:10}{seconds:18.1f}{100_000 / seconds:12.0f}")
    print(f"ours / torchrl time: {per_100k['ours'] / per_100k['torchrl']:.2f}x (target <= 0.5x)")


if __name__ == "__main__":
    main()
