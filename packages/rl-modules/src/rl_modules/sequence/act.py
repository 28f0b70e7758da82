"""ACT: Action Chunking with Transformers (Zhao et al. 2023, arXiv:2304.13705).

A conditional VAE over action chunks. The *style encoder* (a transformer encoder over
``[CLS, a_1..a_K, obs]``) maps an expert chunk to a Gaussian latent ``z``; the *decoder*
(a DETR-style transformer decoder, one learned query per chunk step) cross-attends to the
observation token and ``z`` and emits the ``K`` actions at once. At inference ``z = 0``,
the prior's mean. The layout follows TorchRL 0.14's ``ACTModel`` (same arguments, same
outputs); the paper's image backbone is left to the user (feed its features as
``observation``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["ACTModel", "sinusoidal_positions"]


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    """``[length, dim]`` sine/cosine position codes (Vaswani et al. 2017); ``dim`` even.

    Examples:
        >>> sinusoidal_positions(3, 4)[0]
        tensor([0., 1., 0., 1.])
    """
    if dim % 2:
        raise ValueError(f"sinusoidal_positions needs an even dim, got {dim}.")
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    out = torch.empty(length, dim)
    out[:, 0::2] = torch.sin(pos * freq)
    out[:, 1::2] = torch.cos(pos * freq)
    return out


class ACTModel(nn.Module):
    """ACT's CVAE: ``(observation, action_chunk) -> (action_pred, mu, log_var)``.

    Args:
        obs_dim: observation (or observation-feature) size.
        action_dim: action size.
        chunk_size: ``K``, the actions predicted per call.
        hidden_dim: transformer width (256).
        nheads: attention heads (8).
        num_encoder_layers: style-encoder depth (4).
        num_decoder_layers: action-decoder depth (7, as the paper).
        latent_dim: size of ``z`` (32, as the paper).
        dropout: dropout in every transformer layer (0.1).
        dim_feedforward: MLP width inside the layers (``None``: ``4 * hidden_dim``).

    Shapes: ``observation [*B, obs_dim]``, ``action_chunk [*B, K, action_dim]`` (``None`` at
    inference); returns ``action_pred [*B, K, action_dim]`` and ``mu``, ``log_var``
    ``[*B, latent_dim]`` (zeros at inference).

    Examples:
        >>> model = ACTModel(obs_dim=5, action_dim=2, chunk_size=4, hidden_dim=16, nheads=2,
        ...                  num_encoder_layers=1, num_decoder_layers=1, latent_dim=3)
        >>> pred, mu, log_var = model(torch.randn(6, 5), torch.randn(6, 4, 2))
        >>> pred.shape, mu.shape
        (torch.Size([6, 4, 2]), torch.Size([6, 3]))
        >>> bool(model(torch.randn(6, 5))[1].eq(0).all())
        True
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        chunk_size: int,
        hidden_dim: int = 256,
        nheads: int = 8,
        num_encoder_layers: int = 4,
        num_decoder_layers: int = 7,
        latent_dim: int = 32,
        dropout: float = 0.1,
        dim_feedforward: int | None = None,
    ) -> None:
        super().__init__()
        self.obs_dim, self.action_dim, self.chunk_size = obs_dim, action_dim, chunk_size
        self.hidden_dim, self.latent_dim = hidden_dim, latent_dim
        ff = 4 * hidden_dim if dim_feedforward is None else dim_feedforward
        self.obs_proj = nn.Linear(obs_dim, hidden_dim)
        # style encoder: [CLS, actions, obs] -> (mu, log_var) from the CLS output
        self.cls_embed = nn.Embedding(1, hidden_dim)
        self.action_proj = nn.Linear(action_dim, hidden_dim)
        self.cvae_encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(hidden_dim, nheads, ff, dropout, batch_first=True),
            num_layers=num_encoder_layers,
            enable_nested_tensor=False,
        )
        self.register_buffer(
            "enc_pos", sinusoidal_positions(chunk_size + 2, hidden_dim), persistent=False
        )
        self.latent_proj = nn.Linear(hidden_dim, 2 * latent_dim)
        self.latent_out_proj = nn.Linear(latent_dim, hidden_dim)
        # decoder: one learned query per chunk step, memory [obs, z]
        self.action_queries = nn.Embedding(chunk_size, hidden_dim)
        self.transformer_decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(hidden_dim, nheads, ff, dropout, batch_first=True),
            num_layers=num_decoder_layers,
        )
        self.action_head = nn.Linear(hidden_dim, action_dim)

    def forward(
        self, observation: torch.Tensor, action_chunk: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action_pred, mu, log_var)``; without ``action_chunk``, ``z = mu = log_var = 0``."""
        if observation.shape[-1:] != (self.obs_dim,):
            raise ValueError(
                f"ACTModel: observation must have shape [*B, {self.obs_dim}], got "
                f"{tuple(observation.shape)}."
            )
        batch = observation.shape[:-1]
        flat = math.prod(batch)
        obs_tok = self.obs_proj(observation.reshape(flat, self.obs_dim)).unsqueeze(1)
        if action_chunk is not None:
            expected = (*batch, self.chunk_size, self.action_dim)
            if tuple(action_chunk.shape) != expected:
                raise ValueError(
                    f"ACTModel: action_chunk must have shape {expected} ([*B, chunk_size, "
                    f"action_dim]), got {tuple(action_chunk.shape)}."
                )
            acts = self.action_proj(action_chunk.reshape(flat, self.chunk_size, self.action_dim))
            cls = self.cls_embed.weight.expand(flat, 1, self.hidden_dim)
            enc = self.cvae_encoder(torch.cat([cls, acts, obs_tok], 1) + self.enc_pos)
            mu, log_var = self.latent_proj(enc[:, 0]).chunk(2, -1)
            z = mu + (0.5 * log_var).exp() * torch.randn_like(mu)
        else:
            mu = obs_tok.new_zeros(flat, self.latent_dim)
            log_var = obs_tok.new_zeros(flat, self.latent_dim)
            z = obs_tok.new_zeros(flat, self.latent_dim)
        memory = torch.cat([obs_tok, self.latent_out_proj(z).unsqueeze(1)], 1)
        queries = self.action_queries.weight.expand(flat, self.chunk_size, self.hidden_dim)
        pred = self.action_head(self.transformer_decoder(queries, memory))
        return (
            pred.reshape(*batch, self.chunk_size, self.action_dim),
            mu.reshape(*batch, self.latent_dim),
            log_var.reshape(*batch, self.latent_dim),
        )
