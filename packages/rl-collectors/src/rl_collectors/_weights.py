"""Versioned policy weights in shared memory: the trainer pushes in place, workers pull.

No module is pickled per update: the parameters live in one shared-memory
TensorDict created once; an update copies into it under a lock and bumps a
shared version counter. A worker compares the counter with the version it
holds at the start of each batch and copies the weights into its own policy
only when they changed, so a batch is always produced by one version.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_collectors._policy import load_weights_, module_weights
from rl_collectors._weight_check import check_weights, flat_weights, is_state_dict


class SharedWeights:
    """Shared-memory copy of a policy's parameters and buffers, plus a version counter.

    Args:
        policy: the trainer's module (or a TensorDict of its weights); its weights are the
            initial content (version 0).
        context: the multiprocessing context the workers are started with.

    Examples:
        >>> import torch.multiprocessing as mp
        >>> from torch import nn
        >>> net = nn.Linear(2, 1)
        >>> shared = SharedWeights(net, mp.get_context("spawn"))
        >>> shared.push(net)
        1
    """

    def __init__(self, policy: nn.Module | TensorDictBase, context: Any) -> None:
        source = module_weights(policy) if isinstance(policy, nn.Module) else policy.data
        self.weights: TensorDictBase = source.clone().share_memory_()
        self._flat = flat_weights(self.weights)  # views of the shared tensors, by dotted name
        # A state_dict holds no non-persistent buffer: those keys are not expected from one.
        persistent = policy.state_dict().keys() if isinstance(policy, nn.Module) else self._flat
        self._state_dict_keys = [key for key in self._flat if key in persistent]
        self._version = context.Value("q", 0)

    @property
    def version(self) -> int:
        """The version of the weights now in shared memory."""
        return int(self._version.value)

    def push(
        self, source: Any, version: int | None = None, owner: str = "SharedWeights.push"
    ) -> int:
        """Copy ``source`` (module, TensorDict of weights, state_dict) in; returns the new
        version: the next one, or ``version`` when given (resuming from a checkpoint).

        The whole of ``source`` is validated first (``_weight_check``: same keys, exact
        shapes, same dtype kind, finite values); then every entry is copied under the lock
        the workers read under, so a worker sees all of the update or none of it.

        Raises:
            ValueError: ``source`` does not match the weights (nothing is written and the
                version stays); ``owner`` names the caller in the message.
            TypeError: ``source`` is not a module, a TensorDict or a state_dict.
        """
        given = flat_weights(source)
        if is_state_dict(source):
            expected = {key: self._flat[key] for key in self._state_dict_keys}
        else:
            expected = self._flat
        check_weights(expected, given, f"{owner} (policy_version stays {self.version})")
        with self._version.get_lock(), torch.no_grad():
            for key, dst in expected.items():
                dst.copy_(given[key])
            self._version.value = self._version.value + 1 if version is None else version
            return int(self._version.value)

    def pull(self, policy: nn.Module, held_version: int) -> int:
        """Copy the weights into ``policy`` if they are newer than ``held_version``; returns the version held."""
        if self._version.value == held_version:
            return held_version
        with self._version.get_lock():
            load_weights_(policy, self.weights, check=False)  # checked when pushed
            return int(self._version.value)
