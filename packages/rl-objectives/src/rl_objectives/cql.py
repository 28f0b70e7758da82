"""Conservative Q-learning (Kumar, Zhou, Tucker and Levine 2020, arXiv:2006.04779)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._alpha import Temperature, sum_to_batch
from rl_objectives._nets import (
    action_space_name,
    chosen_value,
    in_keys_of,
    make_qvalue_networks,
    output_of,
    stacked_outputs,
)
from rl_objectives._offline import (
    assemble_output,
    policy_dist,
    require_policy_dist,
    resolve_scalar_mode,
    target_entropy_from,
)
from rl_objectives.common import (
    TD_ESTIMATOR_KEYS,
    TD_ESTIMATORS,
    LossModule,
    estimator_keys,
    loss_output,
)
from rl_objectives.utils import distance_loss
from rl_objectives.value.registry import ValueEstimators

__all__ = ["CQLLoss", "DiscreteCQLLoss"]


def _repeat(td: TensorDictBase, keys: list[NestedKey], n: int) -> TensorDictBase:
    """``td``'s ``keys`` (flat batch ``[B]``), each sample repeated ``n`` times: batch ``[B * n]``."""
    entries = {key: td.get(key).repeat_interleave(n, dim=0) for key in keys if key in td}
    return TensorDict(entries, batch_size=[td.shape[0] * n])


