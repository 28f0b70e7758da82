"""``RemoteTensorDictReplayBuffer``: a TensorDict buffer served to other processes over ``torch.distributed.rpc``."""

from __future__ import annotations

from typing import Any

from rl_buffers.tensordict_replay_buffer import TensorDictReplayBuffer


class RemoteTensorDictReplayBuffer(TensorDictReplayBuffer):
    """A :class:`TensorDictReplayBuffer` meant to live in one process and be used from others.

    Create it on its owner with ``torch.distributed.rpc.remote(owner, RemoteTensorDictReplayBuffer,
    kwargs=...)``; every worker then calls ``rref.rpc_sync().extend(td)`` /
    ``.sample()`` / ``.update_tensordict_priority(td)``. RPC runs concurrent calls
    on a thread pool: each public method takes the buffer's lock, so writes and
    samples never interleave, and everything that crosses the wire (TensorDicts,
    index tensors, ints) pickles. Locally it behaves exactly as its parent.

    Args:
        **kwargs: as :class:`TensorDictReplayBuffer`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage
        >>> rb = RemoteTensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
        >>> _ = rb.extend(TensorDict(a=torch.arange(4), batch_size=[4]))
        >>> sorted(rb.sample().keys())
        ['a', 'index']

    Served over RPC (see ``tests/test_remote_buffer.py``)::

        rref = rpc.remote("buffer", RemoteTensorDictReplayBuffer, kwargs={"storage": LazyTensorStorage(10)})
        rref.rpc_sync().extend(td)
    """

    def sample(
        self,
        batch_size: int | None = None,
        include_info: bool | None = None,
        return_info: bool = False,
    ) -> Any:
        """As :meth:`TensorDictReplayBuffer.sample`; ``include_info`` (TorchRL's deprecated flag) is refused."""
        if include_info:
            raise ValueError(
                "include_info is deprecated in TorchRL and not supported: the sample already "
                "carries 'index' (and the priority weight); use return_info=True for the dict."
            )
        return super().sample(batch_size, return_info=return_info)
