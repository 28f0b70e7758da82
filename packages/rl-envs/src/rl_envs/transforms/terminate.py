"""``TerminateTransform``: ends episodes when a user condition holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms.transform import Transform


class TerminateTransform(Transform):
    """Sets ``terminated`` (and ``done``) where ``stop(next_td)`` is ``True``.

    Args:
        stop: reads the step's output (flat, like ``("next", ...)`` content) and
            returns a bool tensor of shape ``[*B]`` or ``[*B, 1]``.
        write_done: also update ``"done"``.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = TerminateTransform(lambda td: td["observation"][..., :1] > 1)
        >>> nxt = TensorDict(observation=torch.tensor([2.0]), terminated=torch.tensor([False]),
        ...                  done=torch.tensor([False]))
        >>> t._step(TensorDict(), nxt)["terminated"]
        tensor([True])
    """

    def __init__(self, stop: Callable[[TensorDictBase], Any], *, write_done: bool = True) -> None:
        if not callable(stop):
            raise TypeError(
                f"TerminateTransform: stop must be callable, got {type(stop).__name__}."
            )
        super().__init__()
        self.stop = stop
        self.write_done = write_done

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        stop = torch.as_tensor(self.stop(next_tensordict), device=next_tensordict.device)
        shape = (*next_tensordict.batch_size, 1)
        if stop.dtype != torch.bool:
            raise TypeError(f"TerminateTransform: stop() returned {stop.dtype}, expected bool.")
        stop = stop.reshape(shape)
        terminated = next_tensordict.get("terminated", None)
        next_tensordict.set("terminated", stop if terminated is None else terminated | stop)
        if self.write_done:
            done = next_tensordict.get("done", None)
            next_tensordict.set("done", stop if done is None else done | stop)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._step(tensordict, tensordict)
