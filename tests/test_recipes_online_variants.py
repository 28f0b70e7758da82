"""CrossQ, REDQ and GAIL recipes: a run cut in two and resumed ends bit-identical to a straight
one (CrossQ's batch-renorm statistics and actor-delay counter, REDQ's stacked critics, GAIL's
discriminator included); GAIL's learner is paid by the discriminator, not by the env."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest
import torch


def load_recipe(name: str) -> ModuleType:
    """The recipe ``recipes/<name>.py`` as a module (tests/conftest.py puts recipes/ on sys.path)."""
    return importlib.import_module(name)


ARGS = ["--smoke", "--env", "Pendulum-v1", "--frames-per-batch", "100",
        "--init-random-frames", "100", "--utd-ratio", "0.1", "--eval-every", "400",
        "--checkpoint-every", "200"]  # fmt: skip


@pytest.mark.parametrize("name", ["crossq", "redq", "gail"])
def test_resume_is_bit_identical_to_an_uninterrupted_run(name: str, tmp_path: Path) -> None:
    recipe = load_recipe(name)
    straight, split = tmp_path / "straight", tmp_path / "split"
    recipe.main([*ARGS, "--total-frames", "400", "--output-dir", str(straight)])
    recipe.main([*ARGS, "--total-frames", "200", "--output-dir", str(split)])
    ckpt = str(split / "checkpoint.pt")
    resumed = recipe.main(
        [*ARGS, "--total-frames", "400", "--output-dir", str(split), "--resume", ckpt]
    )
    assert resumed["frames"] == 400
    a = torch.load(straight / "checkpoint.pt", weights_only=False)
    b = torch.load(split / "checkpoint.pt", weights_only=False)
    assert a["loss"].keys() == b["loss"].keys()
    for key, value in a["loss"].items():
        assert torch.equal(value, b["loss"][key]), f"{name}: {key} differs after resuming"
    if name == "gail":
        for key, value in a["discriminator"].items():
            assert torch.equal(value, b["discriminator"][key]), key


def test_crossq_critics_hold_batch_statistics_and_no_target_copies() -> None:
    recipe = load_recipe("crossq")
    cfg = recipe.Config(env="Pendulum-v1", hidden=8, critic_hidden=8)
    env = load_recipe("sac").make_env(cfg)
    actor, _ = load_recipe("sac").make_agent(cfg, env)
    loss = recipe.CrossQLoss(actor, recipe.make_critic(cfg, env), action_spec=env.action_spec)
    keys = list(loss.state_dict())
    assert any("running_mean" in k for k in keys)  # checkpointed with the loss
    assert not any("target" in k for k in keys)


@pytest.mark.parametrize("recompute", [True, False])
def test_ppo_writes_advantages_before_every_epoch_or_only_the_first(recompute: bool) -> None:
    from tensordict import TensorDict

    from rl_buffers import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement

    ppo = load_recipe("ppo")
    calls: list[int] = []

    def advantage(batch: TensorDict) -> None:  # a critic that changes between epochs
        calls.append(len(calls))
        batch["advantage"] = torch.full(batch.shape, float(len(calls)))

    buffer = ReplayBuffer(
        storage=LazyTensorStorage(6), sampler=SamplerWithoutReplacement(), batch_size=4
    )
    batch = TensorDict({"x": torch.arange(6.0)}, [6])
    seen = [mb["advantage"] for mb in ppo.epoch_minibatches(batch, advantage, buffer, 3, recompute)]
    assert len(seen) == 6  # 3 epochs of 2 minibatches (4 + 2)
    assert len(calls) == (3 if recompute else 1)
    expected = [1.0, 1.0, 2.0, 2.0, 3.0, 3.0] if recompute else [1.0] * 6
    assert [float(a.unique()) for a in seen] == expected
