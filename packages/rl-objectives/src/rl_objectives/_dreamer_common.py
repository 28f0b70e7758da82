"""Helpers shared by Dreamer's losses (private): imagination, lambda-returns, scalar codes.

``symlog``/``symexp`` and the two-hot functions are small pure functions duplicated from
``rl_modules.model_based`` on purpose: packages never import each other (docs/contract.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type
from tensordict.utils import NestedKey

from rl_objectives._keys import MissingKeyError
from rl_objectives.value.functional import td_lambda_return_estimate

DEFAULT_NUM_BINS = 255


def symlog(value: torch.Tensor) -> torch.Tensor:
    """``sign(x) * log(1 + |x|)`` (DreamerV3, eq. 1).

    Examples:
        >>> symlog(torch.tensor([0.0, torch.e - 1]))
        tensor([0., 1.])
    """
    return torch.sign(value) * torch.log1p(value.abs())


def symexp(value: torch.Tensor) -> torch.Tensor:
    """``sign(x) * (exp(|x|) - 1)``, the inverse of :func:`symlog`.

    Examples:
        >>> symexp(torch.tensor([0.0, 1.0]))
        tensor([0.0000, 1.7183])
    """
    return torch.sign(value) * torch.expm1(value.abs())


def default_bins(num_bins: int = DEFAULT_NUM_BINS) -> torch.Tensor:
    """``symexp`` of ``num_bins`` evenly spaced points of ``[-20, 20]``, exactly antisymmetric.

    Examples:
        >>> default_bins(3)
        tensor([-4.8517e+08,  0.0000e+00,  4.8517e+08])
    """
    if num_bins < 2:
        raise ValueError(f"num_bins must be at least 2, got {num_bins}.")
    bins = symexp(torch.linspace(-20.0, 20.0, num_bins, dtype=torch.float64))
    return ((bins - bins.flip(0)) / 2).to(torch.get_default_dtype())


def two_hot_encode(x: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """Two-hot code ``[*x.shape, len(bins)]`` of ``x`` on the ascending support ``bins``.

    Examples:
        >>> two_hot_encode(torch.tensor([0.25]), torch.tensor([-1.0, 0.0, 1.0]))
        tensor([[0.0000, 0.7500, 0.2500]])
    """
    if bins.ndim != 1 or bins.numel() < 2:
        raise ValueError(f"bins must be 1-d with at least 2 values, got {tuple(bins.shape)}.")
    bins = bins.to(device=x.device, dtype=x.dtype)
    x = x.clamp(bins[0], bins[-1])
    below = (torch.searchsorted(bins, x.contiguous(), right=True) - 1).clamp(0, bins.numel() - 2)
    lo, hi = bins[below], bins[below + 1]
    w_hi = (x - lo) / (hi - lo)
    code = torch.zeros(*x.shape, bins.numel(), device=x.device, dtype=x.dtype)
    code.scatter_(-1, below.unsqueeze(-1), (1 - w_hi).unsqueeze(-1))
    return code.scatter_add_(-1, (below + 1).unsqueeze(-1), w_hi.unsqueeze(-1))


def two_hot_decode(logits: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """``sum(softmax(logits) * bins)`` over the last dim.

    Examples:
        >>> two_hot_decode(torch.zeros(1, 3), torch.tensor([-1.0, 0.0, 4.0]))
        tensor([1.])
    """
    if logits.shape[-1] != bins.numel():
        raise ValueError(
            f"logits have {logits.shape[-1]} bins in their last dim, the support has "
            f"{bins.numel()}: size the head's output to the number of bins."
        )
    return (torch.softmax(logits, -1) * bins.to(logits)).sum(-1)


def two_hot_cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, bins: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy ``[*B]`` of ``logits [*B, K]`` against the two-hot code of ``target``
    (``[*B]`` or ``[*B, 1]``).

    Examples:
        >>> two_hot_cross_entropy(torch.zeros(2, 3), torch.zeros(2), torch.tensor([-1.0, 0, 1]))
        tensor([1.0986, 1.0986])
    """
    if target.shape == (*logits.shape[:-1], 1):
        target = target.squeeze(-1)
    if target.shape != logits.shape[:-1]:
        raise ValueError(
            f"target has shape {tuple(target.shape)}, expected {tuple(logits.shape[:-1])} or "
            f"{(*logits.shape[:-1], 1)} to match logits of shape {tuple(logits.shape)}."
        )
    if logits.shape[-1] != bins.numel():
        raise ValueError(
            f"logits have {logits.shape[-1]} bins in their last dim, the support has "
            f"{bins.numel()}: size the head's output to the number of bins."
        )
    code = two_hot_encode(target.detach(), bins)
    return -(code * torch.log_softmax(logits, -1)).sum(-1)


