"""``LossModule``: networks, target parameters, keys, value estimator and reduction."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictParams
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._checks import LOSS_BOUNDS, check_hyperparameter
from rl_objectives._functional import expanded_params, stacked_params
from rl_objectives._keys import get_entry, replace_keys
from rl_objectives._kwargs import kwargs_to_tensordict
from rl_objectives._mask import AUTO_LOSS_MASK_KEYS, check_loss_mask_key, masked_reduce
from rl_objectives._nets import BoundParams
from rl_objectives.value.registry import ValueEstimators, build_value_estimator, check_value_type

__all__ = [
    "AUTO_LOSS_MASK_KEYS",
    "TARGET_NET_WARNING",
    "LossModule",
    "ValueEstimatorLike",
    "rl_warnings",
]

# What a loss's ``value_estimator=`` accepts: a built-in type, its name, a registered key,
# or a ready estimator module.
ValueEstimatorLike = ValueEstimators | str | nn.Module | None

_REDUCTIONS = ("mean", "sum", "none")

# The estimators a Q-learning loss (one-step bootstrapped targets) accepts.
TD_ESTIMATORS = (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda)
# Estimator keys a bootstrapping loss maps and those a policy-gradient loss maps.
TD_ESTIMATOR_KEYS = ("value", "reward", "done", "terminated")
PG_ESTIMATOR_KEYS = (
    "advantage", "value_target", "value", "reward", "done", "terminated",
    "sample_log_prob", "action",
)  # fmt: skip


def estimator_keys(
    tensor_keys: Any, names: tuple[str, ...], **renamed: str
) -> dict[str, NestedKey]:
    """``{name: tensor_keys.<name>}`` for the estimator, ``renamed`` mapping a name to the loss's.

    Examples:
        >>> from types import SimpleNamespace
        >>> keys = SimpleNamespace(q="q", reward="r")
        >>> estimator_keys(keys, ("value", "reward"), value="q")
        {'value': 'q', 'reward': 'r'}
    """
    return {name: getattr(tensor_keys, renamed.get(name, name)) for name in names}


_EMPTY = torch.Size([])

TARGET_NET_WARNING = (
    "No target network updater has been associated with this loss module: it holds target "
    "parameters, which will only move if you update them yourself. Build a SoftUpdate / "
    "HardUpdate on the loss (or set delay_*=False); the environment variable RL_WARNINGS=0 "
    "turns this warning off."
)


def rl_warnings() -> bool:
    """Whether TorchRL's optional warnings are on: the ``RL_WARNINGS`` environment variable
    (read at each call; on unless ``0``, ``false`` or ``no``).

    Examples:
        >>> import os
        >>> os.environ.pop("RL_WARNINGS", None) and None
        >>> rl_warnings()
        True
    """
    return os.environ.get("RL_WARNINGS", "1").strip().lower() not in ("0", "false", "no", "off")


def loss_output(entries: dict[str, Any]) -> TensorDictBase:
    """The TensorDict a loss returns: ``entries`` (string keys) with ``batch_size=[]``.

    Built with tensordict's unvalidated constructor: every entry is a tensor (or TensorDict)
    the loss just made, and any shape fits an empty batch size, so the public constructor's
    per-entry checks (a few microseconds per call on tensordict 0.14) would find nothing.

    Examples:
        >>> loss_output({"loss_x": torch.tensor(1.0)})["loss_x"]
        tensor(1.)
    """
    return TensorDict._new_unsafe(entries, batch_size=_EMPTY)


class LossModule(nn.Module):
    """Base of every loss.

    What it gives a loss:

    * networks registered with :meth:`convert_to_functional`; their target copies are
      stored as buffers named ``target_<name>_params`` (a :class:`~tensordict.nn.TensorDictParams`
      of detached clones, moved by ``.to()``, saved in ``state_dict``, absent from
      ``parameters()``) and run through ``to_module``, which compiles without graph breaks;
    * ``set_keys(...)`` over a frozen dataclass of default keys (``default_keys``);
    * a value estimator: ``value_estimator=`` at construction (a ready estimator module, a
      :class:`~rl_objectives.value.ValueEstimators` member or its name), or
      ``make_value_estimator(...)`` later, names resolved through
      :mod:`rl_objectives.value.registry`;
    * reduction (``"mean"``, ``"sum"``, ``"none"``) with optional importance weights;
    * a ``debug`` flag: non-finite inputs raise;
    * as in TorchRL, a call of a loss that holds target parameters but has no
      :class:`~rl_objectives.SoftUpdate` / :class:`~rl_objectives.HardUpdate` built on it
      warns (:data:`TARGET_NET_WARNING`; ``RL_WARNINGS=0`` silences it);
    * TorchRL's call with tensors as keywords: ``loss(observation=..., action=...,
      next_reward=...)`` returns the ``out_keys`` entries as a tuple (one tensor for one
      key); :meth:`select_out_keys` narrows the output of both kinds of call.

    Subclasses set ``default_keys``, ``default_value_estimator``, ``SUPPORTED_VALUE_ESTIMATORS``
    and implement ``forward`` (returning a TensorDict of scalar ``loss_*`` entries plus
    detached diagnostics).
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        pass

    default_keys: ClassVar[type] = _AcceptedKeys
    default_out_keys: ClassVar[tuple[str, ...]] = ()
    default_value_estimator: ClassVar[ValueEstimators | None] = None
    SUPPORTED_VALUE_ESTIMATORS: ClassVar[tuple[Any, ...]] = ()

    def __init__(
        self,
        *,
        reduction: str | None = None,
        debug: bool = False,
        value_estimator: ValueEstimatorLike = None,
    ) -> None:
        super().__init__()
        reduction = "mean" if reduction is None else reduction
        if reduction not in _REDUCTIONS:
            raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}.")
        self.reduction = reduction
        self.debug = debug
        self._tensor_keys = self.default_keys()
        self._network_names: list[str] = []
        self._functional_names: set[str] = set()  # networks whose parameters live in <name>_params
        self.__dict__["_loss_mask_key"] = "auto"
        self._detached: dict[str, TensorDictBase] = {}
        self._bound: dict[tuple[str, bool], BoundParams] = {}
        # held outside the module tree: the estimator's critic is one of our networks,
        # and registering it twice would duplicate it in state_dict
        self.__dict__["_value_estimator"] = None
        if value_estimator is not None and not isinstance(value_estimator, nn.Module):
            value_estimator = self._check_value_type(value_estimator)
        # built on first use, once the subclass has set gamma and its networks
        self.__dict__["_value_estimator_choice"] = value_estimator
        # TorchRL's attribute: the chosen estimator type (the instance's class for an instance)
        choice = self.default_value_estimator if value_estimator is None else value_estimator
        self.value_type = type(choice) if isinstance(choice, nn.Module) else choice
        self._value_estimator_hyperparams: dict[str, Any] = {}
        self._selected_out_keys: list[str] | None = None
        self.functional = True
        self.separate_losses = False
        self._own_params_cache: dict[str, TensorDictBase] = {}
        # set by convert_to_functional(create_target_params=True), cleared by an updater
        self._target_updater_missing = False

    # -- calls with tensors, output keys --------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._target_updater_missing and rl_warnings() and not torch.compiler.is_compiling():
            warnings.warn(TARGET_NET_WARNING, UserWarning, stacklevel=2)
        if args or not kwargs or "tensordict" in kwargs:
            out = super().__call__(*args, **kwargs)
            if self._selected_out_keys is not None:
                out = out.select(*self._selected_out_keys)
            return out
        out = super().__call__(kwargs_to_tensordict(kwargs, type(self).__name__))
        keys = self.out_keys or list(out.keys())
        present = set(out.keys())
        values = tuple(out.get(key) for key in keys if key in present)
        return values[0] if len(values) == 1 else values

    def _default_out_keys(self) -> list[str]:
        """The loss's output keys in TorchRL's order (override when they depend on options)."""
        return list(self.default_out_keys)

    @property
    def out_keys(self) -> list[str]:
        """The entries returned by a call with tensors (in this order), and kept by a call with a
        TensorDict after :meth:`select_out_keys`."""
        if self._selected_out_keys is not None:
            return list(self._selected_out_keys)
        return self._default_out_keys()

    @out_keys.setter
    def out_keys(self, keys: list[str]) -> None:
        self._selected_out_keys = list(keys)

    def select_out_keys(self, *keys: str) -> LossModule:
        """Keep only ``keys`` in the output (TensorDict calls) and the returned tuple (tensor calls).

        Raises:
            ValueError: a key that is not one of :attr:`out_keys`.
        """
        known = self._default_out_keys()
        unknown = [k for k in keys if known and k not in known]
        if unknown:
            raise ValueError(
                f"{type(self).__name__}.select_out_keys: {unknown} are not output keys; "
                f"choose among {known}."
            )
        self._selected_out_keys = list(keys)
        return self

    def reset_out_keys(self) -> LossModule:
        """Undo :meth:`select_out_keys`."""
        self._selected_out_keys = None
        return self

    def reset(self) -> None:
        """Reset the loss's own running state (TorchRL's hook; e.g. KL-PPO's ``beta``). Stateless
        losses have none: nothing to do."""

    # -- keys -----------------------------------------------------------------------

    @property
    def tensor_keys(self) -> Any:
        """The keys in use: a frozen dataclass instance of ``default_keys``."""
        return self._tensor_keys

    def set_keys(self, **kwargs: NestedKey) -> LossModule:
        """Change the keys this loss reads and writes; unknown names raise a ``ValueError``.

        Returns:
            ``self``, so calls chain.
        """
        self._tensor_keys = replace_keys(self._tensor_keys, type(self).__name__, kwargs)
        if self._value_estimator is not None:
            self._value_estimator.set_keys(**self._value_estimator_keys())
        return self

    def _get(self, td: TensorDictBase, name: str, *, under_next: bool = False) -> torch.Tensor:
        key = getattr(self._tensor_keys, name)
        if under_next:
            key = ("next", *key) if isinstance(key, tuple) else ("next", key)
        return get_entry(td, key, owner=type(self).__name__, key_name=name, debug=self.debug)

    def _weights(self, td: TensorDictBase) -> torch.Tensor | None:
        """Importance weights of a prioritized sample, when present and enabled."""
        if getattr(self, "use_prioritized_weights", False) in (False, "never"):
            return None
        key = getattr(self._tensor_keys, "priority_weight", None)
        if key is None:
            return None
        return td.get(key, None)

    # -- networks and targets -------------------------------------------------------

    def convert_to_functional(
        self,
        module: nn.Module | list[nn.Module],
        name: str,
        expand_dim: int | None = None,
        create_target_params: bool = False,
        compare_against: Iterable[torch.Tensor] | None = None,
    ) -> None:
        """Register ``module`` as ``self.<name>``, its parameters as ``self.<name>_params``,
        and a target copy ``target_<name>_params`` if asked (TorchRL's subclassing API).

        Without ``expand_dim`` / ``compare_against`` the network keeps its own parameters
        (``<name>_params`` is a TensorDict of those very ``nn.Parameter`` objects). With
        them, the parameters live in ``<name>_params`` (see :mod:`rl_objectives._functional`:
        copies redrawn within each parameter's range, shared ones detached) and the network is
        a template the loss runs with them (``params.to_module(self.<name>)``, ``torch.vmap``).

        Args:
            module: the network, or a list of ``expand_dim`` same-shaped networks stacked
                into one parameter set.
            name: attribute name, e.g. ``"actor_network"``.
            expand_dim: number of copies of the parameters (leading dim).
            create_target_params: store ``target_<name>_params`` (a detached clone).
            compare_against: parameters of another network: held detached here. Ignored
                for a list of networks (as in TorchRL).

        Raises:
            RuntimeError: a list of networks whose length is not ``expand_dim``.
        """
        if isinstance(module, (list, tuple)):
            if expand_dim != len(module):
                raise RuntimeError(
                    f"{type(self).__name__}.convert_to_functional({name!r}): The ``expand_dim`` "
                    f"value must match the length of the module list/tuple (got {expand_dim} "
                    f"for {len(module)} modules)."
                )
            params = stacked_params(list(module))
            module = module[0]
        elif expand_dim is not None or compare_against is not None:
            params = expanded_params(module, expand_dim, compare_against)
        else:
            params = None
        if params is None:
            setattr(self, name, module)
            # the live parameters themselves: edits of the network show here, and back
            self.__dict__[f"{name}_params"] = TensorDict.from_module(module)
        else:
            self.__dict__[name] = module  # a template: its own parameters are not the loss's
            setattr(self, f"{name}_params", params)
            self._functional_names.add(name)
        self._network_names.append(name)
        if create_target_params:
            source = params if params is not None else TensorDict.from_module(module)
            target = source.data.clone()
            setattr(self, f"target_{name}_params", TensorDictParams(target, no_convert=True))
            self._target_updater_missing = True

    def get_stateful_net(self, name: str, copy: bool = True) -> nn.Module:
        """Network ``name`` holding the loss's parameters, as TorchRL's method.

        ``copy=False`` gives the network itself. ``copy=True`` gives a copy of its structure
        holding the same parameter tensors: an in-place edit (``p.data.zero_()``) changes the
        loss's parameters, a replaced parameter (``mod.weight = nn.Parameter(...)``) does not
        until :meth:`from_stateful_net` copies it back.
        """
        module = getattr(self, name)
        if not copy and name not in self._functional_names:
            return module
        clone = deepcopy(module)
        self.network_params(name).to_module(clone)
        return clone

    def from_stateful_net(self, name: str, stateful_net: nn.Module) -> None:
        """Copy the parameter values of ``stateful_net`` into network ``name``'s parameters."""
        new = TensorDict.from_module(stateful_net).data
        with torch.no_grad():
            self.network_params(name).data.update_(new)
        self._own_params_cache.clear()

    def register_coeff_buffer(
        self, name: str, value: float | torch.Tensor | None, dtype: torch.dtype | None = None
    ) -> None:
        """Store a loss coefficient as a 0-d buffer (moved by ``.to()``, saved in ``state_dict``,
        and schedulable: assigning a number later fills it in place); ``None`` is a plain
        attribute.

        Raises:
            ValueError: ``value`` is a bool or a tensor of more than one element.
        """
        if value is None:
            setattr(self, name, None)
            return
        if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.numel() != 1):
            raise ValueError(
                f"{name} must be a float or a scalar tensor, got {value!r}; pass e.g. {name}=0.01."
            )
        if isinstance(value, torch.Tensor):
            tensor = value.detach().reshape(()).to(dtype or value.dtype)
        else:
            tensor = torch.tensor(float(value), dtype=dtype or torch.get_default_dtype())
        self.register_buffer(name, tensor)

    def network_params(self, name: str) -> TensorDictBase:
        """The live parameters (and buffers) of network ``name`` as a TensorDict.

        Its leaves are the modules' own ``nn.Parameter`` objects, so an optimizer can take
        ``params.values(True, True)``.
        """
        if name in self._functional_names:
            return self._modules[f"{name}_params"]
        return TensorDict.from_module(getattr(self, name))

    def detached_params(self, name: str) -> TensorDictBase:
        """Detached views of network ``name``'s parameters (cached; rebuilt after ``.to()``)."""
        cached = self._detached.get(name)
        if cached is None:
            cached = self.network_params(name).detach()
            self._detached[name] = cached
        return cached

    def target_params(self, name: str) -> TensorDictBase:
        """The target parameters of network ``name``; its detached parameters when it has none."""
        target = self._modules.get(f"target_{name}_params")
        return target if target is not None else self.detached_params(name)

    def _bound_params(self, name: str, *, target: bool) -> TensorDictBase | BoundParams:
        """:meth:`target_params` (``target``) or :meth:`detached_params` of ``name``, bound to the
        network for the eager swap (cached; rebuilt after ``.to()`` or a new target TensorDict)."""
        params = self.target_params(name) if target else self.detached_params(name)
        if torch.compiler.is_compiling():
            return params
        bound = self._bound.get((name, target))
        if bound is None or bound.params is not params:
            bound = BoundParams(params, getattr(self, name))
            self._bound[(name, target)] = bound
        return bound

    def target_pairs(self) -> list[tuple[TensorDictBase, TensorDictBase]]:
        """``(online, target)`` parameter pairs, for :class:`~rl_objectives.SoftUpdate` and co."""
        pairs = []
        for name in self._network_names:
            target = self._modules.get(f"target_{name}_params")
            if target is not None:
                pairs.append((self.network_params(name), target))
        return pairs

    def _apply(self, fn: Any, recurse: bool = True) -> LossModule:
        # .to() / .cuda() / .double() replace the parameter tensors: drop stale views
        self._detached.clear()
        self._bound.clear()
        self._own_params_cache.clear()
        return super()._apply(fn, recurse)

    def _own_params(self, name: str = "critic_network") -> TensorDictBase | None:
        """With ``separate_losses``, network ``name``'s parameters with those it shares with the
        actor detached (its loss then trains only its own parameters); else ``None`` (the live
        ones). Cached until ``.to()``."""
        if not self.separate_losses:
            return None
        cached = self._own_params_cache.get(name)
        if cached is None:
            shared = {id(p) for p in self.actor_network.parameters()}
            cached = self.network_params(name).apply(
                lambda p: p.detach() if id(p) in shared else p, filter_empty=False
            )
            self._own_params_cache[name] = cached
        return cached

    def _live_params(self, name: str) -> TensorDictBase | None:
        """TorchRL's ``<name>_params``: ``None`` without the network (or with
        ``functional=False``); with ``separate_losses`` a critic's view of :meth:`_own_params`."""
        if not self.functional or getattr(self, name, None) is None:
            return None
        if self.separate_losses and name != "actor_network":
            return self._own_params(name)
        return self.network_params(name)

    def _reject_ctor_keys(self, **keys: NestedKey | None) -> None:
        """TorchRL's removed key arguments (``advantage_key=``...): raise, pointing at ``set_keys``."""
        for name, value in keys.items():
            if value is not None:
                raise RuntimeError(
                    f"{type(self).__name__}: setting '{name}' via the constructor is deprecated, "
                    f"use .set_keys({name.removesuffix('_key')}=...) instead."
                )

    def _target_view(self, name: str) -> TensorDictBase | None:
        """TorchRL's ``target_<name>_params``: the stored targets, else the detached live
        parameters (a network without delayed targets bootstraps on itself); ``None`` without
        that network."""
        target = self._modules.get(f"target_{name}_params")
        if target is not None:
            return target
        if getattr(self, name, None) is None or not self.functional:
            return None
        return self.detached_params(name)

    @property
    def target_actor_network_params(self) -> TensorDictBase | None:
        """Target actor parameters (see :meth:`_target_view`)."""
        return self._target_view("actor_network")

    @property
    def target_critic_network_params(self) -> TensorDictBase | None:
        """Target critic parameters (see :meth:`_target_view`)."""
        return self._target_view("critic_network")

    @property
    def target_qvalue_network_params(self) -> TensorDictBase | None:
        """Target Q-network parameters (see :meth:`_target_view`)."""
        return self._target_view("qvalue_network")

    @property
    def target_value_network_params(self) -> TensorDictBase | None:
        """Target value-network parameters (see :meth:`_target_view`)."""
        return self._target_view("value_network")

    def reset_parameters_recursive(self) -> None:
        """Re-initialise every network (each submodule's ``reset_parameters``) and copy the new
        parameters into the targets, as TorchRL's method of the same name."""
        for name in self._network_names:
            for module in getattr(self, name).modules():
                reset = getattr(module, "reset_parameters", None)
                if callable(reset) and module is not self:
                    reset()
        with torch.no_grad():
            for online, target in self.target_pairs():
                target.update_(online.detach())
        self._own_params_cache.clear()

    @property
    def actor_network_params(self) -> TensorDictBase | None:
        """Live actor parameters (TorchRL's attribute), ``None`` without an actor."""
        return self._live_params("actor_network")

    @property
    def critic_network_params(self) -> TensorDictBase | None:
        """Live critic parameters, ``None`` without a critic."""
        return self._live_params("critic_network")

    @property
    def qvalue_network_params(self) -> TensorDictBase | None:
        """Live Q-network parameters, ``None`` without Q-networks."""
        return self._live_params("qvalue_network")

    @property
    def value_network_params(self) -> TensorDictBase | None:
        """Live value-network parameters, ``None`` without one."""
        return self._live_params("value_network")

    # -- value estimator ------------------------------------------------------------

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        """``set_keys`` arguments passed to the estimator (override to map the loss's keys)."""
        return {}

    def _value_estimator_network(self) -> nn.Module | None:
        """The critic the estimator calls; ``None`` when the loss feeds values itself."""
        return None

    @property
    def value_estimator(self) -> nn.Module:
        """The estimator in use, built on first access from the constructor's ``value_estimator``
        (``default_value_estimator`` when it was not given)."""
        if self._value_estimator is None:
            self.make_value_estimator(self._value_estimator_choice)
        return self._value_estimator

    @value_estimator.setter
    def value_estimator(self, estimator: nn.Module) -> None:
        if not isinstance(estimator, nn.Module):
            raise TypeError(
                f"{type(self).__name__}.value_estimator must be an estimator module, got "
                f"{type(estimator).__name__}; to choose one by name call "
                "make_value_estimator(name, **hyperparams)."
            )
        self._set_value_estimator(estimator)

    def __setattr__(self, name: str, value: Any) -> None:
        # nn.Module.__setattr__ would register an estimator module as a submodule instead of
        # calling the property's setter (and then duplicate its critic in state_dict)
        if name == "value_estimator":
            LossModule.value_estimator.fset(self, value)
            return
        if name in LOSS_BOUNDS:  # at construction or a later loss.gamma = ...; never per call
            check_hyperparameter(type(self).__name__, name, value, LOSS_BOUNDS[name])
        buffer = self.__dict__.get("_buffers", {}).get(name)
        if buffer is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
            # a scheduled coefficient (register_coeff_buffer): keep the buffer, its device and
            # dtype, and its place in state_dict; only the value changes
            buffer.fill_(value)
            return
        super().__setattr__(name, value)

    def _check_value_type(self, value_type: Any) -> Any:
        """``value_type`` as its registry key, refused when this loss does not support it."""
        value_type = check_value_type(value_type)
        supported = self.SUPPORTED_VALUE_ESTIMATORS
        if isinstance(value_type, ValueEstimators) and supported and value_type not in supported:
            raise NotImplementedError(
                f"{type(self).__name__} does not support {value_type}; "
                f"supported: {[v.name for v in supported]}."
            )
        return value_type

    def _set_value_estimator(self, estimator: nn.Module) -> None:
        # not nn.Module.__setattr__: that would register the estimator (and its critic) again
        self.__dict__["_value_estimator"] = estimator

    def make_value_estimator(self, value_type: Any = None, **hyperparams: Any) -> LossModule:
        """Choose the value estimator.

        Args:
            value_type: a :class:`~rl_objectives.value.ValueEstimators` member, its name
                (``"gae"``), any key registered with ``register_value_estimator``, a ready
                estimator module (used as is) or an estimator class (built with
                ``hyperparams`` and this loss's critic). ``None``: ``default_value_estimator``.
                The choice is kept as ``value_type``.
            **hyperparams: estimator arguments (``gamma``, ``lmbda``, ...); the loss's
                ``gamma`` is used when given to the loss and not here.

        Returns:
            ``self``.
        """
        if isinstance(value_type, nn.Module):
            self._set_value_estimator(value_type)
            self.value_type = type(value_type)
            return self
        gamma = getattr(self, "gamma", None)
        if gamma is not None:
            hyperparams.setdefault("gamma", gamma)
        if isinstance(value_type, type) and issubclass(value_type, nn.Module):
            # an estimator class: built with these hyperparameters and, unless given, the critic
            hyperparams.setdefault("value_network", self._value_estimator_network())
            self._set_value_estimator(value_type(**hyperparams))
            self.value_type = value_type
            return self
        if value_type is None:
            value_type = self.default_value_estimator
        value_type = self._check_value_type(value_type)
        self.value_type = value_type
        hyperparams.setdefault("debug", self.debug)
        self._set_value_estimator(
            build_value_estimator(
                value_type,
                loss=self,
                value_network=self._value_estimator_network(),
                keys=self._value_estimator_keys(),
                **hyperparams,
            )
        )
        return self

    # -- reduction ------------------------------------------------------------------

    @property
    def loss_mask_key(self) -> NestedKey | None:
        """Which validity mask :meth:`_reduce_loss` reads: ``"auto"`` (default: every entry of
        :data:`AUTO_LOSS_MASK_KEYS` present, ANDed), one nested key, or ``None`` (none)."""
        return self.__dict__["_loss_mask_key"]

    @loss_mask_key.setter
    def loss_mask_key(self, value: NestedKey | None) -> None:
        self.__dict__["_loss_mask_key"] = check_loss_mask_key(value, type(self).__name__)

    def _reduce_loss(
        self,
        loss: torch.Tensor,
        tensordict: TensorDictBase | None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Reduce a per-position loss over the valid positions (TorchRL's subclass hook).

        Args:
            loss: the per-position loss.
            tensordict: the loss's input, where the ``loss_mask_key`` masks are read.
            mask: a mask of the caller's; with ``reduction="none"`` the result keeps only the
                valid positions.

        Returns:
            The loss reduced with ``self.reduction`` (see :func:`rl_objectives._mask.masked_reduce`).
        """
        return masked_reduce(loss, self.reduction, tensordict, self.loss_mask_key, mask)

    def _reduce(self, loss: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """Reduce a per-sample loss; weighted mean is ``sum(w * l) / sum(w)``."""
        if weights is not None:
            weights = weights.reshape(weights.shape + (1,) * (loss.ndim - weights.ndim))
            if self.reduction == "none":
                return loss * weights
            if self.reduction == "sum":
                return (loss * weights).sum()
            return (loss * weights).sum() / weights.expand_as(loss).sum()
        if self.reduction == "none":
            return loss
        return loss.sum() if self.reduction == "sum" else loss.mean()