class CQLLoss(LossModule):
    """CQL(H) for continuous actions on top of SAC.

    On dataset transitions ``(s, a, r, s')``, with ``pi`` a tanh-squashed policy:

    * ``loss_qvalue = sum_i loss(Q_i(s, a), y)``, ``y = r + gamma * (1 - terminated) * (min_i
      Q_target_i(s', a') [- alpha * log pi(a' | s')])`` with ``a' ~ pi(s')`` (the entropy term
      only when ``deterministic_backup=False``; with ``max_q_backup`` the max over
      ``num_random`` sampled ``a'``);
    * ``loss_cql = sum_i min_q_weight * (T * logsumexp_j(Q_i(s, a_j) / T) - Q_i(s, a))`` over
      ``3 * num_random`` actions ``a_j`` per state: uniform in ``[-1, 1]^d``, from ``pi(s)``
      and from ``pi(s')``, each corrected by its log density (importance sampling, the
      paper's code);
    * ``loss_actor = alpha * log pi(a~ | s) - min_i Q_i(s, a~)`` (critics detached);
    * ``loss_actor_bc = alpha * log pi(a~ | s) - log pi(a | s)`` (behaviour-cloning warm start);
    * ``loss_alpha = -log_alpha * (log pi(a~ | s) + target_entropy)``;
    * with ``with_lagrange``: ``loss_alpha_prime = -alpha' * (mean cql_i - lagrange_thresh)``
      averaged over critics (only moves ``alpha'``), and ``loss_cql`` is scaled by the
      detached ``alpha'`` as in the paper's code.

    Differences from TorchRL 0.14's class, which follow the paper's code instead: the
    log-sum-exp runs over the ``3 * num_random`` sampled actions of each state (TorchRL's
    over three values per sample), the actions drawn from ``pi(s')`` are scored at ``s``,
    and ``alpha'`` scales ``loss_cql``.

    Writes into the input: ``td_error``, ``pred_q1`` / ``pred_q2`` (``[*B, 1]``) and
    ``cql_q1_loss`` / ``cql_q2_loss`` (``[*B]``).

    Args:
        actor_network: the policy; ``get_dist(td)`` with ``rsample`` and ``log_prob``.
        qvalue_network: one Q network (copied twice, re-initialised) or a list of two.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        alpha_init: initial entropy temperature.
        min_alpha: lower clamp of alpha.
        max_alpha: upper clamp of alpha.
        action_spec: spec-like object; its ``shape`` gives ``target_entropy="auto"``.
        fixed_alpha: do not learn alpha.
        target_entropy: a float, or ``"auto"`` for ``-prod(action shape)`` (from ``action_spec``,
            the actor's ``spec``, else the first batch's actions).
        delay_actor: keep target actor parameters (for the next action).
        delay_qvalue: keep target critic parameters.
        gamma: discount (else the estimator's default, 0.99).
        temperature: ``T`` of the log-sum-exp.
        min_q_weight: weight of the conservative term.
        max_q_backup: bootstrap on the max over ``num_random`` next actions.
        deterministic_backup: leave the entropy term out of the target.
        num_random: actions sampled per state and per source for the log-sum-exp.
        with_lagrange: learn ``alpha'`` to keep the conservative gap at ``lagrange_thresh``.
        lagrange_thresh: the target gap.
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
        >>> class TanhNormal(D.TransformedDistribution):
        ...     def __init__(self, loc, scale):
        ...         super().__init__(D.Independent(D.Normal(loc, scale), 1),
        ...                          [D.TanhTransform(cache_size=1)])
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 4), NormalParamExtractor()),
        ...                      ["observation"], ["loc", "scale"]),
        ...     ProbabilisticTensorDictModule(["loc", "scale"], ["action"],
        ...                                   distribution_class=TanhNormal))
        >>> class Q(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.lin = torch.nn.Linear(5, 1)
        ...     def forward(self, obs, act):
        ...         return self.lin(torch.cat([obs, act], -1))
        >>> q = TensorDictModule(Q(), ["observation", "action"], ["state_action_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.rand(8, 2) * 1.8 - 0.9,
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> out = CQLLoss(actor, q, target_entropy=-2.0, num_random=4)(td)
        >>> sorted(k for k in out.keys() if k.startswith("loss"))
        ['loss_actor', 'loss_actor_bc', 'loss_alpha', 'loss_cql', 'loss_qvalue']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`CQLLoss`."""

        action: NestedKey = "action"
        value: NestedKey = "state_value"
        state_action_value: NestedKey = "state_action_value"
        log_prob: NestedKey = "_log_prob"
        pred_q1: NestedKey = "pred_q1"
        pred_q2: NestedKey = "pred_q2"
        priority: NestedKey = "td_error"
        cql_q1_loss: NestedKey = "cql_q1_loss"
        cql_q2_loss: NestedKey = "cql_q2_loss"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = TD_ESTIMATORS

    def __init__(
        self,
        actor_network: nn.Module,
        qvalue_network: nn.Module | list[nn.Module],
        *,
        loss_function: str = "smooth_l1",
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        action_spec: Any = None,
        fixed_alpha: bool = False,
        target_entropy: str | float = "auto",
        delay_actor: bool = False,
        delay_qvalue: bool = True,
        gamma: float | None = None,
        temperature: float = 1.0,
        min_q_weight: float = 1.0,
        max_q_backup: bool = False,
        deterministic_backup: bool = True,
        num_random: int = 10,
        with_lagrange: bool = False,
        lagrange_thresh: float = 0.0,
        reduction: str | None = None,
        deactivate_vmap: bool = False,
        scalar_output_mode: str | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug)
        require_policy_dist(actor_network, "CQLLoss")
        if max_alpha == 0:
            raise ValueError("CQLLoss: max_alpha must be either None or greater than 0.")
        if num_random < 1:
            raise ValueError(f"CQLLoss: num_random must be >= 1, got {num_random}.")
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        qnets = make_qvalue_networks(qvalue_network, 2)
        self.convert_to_functional(qnets, "qvalue_network", create_target_params=delay_qvalue)
        self.num_qvalue_nets = 2
        self.temperature_module = Temperature(alpha_init, min_alpha, max_alpha, fixed_alpha)
        self.loss_function = loss_function
        self.fixed_alpha = fixed_alpha
        self.delay_actor = delay_actor
        self.delay_qvalue = delay_qvalue
        self.gamma = gamma
        self.temperature = temperature
        self.min_q_weight = min_q_weight
        self.max_q_backup = max_q_backup
        self.deterministic_backup = deterministic_backup
        self.num_random = num_random
        self.with_lagrange = with_lagrange
        self.deactivate_vmap = deactivate_vmap
        if with_lagrange:
            self.target_action_gap = lagrange_thresh
            self.log_alpha_prime = nn.Parameter(torch.zeros(()))
        spec = action_spec if action_spec is not None else getattr(actor_network, "spec", None)
        self._target_entropy = target_entropy_from(spec, target_entropy)
        self.scalar_output_mode = resolve_scalar_mode(
            "CQLLoss", self.reduction, scalar_output_mode, "alpha, entropy"
        )

    @property
    def log_alpha(self) -> torch.Tensor:
        """The log-temperature (a parameter unless ``fixed_alpha``)."""
        return self.temperature_module.log_alpha

    @property
    def target_entropy(self) -> torch.Tensor | None:
        """The target entropy as a tensor, as TorchRL's buffer (``None`` until inferred from the
        first batch when ``"auto"`` had no spec)."""
        if self._target_entropy is None:
            return None
        return torch.tensor(self._target_entropy, device=self.log_alpha.device)

    def _default_out_keys(self) -> list[str]:
        keys = ["loss_actor", "loss_actor_bc", "loss_qvalue", "loss_cql", "loss_alpha",
                "alpha", "entropy"]  # fmt: skip
        return [*keys, "loss_alpha_prime"] if self.with_lagrange else keys

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, TD_ESTIMATOR_KEYS)

    # -- networks -------------------------------------------------------------------

    def _qs(self, td: TensorDictBase, action: torch.Tensor, params: Any) -> torch.Tensor:
        """``[2, *B]``: both critics' values of ``action`` at ``td``'s observations."""
        key = self.tensor_keys.state_action_value
        qs = stacked_outputs(
            self.qvalue_network, td, key, params, {self.tensor_keys.action: action}
        )
        if qs.shape[1:] != (*td.shape, 1):
            raise ValueError(
                f"CQLLoss: the qvalue_network wrote {key!r} with shape {tuple(qs.shape[1:])}, "
                f"expected {(*td.shape, 1)} (one value per sample and action)."
            )
        return qs.squeeze(-1)

    def _sample(self, td: TensorDictBase, params: Any) -> tuple[torch.Tensor, torch.Tensor]:
        dist = policy_dist(self.actor_network, td, params)
        action = dist.rsample()
        return action, sum_to_batch(dist.log_prob(action), td.ndim)

    def _actor_params(self, *, target: bool) -> Any:
        if target and self.delay_actor:
            return self._bound_params("actor_network", target=True)
        return self._bound_params("actor_network", target=False)

    # -- losses ---------------------------------------------------------------------

    def _target(self, td: TensorDictBase, alpha: torch.Tensor) -> torch.Tensor:
        """``y`` of shape ``[*B]`` (no gradient)."""
        target_q = self._bound_params("qvalue_network", target=True)
        actor = self._actor_params(target=True)
        with torch.no_grad():
            nxt = td.get("next")
            if self.max_q_backup:
                flat = nxt.reshape(-1)
                keys = in_keys_of(self.actor_network) + in_keys_of(self.qvalue_network[0])
                rep = _repeat(flat, list(dict.fromkeys(keys)), self.num_random)
                act, _ = self._sample(rep, actor)
                q = self._qs(rep, act, target_q).view(2, -1, self.num_random).amax(-1)
                next_value = q.amin(0).reshape(td.shape)
            else:
                act, log_prob = self._sample(nxt, actor)
                next_value = self._qs(nxt, act, target_q).amin(0)
                if not self.deterministic_backup:
                    next_value = next_value - alpha * log_prob
        return self.value_estimator.value_estimate(td, next_value=next_value.unsqueeze(-1)).squeeze(
            -1
        )

    def _cql_terms(self, td: TensorDictBase, pred: torch.Tensor) -> torch.Tensor:
        """``[2, *B]``: ``min_q_weight * (T * logsumexp(Q(s, a_j) / T) - Q(s, a))`` per critic."""
        n = self.num_random
        action = self._get(td, "action")
        flat = td.reshape(-1)
        batch = flat.shape[0]
        dim = action.shape[-1]
        actor_keys = in_keys_of(self.actor_network)
        q_keys = [k for k in in_keys_of(self.qvalue_network[0]) if k != self.tensor_keys.action]
        with torch.no_grad():
            # policy actions at s and s' (detached, as the paper's code samples them)
            here = _repeat(flat, actor_keys, n)
            there = _repeat(flat.get("next"), actor_keys, n)
            acts, log_pis = self._sample(
                torch.cat([here, there], 0), self._actor_params(target=False)
            )
        random_actions = action.new_empty(batch * n, dim).uniform_(-1.0, 1.0)
        obs = _repeat(flat, q_keys, n)
        obs3 = torch.cat([obs, obs, obs], 0)
        all_actions = torch.cat([random_actions, acts], 0)
        q = self._qs(obs3, all_actions, None).view(2, 3, batch, n)
        random_density = dim * math.log(0.5)
        correction = torch.stack(
            [
                torch.full_like(log_pis[: batch * n], random_density),
                log_pis[: batch * n],
                log_pis[batch * n :],
            ]
        ).view(1, 3, batch, n)
        # [2, B, 3 * n]: every sampled action of a state, log-density corrected
        scores = (q - correction).permute(0, 2, 1, 3).reshape(2, batch, 3 * n)
        lse = torch.logsumexp(scores / self.temperature, dim=-1) * self.temperature
        return (lse.view(2, *td.shape) - pred) * self.min_q_weight

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The five (six with ``with_lagrange``) CQL losses, see the class docstring."""
        keys = self.tensor_keys
        action = self._get(tensordict, "action")
        self._get(tensordict, "reward", under_next=True)
        if action.ndim != tensordict.ndim + 1:
            raise ValueError(
                f"CQLLoss: the action {keys.action!r} has shape {tuple(action.shape)}, expected "
                f"[*batch, action_dim] with batch {tuple(tensordict.shape)}."
            )
        alpha = self.temperature_module.alpha()
        if self._target_entropy is None:
            self._target_entropy = -float(action.shape[-1])
        # critics
        target = self._target(tensordict, alpha)
        pred = self._qs(tensordict, action, None)
        tensordict.set(keys.pred_q1, pred[0].unsqueeze(-1))
        tensordict.set(keys.pred_q2, pred[1].unsqueeze(-1))
        tensordict.set(keys.priority, (pred.detach() - target).pow(2).amax(0))
        loss_q = self._reduce(
            distance_loss(pred, target.expand_as(pred), self.loss_function).sum(0)
        )
        cql = self._cql_terms(tensordict, pred)
        tensordict.set(keys.cql_q1_loss, cql[0].detach())
        tensordict.set(keys.cql_q2_loss, cql[1].detach())
        losses: dict[str, torch.Tensor] = {}
        if self.with_lagrange:
            alpha_prime = self.log_alpha_prime.exp().clamp(max=1e6)
            gaps = cql.detach().reshape(2, -1).mean(-1) - self.target_action_gap
            losses["loss_alpha_prime"] = -0.5 * (alpha_prime * gaps).sum()
            cql = cql * alpha_prime.detach()
        loss_cql = self._reduce(cql.sum(0))
        # actor and behaviour cloning, one distribution at s
        dist = policy_dist(self.actor_network, tensordict)
        new_action = dist.rsample()
        log_prob = sum_to_batch(dist.log_prob(new_action), tensordict.ndim)
        bc_log_prob = sum_to_batch(dist.log_prob(action), tensordict.ndim)
        q_new = self._qs(
            tensordict, new_action, self._bound_params("qvalue_network", target=False)
        ).amin(0)
        loss_actor = self._reduce(alpha * log_prob - q_new)
        loss_actor_bc = self._reduce(alpha * log_prob - bc_log_prob)
        loss_alpha = self._reduce(self.temperature_module.loss(log_prob, self._target_entropy))
        out = {
            "loss_actor": loss_actor,
            "loss_actor_bc": loss_actor_bc,
            "loss_qvalue": loss_q,
            "loss_cql": loss_cql,
            "loss_alpha": loss_alpha,
        }
        if self.with_lagrange:
            out["loss_alpha_prime"] = losses["loss_alpha_prime"]
            if self.reduction == "none":  # a scalar: repeat it over the batch
                out["loss_alpha_prime"] = out["loss_alpha_prime"].expand(tensordict.shape)
        return assemble_output(
            out,
            {"alpha": alpha, "entropy": -log_prob.detach().mean()},
            reduction=self.reduction,
            scalar_mode=self.scalar_output_mode,
            batch_size=tensordict.shape,
        )


class DiscreteCQLLoss(LossModule):
    """CQL for discrete actions on top of DQN (Kumar et al. 2020, the ``CQL(H)`` variant).

    * ``loss_qvalue = 0.5 * loss(Q(s, a), r + gamma * (1 - terminated) * max_a' Q_target(s', a'))``;
    * ``loss_cql = logsumexp_a' Q(s, a') - Q(s, a)``.

    Writes ``td_error`` (``[*B]``) and ``pred_val`` (``[*B, n_actions]``) into the input.

    Args:
        value_network: a TensorDict module writing ``action_value`` (``[*B, n_actions]``).
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        delay_value: keep target parameters.
        gamma: discount (else the estimator's default, 0.99).
        action_space: ``"categorical"``, ``"one_hot"`` or a spec-like object; read from the
            network when omitted, else one-hot with a warning (TorchRL's default).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        debug: raise on non-finite inputs.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> net = TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["action_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.randint(4, (8,)),
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> out = DiscreteCQLLoss(net, action_space="categorical")(td)
        >>> out["loss_qvalue"].shape, out["loss_cql"].shape
        (torch.Size([]), torch.Size([]))
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`DiscreteCQLLoss`."""

        value_target: NestedKey = "value_target"
        value: NestedKey = "chosen_action_value"
        action_value: NestedKey = "action_value"
        action: NestedKey = "action"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        pred_val: NestedKey = "pred_val"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss_qvalue", "loss_cql")
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = TD_ESTIMATORS

    def __init__(
        self,
        value_network: nn.Module,
        *,
        loss_function: str | None = "l2",
        delay_value: bool = True,
        gamma: float | None = None,
        action_space: Any = None,
        reduction: str | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug)
        self.convert_to_functional(value_network, "value_network", create_target_params=delay_value)
        self.delay_value = delay_value
        self.loss_function = loss_function
        self.gamma = gamma
        try:
            self.action_space = action_space_name(action_space, value_network)
        except ValueError:
            if action_space is not None:
                raise
            warnings.warn(
                "DiscreteCQLLoss: action_space was not given and the network does not tell it; "
                "using 'one_hot'. Pass action_space='categorical' or 'one_hot'.",
                UserWarning,
                stacklevel=2,
            )
            self.action_space = "one_hot"

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, (*TD_ESTIMATOR_KEYS, "value_target"))

    def _action_values(self, td: TensorDictBase, params: Any) -> torch.Tensor:
        key = self.tensor_keys.action_value
        q = output_of(self.value_network, td, key, params)
        if q.shape[:-1] != td.shape:
            raise ValueError(
                f"DiscreteCQLLoss: the value_network wrote {key!r} with shape {tuple(q.shape)}, "
                f"expected [*batch, n_actions] with batch {tuple(td.shape)}."
            )
        return q

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``loss_qvalue`` and ``loss_cql``, plus detached ``td_error``, ``pred_value``, ``target_value``."""
        keys = self.tensor_keys
        action = self._get(tensordict, "action")
        self._get(tensordict, "reward", under_next=True)
        q = self._action_values(tensordict, None)
        pred = chosen_value(q, action, self.action_space)
        with torch.no_grad():
            nxt = tensordict.get("next")
            q_next = self._action_values(nxt, self._bound_params("value_network", target=True))
            next_value = q_next.amax(-1, keepdim=True)
        target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        td_error = (pred.detach() - target).pow(2)
        tensordict.set(keys.priority, td_error)
        tensordict.set(keys.pred_val, q.detach())
        loss_q = self._reduce(0.5 * distance_loss(pred, target, self.loss_function))
        loss_cql = self._reduce(torch.logsumexp(q, dim=-1) - pred)
        return loss_output(
            {
                "loss_qvalue": loss_q,
                "loss_cql": loss_cql,
                "td_error": td_error.mean(),
                "pred_value": q.detach().mean(),
                "target_value": target.mean(),
            }
        )
