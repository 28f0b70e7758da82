"""Linear layer with factorised Gaussian parameter noise (NoisyNet)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

from rl_modules.exploration_type import ExplorationType, exploration_type


def _scaled_noise(
    size: int, generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    x = torch.randn(size, generator=generator, device=device)
    return x.sign() * x.abs().sqrt()


class NoisyLinear(nn.Module):
    """``y = (mu_w + sigma_w * eps_w) x + mu_b + sigma_b * eps_b`` with factorised noise.

    Fortunato et al., "Noisy Networks for Exploration" (2018), factorised
    variant: ``eps_w = f(eps_out) f(eps_in)^T`` with ``f(x) = sign(x) sqrt(|x|)``.
    As in TorchRL 0.14, the noise is used when the exploration type is
    ``RANDOM`` (``use_exploration_type=True``, the default), or in training mode
    (``use_exploration_type=False``); call :meth:`reset_noise` to draw new noise.

    Args:
        in_features: input size.
        out_features: output size.
        bias: whether the layer has a (noisy) bias.
        device: where the parameters live.
        dtype: their dtype.
        std_init: initial ``sigma`` factor (``sigma_w = std_init / sqrt(in_features)``,
            ``sigma_b = std_init / sqrt(out_features)``). Default 0.5, as the paper.
        use_exploration_type: noise under ``set_exploration_type(RANDOM)`` (``True`` or
            ``None``) or in training mode (``False``).

    Examples:
        >>> import torch
        >>> layer = NoisyLinear(4, 2)
        >>> layer(torch.zeros(3, 4)).shape
        torch.Size([3, 2])
        >>> layer.reset_noise()
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        std_init: float = 0.5,
        use_exploration_type: bool | None = True,
    ) -> None:
        super().__init__()
        self.use_exploration_type = use_exploration_type is None or bool(use_exploration_type)
        kw = {"device": device, "dtype": dtype}
        self.in_features, self.out_features, self.std_init = in_features, out_features, std_init
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features, **kw))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features, **kw))
        self.register_buffer("weight_epsilon", torch.zeros(out_features, in_features, **kw))
        if bias:
            self.bias_mu = nn.Parameter(torch.empty(out_features, **kw))
            self.bias_sigma = nn.Parameter(torch.empty(out_features, **kw))
            self.register_buffer("bias_epsilon", torch.zeros(out_features, **kw))
        else:
            self.bias_mu = self.bias_sigma = self.bias_epsilon = None
        self.reset_parameters()
        self.reset_noise()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.in_features)
        with torch.no_grad():
            self.weight_mu.uniform_(-bound, bound)
            self.weight_sigma.fill_(self.std_init * bound)
            if self.bias_mu is not None:
                self.bias_mu.uniform_(-bound, bound)
                self.bias_sigma.fill_(self.std_init / math.sqrt(self.out_features))

    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        """Draw new factorised noise."""
        dev = self.weight_mu.device
        eps_in = _scaled_noise(self.in_features, generator, dev)
        eps_out = _scaled_noise(self.out_features, generator, dev)
        self.weight_epsilon.copy_(torch.outer(eps_out, eps_in))
        if self.bias_epsilon is not None:
            self.bias_epsilon.copy_(eps_out)

    def _noisy(self) -> bool:
        if self.use_exploration_type:
            return exploration_type() is ExplorationType.RANDOM
        return self.training

    @property
    def weight(self) -> torch.Tensor:
        if self._noisy():
            return self.weight_mu + self.weight_sigma * self.weight_epsilon
        return self.weight_mu

    @property
    def bias(self) -> torch.Tensor | None:
        if self.bias_mu is None:
            return None
        if self._noisy():
            return self.bias_mu + self.bias_sigma * self.bias_epsilon
        return self.bias_mu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class NoisyLazyLinear(LazyModuleMixin, NoisyLinear):
    """A :class:`NoisyLinear` whose ``in_features`` is read from the first input.

    Becomes a plain :class:`NoisyLinear` after the first call.

    Args:
        out_features: output size.
        bias: whether the layer has a (noisy) bias.
        device: where the parameters live.
        dtype: their dtype.
        std_init: initial ``sigma`` factor.
        use_exploration_type: as :class:`NoisyLinear`.

    Examples:
        >>> import torch
        >>> layer = NoisyLazyLinear(2)
        >>> layer(torch.zeros(3, 5)).shape
        torch.Size([3, 2])
        >>> type(layer).__name__, layer.in_features
        ('NoisyLinear', 5)
    """

    cls_to_become = NoisyLinear

    def __init__(
        self,
        out_features: int,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        std_init: float = 0.5,
        use_exploration_type: bool | None = True,
    ) -> None:
        super().__init__(
            0,
            0,
            False,
            device=device,
            dtype=dtype,
            std_init=std_init,
            use_exploration_type=use_exploration_type,
        )
        kw = {"device": device, "dtype": dtype}
        self.out_features = out_features
        self.weight_mu = UninitializedParameter(**kw)
        self.weight_sigma = UninitializedParameter(**kw)
        self.weight_epsilon = UninitializedBuffer(**kw)
        if bias:
            del self.bias_mu, self.bias_sigma, self.bias_epsilon  # plain None attributes
            self.bias_mu = UninitializedParameter(**kw)
            self.bias_sigma = UninitializedParameter(**kw)
            self.bias_epsilon = UninitializedBuffer(**kw)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_noise(generator)

    def initialize_parameters(self, input: torch.Tensor) -> None:
        if not self.has_uninitialized_params():
            return
        with torch.no_grad():
            self.in_features = input.shape[-1]
            shape = (self.out_features, self.in_features)
            self.weight_mu.materialize(shape)
            self.weight_sigma.materialize(shape)
            self.weight_epsilon.materialize(shape)
            if self.bias_mu is not None:
                self.bias_mu.materialize((self.out_features,))
                self.bias_sigma.materialize((self.out_features,))
                self.bias_epsilon.materialize((self.out_features,))
            self.reset_parameters()
            self.reset_noise()


NoisyLinear.lazy_version = NoisyLazyLinear


def reset_noise(module: nn.Module) -> None:
    """Draw new noise in every :class:`NoisyLinear` (any submodule with ``reset_noise``) of ``module``.

    Examples:
        >>> import torch
        >>> net = torch.nn.Sequential(NoisyLinear(4, 8), torch.nn.ReLU(), NoisyLinear(8, 2))
        >>> before = net[0].weight_epsilon.clone()
        >>> reset_noise(net)
        >>> bool((net[0].weight_epsilon != before).any())
        True
    """
    for sub in module.modules():
        if isinstance(sub, LazyModuleMixin) and sub.has_uninitialized_params():
            continue  # sized (and its noise drawn) by its first call
        draw = getattr(sub, "reset_noise", None)
        if callable(draw):
            draw()
