"""CrossQ (Bhatt et al. 2024, arXiv:1902.05605): SAC without target networks, batch-norm critics."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._alpha import Temperature, sum_to_batch
from rl_objectives._nets import in_keys_of, make_qvalue_networks, stacked_outputs, unshare_from
from rl_objectives._offline import (
    assemble_output,
    policy_dist,
    require_policy_dist,
    resolve_scalar_mode,
    target_entropy_from,
)
from rl_objectives.common import TD_ESTIMATORS, LossModule, estimator_keys
from rl_objectives.utils import distance_loss
from rl_objectives.value.registry import ValueEstimators

__all__ = ["CrossQLoss"]


class CrossQLoss(LossModule):
    """CrossQ: SAC's losses with batch-normalised critics and no target networks.

    The critics see the current pairs ``(s, a)`` and the next pairs ``(s', a' ~ pi(s'))`` in
    **one** forward pass (train mode), so their batch-norm statistics mix both
    distributions, which is what lets CrossQ drop the target networks:

    * ``loss_qvalue = sum_i loss(Q_i(s, a), y)``, ``y = r + gamma * (1 - terminated) *
      (min_i Q_i(s', a') - alpha * log pi(a' | s'))`` (detached, same joint pass);
    * ``loss_actor = alpha * log pi(a~ | s) - min_i Q_i(s, a~)``, critics in eval mode (running
      statistics, no update) and detached;
    * ``loss_alpha = -log_alpha * (log pi(a~ | s) + target_entropy)``.

    The critics must accept a batch (batch norm over the leading dimension); use e.g.
    ``BatchNorm1d`` or rl-modules' ``BatchRenorm1d`` layers. ``td_error`` (max over critics of
    ``|Q_i - y|``) is written into the input.

    Args:
        actor_network: the policy; ``get_dist(td)`` with ``rsample`` and ``log_prob``.
        qvalue_network: one critic (copied ``num_qvalue_nets`` times, re-initialised) or a list.
        num_qvalue_nets: number of critics.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        alpha_init: initial temperature.
        min_alpha: lower clamp of alpha.
        max_alpha: upper clamp of alpha.
        action_spec: spec-like object; its ``shape`` gives ``target_entropy="auto"``.
        fixed_alpha: do not learn alpha.
        target_entropy: a float, or ``"auto"`` for ``-prod(action shape)`` (from ``action_spec``,
            the actor's ``spec``, else the first batch's actions).
        gamma: discount (else the estimator's default, 0.99).
        priority_key: removed in TorchRL (raises; use ``set_keys(priority=...)``).
        separate_losses: the critic loss does not train parameters shared with the actor.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        deactivate_vmap: TorchRL's switch between vmap and a loop; same values here.
        scalar_output_mode: with ``reduction="none"``: ``"exclude"`` or ``"non_tensor"`` for
            ``alpha`` and ``entropy``; ``None`` excludes them with a warning.
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
        ...         self.net = torch.nn.Sequential(torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 1))
        ...     def forward(self, obs, act):
        ...         return self.net(torch.cat([obs, act], -1))
        >>> q = TensorDictModule(Q(), ["observation", "action"], ["state_action_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.randn(8, 2),
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> out = CrossQLoss(actor, q, target_entropy=-2.0)(td)
        >>> sorted(k for k in out.keys() if k.startswith("loss"))
        ['loss_actor', 'loss_alpha', 'loss_qvalue']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`CrossQLoss`."""

        action: NestedKey = "action"
        state_action_value: NestedKey = "state_action_value"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        log_prob: NestedKey = "_log_prob"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy")
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = TD_ESTIMATORS

    def __init__(
        self,
        actor_network: nn.Module,
        qvalue_network: nn.Module | list[nn.Module],
        *,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        action_spec: Any = None,
        fixed_alpha: bool = False,
        target_entropy: str | float = "auto",
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
        require_policy_dist(actor_network, "CrossQLoss")
        if max_alpha == 0:
            raise ValueError("CrossQLoss: max_alpha must be either None or greater than 0.")
        self.convert_to_functional(actor_network, "actor_network")
        qnets = make_qvalue_networks(qvalue_network, num_qvalue_nets)
        if not separate_losses:
            qnets = unshare_from(qnets, actor_network)
        self.convert_to_functional(qnets, "qvalue_network")
        self.temperature = Temperature(alpha_init, min_alpha, max_alpha, fixed_alpha)
        self.num_qvalue_nets = num_qvalue_nets
        self.loss_function = loss_function
        self.fixed_alpha = fixed_alpha
        self.gamma = gamma
        self.separate_losses = separate_losses
        self.deactivate_vmap = deactivate_vmap
        spec = action_spec if action_spec is not None else getattr(actor_network, "spec", None)
        self._target_entropy = target_entropy_from(spec, target_entropy)
        self.scalar_output_mode = resolve_scalar_mode(
            "CrossQLoss", self.reduction, scalar_output_mode, "alpha, entropy"
        )

    @property
    def log_alpha(self) -> torch.Tensor:
        """The log-temperature (a parameter unless ``fixed_alpha``)."""
        return self.temperature.log_alpha

    @property
    def target_entropy(self) -> torch.Tensor | None:
        """The target entropy as a tensor (``None`` until inferred from the first batch)."""
        if self._target_entropy is None:
            return None
        return torch.tensor(self._target_entropy, device=self.log_alpha.device)

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, ("reward", "done", "terminated"))

    def _sample(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        dist = policy_dist(self.actor_network, td)
        action = dist.rsample()
        return action, sum_to_batch(dist.log_prob(action), td.ndim)

    def _qs(self, td: TensorDictBase, action: torch.Tensor, params: Any) -> torch.Tensor:
        key = self.tensor_keys.state_action_value
        qs = stacked_outputs(
            self.qvalue_network, td, key, params, {self.tensor_keys.action: action}
        )
        if qs.shape[1:] != (*td.shape, 1):
            raise ValueError(
                f"CrossQLoss: the qvalue_network wrote {key!r} with shape {tuple(qs.shape[1:])}, "
                f"expected {(*td.shape, 1)} (one value per sample and action)."
            )
        return qs.squeeze(-1)

    def _joint(self, td: TensorDictBase, nxt: TensorDictBase) -> TensorDictBase:
        """The critics' inputs of ``td`` then those of ``nxt``, concatenated along the batch."""
        keys = [k for k in in_keys_of(self.qvalue_network[0]) if k != self.tensor_keys.action]
        entries = {}
        for key in keys:
            here, there = td.get(key, None), nxt.get(key, None)
            if here is None or there is None:
                raise KeyError(
                    f"CrossQLoss: the critic reads {key!r}, which must be in the data and under "
                    f"'next' (present: {here is not None} and {there is not None})."
                )
            entries[key] = torch.cat([here, there], 0)
        return TensorDict(entries, batch_size=[2 * td.shape[0], *td.shape[1:]])

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The three losses; writes ``td_error`` and the actor's log-probabilities into the input."""
        keys = self.tensor_keys
        action = self._get(tensordict, "action")
        self._get(tensordict, "reward", under_next=True)
        if tensordict.ndim == 0:
            raise ValueError(
                "CrossQLoss needs a batch (batch norm): got a TensorDict with no batch dims."
            )
        alpha = self.temperature.alpha()
        if self._target_entropy is None:
            self._target_entropy = -float(math.prod(action.shape[tensordict.ndim :]))
        # critics: current and next pairs in one train-mode pass (joint batch statistics)
        nxt = tensordict.get("next")
        with torch.no_grad():
            next_action, next_log_prob = self._sample(nxt)
        q_params = self._own_params("qvalue_network")
        joint = self._qs(
            self._joint(tensordict, nxt), torch.cat([action, next_action], 0), q_params
        )
        pred, next_q = joint.split(tensordict.shape[0], dim=1)
        next_value = (next_q.amin(0) - alpha * next_log_prob).detach()
        target = self.value_estimator.value_estimate(
            tensordict, next_value=next_value.unsqueeze(-1)
        ).squeeze(-1)
        tensordict.set(keys.priority, (pred.detach() - target).abs().amax(0))
        loss_q = self._reduce(
            distance_loss(pred, target.expand_as(pred), self.loss_function).sum(0)
        )
        # actor: critics in eval mode (running statistics, left untouched), detached
        new_action, log_prob = self._sample(tensordict)
        modes = [m.training for m in self.qvalue_network.modules()]
        self.qvalue_network.eval()
        try:
            q_new = self._qs(
                tensordict, new_action, self._bound_params("qvalue_network", target=False)
            ).amin(0)
        finally:
            for m, mode in zip(self.qvalue_network.modules(), modes, strict=True):
                m.training = mode
        loss_actor = self._reduce(alpha * log_prob - q_new)
        tensordict.set(keys.log_prob, log_prob.detach())
        loss_alpha = self._reduce(self.temperature.loss(log_prob, self._target_entropy))
        return assemble_output(
            {"loss_actor": loss_actor, "loss_qvalue": loss_q, "loss_alpha": loss_alpha},
            {"alpha": alpha, "entropy": -log_prob.detach().mean()},
            reduction=self.reduction,
            scalar_mode=self.scalar_output_mode,
            batch_size=tensordict.shape,
        )
