"""RL Zoo's HalfCheetah settings run by Stable-Baselines3 itself: the independent reference
for ``recipes/a2c.py`` and ``recipes/ppo.py --preset zoo-halfcheetah`` on the same task.

Not a project dependency: run it with a Python that has ``stable-baselines3`` and
``gymnasium[mujoco]`` (the same gymnasium and mujoco as the project's venv), e.g.::

    uv venv /tmp/sb3venv && VIRTUAL_ENV=/tmp/sb3venv uv pip install stable-baselines3 \\
        "gymnasium[mujoco]" "mujoco==3.17.0"
    /tmp/sb3venv/bin/python benchmarks/sb3_reference.py --algo a2c --seed 0 \\
        --frames 300000 --output-dir runs/sb3_a2c/seed_0

It writes ``metrics.csv`` in the recipes' format (``frames,name,value`` rows of
``train/return`` and ``eval/return``), so ``recipes/multiseed.py --aggregate-only`` reads
it. Evaluations are deterministic episodes on a frozen copy of the training statistics,
as the recipes' are. The hyperparameters are the zoo's ``a2c.yml`` / ``ppo.yml``
HalfCheetah entries (``n_envs`` 1, ``normalize: true``).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import gymnasium as gym
import torch
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

ZOO = {
    # hyperparams/a2c.yml HalfCheetah-v4: SB3's defaults, VecNormalize (gamma 0.99)
    "a2c": (A2C, {}, 0.99),
    # hyperparams/ppo.yml HalfCheetah-v4
    "ppo": (
        PPO,
        {
            "batch_size": 64,
            "n_steps": 512,
            "gamma": 0.98,
            "learning_rate": 2.0633e-05,
            "ent_coef": 0.000401762,
            "clip_range": 0.1,
            "n_epochs": 20,
            "gae_lambda": 0.92,
            "max_grad_norm": 0.8,
            "vf_coef": 0.58096,
            "policy_kwargs": {
                "log_std_init": -2,
                "ortho_init": False,
                "activation_fn": torch.nn.ReLU,
                "net_arch": {"pi": [256, 256], "vf": [256, 256]},
            },
        },
        0.98,
    ),
}


class RecipeLog(BaseCallback):
    """Training episode returns, and every ``eval_every`` frames a deterministic evaluation."""

    def __init__(self, writer: csv.writer, eval_env: VecNormalize, eval_every: int,
                 episodes: int) -> None:  # fmt: skip
        super().__init__()
        self.writer, self.eval_env = writer, eval_env
        self.eval_every, self.episodes = eval_every, episodes
        self.next_eval = eval_every

    def _on_step(self) -> bool:
        frames = self.num_timesteps
        for info in self.locals["infos"]:
            if "episode" in info:  # Monitor's raw return
                self.writer.writerow([frames, "train/return", info["episode"]["r"]])
        if frames >= self.next_eval:
            self.next_eval += self.eval_every
            self.eval_env.obs_rms = self.model.get_vec_normalize_env().obs_rms.copy()
            mean, _ = evaluate_policy(self.model, self.eval_env, self.episodes, deterministic=True)
            self.writer.writerow([frames, "eval/return", mean])
            print(f"{frames} eval/return {mean:.1f}", flush=True)
        return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=sorted(ZOO), required=True)
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--eval-every", type=int, default=50_000)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--output-dir", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    algo, kwargs, norm_gamma = ZOO[args.algo]
    env = VecNormalize(DummyVecEnv([lambda: Monitor(gym.make(args.env))]), gamma=norm_gamma)
    eval_env = VecNormalize(
        DummyVecEnv([lambda: gym.make(args.env)]), training=False, norm_reward=False
    )
    eval_env.seed(args.seed + 10_000)
    model = algo("MlpPolicy", env, seed=args.seed, device="cpu", **kwargs)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "metrics.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["frames", "name", "value"])
        log = RecipeLog(writer, eval_env, args.eval_every, args.eval_episodes)
        model.learn(total_timesteps=args.frames, callback=log)
        eval_env.obs_rms = env.obs_rms.copy()
        final = evaluate_policy(model, eval_env, args.eval_episodes, deterministic=True)[0]
        writer.writerow([args.frames, "eval/return", final])
    print(f"final eval/return {float(final):.1f}")


if __name__ == "__main__":
    main()
