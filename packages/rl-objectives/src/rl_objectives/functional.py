"""Pure loss functions: the arithmetic of every loss in this package, on plain tensors.

Each function takes tensors and numbers and returns tensors; none reads a TensorDict, calls a
network or keeps state. The loss classes (:class:`~rl_objectives.ClipPPOLoss`,
:class:`~rl_objectives.SACLoss`, ...) fetch the inputs by key, run the networks and call these,
so a new loss can reuse the same pieces, and each piece is tested on its own against a plain
formula. Argument names follow rlax's habit of saying when a tensor is taken: ``_t`` for the
current step, ``_tp1`` for the next one (``s'``); ``log_ratio`` is
``log pi(a|s) - log pi_old(a|s)``. Per-sample functions return per-sample tensors: the losses
reduce them (mean, sum or none, with importance weights).

Return and advantage estimators over whole trajectories (GAE, TD(lambda), V-trace) live in
:mod:`rl_objectives.value.functional`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

__all__ = [
    "ClippedSurrogate",
    "adaptive_kl_factor",
    "categorical_projection",
    "clipped_double_q",
    "clipped_surrogate_loss",
    "clipped_value_loss",
    "discrete_soft_policy_loss",
    "distance_loss",
    "double_q_value",
    "effective_sample_size",
    "entropy_loss",
    "expected_soft_value",
    "explained_variance",
    "greedy_q_value",
    "huber_loss",
    "kl_penalty_loss",
    "n_step_target",
    "policy_gradient_loss",
    "smoothed_target_action",
    "soft_policy_loss",
    "soft_state_value",
    "standardize",
    "surrogate_loss",
    "td_target",
    "temperature_loss",
]

Scalar = float | torch.Tensor


def _same_shape(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor, who: str) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"{who}: {name_a} has shape {tuple(a.shape)} but {name_b} has shape "
            f"{tuple(b.shape)}; they must match (reshape or unsqueeze one of them)."
        )


# -- distances -------------------------------------------------------------------------


def distance_loss(
    v1: torch.Tensor, v2: torch.Tensor, loss_function: str, *, reduction: str = "none"
) -> torch.Tensor:
    """Element-wise ``"l2"`` (squared error), ``"l1"`` or ``"smooth_l1"`` distance.

    Args:
        v1: first input.
        v2: second input, same shape.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"`` (Huber with ``delta=1``).
        reduction: ``"none"`` (element-wise), ``"mean"`` or ``"sum"``, fused into the loss
            kernel (the same value as reducing the element-wise result).

    Raises:
        ValueError: different shapes, or an unknown ``loss_function``.

    Examples:
        >>> distance_loss(torch.zeros(2), torch.tensor([1.0, 3.0]), "l2")
        tensor([1., 9.])
        >>> distance_loss(torch.zeros(2), torch.tensor([1.0, 3.0]), "l2", reduction="mean")
        tensor(5.)
    """
    if v1.shape != v2.shape:
        raise ValueError(
            f"distance_loss got shapes {tuple(v1.shape)} and {tuple(v2.shape)}; they must match."
        )
    if loss_function == "l2":
        return F.mse_loss(v1, v2, reduction=reduction)
    if loss_function == "l1":
        return F.l1_loss(v1, v2, reduction=reduction)
    if loss_function == "smooth_l1":
        return F.smooth_l1_loss(v1, v2, reduction=reduction)
    raise ValueError(f"loss_function must be 'l2', 'l1' or 'smooth_l1', got {loss_function!r}.")


def huber_loss(v1: torch.Tensor, v2: torch.Tensor, delta: float = 1.0) -> torch.Tensor:
    """Element-wise Huber loss: ``0.5 x^2`` for ``|x| <= delta``, else ``delta (|x| - 0.5 delta)``.

    ``x = v1 - v2`` (Huber 1964). With ``delta=1`` it equals ``distance_loss(..., "smooth_l1")``.

    Examples:
        >>> huber_loss(torch.zeros(2), torch.tensor([0.5, 3.0]))
        tensor([0.1250, 2.5000])
    """
    _same_shape("v1", v1, "v2", v2, "huber_loss")
    return F.huber_loss(v1, v2, reduction="none", delta=delta)


# -- policy gradient (PPO family) --------------------------------------------------------


def policy_gradient_loss(log_prob: torch.Tensor, advantage: torch.Tensor) -> torch.Tensor:
    """The score-function (REINFORCE) loss ``-log pi(a|s) A`` per sample (Williams 1992).

    Examples:
        >>> policy_gradient_loss(torch.tensor([-1.0, -2.0]), torch.tensor([1.0, 0.5]))
        tensor([1., 1.])
    """
    return -log_prob * advantage


def surrogate_loss(log_ratio: torch.Tensor, advantage: torch.Tensor) -> torch.Tensor:
    """The unclipped importance-weighted policy loss ``-r A``, ``r = exp(log_ratio)``.

    Examples:
        >>> surrogate_loss(torch.zeros(2), torch.tensor([1.0, -2.0]))
        tensor([-1.,  2.])
    """
    return -log_ratio.exp() * advantage


class ClippedSurrogate(NamedTuple):
    """What :func:`clipped_surrogate_loss` returns."""

    loss: torch.Tensor
    """Per-sample loss ``-min(r A, clip(r) A)``."""
    clip_fraction: torch.Tensor
    """Detached fraction of samples whose ratio was clipped."""


def clipped_surrogate_loss(
    log_ratio: torch.Tensor,
    advantage: torch.Tensor,
    epsilon: float | tuple[float, float],
) -> ClippedSurrogate:
    """PPO's clipped surrogate ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)``.

    Schulman et al. 2017, arXiv:1707.06347, eq. 7. The ratio is clipped in log space
    (``log_ratio`` clamped to ``[log(1 - eps_low), log(1 + eps_high)]``), which is the same
    clip and never overflows before the clamp.

    Args:
        log_ratio: ``log pi(a|s) - log pi_old(a|s)``, ``[*B]``.
        advantage: ``[*B]``.
        epsilon: ``eps`` or ``(eps_low, eps_high)``, with ``0 <= eps_low < 1``.

    Returns:
        the per-sample loss and the detached clip fraction.

    Examples:
        >>> out = clipped_surrogate_loss(torch.log(torch.tensor([0.5, 1.0, 2.0])),
        ...                              torch.ones(3), 0.2)
        >>> out.loss
        tensor([-0.5000, -1.0000, -1.2000])
        >>> round(float(out.clip_fraction), 4)
        0.6667
    """
    low, high = epsilon if isinstance(epsilon, (tuple, list)) else (epsilon, epsilon)
    clipped = log_ratio.clamp(math.log1p(-low), math.log1p(high))
    gain = torch.minimum(log_ratio.exp() * advantage, clipped.exp() * advantage)
    with torch.no_grad():
        fraction = (clipped != log_ratio).to(log_ratio.dtype).mean()
    return ClippedSurrogate(-gain, fraction)


def kl_penalty_loss(
    log_ratio: torch.Tensor, advantage: torch.Tensor, kl: torch.Tensor, beta: Scalar
) -> torch.Tensor:
    """PPO's KL-penalised objective ``-(r A - beta KL(pi_old || pi))`` per sample.

    Schulman et al. 2017, arXiv:1707.06347, eq. 8.

    Examples:
        >>> kl_penalty_loss(torch.zeros(2), torch.ones(2), torch.tensor([0.0, 1.0]), 0.5)
        tensor([-1.0000, -0.5000])
    """
    return -(log_ratio.exp() * advantage - beta * kl)


def adaptive_kl_factor(
    kl_mean: torch.Tensor, dtarg: float, increment: float, decrement: float
) -> torch.Tensor:
    """The factor PPO multiplies ``beta`` by: ``increment`` when ``kl_mean > 1.5 dtarg``,
    ``decrement`` when ``kl_mean < dtarg / 1.5``, else 1 (arXiv:1707.06347, section 4).

    Examples:
        >>> adaptive_kl_factor(torch.tensor(1.0), 0.01, 2.0, 0.5)
        tensor(2.)
        >>> adaptive_kl_factor(torch.tensor(0.01), 0.01, 2.0, 0.5)
        tensor(1.)
    """
    return torch.where(
        kl_mean > 1.5 * dtarg,
        torch.full_like(kl_mean, increment),
        torch.where(
            kl_mean < dtarg / 1.5,
            torch.full_like(kl_mean, decrement),
            torch.ones_like(kl_mean),
        ),
    )


def entropy_loss(entropy: torch.Tensor, coeff: Scalar) -> torch.Tensor:
    """The entropy bonus as a loss to minimise: ``-coeff * entropy`` (Williams & Peng 1991).

    Examples:
        >>> entropy_loss(torch.tensor([0.5, 1.0]), 0.01)
        tensor([-0.0050, -0.0100])
    """
    return -coeff * entropy


def effective_sample_size(log_weight: torch.Tensor) -> torch.Tensor:
    """Normalised effective sample size ``(sum w)^2 / (n sum w^2)`` of ``w = exp(log_weight)``.

    Computed from ``w / max(w)`` (no overflow), detached; 1 when every weight is equal.

    Examples:
        >>> float(effective_sample_size(torch.zeros(4)))
        1.0
    """
    lw = log_weight.detach().reshape(-1)
    w = (lw - lw.max()).exp()
    return w.sum().square() / (w.square().sum() * lw.numel())


def standardize(x: torch.Tensor, exclude_dims: tuple[int, ...] = ()) -> torch.Tensor:
    """Zero mean, unit std over every dim except ``exclude_dims`` (std floored at 1e-4).

    Examples:
        >>> standardize(torch.tensor([1.0, 3.0]))
        tensor([-0.7071,  0.7071])
    """
    excl = {d % x.ndim for d in exclude_dims}
    dims = tuple(d for d in range(x.ndim) if d not in excl)
    loc = x.mean(dims, keepdim=True)
    scale = x.std(dims, keepdim=True).clamp_min(1e-4)
    return (x - loc) / scale


# -- value regression ------------------------------------------------------------------


def clipped_value_loss(
    target: torch.Tensor,
    value: torch.Tensor,
    loss_function: str,
    clip_value: float | None = None,
    old_value: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Value regression, optionally clipped around ``old_value`` (PPO's value clipping).

    With ``clip_value``: ``max(d(target, v), d(target, v_old + clip(v - v_old, -c, c)))``
    element-wise, where ``d`` is :func:`distance_loss` (Andrychowicz et al. 2021,
    arXiv:2006.05990, section 3.2).

    Args:
        target: the regression target.
        value: the prediction, same shape.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        clip_value: the clip range ``c``; ``None`` for the plain distance.
        old_value: the prediction stored at collection time (needed with ``clip_value``).

    Returns:
        the element-wise loss, and the detached fraction of clipped predictions (``None``
        without clipping).

    Examples:
        >>> loss, frac = clipped_value_loss(torch.zeros(2), torch.tensor([1.0, 0.1]), "l2",
        ...                                 0.2, torch.zeros(2))
        >>> loss, float(frac)
        (tensor([1.0000, 0.0100]), 0.5)
    """
    loss = distance_loss(target, value, loss_function)
    if clip_value is None:
        return loss, None
    if old_value is None:
        raise ValueError("clipped_value_loss: clip_value needs old_value, the stored prediction.")
    delta = value - old_value
    clipped = delta.clamp(-clip_value, clip_value)
    loss_clipped = distance_loss(target, old_value + clipped, loss_function)
    with torch.no_grad():
        fraction = (clipped != delta).to(value.dtype).mean()
    return torch.maximum(loss, loss_clipped), fraction


