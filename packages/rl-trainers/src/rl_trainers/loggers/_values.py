"""Values every logger back-end checks and converts: hyper-parameter mappings, scalars, videos."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch


def flatten(cfg: Mapping[str, Any], prefix: str = "", sep: str = ".") -> dict[str, Any]:
    """Nested mapping -> flat ``{"a.b": value}``; OmegaConf containers become plain dicts first."""
    if not isinstance(cfg, Mapping):
        to_container = getattr(type(cfg), "to_container", None)
        if to_container is None:
            raise TypeError(
                f"hyper-parameters must be a mapping (dict, DictConfig), got {type(cfg).__name__}; "
                "pass dataclasses through dataclasses.asdict() first"
            )
    out: dict[str, Any] = {}
    items = to_plain(cfg).items()
    for key, value in items:
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(flatten(value, name, sep))
        else:
            out[name] = value
    return out


def to_plain(cfg: Any) -> dict[str, Any]:
    if isinstance(cfg, dict):
        return cfg
    try:  # an OmegaConf DictConfig: resolve interpolations into a plain dict
        from omegaconf import OmegaConf

        if OmegaConf.is_config(cfg):
            return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except ImportError:
        pass
    return dict(cfg)


def scalar(value: Any) -> float:
    """A Python float from a number or a one-element tensor; anything else is refused by name."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"log_scalar expects a single number, got a tensor of shape {tuple(value.shape)}; "
                "reduce it first (value.mean()) or use log_histogram"
            )
        return float(value.item())
    return float(value)


def absolute(log_dir: str | None) -> str | None:
    """A directory made absolute; a URI (``sqlite:///...``, ``file:...``) kept as it is."""
    if log_dir is None or ":" in str(log_dir)[2:]:
        return None if log_dir is None else str(log_dir)
    return os.path.abspath(log_dir)


def check_video(video: torch.Tensor) -> None:
    if not isinstance(video, torch.Tensor) or video.dim() != 5 or video.shape[2] not in (1, 3):
        shape = tuple(video.shape) if isinstance(video, torch.Tensor) else type(video).__name__
        raise ValueError(
            f"videos are logged as a tensor of shape (N, T, C, H, W) with C in (1, 3), got {shape}; "
            "add a leading batch dimension with video.unsqueeze(0) for a single clip"
        )
