"""recipes/dreamer.py: the continuation head is wired into the losses, and --device cuda fails
clearly without CUDA (the learning runs themselves are in docs/results.md)."""

from __future__ import annotations

import dreamer
import pytest
import torch
from _common import parse_config

from rl_buffers import LazyTensorStorage, SliceSampler, TensorDictReplayBuffer


def test_device_flag_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"--device cuda was asked for.*--device cpu"):
        dreamer.main(["--smoke", "--device", "cuda"])
    with pytest.raises(ValueError, match="'cpu' or 'cuda'"):
        dreamer.resolve_device("tpu")
    with pytest.raises(ValueError, match="'cpu' or 'cuda'"):
        dreamer.resolve_device("meta")
    assert dreamer.resolve_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize(
    ("version", "flag", "expected"), [("v1", False, False), ("v1", True, True), ("v3", False, True)]
)
def test_continuation_head_feeds_the_losses(version: str, flag: bool, expected: bool) -> None:
    torch.manual_seed(0)
    argv = ["--smoke", "--version", version, "--batch-length", "6", "--batch-size", "2"]
    cfg = parse_config(dreamer.Config, [*argv, "--continuation", str(flag)])
    task = dreamer.Task(cfg)
    agent = dreamer.build_agent(cfg, task)
    losses = dreamer.build_losses(cfg, agent, task)
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(1000),
        sampler=SliceSampler(slice_len=6, traj_key="traj_id"),
        batch_size=12,
    )
    buffer.extend(dreamer.run_episode(task, agent, "random", 0)[0])
    model_losses, out = losses["model"](dreamer.sample_batch(cfg, task, agent, buffer))
    assert ("loss_model_continue" in list(model_losses.keys())) is expected
    _, fake = losses["actor"](out.get("next"))
    if not expected:
        assert fake.get(("next", "continuation"), None) is None
        return
    # Pendulum never terminates: the continuation target is all ones
    logit = out.get(("next", "continue_pred"))
    bce = torch.nn.functional.softplus(-logit).mean()  # -log(sigmoid(logit))
    torch.testing.assert_close(model_losses["loss_model_continue"], bce)
    c = fake.get(("next", "continuation"))
    w = torch.cat([torch.ones_like(c[:, :1]), cfg.gamma * c[:, :-1]], 1).cumprod(1)
    torch.testing.assert_close(fake.get("discount_weight"), w)
