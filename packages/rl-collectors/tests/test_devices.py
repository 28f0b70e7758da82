"""Devices: the policy on CUDA and the batch stored on CUDA give the CPU answer (skips without CUDA)."""

from __future__ import annotations

import pytest
import torch
from rl_collectors_toy_env import ScalePolicy, ToyEnv

from rl_collectors import Collector


@pytest.mark.gpu
def test_cuda_policy_and_storage_match_cpu() -> None:
    trainer = ScalePolicy(1.0)
    cpu = Collector(ToyEnv((2,)), trainer, frames_per_batch=20, total_frames=40)
    gpu = Collector(ToyEnv((2,)), trainer, frames_per_batch=20, total_frames=40,
                    policy_device="cuda", storing_device="cuda")  # fmt: skip
    assert gpu.policy is not trainer and next(gpu.policy.parameters()).is_cuda
    first_cpu, first_gpu = cpu.next(), gpu.next()
    assert first_gpu.device.type == "cuda"
    torch.testing.assert_close(first_gpu.cpu(), first_cpu)
    with torch.no_grad():
        trainer.weight.fill_(3.0)
    gpu.update_policy_weights_()  # copies the trainer's CPU weights into the CUDA copy
    assert next(gpu.policy.parameters()).item() == 3.0


def test_default_devices_are_the_env_device() -> None:
    collector = Collector(ToyEnv(()), ScalePolicy(), frames_per_batch=4)
    assert (
        collector.env_device
        == collector.policy_device
        == collector.storing_device
        == torch.device("cpu")
    )
