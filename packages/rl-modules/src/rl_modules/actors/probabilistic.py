"""Stochastic policies: a network writing distribution parameters, then a sampler."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModuleBase,
    set_interaction_type,
    skip_existing,
)
from tensordict.nn.probabilistic import interaction_type
from tensordict.utils import NestedKey
from torch import nn

from rl_modules._spec import as_composite, project_into, spec_bounds
from rl_modules.actors.common import leaf_spec
from rl_modules.distributions import Delta


def log_prob_key_for(out_key: NestedKey) -> NestedKey:
    """``"action"`` -> ``"action_log_prob"``; ``("agents", "action")`` -> ``("agents", "action_log_prob")``."""
    if isinstance(out_key, str):
        return f"{out_key}_log_prob"
    return (*out_key[:-1], f"{out_key[-1]}_log_prob")


def _takes_bounds(distribution_class: type) -> bool:
    try:
        params = inspect.signature(distribution_class).parameters
    except (TypeError, ValueError):
        return False
    return "low" in params and "high" in params


def _as_list(keys: NestedKey | Sequence[NestedKey]) -> list[NestedKey]:
    return [keys] if isinstance(keys, (str, tuple)) else list(keys)


def _plain_modules(det: nn.Module, modules: list[nn.Module]) -> bool:
    """A parameter module then a plain sampler, the first alone in the deterministic part."""
    if len(modules) != 2:
        return False
    first, last = modules
    return (
        type(last) is ProbabilisticTensorDictModule
        and not isinstance(first, ProbabilisticTensorDictModule | ProbabilisticTensorDictSequential)
        and len(det.module) == 1
        and det.module[0] is first
    )


class ProbabilisticActor(ProbabilisticTensorDictSequential):
    """A policy that samples its action from ``distribution_class(**params)``.

    ``module`` (a TensorDictModule) writes the distribution parameters under
    ``in_keys`` (e.g. ``["loc", "scale"]``); the actor builds the distribution
    and writes its value under ``out_keys`` (``["action"]``). What value
    depends on the exploration type (:func:`set_exploration_type`):
    ``RANDOM`` samples, ``DETERMINISTIC`` / ``MODE`` / ``MEAN`` take that
    statistic; outside any block, ``default_interaction_type`` applies.

    If the distribution takes ``low`` / ``high`` (``TanhNormal``,
    ``TruncatedNormal``, ``TanhDelta``) and ``distribution_kwargs`` does not
    give them, they are read from ``spec.space.low`` / ``spec.space.high``.

    Args:
        module: a TensorDictModule writing the distribution parameters.
        in_keys: the parameter keys, mapped to the distribution's argument
            names: a list (names = keys) or a dict ``{arg_name: key}``.
        out_keys: default ``["action"]``; for a ``CompositeDistribution``, one key per
            ``distribution_map`` entry (renamed by ``name_map``).
        spec: optional spec-like object of the action (bounds come from it).
        distribution_class: default :class:`~rl_modules.Delta`.
        distribution_kwargs: extra distribution arguments.
        return_log_prob: also write the sample's log-probability under
            ``log_prob_key`` (default ``"action_log_prob"``).
        default_interaction_type: used outside any ``set_exploration_type``
            block. Default ``DETERMINISTIC``.
        log_prob_key: where the log-probability goes.
        cache_dist: keep the last distribution (see tensordict).
        n_empirical_estimate: samples for ``MEAN`` when the distribution has no mean.
        safe: project the action into ``spec`` (``spec.project``) after sampling.
        generator: the random generator of the sampler (a ``torch.Generator``, a
            seed, or a TensorDict key holding one), as tensordict's
            ``ProbabilisticTensorDictModule``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from rl_modules import MLP, TanhNormal, ExplorationType, set_exploration_type
        >>> net = torch.nn.Sequential(MLP(in_features=3, out_features=4, num_cells=[16]), NormalParamExtractor())
        >>> actor = ProbabilisticActor(
        ...     TensorDictModule(net, ["observation"], ["loc", "scale"]),
        ...     in_keys=["loc", "scale"],
        ...     distribution_class=TanhNormal,
        ...     distribution_kwargs={"low": -2.0, "high": 2.0},
        ...     return_log_prob=True,
        ... )
        >>> with set_exploration_type(ExplorationType.RANDOM):
        ...     td = actor(TensorDict(observation=torch.zeros(5, 3), batch_size=[5]))
        >>> td["action"].shape, td["action_log_prob"].shape
        (torch.Size([5, 2]), torch.Size([5]))
    """

    def __init__(
        self,
        module: TensorDictModuleBase,
        in_keys: NestedKey | Sequence[NestedKey] | dict[str, NestedKey],
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        *,
        spec: Any = None,
        distribution_class: type = Delta,
        distribution_kwargs: dict | None = None,
        return_log_prob: bool = False,
        default_interaction_type: InteractionType = InteractionType.DETERMINISTIC,
        log_prob_key: NestedKey | None = None,
        cache_dist: bool = False,
        n_empirical_estimate: int = 1000,
        safe: bool = False,
        generator: torch.Generator | int | NestedKey | None = None,
    ) -> None:
        if not isinstance(module, TensorDictModuleBase):
            raise TypeError(
                "ProbabilisticActor: module must be a TensorDictModule writing the distribution "
                f"parameters, got {type(module).__name__}. Wrap it: "
                "TensorDictModule(net, in_keys=['observation'], out_keys=['loc', 'scale'])."
            )
        kwargs = dict(distribution_kwargs or {})
        if out_keys is None and "distribution_map" in kwargs:
            # a CompositeDistribution samples one entry per component (renamed by name_map)
            name_map = kwargs.get("name_map") or {}
            out_keys = [name_map.get(name, name) for name in kwargs["distribution_map"]]
        out_keys = ["action"] if out_keys is None else _as_list(out_keys)
        action_spec = leaf_spec(spec, out_keys[0], 1)
        if (
            action_spec is not None
            and _takes_bounds(distribution_class)
            and not ({"low", "high"} & kwargs.keys())
        ):
            low, high = spec_bounds(action_spec, "ProbabilisticActor")
            kwargs["low"], kwargs["high"] = low, high
        if log_prob_key is None and "distribution_map" not in kwargs:
            log_prob_key = log_prob_key_for(out_keys[0])
        sampler = ProbabilisticTensorDictModule(
            in_keys=in_keys,
            out_keys=out_keys,
            distribution_class=distribution_class,
            distribution_kwargs=kwargs,
            return_log_prob=return_log_prob,
            default_interaction_type=default_interaction_type,
            log_prob_key=log_prob_key,
            cache_dist=cache_dist,
            n_empirical_estimate=n_empirical_estimate,
            generator=generator,
        )
        super().__init__(module, sampler)
        self.spec = as_composite(spec, out_keys[:1], type(self).__name__)
        if safe and action_spec is None:
            raise ValueError(f"{type(self).__name__}: safe=True needs spec= to project into.")
        self.safe = safe

    def forward(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        if not args and not kwargs and isinstance(tensordict, TensorDictBase) and self._plain():
            out = self._forward_plain(tensordict)
        else:
            out = super().forward(tensordict, *args, **kwargs)
        if self.safe:
            key = self.module[-1].out_keys[0]
            spec = leaf_spec(self.spec, key, 1)
            out.set(key, project_into(spec, out.get(key), type(self).__name__))
        return out

    def _plain(self) -> bool:
        """Whether a call is exactly: the parameter module, then the sampler.

        That is the case for an actor built as documented (one parameter module, the
        default options, no ``skip_existing`` mode); tensordict's generic sequence call
        then only adds its dispatch layers (~10 us per call). The verdict on the modules
        is kept until they or the deterministic part change.
        """
        det = self.__dict__.get("_det_part")
        modules = self._modules.get("module")
        if det is None or type(modules) is not nn.ModuleList:
            return False
        token = (det, *modules._modules.values())
        cached = self.__dict__.get("_plain_modules")
        if cached is None or cached[0] != token:
            cached = (token, _plain_modules(det, list(modules)))
            self.__dict__["_plain_modules"] = cached
        return (
            cached[1]
            and self._requires_sample is True
            and self.return_composite is False
            and self.inplace is None
            and det.inplace is None
            and not self.partial_tolerant
            and not det.partial_tolerant
            and not self._select_before_return
            and not det._select_before_return
            and not det._forward_hooks
            and not det._forward_pre_hooks
            and not skip_existing()
        )

    def _forward_plain(self, tensordict: TensorDictBase) -> TensorDictBase:
        """What tensordict's ``ProbabilisticTensorDictSequential.forward`` does in the
        :meth:`_plain` case: the parameters under the current interaction type (the
        sampler's default outside any block), then the sampler, in place."""
        first, sampler = self.module[0], self.module[1]
        if interaction_type() is None:
            with set_interaction_type(sampler.default_interaction_type):
                tensordict = first(tensordict)
        else:
            tensordict = first(tensordict)
        return sampler(tensordict, _requires_sample=True)
