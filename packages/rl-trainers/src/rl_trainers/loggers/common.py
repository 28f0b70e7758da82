"""The logger interface every back-end implements (TorchRL's ``torchrl.record.loggers.Logger``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_trainers.loggers._values import absolute, flatten, scalar

__all__ = ["Logger"]


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
            flat = flatten(metrics, sep=keys_sep)
        values = {name: scalar(value) for name, value in flat.items()}
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
            "log_dir": absolute(self.log_dir),
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
