"""A GPT-2 style causal transformer in plain torch (pre-LayerNorm blocks, learned positions).

The maths of ``transformers``' ``GPT2Model`` (Radford et al. 2019) fed with input embeddings:
``x = drop(inputs + wpe[positions])``, then per block ``x += attn(ln_1(x))`` and
``x += mlp(ln_2(x))``, then ``ln_f``. Attention runs through
:func:`torch.nn.functional.scaled_dot_product_attention` with ``is_causal=True``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CausalTransformer", "activation_module"]

_ACTIVATIONS = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "gelu_new": lambda: nn.GELU(approximate="tanh"),
    "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh"),
    "silu": nn.SiLU,
    "swish": nn.SiLU,
    "tanh": nn.Tanh,
}


def activation_module(name: str) -> nn.Module:
    """The activation called ``name`` (GPT-2's ``activation_function`` names)."""
    if name not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; use one of {sorted(_ACTIVATIONS)}.")
    return _ACTIVATIONS[name]()


class _CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, attn_pdrop: float, resid_pdrop: float) -> None:
        super().__init__()
        self.n_head = n_head
        self.attn_pdrop = attn_pdrop
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.resid_drop = nn.Dropout(resid_pdrop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, length, e = x.shape
        q, k, v = (
            self.qkv(x).view(b, length, 3, self.n_head, e // self.n_head).permute(2, 0, 3, 1, 4)
        )
        drop = self.attn_pdrop if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True)
        return self.resid_drop(self.proj(y.transpose(1, 2).reshape(b, length, e)))


class _Block(nn.Module):
    def __init__(
        self, n_embd: int, n_head: int, n_inner: int, activation: str, attn_pdrop: float,
        resid_pdrop: float,
    ) -> None:  # fmt: skip
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = _CausalSelfAttention(n_embd, n_head, attn_pdrop, resid_pdrop)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, n_inner), activation_module(activation), nn.Linear(n_inner, n_embd),
            nn.Dropout(resid_pdrop),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class CausalTransformer(nn.Module):
    """GPT-2's body over input embeddings ``[B, L, n_embd]`` (``L <= n_positions``).

    Args:
        n_embd: width of the tokens.
        n_layer: number of blocks.
        n_head: attention heads (must divide ``n_embd``).
        n_inner: hidden width of each block's MLP.
        activation: the MLP's activation (``"relu"``, ``"gelu"``, ``"gelu_new"``, ...).
        n_positions: the longest sequence (size of the learned position table).
        resid_pdrop: dropout on the embeddings and on each residual branch.
        attn_pdrop: dropout on the attention probabilities.

    Examples:
        >>> net = CausalTransformer(n_embd=8, n_layer=1, n_head=2, n_inner=16, n_positions=12)
        >>> net(torch.randn(3, 12, 8)).shape
        torch.Size([3, 12, 8])
    """

    def __init__(
        self,
        n_embd: int,
        n_layer: int,
        n_head: int,
        n_inner: int,
        activation: str = "relu",
        n_positions: int = 1024,
        resid_pdrop: float = 0.1,
        attn_pdrop: float = 0.1,
    ) -> None:
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"n_head ({n_head}) must divide n_embd ({n_embd}).")
        self.n_positions = n_positions
        self.wpe = nn.Embedding(n_positions, n_embd)
        self.drop = nn.Dropout(resid_pdrop)
        self.blocks = nn.ModuleList(
            _Block(n_embd, n_head, n_inner, activation, attn_pdrop, resid_pdrop)
            for _ in range(n_layer)
        )
        self.ln_f = nn.LayerNorm(n_embd)

    def forward(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        """The last hidden state, ``[B, L, n_embd]``."""
        length = inputs_embeds.shape[-2]
        if length > self.n_positions:
            raise ValueError(
                f"the sequence has {length} tokens but n_positions is {self.n_positions}; "
                "raise n_positions in the config or shorten the context."
            )
        x = self.drop(inputs_embeds + self.wpe.weight[:length])
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)
