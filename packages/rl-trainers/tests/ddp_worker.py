"""One rank of the 2-process DDP test: ``python ddp_worker.py RANK WORLD INIT_FILE OUT STEPS``."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).parent))

from trainers_testlib import DDPRegression, make_collector, make_regression_net

from rl_trainers import Trainer


def main(rank: int, world: int, init_file: str, out: str, steps: int) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        net = DistributedDataParallel(make_regression_net())
        loss = DDPRegression(net)
        trainer = Trainer(
            collector=make_collector(frames_per_batch=16, seed=rank),
            total_frames=16 * steps,
            frame_skip=1,
            optim_steps_per_batch=1,
            loss_module=loss,
            optimizer=torch.optim.Adam(net.parameters(), lr=1e-2),
            progress_bar=False,
        )
        trainer.train()
        if rank == 0:
            torch.save(net.module.state_dict(), out)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
