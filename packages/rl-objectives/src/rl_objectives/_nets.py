"""Small helpers to call TensorDict networks: key selection, parameter swaps, action spaces.

Losses call the user's networks many times per step, and a ``TensorDictModule`` call costs
more than the small MLPs it wraps (dispatch, key selection, output wrapping: on tensordict
0.14 about 150 us per output tensor). :func:`output_of` and :func:`dist_of` therefore call
the wrapped ``nn.Module`` directly on the input tensors when :func:`direct_call_eligible`
says that this is what the module's own call would do; anything else goes through the
module's own ``forward``, with the same result.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
)
from tensordict.utils import NestedKey
from torch import distributions as D
from torch import nn
from torch.nn.modules import module as _torch_module

__all__ = [
    "BoundParams",
    "action_space_name",
    "call",
    "chosen_value",
    "direct_call_eligible",
    "dist_of",
    "in_keys_of",
    "make_qvalue_networks",
    "output_of",
    "stacked_outputs",
    "with_params",
]


def in_keys_of(module: nn.Module) -> list[NestedKey]:
    """The ``in_keys`` of a TensorDict module, with a clear error when it has none."""
    keys = getattr(module, "in_keys", None)
    if keys is None:
        raise TypeError(
            f"{type(module).__name__} has no in_keys: losses need TensorDict modules "
            "(tensordict.nn.TensorDictModule and friends) that declare in_keys and out_keys."
        )
    return list(keys)


def _param_slots(params: TensorDictBase, module: nn.Module) -> list[tuple[dict, str, torch.Tensor]]:
    """``(slots, name, value)`` per leaf of ``params``: the ``_parameters`` / ``_buffers`` dict of
    the submodule that owns it, its name there, and the tensor to put in."""
    slots = []
    for key, value in params.items(include_nested=True, leaves_only=True):
        key = (key,) if isinstance(key, str) else key
        owner = module
        for name in key[:-1]:
            owner = owner._modules[name]
        where = owner._parameters if key[-1] in owner._parameters else owner._buffers
        slots.append((where, key[-1], value))
    return slots


class _Swapped:
    """Put each value in its slot, then restore the old ones on exit.

    A plain dict swap (what ``torch.func.functional_call`` does with ``setattr``), without the
    per-leaf TensorDict bookkeeping of ``to_module``; used in eager mode only.
    """

    __slots__ = ("_saved", "_slots")

    def __init__(self, slots: list[tuple[dict, str, torch.Tensor]]) -> None:
        self._slots = slots
        self._saved: list[torch.Tensor] = []

    def __enter__(self) -> None:
        saved = self._saved
        for where, name, value in self._slots:
            saved.append(where[name])
            where[name] = value

    def __exit__(self, *exc: object) -> None:
        for (where, name, _), old in zip(self._slots, self._saved, strict=False):
            where[name] = old


class BoundParams:
    """Parameters bound to the module they are swapped into, their slots looked up once.

    Losses swap the same target or detached parameters into the same networks on every call;
    binding them once spares walking the TensorDict each time. Valid as long as ``params``'
    leaves and ``module``'s submodules are the same objects (in-place updates are fine; the
    losses rebind after ``.to()``).

    Args:
        params: a TensorDict with ``module``'s structure (``TensorDict.from_module(module)``).
        module: the module they go into.
    """

    __slots__ = ("_slots", "module", "params")

    def __init__(self, params: TensorDictBase, module: nn.Module) -> None:
        self.params = params
        self.module = module
        self._slots: list[tuple[dict, str, torch.Tensor]] | None = None

    def slots(self) -> list[tuple[dict, str, torch.Tensor]]:
        """The ``(slots, name, value)`` triples, computed on first use."""
        if self._slots is None:
            self._slots = _param_slots(self.params, self.module)
        return self._slots


def with_params(
    params: TensorDictBase | BoundParams | None, module: nn.Module
) -> contextlib.AbstractContextManager:
    """Run ``module`` with ``params`` swapped in (its own parameters when ``None``).

    ``params`` must have ``module``'s structure (``TensorDict.from_module(module)``), or be
    :class:`BoundParams` bound to ``module``.
    """
    if params is None:
        return contextlib.nullcontext()
    if isinstance(params, BoundParams):
        if torch.compiler.is_compiling():
            return params.params.to_module(module, preserve_module_state=False)
        return _Swapped(params.slots())
    if torch.compiler.is_compiling():
        return params.to_module(module, preserve_module_state=False)
    return _Swapped(_param_slots(params, module))


def call(
    module: nn.Module, td: TensorDictBase, params: TensorDictBase | BoundParams | None = None
) -> TensorDictBase:
    """``module(td.select(*in_keys))`` with optional parameters; returns the module's output."""
    td_in = td.select(*in_keys_of(module), strict=False)
    with with_params(params, module):
        return module(td_in)


