"""``PolicyAgeFilter``: drops replay-buffer data produced by a too old policy."""

from __future__ import annotations

import logging
from collections.abc import Callable

from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import Transform

_LOG = logging.getLogger(__name__)


class PolicyAgeFilter(Transform):
    """Drops elements whose stamped policy version lags the current one by more than
    ``max_policy_lag``.

    In a replay buffer it filters writes (``extend``: stale data never enters) and
    reads (``sample``: data that became stale since it was written is dropped, so a
    batch may be smaller than asked). An element of a ``[B, T, ...]`` batch is judged
    by its oldest version. Inside an env it does nothing (the live policy acts there).

    Args:
        current_version: the live version, or a callable returning it (read at
            every filtering pass, e.g. ``lambda: collector.policy_version``).
        max_policy_lag: the largest ``current_version - stamped_version`` kept (>= 0).
        policy_version_key: where the stamped version is.
        strict: data without ``policy_version_key`` raises a ``KeyError``;
            ``False``: it passes unfiltered (logged once).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(policy_version=torch.tensor([0, 2, 3]), batch_size=[3])
        >>> PolicyAgeFilter(3, max_policy_lag=1)(td)["policy_version"]
        tensor([2, 3])
    """

    def __init__(
        self,
        current_version: int | Callable[[], int],
        max_policy_lag: int,
        *,
        policy_version_key: NestedKey = "policy_version",
        strict: bool = False,
    ) -> None:
        super().__init__()
        if max_policy_lag < 0:
            raise ValueError(
                f"PolicyAgeFilter: max_policy_lag must be non-negative, got {max_policy_lag}."
            )
        self.current_version = (
            current_version if callable(current_version) else int(current_version)
        )
        self.max_policy_lag = int(max_policy_lag)
        self.policy_version_key = policy_version_key
        self.strict = bool(strict)
        self._warned_missing = False

    def _version_now(self) -> int:
        version = self.current_version
        return int(version()) if callable(version) else version

    def _filter(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.batch_dims == 0 or tensordict.batch_size[0] == 0:
            return tensordict
        stamped = tensordict.get(self.policy_version_key, None)
        if stamped is None:
            if self.strict:
                raise KeyError(
                    f"PolicyAgeFilter: {self.policy_version_key!r} is not in the data. Make "
                    "the producer stamp versions under that key (policy_version_key=...), or "
                    "pass strict=False to let unstamped data through."
                )
            if not self._warned_missing:
                _LOG.warning(
                    "PolicyAgeFilter: no %r entry, the data passes unfiltered.",
                    self.policy_version_key,
                )
                self._warned_missing = True
            return tensordict
        oldest = stamped.reshape(tensordict.batch_size[0], -1).min(dim=-1).values
        keep = self._version_now() - oldest <= self.max_policy_lag
        if bool(keep.all()):
            return tensordict
        return tensordict[keep]

    def _in_env(self) -> bool:
        return self._env_and_index()[0] is not None

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Drops stale elements of a sample (the replay buffer's read path)."""
        return tensordict if self._in_env() else self._filter(tensordict)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Drops stale elements before they are written (the replay buffer's write path)."""
        return tensordict if self._in_env() else self._filter(tensordict)

    def _has_inverse(self) -> bool:
        return False  # nothing to invert inside an env

    def extra_repr(self) -> str:
        return (
            f"max_policy_lag={self.max_policy_lag}, policy_version_key={self.policy_version_key!r}"
        )
