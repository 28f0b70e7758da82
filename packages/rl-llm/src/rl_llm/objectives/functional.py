"""Pure tensor functions behind the LLM losses: aggregation, clipped surrogate, KL, group advantages."""

from __future__ import annotations

from typing import Literal

import torch

Aggregation = Literal["token_mean", "prompt_mean", "constant_mean", "none"]


def aggregate(
    value: torch.Tensor, mask: torch.Tensor, aggregation: Aggregation, max_tokens: int | None = None
) -> torch.Tensor:
    """Reduces a per-token loss ``[B, L]`` over the tokens in ``mask``.

    * ``"token_mean"``: sum over every masked token of the batch / their count
      (DAPO, arXiv:2503.14476: long replies weigh by their length).
    * ``"prompt_mean"``: mean over each sequence's tokens, then over sequences
      (GRPO as in DeepSeekMath, arXiv:2402.03300).
    * ``"constant_mean"``: each sequence's token sum divided by a constant
      ``max_tokens`` (default ``L``), then mean over sequences (Dr. GRPO,
      arXiv:2503.20783: no length bias).
    * ``"none"``: the per-token values, zero outside the mask.

    Examples:
        >>> v, m = torch.tensor([[1.0, 3.0], [5.0, 0.0]]), torch.tensor([[True, True], [True, False]])
        >>> aggregate(v, m, "token_mean"), aggregate(v, m, "prompt_mean")
        (tensor(3.), tensor(3.5000))
    """
    if value.shape != mask.shape:
        raise ValueError(
            f"value and mask must have the same [B, L] shape, got {tuple(value.shape)} and {tuple(mask.shape)}."
        )
    masked = torch.where(mask, value, value.new_zeros(()))
    if aggregation == "none":
        return masked
    if aggregation == "token_mean":
        return masked.sum() / mask.sum().clamp_min(1)
    if aggregation == "prompt_mean":
        return (masked.sum(-1) / mask.sum(-1).clamp_min(1)).mean()
    if aggregation == "constant_mean":
        norm = value.shape[-1] if max_tokens is None else max_tokens
        return masked.sum(-1).mean() / norm
    raise ValueError(
        f"aggregation must be 'token_mean', 'prompt_mean', 'constant_mean' or 'none', got {aggregation!r}."
    )


def clipped_surrogate(
    log_prob: torch.Tensor,
    sample_log_prob: torch.Tensor,
    advantage: torch.Tensor,
    clip_low: float,
    clip_high: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token PPO-clip loss ``-min(r A, clip(r, 1 - low, 1 + high) A)`` with ``r = exp(lp - lp_old)``.

    Asymmetric bounds (``clip_high > clip_low``) are DAPO's clip-higher.

    Returns:
        The per-token loss, the log importance weight, and where the ratio was clipped.
    """
    log_weight = log_prob - sample_log_prob
    ratio = log_weight.exp()
    clipped_ratio = ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = -torch.minimum(ratio * advantage, clipped_ratio * advantage)
    return loss, log_weight, clipped_ratio != ratio


def kl_k3(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    """Per-token unbiased KL estimator ``exp(ref - lp) - (ref - lp) - 1 >= 0`` (Schulman's k3, used by GRPO)."""
    delta = ref_log_prob - log_prob
    return delta.exp() - delta - 1.0


def k3_kl_token_estimate(target_log_prob: torch.Tensor, log_prob: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate ``exp(d) - 1 - d``, ``d = target_log_prob - log_prob`` (TorchRL's name).

    Schulman's k3 ("Approximating KL Divergence", 2020): unbiased for
    ``KL(p || target)`` when the tokens are samples of ``p`` (whose log-probs are
    ``log_prob``), nonnegative, not reduced. Same as :func:`kl_k3` with the arguments
    swapped, computed with ``expm1`` for precision near 0.

    Raises:
        ValueError: when the two tensors differ in shape.

    Examples:
        >>> k3_kl_token_estimate(torch.zeros(2), torch.zeros(2))
        tensor([0., 0.])
    """
    if target_log_prob.shape != log_prob.shape:
        raise ValueError(
            f"target_log_prob and log_prob must have the same shape (one value per token), got "
            f"{tuple(target_log_prob.shape)} and {tuple(log_prob.shape)}."
        )
    d = target_log_prob - log_prob
    return d.expm1() - d


def group_relative_advantage(
    returns: torch.Tensor, *, scale: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Advantages ``(R - mean_group) / (std_group + eps)`` over the last dim (the group).

    Args:
        returns: ``[..., G]`` returns of ``G`` answers to the same prompt.
        scale: divide by the group's standard deviation (GRPO); ``False`` only
            centres them (Dr. GRPO).
        eps: added to the standard deviation.

    Examples:
        >>> group_relative_advantage(torch.tensor([1.0, 0.0, 0.0, 1.0]), scale=False)
        tensor([ 0.5000, -0.5000, -0.5000,  0.5000])
    """
    centred = returns - returns.mean(-1, keepdim=True)
    if not scale:
        return centred
    return centred / (returns.std(-1, keepdim=True) + eps)
