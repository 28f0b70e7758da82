"""SharedWeights: in-place, versioned pushes and pulls (single process)."""

from __future__ import annotations

import torch
import torch.multiprocessing as mp
from rl_collectors_toy_env import ScalePolicy
from tensordict import TensorDict

from rl_collectors._weights import SharedWeights


def test_push_pull_versions_and_in_place() -> None:
    trainer, worker = ScalePolicy(1.0), ScalePolicy(0.0)
    shared = SharedWeights(trainer, mp.get_context("spawn"))
    assert shared.version == 0 and shared.weights["weight"].is_shared()
    assert shared.pull(worker, 0) == 0 and worker.weight.item() == 0.0  # same version: no copy
    storage = worker.weight.data_ptr()
    with torch.no_grad():
        trainer.weight.fill_(3.0)
    assert shared.push(trainer) == 1
    assert shared.pull(worker, 0) == 1
    assert worker.weight.item() == 3.0 and worker.weight.data_ptr() == storage
    assert shared.push({"weight": torch.tensor(4.0)}) == 2
    assert shared.push(TensorDict({"weight": torch.tensor(5.0)}, [])) == 3
    assert shared.pull(worker, 1) == 3 and worker.weight.item() == 5.0
