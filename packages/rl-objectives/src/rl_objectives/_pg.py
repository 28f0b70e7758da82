"""Pieces shared by the policy-gradient losses (PPO family, A2C, REINFORCE)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection
from tensordict.nn import CompositeDistribution
from tensordict.utils import NestedKey
from torch import distributions as D
from torch import nn

from rl_objectives._alpha import sum_to_batch
from rl_objectives._nets import in_keys_of
from rl_objectives.functional import clipped_value_loss, entropy_loss, standardize

__all__ = [
    "action_log_prob",
    "critic_loss",
    "entropy_of",
    "log_prob_of",
    "prev_log_prob",
    "standardize",
    "sum_leaves",
    "summed_critic_loss",
    "weighted_entropy_loss",
]


def actor_sample_keys(actor: nn.Module) -> dict[str, NestedKey]:
    """TorchRL's default keys from the policy: where it writes its one sampled action and its
    log-probability (``dist_sample_keys`` / ``log_prob_keys`` of a probabilistic sequential);
    empty when it declares none or several (composite policies: set the keys by hand).

    Examples:
        >>> actor_sample_keys(nn.Linear(2, 2))
        {}
    """
    log_prob_keys = getattr(actor, "log_prob_keys", None)
    sample_keys = getattr(actor, "dist_sample_keys", None)
    if not log_prob_keys or not sample_keys or len(log_prob_keys) != 1 or len(sample_keys) != 1:
        return {}
    return {"sample_log_prob": log_prob_keys[0], "action": sample_keys[0]}


def checked_clip_value(clip_value: float | torch.Tensor | None, owner: str) -> Any:
    """``clip_value`` as given: a float or a scalar tensor, ``None`` for no clipping.

    Raises:
        ValueError: anything else (a bool included: only ``ClipPPOLoss`` reads ``True``).
    """
    scalar = isinstance(clip_value, torch.Tensor) and clip_value.numel() == 1
    if clip_value is None or scalar:
        return clip_value
    if isinstance(clip_value, bool) or not isinstance(clip_value, (int, float)):
        raise ValueError(
            f"{owner}: clip_value must be a float or a scalar tensor, got {clip_value}."
        )
    return float(clip_value)


def value_to_clip_around(
    td: TensorDictBase, key: NestedKey, clip_value: Any, family: str
) -> torch.Tensor:
    """The stored value the prediction is clipped around (``clip_value`` is set).

    Raises:
        KeyError: it is missing, naming the key and how to point the loss at it.
    """
    value = td.get(key, None)
    if value is None:
        raise KeyError(
            f"clip_value is set to {clip_value}, but the key {key} was not found in the input "
            f"tensordict. Make sure that the value_key passed to {family} exists in the input "
            "tensordict (collect with the critic, or .set_keys(value=<your key>))."
        )
    return value


def sum_leaves(td: TensorDictBase, batch_ndim: int) -> torch.Tensor:
    """Sum every leaf of ``td``, each first summed down to ``batch_ndim`` dims."""
    if td.is_empty():
        raise ValueError("got an empty TensorDict of log-probabilities or entropies.")
    return sum_to_batch(td, batch_ndim)


def log_prob_of(
    dist: D.Distribution, td: TensorDictBase, action_key: NestedKey, batch_ndim: int
) -> tuple[torch.Tensor, TensorDictBase | None]:
    """Log-probability of the stored action, ``[*B]``; per-head entries too for composites."""
    if isinstance(dist, CompositeDistribution):
        lp = dist.log_prob(td)
        if is_tensor_collection(lp):
            return sum_leaves(lp, batch_ndim), lp
        return sum_to_batch(lp, batch_ndim), None
    action = td.get(action_key)
    return sum_to_batch(dist.log_prob(action), batch_ndim), None


def action_log_prob(
    actor: nn.Module, td: TensorDictBase, action_key: NestedKey
) -> tuple[D.Distribution, torch.Tensor]:
    """The actor's distribution on ``td`` and the log-probability of its stored action, ``[*B]``."""
    dist = actor.get_dist(td.select(*in_keys_of(actor), strict=False))
    log_prob, _ = log_prob_of(dist, td, action_key, td.ndim)
    return dist, log_prob


