"""Spec-aware versions of tensordict's probabilistic modules and sequences (TorchRL's ``Safe*`` names)."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModuleBase,
    TensorDictSequential,
)
from tensordict.utils import NestedKey

from rl_modules._spec import as_composite, composite_class_of, is_composite, project_into
from rl_modules.actors.common import leaf_spec
from rl_modules.distributions import Delta


def _project_outputs(module: Any, td: TensorDictBase, keys: list[NestedKey]) -> TensorDictBase:
    who = type(module).__name__
    for key in keys:
        spec = leaf_spec(module.spec, key, len(keys))
        if spec is not None and key in td.keys(True, True):
            td.set(key, project_into(spec, td.get(key), who))
    return td


def _check_safe(safe: bool, spec: Any, who: str) -> None:
    if safe and spec is None:
        raise RuntimeError(
            f"`{who}(spec=None, safe=True)` is not a valid configuration: there is no spec to "
            "project the outputs into. Pass spec=."
        )


def merged_spec(modules: tuple[Any, ...]) -> Any:
    """One Composite-like spec of the outputs of ``modules`` (later modules win), or ``None``.

    Built with the Composite class of the first spec found; ``None`` when no
    module has a spec.
    """
    entries: dict[NestedKey, Any] = {}
    example = None
    for module in modules:
        spec = getattr(module, "spec", None)
        if is_composite(spec):
            for key in spec.keys(True, True):
                entries[key] = spec[key]
                example = spec
        elif spec is not None and len(module.out_keys) == 1:
            entries[module.out_keys[0]] = spec
            example = spec
    if example is None:
        return None
    composite = composite_class_of(example)
    if composite is None:
        return entries
    out = composite()
    for key, spec in entries.items():
        out[key] = spec
    return out


class SafeProbabilisticModule(ProbabilisticTensorDictModule):
    """A :class:`~tensordict.nn.ProbabilisticTensorDictModule` that can keep its sample in a spec.

    With ``safe=True`` the sample (the first out_key) is replaced by
    ``spec.project(sample)``. A bare ``spec`` is stored as
    ``Composite({out_keys[0]: spec})``, as in TorchRL.

    Args:
        in_keys: distribution parameter keys (list, or dict ``{arg_name: key}``).
        out_keys: sample key(s). Default ``["action"]``.
        spec: spec-like object of the sample.
        safe: project the sample into ``spec``.
        default_interaction_type, distribution_class, distribution_kwargs,
            return_log_prob, log_prob_key, cache_dist, n_empirical_estimate,
            num_samples, generator: as :class:`~tensordict.nn.ProbabilisticTensorDictModule`
            (``distribution_class`` defaults to :class:`~rl_modules.Delta`).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Box:  # a tiny spec-like object
        ...     def project(self, v):
        ...         return v.clamp(-1, 1)
        >>> m = SafeProbabilisticModule(["param"], ["action"], spec=Box(), safe=True)
        >>> m(TensorDict(param=torch.full((3, 2), 5.0), batch_size=[3]))["action"].max()
        tensor(1.)
    """

    def __init__(
        self,
        in_keys: NestedKey | list[NestedKey] | dict[str, NestedKey],
        out_keys: NestedKey | list[NestedKey] | None = None,
        spec: Any = None,
        safe: bool = False,
        default_interaction_type: InteractionType = InteractionType.DETERMINISTIC,
        distribution_class: type = Delta,
        distribution_kwargs: dict | None = None,
        return_log_prob: bool = False,
        log_prob_key: NestedKey | None = None,
        cache_dist: bool = False,
        n_empirical_estimate: int = 1000,
        num_samples: int | None = None,
        generator: torch.Generator | int | NestedKey | None = None,
    ) -> None:
        super().__init__(
            in_keys=in_keys,
            out_keys=["action"] if out_keys is None else out_keys,
            default_interaction_type=default_interaction_type,
            distribution_class=distribution_class,
            distribution_kwargs=distribution_kwargs,
            return_log_prob=return_log_prob,
            log_prob_key=log_prob_key,
            cache_dist=cache_dist,
            n_empirical_estimate=n_empirical_estimate,
            num_samples=num_samples,
            generator=generator,
        )
        _check_safe(safe, spec, type(self).__name__)
        self.spec = as_composite(spec, list(self.out_keys)[:1], type(self).__name__)
        self.safe = safe

    def forward(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        out = super().forward(tensordict, *args, **kwargs)
        if self.safe:
            _project_outputs(self, out, list(self.out_keys)[:1])
        return out


class SafeProbabilisticTensorDictSequential(ProbabilisticTensorDictSequential):
    """A :class:`~tensordict.nn.ProbabilisticTensorDictSequential` with the specs of its modules.

    ``spec`` merges the specs of the modules (e.g. a
    :class:`SafeProbabilisticModule` last); the last module projects its own
    sample when it was built with ``safe=True``.

    Args:
        *modules: TensorDict modules, the last one probabilistic.
        partial_tolerant: skip modules whose inputs are missing.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> seq = SafeProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["param"]),
        ...     SafeProbabilisticModule(["param"], ["action"]),
        ... )
        >>> seq(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))["action"].shape
        torch.Size([4, 2])
    """

    def __init__(self, *modules: TensorDictModuleBase, partial_tolerant: bool = False) -> None:
        super().__init__(*modules, partial_tolerant=partial_tolerant)
        self.spec = merged_spec(modules)


class SafeSequential(TensorDictSequential):
    """A :class:`~tensordict.nn.TensorDictSequential` whose ``spec`` merges its modules' specs.

    Each module keeps its own ``safe`` behaviour (e.g. :class:`~rl_modules.SafeModule`).

    Args:
        *modules: TensorDict modules run in order.
        partial_tolerant: skip modules whose inputs are missing.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_modules import SafeModule
        >>> seq = SafeSequential(
        ...     SafeModule(torch.nn.Linear(3, 4), ["observation"], ["hidden"]),
        ...     SafeModule(torch.nn.Linear(4, 2), ["hidden"], ["action"]),
        ... )
        >>> seq(TensorDict(observation=torch.zeros(5, 3), batch_size=[5]))["action"].shape
        torch.Size([5, 2])
    """

    def __init__(self, *modules: TensorDictModuleBase, partial_tolerant: bool = False) -> None:
        super().__init__(*modules, partial_tolerant=partial_tolerant)
        self.spec = merged_spec(modules)
