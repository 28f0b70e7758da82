"""Multi-agent networks: one network per agent (or one shared), vectorised over agents."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDict
from torch import nn

from rl_modules.networks.conv import ConvNet
from rl_modules.networks.ensemble import StackedParams
from rl_modules.networks.mlp import MLP


class _MultiAgentNet(nn.Module):
    """Routes ``[*B, n_agents, *in]`` through a shared net or per-agent stacked nets.

    Subclasses build ``template`` (the per-agent network, fed with the
    agent's own input, or with every agent's input when centralised).
    """

    agent_event_dims: int  # number of trailing dims of one agent's input

    def __init__(
        self,
        template: nn.Module,
        n_agents: int,
        centralized: bool,
        share_params: bool,
        agent_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.n_agents, self.centralized, self.share_params = n_agents, centralized, share_params
        self._agent_dim_setting = agent_dim
        if share_params:
            self.net = template
        else:
            self.agent_nets = StackedParams(template, n_agents, reset_parameters=True)

    @property
    def agent_dim(self) -> int:
        """The agent dim of the input (default counted from the end: ``-2`` for MLPs, ``-4`` for ConvNets)."""
        if self._agent_dim_setting is not None:
            return self._agent_dim_setting
        return -(self.agent_event_dims + 1)

    def _pre_forward_check(self, x: torch.Tensor) -> torch.Tensor:
        """Validate (or adapt) the input; the default checks the agent dim's size."""
        agent_dim = self.agent_dim
        if not -x.ndim <= agent_dim < x.ndim or x.shape[agent_dim] != self.n_agents:
            raise ValueError(
                f"{type(self).__name__}: expected n_agents={self.n_agents} entries on the agent "
                f"dim {agent_dim} of the input, got shape {tuple(x.shape)}."
            )
        return x

    @property
    def params(self) -> TensorDict:
        """The parameters as a TensorDict: batch ``[n_agents]`` when not shared, ``[]`` when shared."""
        if self.share_params:
            return TensorDict.from_module(self.net)
        stacked = dict(zip(self.agent_nets._names, self.agent_nets.params, strict=True))
        return TensorDict(stacked, batch_size=[self.n_agents]).unflatten_keys(".")

    def reset_parameters(self) -> None:
        """Re-initialise the parameters (each agent's net independently when not shared)."""
        if self.share_params:
            for module in self.net.modules():
                if callable(getattr(module, "reset_parameters", None)):
                    module.reset_parameters()
        else:
            self.agent_nets.reset_parameters()

    def __repr__(self) -> str:
        template = self.net if self.share_params else self.agent_nets._template[0]
        inner = "\n".join("    " + line for line in repr(template).splitlines())
        return (
            f"{type(self).__name__}(\n{inner},\n    n_agents={self.n_agents},\n"
            f"    share_params={self.share_params},\n    centralized={self.centralized},\n"
            f"    agent_dim={self.agent_dim})"
        )

    def _centralise(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._pre_forward_check(x)
        agent_dim = self.agent_dim % x.ndim
        if not self.centralized:
            if self.share_params:
                return self.net(x)
            return self.agent_nets.call(x, in_dims=agent_dim, out_dim=agent_dim)
        joint = self._centralise(x)
        if self.share_params:
            out = self.net(joint).unsqueeze(agent_dim)
            return out.expand(*out.shape[:agent_dim], self.n_agents, *out.shape[agent_dim + 1 :])
        return self.agent_nets.call(joint, in_dims=None, out_dim=agent_dim)


class MultiAgentNetBase(_MultiAgentNet):
    """Base of custom multi-agent networks: define ``_build_single_net`` (one agent's net).

    The net is shared by all agents (``share_params=True``) or copied per agent
    with independent parameters, run in one ``torch.vmap`` call over the agent
    dim (``agent_dim``, any position). Override ``_pre_forward_check(x)`` to
    validate inputs. Centralised nets also need ``_centralise(x)`` (the joint
    input every agent's net sees).

    Args:
        n_agents: number of agents.
        centralized: whether each net sees every agent's input (needs ``_centralise``).
        share_params: one net for all agents, or one per agent.
        agent_dim: the agent dim of the input.
        device: passed to ``_build_single_net``.
        **kwargs: passed to ``_build_single_net``.

    Examples:
        >>> import torch
        >>> class PerAgent(MultiAgentNetBase):
        ...     def _build_single_net(self, *, device, **kwargs):
        ...         return torch.nn.Linear(5, 2, device=device)
        >>> net = PerAgent(n_agents=3, centralized=False, share_params=False, agent_dim=1)
        >>> net(torch.zeros(4, 3, 6, 5)).shape
        torch.Size([4, 3, 6, 2])
    """

    def __init__(
        self,
        *,
        n_agents: int,
        centralized: bool,
        share_params: bool,
        agent_dim: int,
        device: torch.device | str | None = None,
        **kwargs: object,
    ) -> None:
        if centralized and type(self)._centralise is _MultiAgentNet._centralise:
            raise NotImplementedError(
                f"{type(self).__name__}: centralized=True needs a _centralise(x) method giving "
                "the joint input every agent's net sees."
            )
        template = self._build_single_net(device=device, **kwargs)
        super().__init__(template, n_agents, centralized, share_params, agent_dim=agent_dim)

    def _build_single_net(
        self, *, device: torch.device | str | None, **kwargs: object
    ) -> nn.Module:
        raise NotImplementedError(f"{type(self).__name__} must define _build_single_net().")


class MultiAgentMLP(_MultiAgentNet):
    """An MLP per agent over inputs ``[*B, n_agents, n_agent_inputs]``.

    - ``share_params=True``: one MLP for all agents; ``False``: independent
      parameters per agent, stored stacked and run with ``torch.vmap`` (one
      batched call, not a loop over agents).
    - ``centralized=True``: every agent's net sees all agents' inputs
      (concatenated, ``n_agents * n_agent_inputs`` features), as a MAPPO critic.
      Centralised with shared parameters gives the same output to every agent.

    Args:
        n_agent_inputs: features per agent, or ``None`` to read them from the
            first input (lazy layers; the parameters are materialised in place by
            the first call, so an optimizer may be built before it).
        n_agent_outputs: outputs per agent.
        n_agents: number of agents.
        centralized: see above.
        share_params: see above.
        device: where the parameters live.
        depth: hidden layers of each MLP.
        num_cells: hidden widths (default 32).
        activation_class: activation (default ``nn.Tanh``).
        **mlp_kwargs: other :class:`MLP` arguments.

    Examples:
        >>> import torch
        >>> net = MultiAgentMLP(4, 2, n_agents=3, centralized=False, share_params=False, num_cells=[16])
        >>> net(torch.zeros(10, 3, 4)).shape
        torch.Size([10, 3, 2])
    """

    agent_event_dims = 1

    def __init__(
        self,
        n_agent_inputs: int | None,
        n_agent_outputs: int,
        n_agents: int,
        *,
        centralized: bool,
        share_params: bool,
        device: torch.device | str | None = None,
        depth: int | None = None,
        num_cells: int | Sequence[int] | None = None,
        activation_class: type[nn.Module] = nn.Tanh,
        **mlp_kwargs: object,
    ) -> None:
        in_features = n_agent_inputs
        if centralized and n_agent_inputs is not None:
            in_features = n_agent_inputs * n_agents
        template = MLP(
            in_features=in_features,
            out_features=n_agent_outputs,
            depth=depth,
            num_cells=num_cells,
            activation_class=activation_class,
            device=device,
            **mlp_kwargs,
        )
        super().__init__(template, n_agents, centralized, share_params)
        self.n_agent_inputs, self.n_agent_outputs = n_agent_inputs, n_agent_outputs

    def _centralise(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(-2)


class MultiAgentConvNet(_MultiAgentNet):
    """A :class:`ConvNet` per agent over inputs ``[*B, n_agents, C, H, W]``.

    Centralised nets see every agent's image stacked on the channel dim
    (``n_agents * C`` channels). See :class:`MultiAgentMLP` for the sharing modes.

    Args:
        n_agents: number of agents.
        centralized: whether each net sees every agent's input.
        share_params: one net for all agents, or one per agent.
        in_features: channels of one agent's input, or ``None`` for lazy first
            layers (sized, per agent, by the first call).
        device: where the parameters live.
        num_cells, kernel_sizes, strides, paddings, activation_class, **conv_kwargs:
            :class:`ConvNet` arguments.

    Examples:
        >>> import torch
        >>> net = MultiAgentConvNet(2, centralized=True, share_params=False, in_features=3, num_cells=[4], kernel_sizes=3)
        >>> net(torch.zeros(5, 2, 3, 8, 8)).shape
        torch.Size([5, 2, 144])
    """

    agent_event_dims = 3

    def __init__(
        self,
        n_agents: int,
        *,
        centralized: bool,
        share_params: bool,
        in_features: int | None = None,
        device: torch.device | str | None = None,
        num_cells: Sequence[int] | None = None,
        kernel_sizes: int | Sequence[int] = 3,
        strides: int | Sequence[int] = 1,
        paddings: int | Sequence[int] = 0,
        activation_class: type[nn.Module] = nn.ELU,
        **conv_kwargs: object,
    ) -> None:
        if in_features is not None and centralized:
            in_features = in_features * n_agents
        template = ConvNet(
            in_features=in_features,
            num_cells=num_cells,
            kernel_sizes=kernel_sizes,
            strides=strides,
            paddings=paddings,
            activation_class=activation_class,
            device=device,
            **conv_kwargs,
        )
        super().__init__(template, n_agents, centralized, share_params)

    def _centralise(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(-4, -3)
