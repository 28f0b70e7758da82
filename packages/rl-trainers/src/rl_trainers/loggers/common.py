"""The logger interface every back-end implements (TorchRL's ``torchrl.record.loggers.Logger``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

__all__ = ["Logger"]


def _flatten(cfg: Mapping[str, Any], prefix: str = "", sep: str = ".") -> dict[str, Any]:
    """Nested mapping -> flat ``{"a.b": value}``; OmegaConf containers become plain dicts first."""
    if not isinstance(cfg, Mapping):
        to_container = getattr(type(cfg), "to_container", None)
        if to_container is None:
            raise TypeError(
                f"hyper-parameters must be a mapping (dict, DictConfig), got {type(cfg).__name__}; "
                "pass dataclasses through dataclasses.asdict() first"
            )
    out: dict[str, Any] = {}
    items = _to_plain(cfg).items()
    for key, value in items:
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(_flatten(value, name, sep))
        else:
            out[name] = value
    return out


def _to_plain(cfg: Any) -> dict[str, Any]:
    if isinstance(cfg, dict):
        return cfg
    try:  # an OmegaConf DictConfig: resolve interpolations into a plain dict
        from omegaconf import OmegaConf

        if OmegaConf.is_config(cfg):
            return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except ImportError:
        pass
    return dict(cfg)


def _scalar(value: Any) -> float:
    """A Python float from a number or a one-element tensor; anything else is refused by name."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"log_scalar expects a single number, got a tensor of shape {tuple(value.shape)}; "
                "reduce it first (value.mean()) or use log_histogram"
            )
        return float(value.item())
    return float(value)


def _absolute(log_dir: str | None) -> str | None:
    """A directory made absolute; a URI (``sqlite:///...``, ``file:...``) kept as it is."""
    if log_dir is None or ":" in str(log_dir)[2:]:
        return None if log_dir is None else str(log_dir)
    return os.path.abspath(log_dir)


def _check_video(video: torch.Tensor) -> None:
    if not isinstance(video, torch.Tensor) or video.dim() != 5 or video.shape[2] not in (1, 3):
        shape = tuple(video.shape) if isinstance(video, torch.Tensor) else type(video).__name__
        raise ValueError(
            f"videos are logged as a tensor of shape (N, T, C, H, W) with C in (1, 3), got {shape}; "
            "add a leading batch dimension with video.unsqueeze(0) for a single clip"
        )


class Logger:
    """Base class of the loggers: one experiment, named ``exp_name``, written under ``log_dir``.

    Subclasses create their back-end object in ``_create_experiment`` (kept as
    ``self.experiment``) and implement the ``log_*`` methods. ``state_dict`` /
    ``load_state_dict`` carry local counters so that a resumed run keeps
    appending where it stopped.

    Args:
        exp_name: name of the experiment.
        log_dir: where the back-end writes (a directory or, for MLflow, a tracking URI).
    """

    def __init__(self, exp_name: str, log_dir: str | None) -> None:
        self.exp_name = exp_name
        self.log_dir = log_dir
        self._closed = False
        self.experiment = self._create_experiment()

    def _create_experiment(self) -> Any:
        raise NotImplementedError

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Log one number under ``name`` at ``step``."""
        raise NotImplementedError

    def log_video(self, name: str, video: torch.Tensor, step: int | None = None, **kwargs) -> None:
        """Log a video tensor of shape ``(N, T, C, H, W)``."""
        raise NotImplementedError

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:
        """Log the run's hyper-parameters (a dict or an OmegaConf ``DictConfig``)."""
        raise NotImplementedError

    def log_histogram(self, name: str, data: Sequence | torch.Tensor, **kwargs) -> None:
        """Log the distribution of ``data`` (``step=`` and ``bins=`` keyword arguments)."""
        raise NotImplementedError(f"{type(self).__name__} cannot log histograms")

    def log_metrics(
        self,
        metrics: Mapping[str, Any] | TensorDictBase,
        step: int | None = None,
        *,
        keys_sep: str = "/",
    ) -> dict[str, float]:
        """Log several scalars at once; nested keys are joined with ``keys_sep``.

        Returns:
            The flat ``{name: float}`` dictionary that was logged.
        """
        if isinstance(metrics, TensorDictBase):
            flat = {
                keys_sep.join(k) if isinstance(k, tuple) else k: v
                for k, v in metrics.items(include_nested=True, leaves_only=True)
            }
        else:
            flat = _flatten(metrics, sep=keys_sep)
        values = {name: _scalar(value) for name, value in flat.items()}
        for name, value in values.items():
            self.log_scalar(name, value, step=step)
        return values

    def flush(self) -> None:
        """Write buffered records to their destination."""
        flush = getattr(self.experiment, "flush", None)
        if callable(flush):
            flush()

    def close(self) -> None:
        """Flush and release the back-end (idempotent)."""
        if self._closed:
            return
        self.flush()
        self._close()
        self._closed = True

    shutdown = close

    def _close(self) -> None:
        close = getattr(self.experiment, "close", None)
        if callable(close):
            close()

    def state_dict(self) -> dict[str, Any]:
        """Names and local counters, for a checkpoint."""
        self.flush()
        state: dict[str, Any] = {
            "exp_name": self.exp_name,
            "log_dir": _absolute(self.log_dir),
        }
        local = self._checkpoint_state()
        if local:
            state["local"] = local
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore local counters saved by ``state_dict``."""
        self._load_checkpoint_state(state_dict.get("local", {}))

    def _checkpoint_state(self) -> dict[str, Any]:
        return {}

    def _load_checkpoint_state(self, state_dict: Mapping[str, Any]) -> None:
        del state_dict

    def __repr__(self) -> str:
        return f"{type(self).__name__}(exp_name={self.exp_name!r}, log_dir={self.log_dir!r})"