def _no_hooks(module: nn.Module) -> bool:
    return not (
        module._forward_hooks
        or module._forward_pre_hooks
        or _torch_module._global_forward_hooks
        or _torch_module._global_forward_pre_hooks
    )


# (class, base, names) -> answer of _keeps: classes do not change, and tensordict's module
# classes make each class attribute lookup cost ~0.7 us
_KEEPS: dict[tuple[type, type, tuple[str, ...]], bool] = {}


def _keeps(module: nn.Module, base: type, names: tuple[str, ...]) -> bool:
    """Whether ``module``'s class inherits ``names`` from ``base`` unchanged."""
    cls = type(module)
    if torch.compiler.is_compiling():
        return all(getattr(cls, name) is getattr(base, name) for name in names)
    answer = _KEEPS.get((cls, base, names))
    if answer is None:
        answer = all(getattr(cls, name) is getattr(base, name) for name in names)
        _KEEPS[(cls, base, names)] = answer
    return answer


def direct_call_eligible(module: nn.Module) -> bool:
    """Whether the losses may run ``module``'s network directly instead of calling ``module``.

    The one rule: ``module`` is a tensordict ``TensorDictModule`` (or a
    ``ProbabilisticTensorDictSequential`` actor, for its distribution), of that class or a
    subclass, with no forward hooks (its own or global), no ``method`` or keyword routing and
    no ``"_"`` out key, and its class either keeps the base class's ``forward`` or follows the
    safe-module protocol, recognised by duck typing: a ``safe`` attribute, ``False`` (the
    subclasses of rl_modules and TorchRL, ``SafeModule``, ``Actor``, ``ValueOperator``,
    ``ProbabilisticActor``, whose ``forward`` only adds input-key checks and, with
    ``safe=True``, a projection of the outputs into their spec). An actor must also keep the
    base class's ``get_dist``. Then calling the module gives exactly
    ``module.module(*[td[k] for k in in_keys])`` written to ``out_keys``.

    Examples:
        >>> from tensordict.nn import TensorDictModule
        >>> direct_call_eligible(TensorDictModule(nn.Linear(3, 1), ["obs"], ["value"]))
        True
        >>> class Clipped(TensorDictModule):
        ...     def forward(self, td):
        ...         return super().forward(td).apply(lambda x: x.clamp(-1, 1))
        >>> direct_call_eligible(Clipped(nn.Linear(3, 1), ["obs"], ["value"]))
        False
    """
    # a TensorDictSequential is a TensorDictModule too: test the actor class first
    if isinstance(module, ProbabilisticTensorDictSequential):
        base = ProbabilisticTensorDictSequential
        routed = getattr(module, "return_composite", False) or not _keeps(
            module, base, ("get_dist",)
        )
    elif isinstance(module, TensorDictSequential):
        return False
    elif isinstance(module, TensorDictModule):
        base = TensorDictModule
        routed = (
            module.method is not None
            or bool(module.method_kwargs)
            or getattr(module, "_kwargs", None) is not None
            or "_" in module.out_keys
        )
    else:
        return False
    if routed or not _no_hooks(module):
        return False
    # an instance attribute, read without TensorDictModule.__getattr__'s fallback to its network
    safe = module.__dict__.get("safe")
    if safe is None:
        return _keeps(module, base, ("forward",))
    return safe is False


def _plain_module(module: nn.Module) -> bool:
    """A module whose call is its network's call on ``in_keys`` written to ``out_keys``."""
    return not isinstance(module, TensorDictSequential) and direct_call_eligible(module)


