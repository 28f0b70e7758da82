"""Which estimator class implements which value type, and with which defaults.

Losses never name estimator classes: ``loss.make_value_estimator(value_type, **kw)``
looks the class up here. The registry is read-only from the outside: a new estimator
registers under a new name with :func:`register_value_estimator`, and a built-in
entry can never be replaced, so no import can change what ``"gae"`` means for every
loss in the process. To use another estimator in one loss (for instance a Triton
one from ``rl-kernels``, which cannot import this package), give the instance to
that loss: ``ClipPPOLoss(actor, critic, value_estimator=MyGAE(...))``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from torch import nn

__all__ = [
    "ValueEstimatorEntry",
    "ValueEstimators",
    "build_value_estimator",
    "check_value_type",
    "default_value_kwargs",
    "dispatch_value_estimator",
    "get_value_estimator_entry",
    "register_value_estimator",
    "registered_value_estimators",
]


class ValueEstimators(Enum):
    """The built-in value estimator types (TorchRL's names).

    Examples:
        >>> ValueEstimators["GAE"] is ValueEstimators.GAE
        True
    """

    TD0 = "Bootstrapped TD (1-step return)"
    TD1 = "TD(1) (infinity-step return)"
    TDLambda = "TD(lambda)"
    GAE = "Generalized advantage estimate"
    VTrace = "V-trace"
    MAGAE = "Multi-agent generalized advantage estimate"


@dataclass(frozen=True)
class ValueEstimatorEntry:
    """A registered estimator: its class and the hyper-parameters it is built with by default.

    Examples:
        >>> import rl_objectives.value
        >>> entry = get_value_estimator_entry("td0")
        >>> entry.cls.__name__, dict(entry.default_kwargs)
        ('TD0Estimator', {'gamma': 0.99})
    """

    cls: type
    default_kwargs: Mapping[str, Any] = field(default_factory=dict)


_REGISTRY: dict[Any, ValueEstimatorEntry] = {}
_CLASSES: dict[Any, type] = {}
_CLASSES_VIEW: Mapping[Any, type] = MappingProxyType(_CLASSES)


def check_value_type(value_type: Any) -> Any:
    """The registry key of ``value_type``: an enum member, its name in any case (``"gae"``)
    or a registered key.

    Raises:
        KeyError: an unknown value type (the message lists the known ones).

    Examples:
        >>> check_value_type("gae")
        <ValueEstimators.GAE: 'Generalized advantage estimate'>
    """
    if isinstance(value_type, ValueEstimators) or value_type in _REGISTRY:
        return value_type
    if isinstance(value_type, str):
        for member in ValueEstimators:
            if member.name.lower() == value_type.lower():
                return member
    known = [k.name if isinstance(k, Enum) else k for k in _REGISTRY]
    raise KeyError(
        f"unknown value estimator {value_type!r}; registered: {known}. "
        "Register a new one with rl_objectives.value.register_value_estimator(name)(cls)."
    )


def register_value_estimator(
    value_type: Any, *, default_kwargs: dict[str, Any] | None = None
) -> Callable[[type], type]:
    """Class decorator: register ``cls`` as the estimator built for a new ``value_type``.

    ``cls`` is built by ``cls.for_loss(loss, **kwargs)`` when it defines that
    classmethod, otherwise by ``cls(value_network=<the loss's critic>, **kwargs)``
    followed by ``set_keys(...)`` with the loss's keys when the class has it.

    Args:
        value_type: a new hashable name (a built-in :class:`ValueEstimators` member is
            registered once, by this package).
        default_kwargs: hyper-parameters used unless the caller overrides them.

    Raises:
        ValueError: ``value_type`` is already registered to another class, or is a built-in
            name in another case (``"GAE"``): entries are never replaced. To use another
            estimator in place of a built-in one, give the instance to the loss
            (``value_estimator=``) or to ``loss.make_value_estimator(instance)``.

    Examples:
        >>> from rl_objectives.value import TD0Estimator
        >>> _ = register_value_estimator("my_td0", default_kwargs={"gamma": 0.9})(TD0Estimator)
        >>> default_value_kwargs("my_td0")
        {'gamma': 0.9}
    """

    def decorator(cls: type) -> type:
        known = _REGISTRY.get(value_type)
        if known is not None and known.cls is not cls:
            raise ValueError(
                f"value estimator {value_type!r} is already registered to {known.cls.__name__}; "
                f"registered entries cannot be replaced. Register {cls.__name__} under a new "
                "name, or pass an instance to one loss: Loss(..., value_estimator=est)."
            )
        if isinstance(value_type, str) and value_type.lower() in _BUILTIN_NAMES:
            raise ValueError(
                f"value estimator name {value_type!r} would shadow the built-in "
                f"ValueEstimators.{_BUILTIN_NAMES[value_type.lower()]}; choose another name."
            )
        _REGISTRY[value_type] = ValueEstimatorEntry(
            cls, MappingProxyType(dict(default_kwargs or {}))
        )
        _CLASSES[value_type] = cls
        return cls

    return decorator


_BUILTIN_NAMES = {member.name.lower(): member.name for member in ValueEstimators}


def registered_value_estimators() -> Mapping[Any, type]:
    """The registered value types and their classes, as a read-only mapping.

    Examples:
        >>> import rl_objectives.value
        >>> registered_value_estimators()[ValueEstimators.GAE].__name__
        'GAE'
    """
    return _CLASSES_VIEW


def default_value_kwargs(value_type: Any) -> dict[str, Any]:
    """The default hyper-parameters of a registered value type (a copy).

    Examples:
        >>> import rl_objectives.value
        >>> default_value_kwargs("gae")
        {'gamma': 0.99, 'lmbda': 0.95}
    """
    return dict(get_value_estimator_entry(value_type).default_kwargs)


def get_value_estimator_entry(value_type: Any) -> ValueEstimatorEntry:
    """The registry entry of ``value_type``: an enum member (built-in or registered), a
    registered key, or the name of a member in any case (``"gae"``, ``"GAE"``).

    Raises:
        KeyError: a string that names no registered estimator.
        TypeError: anything else that is not registered (e.g. an int).

    Examples:
        >>> import rl_objectives.value
        >>> get_value_estimator_entry("gae") is get_value_estimator_entry(ValueEstimators.GAE)
        True
    """
    if _is_registered(value_type):
        return _REGISTRY[value_type]
    if isinstance(value_type, str):
        name = value_type.lower()
        for key, entry in _REGISTRY.items():
            if isinstance(key, Enum) and key.name.lower() == name:
                return entry
        aliases = [k.name.lower() if isinstance(k, Enum) else k for k in _REGISTRY]
        raise KeyError(f"Unknown value estimator alias {value_type!r}; known aliases: {aliases}.")
    raise TypeError(
        f"value_type must be a registered enum value or a string alias, got "
        f"{type(value_type).__name__} {value_type!r}."
    )


def _is_registered(value_type: Any) -> bool:
    try:
        return value_type in _REGISTRY
    except TypeError:  # unhashable
        return False


def _registry_key(value_type: Any) -> Any:
    entry = get_value_estimator_entry(value_type)
    return next(k for k, e in _REGISTRY.items() if e is entry)


def dispatch_value_estimator(
    loss_module: nn.Module,
    value_type: Any,
    *,
    supported: Iterable[Any],
    tensor_keys: Mapping[str, Any] | None = None,
    **hyperparams: Any,
) -> nn.Module:
    """Builds and sets a loss's estimator, for a custom loss's ``make_value_estimator``.

    Checks ``value_type`` against ``supported``, uses the loss's ``gamma`` unless
    ``hyperparams`` has one, builds the registered class (with the loss's critic when the
    loss offers ``_value_estimator_network``), applies ``tensor_keys`` with ``set_keys``,
    and stores it as the loss's estimator and ``value_type``.

    Raises:
        NotImplementedError: ``value_type`` is not in ``supported`` (the message names both).

    Examples:
        >>> import torch
        >>> import rl_objectives.value
        >>> loss = torch.nn.Module()
        >>> est = dispatch_value_estimator(loss, "td0", supported=[ValueEstimators.TD0], gamma=0.5)
        >>> loss.value_type, float(est.gamma)
        (<ValueEstimators.TD0: 'Bootstrapped TD (1-step return)'>, 0.5)
    """
    key = _registry_key(value_type)
    allowed = {_registry_key(v) for v in supported}
    if key not in allowed:
        names = sorted(getattr(v, "name", str(v)) for v in allowed)
        raise NotImplementedError(
            f"Value type {key!r} is not implemented for loss {type(loss_module).__name__}. "
            f"Supported value types: {names}."
        )
    gamma = getattr(loss_module, "gamma", None)
    if gamma is not None:
        hyperparams.setdefault("gamma", gamma)
    network = getattr(loss_module, "_value_estimator_network", None)
    if network is not None and "value_network" not in hyperparams:
        hyperparams["value_network"] = network()
    estimator = build_value_estimator(
        key, loss=loss_module, keys=dict(tensor_keys) if tensor_keys else None, **hyperparams
    )
    setter = getattr(loss_module, "_set_value_estimator", None)
    if setter is not None:
        setter(estimator)
    else:
        loss_module._value_estimator = estimator
    loss_module.value_type = key
    return estimator


def build_value_estimator(
    value_type: Any,
    *,
    loss: nn.Module | None = None,
    value_network: nn.Module | None = None,
    keys: dict[str, Any] | None = None,
    **hyperparams: Any,
) -> nn.Module:
    """Build the estimator registered for ``value_type``.

    Args:
        value_type: a :class:`ValueEstimators` member, its name, or a registered key.
        loss: the loss that will own the estimator (passed to ``cls.for_loss``).
        value_network: the critic the estimator calls (``None``: read values from the data).
        keys: ``set_keys`` arguments applied to the new estimator.
        **hyperparams: override the registered defaults.

    Examples:
        >>> import rl_objectives.value
        >>> est = build_value_estimator("td0", gamma=0.5)
        >>> type(est).__name__, est.gamma
        ('TD0Estimator', 0.5)
    """
    entry = _REGISTRY[check_value_type(value_type)]
    cls = entry.cls
    kwargs = {**entry.default_kwargs, **hyperparams}
    for_loss = getattr(cls, "for_loss", None)
    if for_loss is not None and loss is not None:
        estimator = for_loss(loss, value_network=value_network, **kwargs)
    else:
        estimator = cls(value_network=value_network, **kwargs)
    if keys and hasattr(estimator, "set_keys"):
        estimator.set_keys(**keys)
    return estimator
