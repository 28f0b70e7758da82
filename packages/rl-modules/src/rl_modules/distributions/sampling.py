"""Draw a sample and score that same draw in one call, for plain and composite distributions.

A squashed distribution (``TanhNormal``) loses precision when its sample is
inverted to be scored; scoring the latent draw it came from keeps the
log-probability exact. These helpers use a distribution's own
``(r)sample_and_log_prob`` when it has one and fall back to ``sample`` then
``log_prob``; a ``tensordict.nn.CompositeDistribution`` is handled component by
component and honours ``composite_lp_aggregate()``.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase, is_tensor_collection
from tensordict.nn import CompositeDistribution, composite_lp_aggregate
from tensordict.utils import NestedKey
from torch import distributions as D

Scores = torch.Tensor | TensorDictBase


def _suffixed(name: NestedKey, suffix: str) -> NestedKey:
    """``"action"`` -> ``"action_log_prob"``; ``("agent", "action")`` -> ``("agent", "action_log_prob")``."""
    if isinstance(name, str):
        return name + suffix
    return (*name[:-1], name[-1] + suffix)


def _aggregate(parts: dict[NestedKey, Scores], batch_ndim: int) -> torch.Tensor:
    """Sum the per-component entries into one tensor of the batch shape."""
    total: torch.Tensor | float = 0.0
    for part in parts.values():
        if is_tensor_collection(part):
            part = part.sum(dim="feature", reduce=True)
        elif part.ndim > batch_ndim:
            part = part.flatten(batch_ndim, -1).sum(-1)
        total = total + part
    return total  # type: ignore[return-value]


def sample_and_log_prob(
    distribution: D.Distribution,
    sample_shape: torch.Size | tuple[int, ...] = (),
    *,
    reparameterize: bool = False,
) -> tuple[Any, Scores]:
    """A sample and the log-probability of that same draw.

    Args:
        distribution: any ``torch.distributions.Distribution`` or a
            ``tensordict.nn.CompositeDistribution``.
        sample_shape: leading sample dimensions.
        reparameterize: draw with ``rsample`` (gradients flow into the sample).

    Returns:
        ``(sample, log_prob)``. For a composite distribution the sample is a
        TensorDict; the log-probability is one summed tensor when
        ``composite_lp_aggregate()`` is on, else a TensorDict with one
        ``<name>_log_prob`` entry per component.

    Examples:
        >>> import torch
        >>> from rl_modules import TanhNormal
        >>> d = TanhNormal(torch.zeros(3), torch.ones(3), event_dims=1)
        >>> action, log_prob = sample_and_log_prob(d, (5,))
        >>> action.shape, log_prob.shape
        (torch.Size([5, 3]), torch.Size([5]))
    """
    sample_shape = torch.Size(sample_shape)
    if isinstance(distribution, CompositeDistribution):
        samples, scores = {}, {}
        for name, component in distribution.dists.items():
            samples[name], scores[_suffixed(name, "_log_prob")] = sample_and_log_prob(
                component, sample_shape, reparameterize=reparameterize
            )
        batch_size = sample_shape + distribution.batch_shape
        sample = TensorDict(samples, batch_size=batch_size)
        if not composite_lp_aggregate():
            return sample, TensorDict(scores, batch_size=batch_size)
        return sample, _aggregate(scores, len(batch_size))
    joint = getattr(
        distribution, "rsample_and_log_prob" if reparameterize else "sample_and_log_prob", None
    )
    if callable(joint):
        return joint(sample_shape)
    sample = (distribution.rsample if reparameterize else distribution.sample)(sample_shape)
    return sample, distribution.log_prob(sample)


def rsample_and_log_prob(
    distribution: D.Distribution, sample_shape: torch.Size | tuple[int, ...] = ()
) -> tuple[Any, Scores]:
    """:func:`sample_and_log_prob` with a reparameterised draw.

    Examples:
        >>> import torch
        >>> from rl_modules import TanhNormal
        >>> loc = torch.zeros(3, requires_grad=True)
        >>> action, log_prob = rsample_and_log_prob(TanhNormal(loc, torch.ones(3), event_dims=1))
        >>> action.requires_grad, log_prob.shape
        (True, torch.Size([]))
    """
    return sample_and_log_prob(distribution, sample_shape, reparameterize=True)


def composite_entropy(distribution: CompositeDistribution, samples_mc: int = 1) -> Scores:
    """The entropy of each component of a composite distribution, or their sum.

    A component's analytic ``entropy()`` is used when it has one; otherwise the
    entropy is estimated as ``-mean(log_prob)`` over ``samples_mc``
    reparameterised draws, each scored at its own latent draw (never by
    inverting the sample).

    Args:
        distribution: a ``tensordict.nn.CompositeDistribution``.
        samples_mc: Monte Carlo draws for components without an analytic entropy.

    Returns:
        One tensor of the batch shape when ``composite_lp_aggregate()`` is on,
        else a TensorDict with one ``<name>_entropy`` entry per component.

    Raises:
        NotImplementedError: a component has neither an analytic entropy nor ``rsample``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import CompositeDistribution, set_composite_lp_aggregate
        >>> params = TensorDict(a=TensorDict(loc=torch.zeros(2, 1), scale=torch.ones(2, 1)), batch_size=[2])
        >>> d = CompositeDistribution(params, distribution_map={"a": torch.distributions.Normal})
        >>> with set_composite_lp_aggregate(True):
        ...     composite_entropy(d).shape
        torch.Size([2])
    """
    entropies: dict[NestedKey, Scores] = {}
    for name, component in distribution.dists.items():
        try:
            entropy = component.entropy()
        except NotImplementedError:
            if not component.has_rsample:
                raise
            _, log_prob = rsample_and_log_prob(component, (samples_mc,))
            entropy = -log_prob.mean(0)
        entropies[_suffixed(name, "_entropy")] = entropy
    if not composite_lp_aggregate():
        return TensorDict(entropies, batch_size=distribution.batch_shape)
    return _aggregate(entropies, len(distribution.batch_shape))
