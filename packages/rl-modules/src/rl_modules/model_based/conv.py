"""Pixel encoder and decoder of Dreamer (Ha & Schmidhuber, 2018, arXiv:1803.10122; Hafner et al.).

``ObsEncoder``: ``num_layers`` convolutions (kernel 4, stride 2, ReLU), channels doubling from
``channels``; a 64x64 image gives a ``32 * channels``-dim embedding with 4 layers.
``ObsDecoder``: a linear layer to ``8 * channels`` then transposed convolutions (kernels
5, 5, 6, 6 for 4 layers) back to a 64x64 image. Architecture and argument names are TorchRL's.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["ObsDecoder", "ObsEncoder"]


class ObsEncoder(nn.Module):
    """Convolutional encoder of ``[*B, C, H, W]`` pixels into ``[*B, D]`` embeddings.

    Args:
        channels: channels of the first layer (doubled at each layer). Default 32.
        num_layers: number of convolutions. Default 4.
        in_channels: channels of the input; ``None`` makes the first layer lazy.
        device: where to create the parameters.

    Example:
        >>> enc = ObsEncoder(channels=8, in_channels=3)
        >>> enc(torch.zeros(2, 5, 3, 64, 64)).shape
        torch.Size([2, 5, 256])
    """

    def __init__(
        self,
        channels: int = 32,
        num_layers: int = 4,
        in_channels: int | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}.")
        first = (
            nn.LazyConv2d(channels, 4, stride=2, device=device)
            if in_channels is None
            else nn.Conv2d(in_channels, channels, 4, stride=2, device=device)
        )
        layers: list[nn.Module] = [first, nn.ReLU()]
        width = channels
        for _ in range(1, num_layers):
            layers += [nn.Conv2d(width, 2 * width, 4, stride=2, device=device), nn.ReLU()]
            width *= 2
        self.encoder = nn.Sequential(*layers)
        self.in_channels = in_channels

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        if observation.ndim < 3 or (
            self.in_channels is not None and observation.shape[-3] != self.in_channels
        ):
            expected = self.in_channels if self.in_channels is not None else "C"
            raise ValueError(
                f"ObsEncoder expected pixels shaped [*B, {expected}, H, W] (channels first, "
                f"float), got {tuple(observation.shape)}. Convert HWC images with "
                "ToTensorImage, or point the encoder's in_keys at the pixel entry."
            )
        if not observation.is_floating_point():
            raise TypeError(
                f"ObsEncoder expected float pixels, got {observation.dtype}. Scale uint8 "
                "images to [0, 1] floats first (ToTensorImage)."
            )
        batch = observation.shape[:-3]
        images = observation.reshape(-1, *observation.shape[-3:])
        # channels-last convolutions: ~7% less CPU time (oneDNN) for the same values
        latent = self.encoder(images.contiguous(memory_format=torch.channels_last))
        return latent.reshape(*batch, -1)


class ObsDecoder(nn.Module):
    """Transposed-convolution decoder of ``(state, belief)`` into ``[*B, C, H, W]`` pixels.

    Args:
        channels: channels of the last hidden layer. Default 32.
        num_layers: number of transposed convolutions. Default 4.
        kernel_sizes: kernel of each layer (default ``[5, 5, 6, 6]`` for 4 layers, else 5).
        latent_dim: ``state_dim + rnn_hidden_dim``; ``None`` makes the first layer lazy.
        out_channels: channels of the output image. Default 3.
        device: where to create the parameters.

    Example:
        >>> dec = ObsDecoder(channels=8, latent_dim=10)
        >>> dec(torch.zeros(2, 4), torch.zeros(2, 6)).shape
        torch.Size([2, 3, 64, 64])
    """

    def __init__(
        self,
        channels: int = 32,
        num_layers: int = 4,
        kernel_sizes: int | list[int] | None = None,
        latent_dim: int | None = None,
        out_channels: int = 3,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}.")
        if kernel_sizes is None:
            kernel_sizes = [5, 5, 6, 6] if num_layers == 4 else 5
        if isinstance(kernel_sizes, int):
            kernel_sizes = [kernel_sizes] * num_layers
        if len(kernel_sizes) != num_layers:
            raise ValueError(
                f"kernel_sizes has {len(kernel_sizes)} entries, expected num_layers={num_layers}."
            )
        linear_out = channels * 8 * 2 * 2
        first = (
            nn.LazyLinear(linear_out, device=device)
            if latent_dim is None
            else nn.Linear(latent_dim, linear_out, device=device)
        )
        self.state_to_latent = nn.Sequential(first, nn.ReLU())
        # widths from the input side: linear_out, then channels * 2**(num_layers-2) ... channels
        widths = [linear_out] + [
            channels * 2 ** (num_layers - 2 - i) for i in range(num_layers - 1)
        ]
        layers: list[nn.Module] = []
        for i in range(num_layers - 1):
            layers += [
                nn.ConvTranspose2d(
                    widths[i], widths[i + 1], kernel_sizes[i], stride=2, device=device
                ),
                nn.ReLU(),
            ]
        layers.append(
            nn.ConvTranspose2d(widths[-1], out_channels, kernel_sizes[-1], stride=2, device=device)
        )
        self.decoder = nn.Sequential(*layers)

    def forward(self, state: torch.Tensor, rnn_hidden: torch.Tensor) -> torch.Tensor:
        latent = self.state_to_latent(torch.cat([state, rnn_hidden], dim=-1))
        batch = latent.shape[:-1]
        # the first transposed convolution sees a 1x1 input: it is a matrix product, which
        # runs (with its backward) ~3x faster than the transposed-convolution kernel on CPU
        first = self.decoder[0]
        kh, kw = first.kernel_size
        hidden = torch.addmm(
            first.bias.repeat_interleave(kh * kw),
            latent.reshape(-1, latent.shape[-1]),
            first.weight.flatten(1),
        ).view(-1, first.out_channels, kh, kw)
        pixels = self.decoder[1:](hidden.contiguous(memory_format=torch.channels_last))
        return pixels.reshape(*batch, *pixels.shape[-3:])
