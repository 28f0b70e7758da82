"""Replay a ``recipes/ppo.py`` HalfCheetah checkpoint and say which episodes flip the cheetah.

A HalfCheetah run whose training returns fall from thousands to a few hundred in a few
episodes, with a policy that barely changed (small KL), is often the cheetah landing on
its back: the torso angle (observation 1, ``rooty``) passes pi/2 and the gait cannot
bring it back. This replays the checkpoint's policy (sampled actions, as in training) with
the run's own observation statistics and prints, per episode, the return and the first
step at which the torso is past pi/2.

    uv run benchmarks/halfcheetah_flips.py runs/ppo/checkpoint.pt \\
        --recipe-args "--preset zoo-halfcheetah" --episodes 6
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path

import torch
from tensordict.nn import InteractionType, set_interaction_type

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "recipes"))

import ppo
from _common import copy_frozen_stats, load_checkpoint, parse_config

from rl_envs import RenameTransform, VecNorm
from rl_objectives import ClipPPOLoss

TORSO_ANGLE = 1  # HalfCheetah's observation: qpos[1:] (rootz, rooty, ...) then qvel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--recipe-args", default="", help="the run's recipe flags")
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cfg = parse_config(ppo.Config, shlex.split(args.recipe_args))
    state = load_checkpoint(args.checkpoint)

    trained = ppo.make_env(cfg, 1, VecNorm(in_keys=["observation"], decay=0.99999), train=True)
    trained.load_state_dict(state["collector"]["env_state_dict"])  # the run's statistics
    held = VecNorm(in_keys=["observation"], decay=0.99999)
    env = ppo.make_env(cfg, 1, held, train=False)
    copy_frozen_stats(trained.transform[0], held)
    raw = RenameTransform(["observation"], ["raw_observation"], create_copy=True)
    env.insert_transform(0, raw)  # the observation before normalisation, kept beside it
    actor, critic = ppo.make_agent(cfg, env)
    ClipPPOLoss(actor, critic).load_state_dict(state["loss"])

    print(f"{args.checkpoint}: {state['frames']} frames")
    env.set_seed(args.seed)
    with torch.no_grad(), set_interaction_type(InteractionType.RANDOM):
        for episode in range(args.episodes):
            rollout = env.rollout(1000, actor)
            angle = rollout["next", "raw_observation"][:, TORSO_ANGLE].abs()
            past = (angle > math.pi / 2).nonzero()
            flip = f"flips at step {int(past[0])}" if len(past) else "stays upright"
            print(
                f"episode {episode}: return {rollout['next', 'reward'].sum():8.1f}, "
                f"max |torso angle| {angle.max():.2f} rad, {flip}"
            )


if __name__ == "__main__":
    main()
