"""Implicit Q-learning (Kostrikov, Nair and Levine 2021, arXiv:2110.06169), continuous and discrete."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._alpha import sum_to_batch
from rl_objectives._nets import (
    action_space_name,
    make_qvalue_networks,
    output_of,
    stacked_outputs,
)
from rl_objectives._offline import (
    assemble_output,
    check_value_shape,
    policy_dist,
    require_policy_dist,
    resolve_scalar_mode,
    without_shared,
)
from rl_objectives.common import TD_ESTIMATORS, LossModule, estimator_keys
from rl_objectives.utils import distance_loss
from rl_objectives.value.registry import ValueEstimators

__all__ = ["DiscreteIQLLoss", "IQLLoss", "expectile_loss"]


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """Asymmetric squared loss ``|expectile - 1(diff <= 0)| * diff**2`` (IQL's eq. 2 on ``u = Q - V``).

    Examples:
        >>> expectile_loss(torch.tensor([2.0, -2.0]), 0.7)
        tensor([2.8000, 1.2000])
    """
    weight = torch.where(diff > 0, expectile, 1.0 - expectile)
    return weight * diff.pow(2)


class IQLLoss(LossModule):
    """IQL for continuous actions: in-sample Q-learning with an expectile value and AWR policy.

    On dataset transitions ``(s, a, r, s')``, with ``Q_min = min_i Q_target_i(s, a)``:

    * ``loss_value = L_tau(Q_min - V(s))``, ``L_tau`` the :func:`expectile_loss`;
    * ``loss_qvalue = sum_i loss(Q_i(s, a), r + gamma * (1 - terminated) * V(s'))`` (``V(s')``
      from the value network's current parameters, no gradient);
    * ``loss_actor = -exp(temperature * (Q_min - V(s))).clamp(max=100) * log pi(a | s)``
      (advantage-weighted regression; critics and value detached).

    The Q-networks keep target parameters (update them with ``SoftUpdate``); the actor and
    the value network do not. ``td_error`` (max over critics of the squared TD error) and the
    detached ``log pi(a | s)`` (``tensor_keys.log_prob``) are written into the input.

    Args:
        actor_network: the policy; ``get_dist(td)`` must give a distribution with ``log_prob``.
        qvalue_network: one Q-network reading the observation and ``action`` and writing
            ``state_action_value`` (copied ``num_qvalue_nets`` times, re-initialised), or a list.
        value_network: a state-value network writing ``state_value``.
        num_qvalue_nets: number of critics.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"`` for the critics.
        temperature: inverse temperature ``beta`` of the advantage weights.
        expectile: ``tau`` in ``[0, 1)``; ``0.5`` is a plain mean, ``0.7`` to ``0.9`` in the paper.
        gamma: discount (else the estimator's default, 0.99).
        priority_key: removed in TorchRL (raises; use ``set_keys(priority=...)``).
        separate_losses: the value loss does not train parameters shared with the actor, and
            the critic loss none shared with the actor or the value network.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        deactivate_vmap: TorchRL's switch between vmap and a loop over critics; the values
            are the same either way.
        scalar_output_mode: with ``reduction="none"``: ``"exclude"`` or ``"non_tensor"`` for
            ``entropy`` (see TorchRL); ``None`` excludes it with a warning.
        debug: raise on non-finite inputs.

    Examples:
        >>> import torch
        >>> from torch import distributions as D
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (TensorDictModule, ProbabilisticTensorDictModule,
        ...                            ProbabilisticTensorDictSequential, NormalParamExtractor)
        >>> def normal(loc, scale):
        ...     return D.Independent(D.Normal(loc, scale), 1)
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 4), NormalParamExtractor()),
        ...                      ["observation"], ["loc", "scale"]),
        ...     ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=normal))
        >>> class Q(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.lin = torch.nn.Linear(5, 1)
        ...     def forward(self, obs, act):
        ...         return self.lin(torch.cat([obs, act], -1))
        >>> q = TensorDictModule(Q(), ["observation", "action"], ["state_action_value"])
        >>> v = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.randn(8, 2),
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> out = IQLLoss(actor, q, v, expectile=0.7, temperature=3.0)(td)
        >>> sorted(out.keys())
        ['entropy', 'loss_actor', 'loss_qvalue', 'loss_value']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`IQLLoss`."""

        value: NestedKey = "state_value"
        action: NestedKey = "action"
        log_prob: NestedKey = "_log_prob"
        priority: NestedKey = "td_error"
        state_action_value: NestedKey = "state_action_value"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss_actor", "loss_qvalue", "loss_value", "entropy")
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = TD_ESTIMATORS

    def __init__(
        self,
        actor_network: nn.Module,
        qvalue_network: nn.Module | list[nn.Module],
        value_network: nn.Module,
        *,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        temperature: float = 1.0,
        expectile: float = 0.5,
        gamma: float | None = None,
        priority_key: NestedKey | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        deactivate_vmap: bool = False,
        scalar_output_mode: str | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug)
        self._reject_ctor_keys(priority_key=priority_key)
        owner = type(self).__name__
        require_policy_dist(actor_network, owner)
        if value_network is None:
            raise TypeError(f"{owner} needs a value_network writing 'state_value'; got None.")
        if not 0.0 <= expectile <= 1.0:
            raise ValueError(f"{owner}: expectile must be in [0, 1], got {expectile}.")
        self.convert_to_functional(actor_network, "actor_network")
        self.convert_to_functional(value_network, "value_network")
        qnets = make_qvalue_networks(qvalue_network, num_qvalue_nets)
        self.convert_to_functional(qnets, "qvalue_network", create_target_params=True)
        self.num_qvalue_nets = num_qvalue_nets
        self.loss_function = loss_function
        self.temperature = temperature
        self.expectile = expectile
        self.gamma = gamma
        self.separate_losses = separate_losses
        self.deactivate_vmap = deactivate_vmap
        self.delay_qvalue = True
        self.scalar_output_mode = resolve_scalar_mode(
            owner, self.reduction, scalar_output_mode, "entropy"
        )

    loss_value_diff = staticmethod(expectile_loss)

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, ("value", "reward", "done", "terminated"))

    # -- networks -------------------------------------------------------------------

    def _state_value(self, td: TensorDictBase, params: Any) -> torch.Tensor:
        key = self.tensor_keys.value
        value = output_of(self.value_network, td, key, params)
        return check_value_shape(value, td.shape, key, type(self).__name__, "value_network")

    def _chosen_qs(self, td: TensorDictBase, action: torch.Tensor, params: Any) -> torch.Tensor:
        """``[num_qvalue_nets, *B]``: each critic's value of the dataset action."""
        key = self.tensor_keys.state_action_value
        qs = stacked_outputs(
            self.qvalue_network, td, key, params, {self.tensor_keys.action: action}
        )
        expected = (self.num_qvalue_nets, *td.shape, 1)
        if tuple(qs.shape) != expected:
            raise ValueError(
                f"{type(self).__name__}: the qvalue_network wrote {key!r} with shape "
                f"{tuple(qs.shape[1:])}, expected {expected[1:]} (one value per sample and action)."
            )
        return qs.squeeze(-1)

    def _log_prob(self, td: TensorDictBase, action: torch.Tensor) -> torch.Tensor:
        dist = policy_dist(self.actor_network, td)
        return sum_to_batch(dist.log_prob(action), td.ndim)

    def _check_action(self, action: torch.Tensor, td: TensorDictBase) -> None:
        if action.shape[: td.ndim] != td.shape or action.ndim < td.ndim + 1:
            raise ValueError(
                f"{type(self).__name__}: the action {self.tensor_keys.action!r} has shape "
                f"{tuple(action.shape)}, expected [*batch, action_dim] with batch {tuple(td.shape)}."
            )

    # -- loss -----------------------------------------------------------------------

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The three IQL losses; writes ``td_error`` and the dataset actions' log-probabilities.

        Returns:
            ``loss_actor``, ``loss_qvalue``, ``loss_value`` and the detached ``entropy``
            (``-mean log pi(a | s)`` over the dataset actions).
        """
        keys = self.tensor_keys
        action = self._get(tensordict, "action")
        self._check_action(action, tensordict)
        self._get(tensordict, "reward", under_next=True)
        target_q = self._bound_params("qvalue_network", target=True)
        with torch.no_grad():
            min_q = self._chosen_qs(tensordict, action, target_q).amin(0)
        # value: expectile regression onto the target critics' minimum
        value_params = None
        if self.separate_losses:
            value_params = without_shared(
                self.network_params("value_network"), [self.actor_network]
            )
        value = self._state_value(tensordict, value_params)
        loss_value = self._reduce(expectile_loss(min_q - value, self.expectile))
        # actor: advantage-weighted log-likelihood of the dataset actions
        log_prob = self._log_prob(tensordict, action)
        if log_prob.shape != min_q.shape:
            raise ValueError(
                f"{type(self).__name__}: the actor's log_prob has shape {tuple(log_prob.shape)}, "
                f"expected the batch shape {tuple(min_q.shape)}."
            )
        weight = torch.exp((min_q - value.detach()) * self.temperature).clamp_max(100.0)
        loss_actor = self._reduce(-(weight * log_prob))
        tensordict.set(keys.log_prob, log_prob.detach())
        # critics: bootstrapped on V(s'), no target value network in IQL
        with torch.no_grad():
            nxt = tensordict.get("next")
            next_value = self._state_value(
                nxt, self._bound_params("value_network", target=False)
            ).unsqueeze(-1)
        target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        q_params = None
        if self.separate_losses:
            q_params = without_shared(
                self.network_params("qvalue_network"), [self.actor_network, self.value_network]
            )
        pred = self._chosen_qs(tensordict, action, q_params)
        td_error = (pred.detach() - target).pow(2)
        tensordict.set(keys.priority, td_error.amax(0))
        loss_q = distance_loss(pred, target.expand_as(pred), self.loss_function).sum(0)
        loss_q = self._reduce(loss_q)
        return assemble_output(
            {"loss_actor": loss_actor, "loss_qvalue": loss_q, "loss_value": loss_value},
            {"entropy": -log_prob.detach().mean()},
            reduction=self.reduction,
            scalar_mode=self.scalar_output_mode,
            batch_size=tensordict.shape,
        )


class DiscreteIQLLoss(IQLLoss):
    """IQL for discrete actions: critics write one value per action, the actor is categorical.

    The losses are :class:`IQLLoss`'s with ``Q_i(s, a)`` read from each critic's
    ``state_action_value`` (``[*B, n_actions]``) at the dataset action.

    Args:
        actor_network: a categorical policy (``get_dist(td)``; ``Categorical`` for integer
            actions, ``OneHotCategorical`` for one-hot ones).
        qvalue_network: one network reading the observation and writing ``state_action_value``
            of shape ``[*B, n_actions]`` (copied ``num_qvalue_nets`` times), or a list.
        value_network: a state-value network writing ``state_value``.
        action_space: ``"categorical"``, ``"one_hot"`` or a spec-like object; ``None`` reads the
            Q-network's action space and falls back to one-hot with a warning, as TorchRL.
        num_qvalue_nets: number of critics.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        temperature: inverse temperature of the advantage weights.
        expectile: ``tau`` in ``[0, 1)``.
        gamma: discount (else the estimator's default, 0.99).
        priority_key: removed in TorchRL (raises).
        separate_losses: see :class:`IQLLoss`.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        scalar_output_mode: see :class:`IQLLoss`.
        debug: raise on non-finite inputs.

    Examples:
        >>> import torch
        >>> from torch import distributions as D
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (TensorDictModule, ProbabilisticTensorDictModule,
        ...                            ProbabilisticTensorDictSequential)
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
        ...     ProbabilisticTensorDictModule(["logits"], ["action"], distribution_class=D.Categorical))
        >>> q = TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["state_action_value"])
        >>> v = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.randint(4, (8,)),
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> loss = DiscreteIQLLoss(actor, q, v, action_space="categorical", expectile=0.7)
        >>> loss(td)["loss_qvalue"].shape
        torch.Size([])
    """

    def __init__(
        self,
        actor_network: nn.Module,
        qvalue_network: nn.Module | list[nn.Module],
        value_network: nn.Module,
        *,
        action_space: Any = None,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        temperature: float = 1.0,
        expectile: float = 0.5,
        gamma: float | None = None,
        priority_key: NestedKey | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        deactivate_vmap: bool = False,
        scalar_output_mode: str | None = None,
        debug: bool = False,
    ) -> None:
        if expectile >= 1.0:
            raise ValueError(f"DiscreteIQLLoss: expectile must be lower than 1.0, got {expectile}.")
        super().__init__(
            actor_network,
            qvalue_network,
            value_network,
            num_qvalue_nets=num_qvalue_nets,
            loss_function=loss_function,
            temperature=temperature,
            expectile=expectile,
            gamma=gamma,
            priority_key=priority_key,
            separate_losses=separate_losses,
            reduction=reduction,
            deactivate_vmap=deactivate_vmap,
            scalar_output_mode=scalar_output_mode,
            debug=debug,
        )
        try:
            self.action_space = action_space_name(action_space, qvalue_network)
        except ValueError:
            warnings.warn(
                "DiscreteIQLLoss: action_space was not given and the Q-network does not tell it; "
                "using 'one_hot'. Pass action_space='categorical' or 'one_hot'.",
                UserWarning,
                stacklevel=2,
            )
            self.action_space = "one_hot"

    def _check_action(self, action: torch.Tensor, td: TensorDictBase) -> None:
        ok = action.shape[: td.ndim] == td.shape
        if self.action_space == "one_hot":
            ok = ok and action.ndim == td.ndim + 1
        else:
            ok = ok and (
                action.ndim == td.ndim or (action.ndim == td.ndim + 1 and action.shape[-1] == 1)
            )
        if not ok:
            expected = (
                "[*batch, n_actions] (one-hot)"
                if self.action_space == "one_hot"
                else ("[*batch] or [*batch, 1] (integer indices)")
            )
            raise ValueError(
                f"DiscreteIQLLoss: the action {self.tensor_keys.action!r} has shape "
                f"{tuple(action.shape)}, expected {expected} with batch {tuple(td.shape)}."
            )

    def _log_prob(self, td: TensorDictBase, action: torch.Tensor) -> torch.Tensor:
        dist = policy_dist(self.actor_network, td)
        if self.action_space == "categorical" and action.ndim > td.ndim:
            action = action.squeeze(-1)
        return dist.log_prob(action)

    def _chosen_qs(self, td: TensorDictBase, action: torch.Tensor, params: Any) -> torch.Tensor:
        key = self.tensor_keys.state_action_value
        qs = stacked_outputs(self.qvalue_network, td, key, params)
        if qs.shape[1:-1] != td.shape:
            raise ValueError(
                f"DiscreteIQLLoss: the qvalue_network wrote {key!r} with shape {tuple(qs.shape[1:])}, "
                f"expected [*batch, n_actions] with batch {tuple(td.shape)}."
            )
        if self.action_space == "categorical":
            action = action.long()
            if action.ndim == td.ndim:
                action = action.unsqueeze(-1)
            return qs.gather(-1, action.expand(*qs.shape[:-1], 1)).squeeze(-1)
        return (qs * action.to(qs.dtype)).sum(-1)