def _direct_outputs(
    module: TensorDictModule, td: TensorDictBase, overrides: Mapping[NestedKey, torch.Tensor]
) -> dict[NestedKey, Any] | None:
    """Outputs of a plain module by key, or ``None`` when an input is missing."""
    inputs = []
    for key in module.in_keys:
        value = overrides[key] if key in overrides else td.get(key, None)
        if value is None:
            return None
        inputs.append(value)
    # _modules["module"] is module.module without TensorDictModule.__getattr__'s fallbacks
    out = module._modules["module"](*inputs)
    if not isinstance(out, tuple):
        out = (out,)
    out_keys = module.out_keys
    if len(out) != len(out_keys):
        return None
    return dict(zip(out_keys, out, strict=True))


def output_of(
    module: nn.Module,
    td: TensorDictBase,
    key: NestedKey,
    params: TensorDictBase | BoundParams | None = None,
    overrides: Mapping[NestedKey, torch.Tensor] | None = None,
) -> torch.Tensor:
    """The ``key`` output of ``module`` on ``td`` (entries in ``overrides`` replace ``td``'s).

    Args:
        module: a TensorDict module.
        td: the input data.
        key: the output entry wanted.
        params: parameters swapped in for the call (the module's own when ``None``).
        overrides: input entries to use instead of ``td``'s (e.g. a freshly sampled action).
    """
    overrides = overrides or {}
    with with_params(params, module):
        if _plain_module(module) and key in module.out_keys:
            outputs = _direct_outputs(module, td, overrides)
            if outputs is not None:
                return outputs[key]
        td_in = td.select(*in_keys_of(module), strict=False)
        for name, value in overrides.items():
            td_in.set(name, value)
        return module(td_in).get(key)


def stacked_outputs(
    nets: nn.ModuleList,
    td: TensorDictBase,
    key: NestedKey,
    params: TensorDictBase | BoundParams | None = None,
    overrides: Mapping[NestedKey, torch.Tensor] | None = None,
) -> torch.Tensor:
    """``[len(nets), ...]``: each net's :func:`output_of` ``key``, ``params`` swapped into ``nets``."""
    with with_params(params, nets):
        return torch.stack([output_of(net, td, key, overrides=overrides) for net in nets], 0)


def dist_of(
    actor: nn.Module, td: TensorDictBase, params: TensorDictBase | BoundParams | None = None
) -> D.Distribution:
    """``actor.get_dist(td)`` with optional parameters, skipping wrapper overhead when safe."""
    with with_params(params, actor):
        mods = _plain_actor(actor)
        if mods is not None:
            body, head = mods
            outputs = _direct_outputs(body, td, {})
            if outputs is not None:
                dist = _direct_dist(head, outputs)
                if dist is not None:
                    return dist
                for key in head.in_keys:
                    if key not in outputs:
                        outputs[key] = td.get(key)
                return head.get_dist(TensorDict(outputs, batch_size=td.batch_size))
        return actor.get_dist(td.select(*in_keys_of(actor), strict=False))


def _plain_actor(
    actor: nn.Module,
) -> tuple[TensorDictModule, ProbabilisticTensorDictModule] | None:
    """``(body, head)`` of a ``[TensorDictModule, ProbabilisticTensorDictModule]`` actor whose
    distribution is ``head``'s on ``body``'s outputs; ``None`` for anything else."""
    if not isinstance(actor, ProbabilisticTensorDictSequential) or not direct_call_eligible(actor):
        return None
    mods = tuple(actor._modules["module"]._modules.values())
    if (
        len(mods) != 2
        or not _plain_module(mods[0])
        or type(mods[1]) is not ProbabilisticTensorDictModule
    ):
        return None
    return mods


def _direct_dist(
    module: ProbabilisticTensorDictModule, outputs: dict[NestedKey, Any]
) -> D.Distribution | None:
    """``module.get_dist`` on ``outputs`` without building a TensorDict, or ``None`` to take that path.

    ``get_dist`` calls ``distribution_class(**{dist_key: td[in_key]}, **distribution_kwargs)``;
    this makes the same call when every parameter is in ``outputs`` and the keyword arguments
    are a plain dict. A ``TypeError`` returns ``None`` so that ``get_dist`` raises its own message.
    """
    extra = module.distribution_kwargs
    if type(extra) is not dict:
        return None
    kwargs = {}
    for dist_key, key in zip(module.dist_keys, module.in_keys, strict=True):
        if key not in outputs:
            return None
        kwargs[dist_key[-1] if isinstance(dist_key, tuple) else dist_key] = outputs[key]
    try:
        return module.distribution_class(**kwargs, **extra)
    except TypeError:
        return None


