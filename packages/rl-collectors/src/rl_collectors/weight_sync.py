"""Weight-sync schemes: how a multiprocess collector hands the trainer's weights to its workers.

TorchRL's ``weight_sync_schemes={"policy": scheme}`` argument names these classes. Here the
workers always read weights from one shared-memory copy (see ``_weights.SharedWeights``):
``SharedMemWeightSyncScheme`` and ``MultiProcessWeightSyncScheme`` both select it (a worker
sees the new weights at the start of its next batch), ``NoWeightSyncScheme`` turns it off
(workers keep the weights they started with).

Examples:
    >>> scheme = WeightSyncScheme.from_backend("shared", sync=False)
    >>> type(scheme).__name__, scheme.sync
    ('SharedMemWeightSyncScheme', False)
"""

from __future__ import annotations

from typing import Any

_STRATEGIES = ("tensordict", "state_dict")


class WeightSyncScheme:
    """Base class: a weight-sync choice for ``weight_sync_schemes={"policy": scheme}``.

    Args:
        strategy: how weights travel, ``"tensordict"`` (default) or ``"state_dict"``; both
            give the workers the same weights.
        sync: accepted for TorchRL's signature; weights always reach a worker before its
            next batch.

    Raises:
        ValueError: an unknown ``strategy``.
    """

    enabled = True

    def __init__(self, strategy: str = "tensordict", sync: bool = True) -> None:
        if strategy not in _STRATEGIES:
            raise ValueError(f"strategy must be one of {_STRATEGIES}; got {strategy!r}.")
        self.strategy_str = strategy
        self.sync = sync
        self.sender_source: Any | None = None  # set by init_on_sender

    def init_on_sender(
        self,
        *,
        model: Any | None = None,
        weights: Any | None = None,
        params_map: dict[int, Any] | None = None,
        model_id: str | None = "policy",
        devices: Any = None,
        **kwargs: Any,
    ) -> None:
        """Give the scheme the sender's weights (a module or a TensorDict of weights), as
        TorchRL's ``init_on_sender(model=..., devices=..., model_id=...)``; or
        ``params_map={worker: weights}`` holding the same weights for every worker.

        A multiprocess collector built from a ``policy_factory`` alone (no ``policy`` in the
        parent) takes the layout of its shared weights from here. ``devices`` and other
        keywords are accepted for TorchRL's signature (workers place weights themselves).

        Raises:
            ValueError: a ``model_id`` other than ``"policy"``, not exactly one of ``model``,
                ``weights`` and ``params_map``, or a ``params_map`` with different weights
                for different workers (every worker runs the same weights here).
        """
        if model_id not in (None, "policy"):
            raise ValueError(f"only the 'policy' model is synced here; got model_id={model_id!r}.")
        if params_map is not None:
            distinct = {id(value) for value in params_map.values()}
            if len(distinct) != 1:
                raise ValueError(
                    "params_map must map every worker to the same weights: every worker "
                    "runs the same weights here."
                )
            weights = next(iter(params_map.values()))
        if (model is None) == (weights is None):
            raise ValueError("init_on_sender needs exactly one of model=, weights= or params_map=.")
        self.sender_source = model if model is not None else weights

    @classmethod
    def from_backend(cls, backend: str, **kwargs: Any) -> WeightSyncScheme:
        """The scheme for a deployment backend (TorchRL's names and aliases).

        ``"none"`` / ``"direct"`` -> :class:`NoWeightSyncScheme`; ``"shared"`` / ``"thread"``
        -> :class:`SharedMemWeightSyncScheme`; ``"process"`` / ``"multiprocessing"`` ->
        :class:`MultiProcessWeightSyncScheme`. ``kwargs`` go to its constructor.

        Raises:
            ValueError: any other backend (TorchRL's distributed / RPC / Ray schemes are not
                provided; :class:`~rl_collectors.RayCollector` syncs its actors itself).
        """
        try:
            scheme_cls = _BACKENDS[backend]
        except KeyError:
            raise ValueError(
                f"Unsupported weight-sync backend {backend!r}. Expected one of {sorted(_BACKENDS)}."
            ) from None
        return scheme_cls(**kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(strategy={self.strategy_str!r}, sync={self.sync})"


class NoWeightSyncScheme(WeightSyncScheme):
    """Workers keep the weights they started with; ``update_policy_weights_()`` sends nothing."""

    enabled = False


class SharedMemWeightSyncScheme(WeightSyncScheme):
    """One shared-memory copy of the weights, updated in place; workers read it per batch.

    Args:
        strategy: see :class:`WeightSyncScheme`.
        sync: see :class:`WeightSyncScheme`.
        per_worker_weights: accepted for TorchRL's signature only when ``False``: every
            worker runs the same weights.
    """

    def __init__(
        self, strategy: str = "tensordict", sync: bool = True, per_worker_weights: bool = False
    ) -> None:
        if per_worker_weights:
            raise ValueError(
                "per_worker_weights=True is not supported: every worker runs the same weights."
            )
        super().__init__(strategy, sync)
        self.per_worker_weights = per_worker_weights


class MultiProcessWeightSyncScheme(WeightSyncScheme):
    """TorchRL sends the weights through pipes; here they go through the shared-memory copy,
    which gives the workers the same weights at the same point (their next batch)."""


_BACKENDS: dict[str, type[WeightSyncScheme]] = {
    "none": NoWeightSyncScheme,
    "direct": NoWeightSyncScheme,
    "shared": SharedMemWeightSyncScheme,
    "thread": SharedMemWeightSyncScheme,
    "process": MultiProcessWeightSyncScheme,
    "multiprocessing": MultiProcessWeightSyncScheme,
}


def policy_scheme(weight_sync_schemes: dict[str, WeightSyncScheme] | None) -> WeightSyncScheme:
    """The scheme for the policy (``SharedMemWeightSyncScheme`` when none is given).

    Raises:
        ValueError: a key other than ``"policy"``, or a value that is not a scheme.
    """
    schemes = dict(weight_sync_schemes or {})
    unknown = set(schemes) - {"policy"}
    if unknown:
        raise ValueError(
            f"weight_sync_schemes has keys {sorted(unknown)}; only 'policy' is synced here."
        )
    scheme = schemes.get("policy", SharedMemWeightSyncScheme())
    if not isinstance(scheme, WeightSyncScheme):
        raise TypeError(
            f"weight_sync_schemes['policy'] must be a WeightSyncScheme instance; got "
            f"{type(scheme).__name__} (did you pass the class instead of an instance?)."
        )
    return scheme
