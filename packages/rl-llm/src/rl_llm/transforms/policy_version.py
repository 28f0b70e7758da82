"""``PolicyVersion``: stamps each reset and step with the version of the policy's weights."""

from __future__ import annotations

import uuid

import torch
from tensordict import TensorDictBase

from rl_llm.envs.transform import LLMTransform


class PolicyVersion(LLMTransform):
    """Writes ``"policy_version"`` into every reset output and step output.

    The version is an int counter (an int64 ``[B]`` entry on the TensorDict's device) or a UUID string (a
    non-tensor entry). :class:`~rl_llm.LLMCollector` calls :meth:`increment_version`
    each time it loads new weights, so every turn says which weights produced it.

    Args:
        version_type: ``int`` / ``"int"`` or ``str`` / ``"uuid"``.

    Examples:
        >>> pv = PolicyVersion()
        >>> pv.version
        0
        >>> pv.increment_version()
        >>> pv.version
        1
    """

    def __init__(self, version_type: type | str = int) -> None:
        if version_type in (int, "int"):
            self._is_int = True
        elif version_type in (str, "uuid"):
            self._is_int = False
        else:
            raise ValueError(
                f"PolicyVersion: version_type must be int/'int' or str/'uuid'; got {version_type!r}."
            )
        self.version_type = version_type
        self.version: int | str = 0 if self._is_int else str(uuid.uuid4())

    def increment_version(self) -> None:
        """The next version: ``+1``, or a new UUID."""
        self.version = self.version + 1 if self._is_int else str(uuid.uuid4())

    def _stamp(self, td: TensorDictBase) -> TensorDictBase:
        if self._is_int:  # int64 of the batch's shape, on its device (as TorchRL's)
            version = torch.full(td.batch_size, self.version, dtype=torch.int64, device=td.device)
            td.set("policy_version", version)
        else:
            td.set_non_tensor("policy_version", self.version)
        return td

    def _reset(
        self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._stamp(tensordict_reset)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._stamp(next_tensordict)
