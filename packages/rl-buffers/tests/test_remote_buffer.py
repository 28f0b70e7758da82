"""RemoteTensorDictReplayBuffer served over torch.distributed.rpc to another process."""

import socket

import pytest
import torch
import torch.multiprocessing as mp
from tensordict import TensorDict

from rl_buffers import LazyTensorStorage, RemoteTensorDictReplayBuffer

rpc = pytest.importorskip("torch.distributed.rpc")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(rank: int, port: int, results) -> None:
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 1:  # the trainer: owns nothing, writes to and samples from worker0's buffer
        rref = rpc.remote("worker0", RemoteTensorDictReplayBuffer,
                          kwargs={"storage": LazyTensorStorage(8), "batch_size": 4})  # fmt: skip
        rref.rpc_sync().extend(TensorDict(a=torch.arange(6.0), batch_size=[6]))
        sample = rref.rpc_sync().sample()
        results.put((rref.rpc_sync().__len__(), sorted(sample.keys()), sample["a"].tolist()))
    rpc.shutdown()


def test_a_worker_extends_and_samples_a_buffer_held_by_another_process():
    ctx = mp.get_context("fork")  # the target lives in this test module
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_run, args=(rank, port, results)) for rank in range(2)]
    for p in procs:
        p.start()
    try:
        size, keys, values = results.get(timeout=120)
    finally:
        for p in procs:
            p.join(30)
            if p.exitcode is None:
                p.kill()
    assert [p.exitcode for p in procs] == [0, 0]
    assert size == 6 and keys == ["a", "index"]
    assert all(v in range(6) for v in values) and len(values) == 4


def test_include_info_is_refused_with_the_replacement():
    rb = RemoteTensorDictReplayBuffer(storage=LazyTensorStorage(4), batch_size=2)
    rb.extend(TensorDict(a=torch.zeros(2), batch_size=[2]))
    with pytest.raises(ValueError, match="return_info=True"):
        rb.sample(include_info=True)