def make_qvalue_networks(qvalue_network: nn.Module | list[nn.Module], num: int) -> nn.ModuleList:
    """``num`` Q-networks: the given list, or copies of one network with re-drawn parameters.

    Args:
        qvalue_network: one network (copied ``num`` times; every copy after the first has its
            ``reset_parameters()`` called so the nets start different) or a list of ``num``.
        num: number of Q-networks.
    """
    if isinstance(qvalue_network, (list, tuple, nn.ModuleList)):
        nets = list(qvalue_network)
        if len(nets) != num:
            raise ValueError(
                f"got {len(nets)} Q-value networks but num_qvalue_nets={num}; pass one network "
                "(copied) or a list of exactly num_qvalue_nets networks."
            )
        return nn.ModuleList(nets)
    nets = [qvalue_network]
    for _ in range(num - 1):
        clone = copy.deepcopy(qvalue_network)
        for sub in clone.modules():
            reset = getattr(sub, "reset_parameters", None)
            if callable(reset):
                reset()
        nets.append(clone)
    return nn.ModuleList(nets)


def unshare_from(nets: nn.ModuleList, actor: nn.Module) -> nn.ModuleList:
    """``nets`` with each network that shares parameters with ``actor`` replaced by a copy.

    As TorchRL's expanded critics: without ``separate_losses`` the critics own a copy of a trunk
    they share with the actor (same values), trained by the critic loss only.
    """
    actor_ids = {id(p) for p in actor.parameters()}
    if not any(id(p) in actor_ids for p in nets.parameters()):
        return nets
    return nn.ModuleList(
        copy.deepcopy(net) if any(id(p) in actor_ids for p in net.parameters()) else net
        for net in nets
    )


def action_space_name(action_space: Any, network: nn.Module | None = None) -> str:
    """``"categorical"`` or ``"one_hot"`` from a string, a spec-like object or the network.

    The network is asked, as in TorchRL, for its action ``spec`` (e.g. a ``QValueActor`` built
    with ``spec=env.action_spec``, or a Composite with an ``"action"`` entry), then for an
    ``action_space`` attribute (on itself or one of its submodules).
    """
    if action_space is None and network is not None:
        spec = getattr(network, "spec", None)
        if callable(getattr(spec, "keys", None)):  # a Composite: its "action" entry
            keys = list(spec.keys(True, True))
            spec = spec["action"] if "action" in keys else None
        spec_name = type(spec).__name__.lower().replace("_", "")
        if "onehot" in spec_name or "categorical" in spec_name:
            action_space = spec
        else:
            action_space = getattr(network, "action_space", None)
        if action_space is None:  # e.g. a QValueActor: its Q-value head knows the space
            heads = (getattr(m, "action_space", None) for m in network.modules())
            action_space = next((a for a in heads if isinstance(a, str)), None)
    if action_space is None:
        raise ValueError(
            "action_space is needed: pass 'categorical' (integer actions) or 'one_hot', "
            "or a spec-like object (Categorical / OneHot)."
        )
    if not isinstance(action_space, str):
        action_space = type(action_space).__name__
    name = action_space.lower().replace("-", "").replace("_", "")
    if "onehot" in name:
        return "one_hot"
    if "categorical" in name:
        return "categorical"
    raise ValueError(
        f"unsupported action_space {action_space!r}: expected 'categorical' or 'one_hot' "
        "(or a Categorical / OneHot spec)."
    )


def chosen_value(values: torch.Tensor, action: torch.Tensor, action_space: str) -> torch.Tensor:
    """Pick ``values[..., action]`` for categorical or one-hot actions; shape ``values.shape[:-1]``."""
    if action_space == "categorical":
        if action.ndim == values.ndim:
            action = action.squeeze(-1)
        return values.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
    return (values * action.to(values.dtype)).sum(-1)