def prev_log_prob(
    td: TensorDictBase,
    key: NestedKey,
    heads: TensorDictBase | None,
    batch_ndim: int,
    owner: str,
) -> torch.Tensor:
    """The behaviour log-probability: ``key``, or the sum of the per-head entries of a composite."""
    value = td.get(key, None)
    if value is None and heads is not None:
        missing = [k for k in heads.keys(True, True) if td.get(k, None) is None]
        if not missing:
            return sum_leaves(td.select(*heads.keys(True, True)), batch_ndim)
    if value is None:
        raise KeyError(
            f"{owner} expected the behaviour log-probability {key!r} (its 'sample_log_prob' key) "
            "in the input TensorDict, but it is missing. Collect with a policy that writes it "
            f"(return_log_prob=True), or point the loss at your entry with "
            f".set_keys(sample_log_prob=<your key>)."
        )
    if value.requires_grad:
        raise RuntimeError(f"{owner}: the stored {key!r} requires grad; store it detached.")
    return sum_to_batch(value, batch_ndim)


def _analytic_entropy(dist: D.Distribution) -> bool:
    if isinstance(dist, D.Independent):
        return _analytic_entropy(dist.base_dist)
    if isinstance(dist, D.TransformedDistribution):
        return False
    return type(dist).entropy is not D.Distribution.entropy


def entropy_of(
    dist: D.Distribution, batch_ndim: int, samples_mc: int
) -> torch.Tensor | TensorDictBase:
    """Entropy per sample ``[*B]`` (a TensorDict of heads for composites); Monte-Carlo if needed."""
    if isinstance(dist, CompositeDistribution):
        heads = list(dist.dists.values())
        if all(_analytic_entropy(h) for h in heads):
            return dist.entropy()
        sample = dist.rsample((samples_mc,)) if dist.has_rsample else dist.sample((samples_mc,))
        lp = dist.log_prob(sample)
        if is_tensor_collection(lp):
            return (-lp).apply(lambda x: sum_to_batch(x.mean(0), batch_ndim), batch_size=[])
        return -sum_to_batch(lp.mean(0), batch_ndim)
    if _analytic_entropy(dist):
        return sum_to_batch(dist.entropy(), batch_ndim)
    sample = dist.rsample((samples_mc,)) if dist.has_rsample else dist.sample((samples_mc,))
    return -sum_to_batch(dist.log_prob(sample).mean(0), batch_ndim)


def weighted_entropy_loss(
    entropy: torch.Tensor | TensorDictBase,
    coeff: float | Mapping[NestedKey, float],
    batch_ndim: int,
) -> torch.Tensor:
    """``-coeff * entropy``; with a mapping, one coefficient per composite head (leaf key)."""
    if not isinstance(coeff, Mapping):
        if is_tensor_collection(entropy):
            entropy = sum_leaves(entropy, batch_ndim)
        return entropy_loss(entropy, coeff)
    if not is_tensor_collection(entropy):
        raise TypeError("a per-head entropy_coeff mapping needs a composite action distribution.")
    total = None
    for key, value in entropy.items(include_nested=True, leaves_only=True):
        if key not in coeff:
            raise KeyError(
                f"entropy_coeff has no entry for the head {key!r}; given: {list(coeff)}."
            )
        term = entropy_loss(sum_to_batch(value, batch_ndim), coeff[key])
        total = term if total is None else total + term
    return total


def critic_loss(
    target: torch.Tensor,
    value: torch.Tensor,
    loss_type: str,
    clip_value: float | None,
    old_value: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`~rl_objectives.functional.clipped_value_loss` (kept under its old name)."""
    return clipped_value_loss(target, value, loss_type, clip_value, old_value)


def summed_critic_loss(
    target: torch.Tensor,
    value: torch.Tensor,
    loss_type: str,
    clip_value: float | None,
    old_value: torch.Tensor | None,
    batch_ndim: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`critic_loss` summed over the dims after the batch dims (``[*B]``), and the clip fraction."""
    loss, fraction = clipped_value_loss(target, value, loss_type, clip_value, old_value)
    return loss.reshape((*loss.shape[:batch_ndim], -1)).sum(-1), fraction