def explained_variance(target: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``1 - Var(target - value) / Var(target)`` (population variances, 1e-8 added below).

    Examples:
        >>> explained_variance(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0]))
        tensor(1.)
    """
    resid = (target - value).var(correction=0)
    return 1.0 - resid / (target.var(correction=0) + 1e-8)


# -- bootstrapped targets --------------------------------------------------------------


def td_target(r_t: torch.Tensor, discount_t: Scalar, v_tp1: torch.Tensor) -> torch.Tensor:
    """The one-step (TD(0)) target ``r_t + discount_t * v_tp1`` (Sutton & Barto 2018, eq. 6.2).

    ``discount_t`` is ``gamma * (1 - terminated)``: zero where the episode terminated, so a
    terminal transition does not bootstrap.

    Examples:
        >>> td_target(torch.ones(2), 0.9 * torch.tensor([1.0, 0.0]), torch.full((2,), 10.0))
        tensor([10.,  1.])
    """
    return r_t + discount_t * v_tp1


def n_step_target(r_t: torch.Tensor, discount_t: torch.Tensor, v_tpn: torch.Tensor) -> torch.Tensor:
    """The n-step bootstrapped target ``sum_k (prod_{j<k} d_j) r_k + (prod_k d_k) v_tpn``.

    Sutton & Barto 2018, eq. 7.1. The ``n`` steps run along the last dim.

    Args:
        r_t: rewards ``[*B, n]``.
        discount_t: per-step discounts ``gamma * (1 - terminated)``, ``[*B, n]``.
        v_tpn: the bootstrap value after the ``n`` steps, ``[*B]``.

    Examples:
        >>> n_step_target(torch.ones(1, 3), torch.full((1, 3), 0.5), torch.tensor([8.0]))
        tensor([2.7500])
    """
    _same_shape("r_t", r_t, "discount_t", discount_t, "n_step_target")
    if v_tpn.shape != r_t.shape[:-1]:
        raise ValueError(
            f"n_step_target: v_tpn has shape {tuple(v_tpn.shape)}, expected "
            f"{tuple(r_t.shape[:-1])} (r_t's shape without its last, time, dim)."
        )
    target = v_tpn
    for k in range(r_t.shape[-1] - 1, -1, -1):
        target = r_t[..., k] + discount_t[..., k] * target
    return target


def greedy_q_value(q_tp1: torch.Tensor) -> torch.Tensor:
    """``max_a Q(s', a)`` over the last dim, kept as a size-1 dim (Mnih et al. 2015).

    Examples:
        >>> greedy_q_value(torch.tensor([[1.0, 3.0], [2.0, 0.0]]))
        tensor([[3.],
                [2.]])
    """
    return q_tp1.max(-1, keepdim=True).values


def double_q_value(q_tp1_target: torch.Tensor, q_tp1_selector: torch.Tensor) -> torch.Tensor:
    """Double Q-learning's bootstrap: ``Q_target(s', argmax_a Q_online(s', a))``.

    van Hasselt et al. 2016, arXiv:1509.06461. The size-1 action dim is kept.

    Examples:
        >>> double_q_value(torch.tensor([[1.0, 3.0]]), torch.tensor([[5.0, 0.0]]))
        tensor([[1.]])
    """
    _same_shape("q_tp1_target", q_tp1_target, "q_tp1_selector", q_tp1_selector, "double_q_value")
    return q_tp1_target.gather(-1, q_tp1_selector.argmax(-1, keepdim=True))


def clipped_double_q(q_values: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """The minimum over an ensemble of critics (Fujimoto et al. 2018, arXiv:1802.09477).

    On ties the gradient goes to one critic (``min(dim).values``), as in TorchRL.

    Examples:
        >>> clipped_double_q(torch.tensor([[1.0, 4.0], [2.0, 3.0]]))
        tensor([1., 3.])
    """
    return q_values.min(dim).values


def smoothed_target_action(
    action: torch.Tensor,
    noise: torch.Tensor,
    noise_clip: float,
    low: Scalar,
    high: Scalar,
) -> torch.Tensor:
    """TD3's target policy smoothing: ``clamp(a + clamp(noise, -c, c), low, high)``.

    Fujimoto et al. 2018, arXiv:1802.09477, eq. 14. ``noise`` is drawn by the caller (e.g.
    ``policy_noise * torch.randn_like(action)``), which keeps this function deterministic.

    Examples:
        >>> smoothed_target_action(torch.tensor([0.9]), torch.tensor([0.8]), 0.5, -1.0, 1.0)
        tensor([1.])
    """
    return torch.clamp(action + noise.clamp(-noise_clip, noise_clip), low, high)


# -- soft (maximum-entropy) terms -------------------------------------------------------


def soft_state_value(q_t: torch.Tensor, log_prob_t: torch.Tensor, alpha: Scalar) -> torch.Tensor:
    """The soft value ``Q(s, a) - alpha log pi(a|s)`` of a sampled action (arXiv:1801.01290, eq. 3).

    Examples:
        >>> soft_state_value(torch.tensor([1.0]), torch.tensor([-2.0]), 0.5)
        tensor([2.])
    """
    return q_t - alpha * log_prob_t


def expected_soft_value(
    probs_t: torch.Tensor, q_t: torch.Tensor, log_probs_t: torch.Tensor, alpha: Scalar
) -> torch.Tensor:
    """Discrete actions: ``sum_a pi(a|s) (Q(s, a) - alpha log pi(a|s))``, size-1 dim kept.

    Christodoulou 2019, arXiv:1910.07207, eq. 10. The actions run along the last dim.

    Examples:
        >>> p = torch.tensor([[0.5, 0.5]])
        >>> expected_soft_value(p, torch.tensor([[1.0, 3.0]]), p.log(), 1.0)
        tensor([[2.6931]])
    """
    return (probs_t * (q_t - alpha * log_probs_t)).sum(-1, keepdim=True)


def soft_policy_loss(log_prob_t: torch.Tensor, q_t: torch.Tensor, alpha: Scalar) -> torch.Tensor:
    """SAC's actor loss per sample ``alpha log pi(a~|s) - Q(s, a~)`` (arXiv:1812.05905, eq. 7).

    Examples:
        >>> soft_policy_loss(torch.tensor([-1.0]), torch.tensor([2.0]), 0.5)
        tensor([-2.5000])
    """
    return alpha * log_prob_t - q_t


def discrete_soft_policy_loss(
    probs_t: torch.Tensor, log_probs_t: torch.Tensor, q_t: torch.Tensor, alpha: Scalar
) -> torch.Tensor:
    """Discrete SAC's actor loss ``sum_a pi(a|s) (alpha log pi(a|s) - Q(s, a))`` (arXiv:1910.07207).

    Examples:
        >>> p = torch.tensor([[0.5, 0.5]])
        >>> discrete_soft_policy_loss(p, p.log(), torch.tensor([[1.0, 3.0]]), 1.0)
        tensor([-2.6931])
    """
    return (probs_t * (alpha * log_probs_t - q_t)).sum(-1)


def temperature_loss(
    log_alpha: torch.Tensor, log_prob_t: torch.Tensor, target_entropy: float
) -> torch.Tensor:
    """SAC's temperature loss ``-log_alpha (log pi + target_entropy)`` per sample.

    Haarnoja et al. 2018, arXiv:1812.05905, eq. 18 (in ``log_alpha``); ``log_prob_t`` is
    detached, so only ``log_alpha`` moves.

    Examples:
        >>> temperature_loss(torch.tensor(0.0), torch.tensor([-1.0]), 2.0)
        tensor([-0.])
    """
    return -log_alpha * (log_prob_t.detach() + target_entropy)


# -- distributional --------------------------------------------------------------------


def categorical_projection(
    probs_tp1: torch.Tensor, r_t: torch.Tensor, discount_t: torch.Tensor, support: torch.Tensor
) -> torch.Tensor:
    """Project the distribution of ``r + discount * z`` (probabilities ``probs_tp1``) onto ``z``.

    C51's target (Bellemare et al. 2017, arXiv:1707.06887, algorithm 1). The atoms run along
    the last dim.

    Args:
        probs_tp1: next-state atom probabilities ``[*B, n_atoms]``.
        r_t: rewards ``[*B, 1]``.
        discount_t: ``gamma * (1 - terminated)``, ``[*B, 1]``.
        support: the atoms ``z``, ``[n_atoms]``, increasing and evenly spaced.

    Returns:
        the projected probabilities, ``[*B, n_atoms]``.

    Examples:
        >>> categorical_projection(torch.tensor([[0.0, 1.0, 0.0]]), torch.tensor([[0.5]]),
        ...                        torch.tensor([[1.0]]), torch.tensor([-1.0, 0.0, 1.0]))
        tensor([[0.0000, 0.5000, 0.5000]])
    """
    z = support.to(probs_tp1.dtype)
    n_atoms = z.numel()
    vmin, vmax = z[0], z[-1]
    delta = (vmax - vmin) / (n_atoms - 1)
    tz = (r_t + discount_t * z).clamp(vmin, vmax)
    b = (tz - vmin) / delta
    lower = b.floor().long().clamp(0, n_atoms - 1)
    upper = b.ceil().long().clamp(0, n_atoms - 1)
    # when b lands on an atom, lower == upper: it gets all the mass
    w_upper = b - lower.to(b.dtype)
    w_lower = 1.0 - w_upper
    target = torch.zeros_like(probs_tp1)
    target.scatter_add_(-1, lower, probs_tp1 * w_lower)
    target.scatter_add_(-1, upper, probs_tp1 * w_upper)
    return target
