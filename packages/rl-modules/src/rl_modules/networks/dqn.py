"""Dueling DQN and DDPG networks."""

from __future__ import annotations

import torch
from torch import nn

from rl_modules.networks.conv import ConvNet
from rl_modules.networks.mlp import MLP


class DuelingCnnDQNet(nn.Module):
    """Dueling Q-network on pixels: ``Q = V + A - mean(A)`` (Wang et al., 2016).

    Args:
        out_features: number of actions.
        out_features_value: outputs of the value head (1).
        cnn_kwargs: :class:`ConvNet` arguments; default the Nature-DQN trunk
            (``num_cells=[32, 64, 64]``, ``kernel_sizes=[8, 4, 3]``, ``strides=[4, 2, 1]``).
        mlp_kwargs: :class:`MLP` arguments of both heads; default one hidden
            layer of 512 with ``nn.ELU``.
        device: where the parameters live.

    Examples:
        >>> import torch
        >>> net = DuelingCnnDQNet(out_features=4, cnn_kwargs={"num_cells": [8], "kernel_sizes": [4], "strides": [4]})
        >>> net(torch.zeros(2, 3, 32, 32)).shape
        torch.Size([2, 4])
    """

    def __init__(
        self,
        out_features: int,
        out_features_value: int = 1,
        cnn_kwargs: dict | None = None,
        mlp_kwargs: dict | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        cnn = {"num_cells": [32, 64, 64], "kernel_sizes": [8, 4, 3], "strides": [4, 2, 1]}
        cnn.update(cnn_kwargs or {})
        mlp = {"depth": 1, "num_cells": 512, "activation_class": nn.ELU}
        mlp.update(mlp_kwargs or {})
        self.features = ConvNet(device=device, **cnn)
        self.advantage = MLP(out_features=out_features, device=device, **mlp)
        self.value = MLP(out_features=out_features_value, device=device, **mlp)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.features(pixels)
        adv = self.advantage(x)
        return self.value(x) + adv - adv.mean(-1, keepdim=True)


def _init_last_layer(mlp: MLP, scale: float) -> None:
    """DDPG's small uniform init of the output layer (Lillicrap et al., 2016, sec. 7)."""
    last = [m for m in mlp.modules() if isinstance(m, nn.Linear)][-1]
    if isinstance(last.weight, nn.parameter.UninitializedParameter):
        return
    with torch.no_grad():
        last.weight.uniform_(-scale, scale)
        if last.bias is not None:
            last.bias.uniform_(-scale, scale)


class DdpgMlpActor(nn.Module):
    """DDPG's deterministic actor: an MLP (400, 300, ELU) from observation to action.

    Lillicrap et al., "Continuous control with deep reinforcement learning" (2016).
    Squash the output with a ``TanhDelta`` or project it into the action spec.

    Args:
        action_dim: size of the action.
        mlp_net_kwargs: overrides of the :class:`MLP` defaults.
        device: where the parameters live.

    Examples:
        >>> import torch
        >>> DdpgMlpActor(2, {"in_features": 5})(torch.zeros(7, 5)).shape
        torch.Size([7, 2])
    """

    def __init__(
        self,
        action_dim: int,
        mlp_net_kwargs: dict | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        kwargs = {
            "in_features": None,
            "out_features": action_dim,
            "depth": 2,
            "num_cells": [400, 300],
            "activation_class": nn.ELU,
            "bias_last_layer": True,
        }
        kwargs.update(mlp_net_kwargs or {})
        self.mlp = MLP(device=device, **kwargs)
        _init_last_layer(self.mlp, 6e-3)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.mlp(observation)


class DdpgMlpQNet(nn.Module):
    """DDPG's critic: ``Q(s, a) = net2(cat(net1(s), a))``.

    Args:
        mlp_net_kwargs_net1: overrides for the observation trunk (default 400 ELU units,
            activated output).
        mlp_net_kwargs_net2: overrides for the head (default 300 ELU units to 1 output).
        device: where the parameters live.

    Examples:
        >>> import torch
        >>> q = DdpgMlpQNet()
        >>> q(torch.zeros(7, 5), torch.zeros(7, 2)).shape
        torch.Size([7, 1])
    """

    def __init__(
        self,
        mlp_net_kwargs_net1: dict | None = None,
        mlp_net_kwargs_net2: dict | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        k1 = {
            "in_features": None,
            "out_features": 400,
            "depth": 0,
            "num_cells": [],
            "activation_class": nn.ELU,
            "bias_last_layer": True,
            "activate_last_layer": True,
        }
        k1.update(mlp_net_kwargs_net1 or {})
        k2 = {
            "in_features": None,
            "out_features": 1,
            "depth": 1,
            "num_cells": [300],
            "activation_class": nn.ELU,
            "bias_last_layer": True,
        }
        k2.update(mlp_net_kwargs_net2 or {})
        self.mlp1 = MLP(device=device, **k1)
        self.mlp2 = MLP(device=device, **k2)
        _init_last_layer(self.mlp2, 6e-4)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.mlp2(torch.cat([self.mlp1(observation), action], -1))
