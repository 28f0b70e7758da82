"""Decision Transformer (Chen et al. 2021, arXiv:2106.01345) and its actors.

The model reads the interleaved sequence ``(R_1, s_1, a_1, R_2, s_2, a_2, ...)`` of
returns-to-go, states and actions and returns the hidden state at each *state* token, from
which an actor head predicts ``a_t``: causal attention lets ``s_t``'s token see
``R_1..R_t``, ``s_1..s_t`` and ``a_1..a_{t-1}`` only.

Why torch's own layers and not ``transformers``' GPT-2 (TorchRL's choice): the blocks are
the same maths (see :mod:`rl_modules.sequence._gpt`, tested against ``GPT2Model`` with
copied weights), they run on fused ``scaled_dot_product_attention``, and rl-modules stays
free of a large dependency that brings tokenizers and model hubs a control policy never uses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from rl_modules.sequence._gpt import CausalTransformer

__all__ = ["DTActor", "DecisionTransformer", "OnlineDTActor"]


def _as_dict(config: Any, default: Any) -> dict[str, Any]:
    if config is None:
        config = default
    if dataclasses.is_dataclass(config):
        config = dataclasses.asdict(config)
    try:
        config = dict(config)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"config must be a DecisionTransformer.DTConfig or a dict, got {type(config).__name__}."
        ) from err
    known = {f.name for f in dataclasses.fields(DecisionTransformer.DTConfig)}
    unknown = sorted(set(config) - known)
    if unknown:
        raise TypeError(f"unknown DTConfig field(s) {unknown}; the fields are {sorted(known)}.")
    return {**dataclasses.asdict(DecisionTransformer.DTConfig()), **config}


def _orthogonal_init(layer: nn.Linear) -> nn.Linear:
    nn.init.orthogonal_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


class DecisionTransformer(nn.Module):
    """GPT-style transformer over return-to-go, state and action tokens; returns state tokens.

    Each modality has its own linear embedding; the three tokens of step ``t`` are
    interleaved, layer-normed, given learned positions (GPT-2's, ``3 T <= n_positions``)
    and, when ``config.max_timestep > 0`` and ``timestep`` is passed, the embedding of the
    episode step ``t`` (the paper's timestep embedding, shared by the three tokens).

    Args:
        state_dim: observation size.
        action_dim: action size.
        config: a :class:`DecisionTransformer.DTConfig` or a dict of its fields
            (``None``: the defaults).
        device: where the parameters live.

    Examples:
        >>> config = DecisionTransformer.DTConfig(n_embd=16, n_layer=1, n_head=2, n_inner=32)
        >>> model = DecisionTransformer(state_dim=4, action_dim=2, config=config)
        >>> obs, act, rtg = torch.randn(3, 5, 10, 4), torch.randn(3, 5, 10, 2), torch.randn(3, 5, 10, 1)
        >>> model(obs, act, rtg).shape
        torch.Size([3, 5, 10, 16])
    """

    @dataclass
    class DTConfig:
        """The transformer's hyperparameters (TorchRL's fields, plus ``max_timestep``)."""

        n_embd: int = 256
        n_layer: int = 4
        n_head: int = 4
        n_inner: int = 1024
        activation: str = "relu"
        n_positions: int = 1024
        resid_pdrop: float = 0.1
        attn_pdrop: float = 0.1
        max_timestep: int = 0
        """Size of the episode-step embedding table (0: no timestep embedding)."""

    @classmethod
    def default_config(cls) -> DecisionTransformer.DTConfig:
        """A fresh default :class:`DTConfig`."""
        return cls.DTConfig()

    def __init__(
        self,
        state_dim: int,
        action_dim: int,
        config: DTConfig | dict[str, Any] | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        cfg = _as_dict(config, self.default_config())
        self.state_dim, self.action_dim = state_dim, action_dim
        self.hidden_size = cfg["n_embd"]
        self.max_timestep = cfg["max_timestep"]
        with torch.device(device) if device is not None else contextlib.nullcontext():
            self.transformer = CausalTransformer(
                n_embd=cfg["n_embd"], n_layer=cfg["n_layer"], n_head=cfg["n_head"],
                n_inner=cfg["n_inner"], activation=cfg["activation"],
                n_positions=cfg["n_positions"], resid_pdrop=cfg["resid_pdrop"],
                attn_pdrop=cfg["attn_pdrop"],
            )  # fmt: skip
            self.embed_return = nn.Linear(1, self.hidden_size)
            self.embed_state = nn.Linear(state_dim, self.hidden_size)
            self.embed_action = nn.Linear(action_dim, self.hidden_size)
            self.embed_timestep = (
                nn.Embedding(self.max_timestep, self.hidden_size) if self.max_timestep else None
            )
            self.embed_ln = nn.LayerNorm(self.hidden_size)

    def _check(self, observation: torch.Tensor, action: torch.Tensor, rtg: torch.Tensor) -> None:
        expected = {
            "observation": (observation, self.state_dim),
            "action": (action, self.action_dim),
            "return_to_go": (rtg, 1),
        }
        for name, (x, size) in expected.items():
            if x.ndim < 2 or x.shape[-1] != size:
                raise ValueError(
                    f"DecisionTransformer: {name} must have shape [*batch, T, {size}], got "
                    f"{tuple(x.shape)}."
                )
        if not observation.shape[:-1] == action.shape[:-1] == rtg.shape[:-1]:
            raise ValueError(
                "DecisionTransformer: observation, action and return_to_go must share their "
                f"[*batch, T] dims, got {tuple(observation.shape[:-1])}, "
                f"{tuple(action.shape[:-1])} and {tuple(rtg.shape[:-1])}."
            )

    def forward(
        self,
        observation: torch.Tensor,
        action: torch.Tensor,
        return_to_go: torch.Tensor,
        timestep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Hidden state at each state token, ``[*batch, T, n_embd]``.

        Args:
            observation: ``[*batch, T, state_dim]``.
            action: ``[*batch, T, action_dim]`` (the action at ``t`` is not seen by ``s_t``).
            return_to_go: ``[*batch, T, 1]``.
            timestep: optional episode steps ``[*batch, T]`` (or ``[*batch, T, 1]``), integers
                in ``[0, max_timestep)``; used only with ``config.max_timestep > 0``.
        """
        self._check(observation, action, return_to_go)
        batch, length = observation.shape[:-2], observation.shape[-2]
        flat = math.prod(batch)
        tokens = torch.stack(
            (
                self.embed_return(return_to_go.reshape(flat, length, 1)),
                self.embed_state(observation.reshape(flat, length, self.state_dim)),
                self.embed_action(action.reshape(flat, length, self.action_dim)),
            ),
            dim=2,
        )  # [B, T, 3, E]
        if timestep is not None:
            if self.embed_timestep is None:
                raise ValueError(
                    "DecisionTransformer: a timestep was passed but config.max_timestep is 0; "
                    "set max_timestep to the longest episode to embed episode steps."
                )
            if timestep.shape[-1:] == (1,) and timestep.ndim == observation.ndim:
                timestep = timestep.squeeze(-1)
            if timestep.shape != observation.shape[:-1]:
                raise ValueError(
                    f"DecisionTransformer: timestep must have shape {tuple(observation.shape[:-1])}"
                    f" ([*batch, T]), got {tuple(timestep.shape)}."
                )
            steps = timestep.reshape(flat, length, 1).long().clamp(0, self.max_timestep - 1)
            tokens = tokens + self.embed_timestep(steps)
        x = self.embed_ln(tokens.reshape(flat, 3 * length, self.hidden_size))
        x = self.transformer(x).view(flat, length, 3, self.hidden_size)[:, :, 1]
        return x.reshape(*batch, length, self.hidden_size)


class DTActor(nn.Module):
    """Deterministic Decision Transformer actor: a linear head on the state tokens.

    Args:
        state_dim: observation size.
        action_dim: action size.
        transformer_config: the transformer's config (``None``: :meth:`default_config`).
        device: where the parameters live.

    Examples:
        >>> config = DecisionTransformer.DTConfig(n_embd=16, n_layer=1, n_head=2, n_inner=32)
        >>> actor = DTActor(state_dim=4, action_dim=2, transformer_config=config)
        >>> actor(torch.randn(8, 10, 4), torch.randn(8, 10, 2), torch.randn(8, 10, 1)).shape
        torch.Size([8, 10, 2])
    """

    def __init__(
        self,
        state_dim: int,
        action_dim: int,
        transformer_config: DecisionTransformer.DTConfig | dict[str, Any] | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        cfg = _as_dict(transformer_config, self.default_config())
        self.transformer = DecisionTransformer(state_dim, action_dim, cfg, device=device)
        self.action_layer = _orthogonal_init(nn.Linear(cfg["n_embd"], action_dim, device=device))

    def forward(
        self,
        observation: torch.Tensor,
        action: torch.Tensor,
        return_to_go: torch.Tensor,
        timestep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Predicted actions ``[*batch, T, action_dim]``."""
        return self.action_layer(self.transformer(observation, action, return_to_go, timestep))

    @classmethod
    def default_config(cls) -> DecisionTransformer.DTConfig:
        """TorchRL's default for the actors: 512 wide, 4 layers, 4 heads, MLP 2048."""
        return DecisionTransformer.DTConfig(n_embd=512, n_layer=4, n_head=4, n_inner=2048)


class OnlineDTActor(nn.Module):
    """Online Decision Transformer actor (Zheng et al. 2022, arXiv:2202.05607): Gaussian head.

    Returns ``(loc, scale)``; with a ``TanhNormal`` distribution on top this is the paper's
    squashed Gaussian policy. The log standard deviation is learned per state token and
    squashed into ``[log_std_min, log_std_max]`` by ``tanh``, as in the paper's code.

    Args:
        state_dim: observation size.
        action_dim: action size.
        transformer_config: the transformer's config (``None``: :meth:`default_config`).
        device: where the parameters live.
        log_std_min: lowest log standard deviation (-5, as the paper).
        log_std_max: highest log standard deviation (2, as the paper).

    Examples:
        >>> config = DecisionTransformer.DTConfig(n_embd=16, n_layer=1, n_head=2, n_inner=32)
        >>> actor = OnlineDTActor(state_dim=4, action_dim=2, transformer_config=config)
        >>> loc, scale = actor(torch.randn(8, 10, 4), torch.randn(8, 10, 2), torch.randn(8, 10, 1))
        >>> loc.shape, bool((scale > 0).all())
        (torch.Size([8, 10, 2]), True)
    """

    def __init__(
        self,
        state_dim: int,
        action_dim: int,
        transformer_config: DecisionTransformer.DTConfig | dict[str, Any] | None = None,
        device: torch.device | str | None = None,
        *,
        log_std_min: float = -5.0,
        log_std_max: float = 2.0,
    ) -> None:
        super().__init__()
        if not log_std_min < log_std_max:
            raise ValueError(f"log_std_min ({log_std_min}) must be < log_std_max ({log_std_max}).")
        cfg = _as_dict(transformer_config, self.default_config())
        self.transformer = DecisionTransformer(state_dim, action_dim, cfg, device=device)
        self.action_layer_mean = _orthogonal_init(
            nn.Linear(cfg["n_embd"], action_dim, device=device)
        )
        self.action_layer_logstd = _orthogonal_init(
            nn.Linear(cfg["n_embd"], action_dim, device=device)
        )
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def forward(
        self,
        observation: torch.Tensor,
        action: torch.Tensor,
        return_to_go: torch.Tensor,
        timestep: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loc, scale)``, each ``[*batch, T, action_dim]``."""
        hidden = self.transformer(observation, action, return_to_go, timestep)
        squashed = torch.tanh(self.action_layer_logstd(hidden))
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (squashed + 1)
        return self.action_layer_mean(hidden), log_std.exp()

    @classmethod
    def default_config(cls) -> DecisionTransformer.DTConfig:
        """TorchRL's default for the actors: 512 wide, 4 layers, 4 heads, MLP 2048."""
        return DecisionTransformer.DTConfig(n_embd=512, n_layer=4, n_head=4, n_inner=2048)
