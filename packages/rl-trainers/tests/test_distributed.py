"""The Trainer's learner under torch.distributed: 2 gloo processes equal one process on the same data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from trainers_testlib import ConcatCollector, DDPRegression, make_collector, make_regression_net

from rl_trainers import Trainer

STEPS = 100


@pytest.mark.slow
def test_two_process_ddp_matches_single_process(tmp_path) -> None:
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    worker = Path(__file__).with_name("ddp_worker.py")
    out = tmp_path / "ddp.pt"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(worker),
                str(rank),
                "2",
                str(tmp_path / "init"),
                str(out),
                str(STEPS),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for rank in range(2)
    ]
    for proc in procs:
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, output.decode()[-3000:]

    # one process: each step sees both ranks' batches; the mean loss over the union has the
    # gradient DDP averages across the two ranks
    torch.set_num_threads(1)
    net = make_regression_net()
    trainer = Trainer(
        collector=ConcatCollector(
            make_collector(frames_per_batch=16, seed=0), make_collector(frames_per_batch=16, seed=1)
        ),
        total_frames=32 * STEPS,
        frame_skip=1,
        optim_steps_per_batch=1,
        loss_module=DDPRegression(net),
        optimizer=torch.optim.Adam(net.parameters(), lr=1e-2),
        progress_bar=False,
    )
    trainer.train()
    ddp_state = torch.load(out, weights_only=True)
    diff = max((ddp_state[k] - v).abs().max().item() for k, v in net.state_dict().items())
    print(f"max |parameter difference| after {STEPS} updates: {diff:.3e}")
    assert diff < 1e-5
    moved = max(
        (v - make_regression_net().state_dict()[k]).abs().max().item()
        for k, v in net.state_dict().items()
    )
    assert moved > 1e-2  # the comparison is not between two untrained nets