def next_key(key: NestedKey) -> tuple[str, ...]:
    """``key`` under ``"next"``: ``next_key("reward") == ("next", "reward")``."""
    return ("next", *key) if isinstance(key, tuple) else ("next", key)


def require_entry(
    td: TensorDictBase, key: NestedKey, owner: str, name: str, hint: str
) -> torch.Tensor:
    """``td[key]``; a ``MissingKeyError`` naming ``owner``'s ``name`` key and ``hint`` if absent."""
    value = td.get(key, None)
    if value is None:
        present = sorted(str(k) for k in td.keys(True, True))
        raise MissingKeyError(
            f"{owner} expected the entry {key!r} (its '{name}' key) after running the world "
            f"model, but it is missing. Present entries: {present}. {hint} Or point "
            f"{owner} at your entry with .set_keys({name}=<your key>)."
        )
    return value


def sum_event(x: torch.Tensor, batch_ndim: int, global_average: bool) -> torch.Tensor:
    """Mean over everything (``global_average``) or sum over event dims then mean."""
    if global_average or x.ndim == batch_ndim:
        return x.mean()
    return x.sum(tuple(range(batch_ndim, x.ndim))).mean()


def distance(v1: torch.Tensor, v2: torch.Tensor, kind: str) -> torch.Tensor:
    """Element-wise ``"l2"`` (squared), ``"l1"`` or ``"smooth_l1"`` distance."""
    if v1.shape != v2.shape:
        raise ValueError(f"shapes {tuple(v1.shape)} and {tuple(v2.shape)} must match.")
    if kind == "l2":
        return F.mse_loss(v1, v2, reduction="none")
    if kind == "l1":
        return F.l1_loss(v1, v2, reduction="none")
    if kind == "smooth_l1":
        return F.smooth_l1_loss(v1, v2, reduction="none")
    raise ValueError(f"unknown distance {kind!r}; choose 'l2', 'l1' or 'smooth_l1'.")


@contextlib.contextmanager
def hold_out(module: Any) -> Iterator[None]:
    """Turn off ``requires_grad`` of ``module``'s parameters inside the block (TorchRL's
    ``hold_out_net``): gradients flow through it to its inputs, not into its weights."""
    parameters = getattr(module, "parameters", None)
    params = [p for p in parameters() if p.requires_grad] if callable(parameters) else []
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


def imagine(env: Any, policy: Any, start: TensorDictBase, horizon: int) -> TensorDictBase:
    """Roll ``policy`` for ``horizon`` steps in the imagination env from the latents ``start``
    (batch ``[N]``), sampling actions, with the env's world model held out."""
    with hold_out(env), set_interaction_type(InteractionType.RANDOM):
        root = env.reset(start.copy())
        return env.rollout(horizon, policy, auto_reset=False, tensordict=root)


def lambda_return(
    reward: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float | torch.Tensor,
    lmbda: float,
) -> torch.Tensor:
    """``G[t] = r[t] + gamma[t] ((1 - lmbda) V[t+1] + lmbda G[t+1])``, ``G[H-1] = r + gamma V[H]``,
    over ``[*B, H, 1]`` (``gamma`` may be per step, e.g. ``gamma * continuation``)."""
    done = torch.zeros(reward.shape, dtype=torch.bool, device=reward.device)
    if isinstance(gamma, torch.Tensor):
        gamma = gamma.expand_as(reward)
    return td_lambda_return_estimate(gamma, lmbda, next_value, reward, done)


def discount_weights(step_discount: torch.Tensor) -> torch.Tensor:
    """``[1, d0, d0 d1, ...]`` along the time dim (-2): the weight of each imagined step."""
    ones = torch.ones_like(step_discount[..., :1, :])
    return torch.cat([ones, step_discount[..., :-1, :]], dim=-2).cumprod(-2)


def estimator_factors(loss: Any) -> tuple[float, float]:
    """``(gamma, lmbda)`` of a loss's TD estimator (TD0: lmbda 0, TD1: lmbda 1)."""
    estimator = loss.value_estimator
    gamma = float(estimator.gamma)
    name = type(estimator).__name__
    if name == "TD0Estimator":
        return gamma, 0.0
    if name == "TD1Estimator":
        return gamma, 1.0
    return gamma, float(estimator.lmbda)
