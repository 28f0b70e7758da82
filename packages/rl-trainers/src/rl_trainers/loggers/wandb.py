"""Weights & Biases logger (needs the ``wandb`` extra); ``offline=True`` needs no network."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl_trainers.loggers._values import check_video, flatten, scalar
from rl_trainers.loggers.common import Logger

__all__ = ["WandbLogger"]

_STEP_KEY = "trainer/step"


class WandbLogger(Logger):
    """Log to a W&B run (TorchRL's ``WandbLogger``).

    With ``offline=True`` the run is written under ``<save_dir>/wandb/offline-run-*``
    and can be uploaded later with ``wandb sync``; nothing touches the network.
    The mode is passed to ``wandb.init`` directly: no environment variable is set.

    Args:
        exp_name: name of the run.
        offline: write locally only. Defaults to ``False``.
        save_dir: directory of the run files (alias ``log_dir``, not both).
        id: run id, to resume a run.
        project: W&B project.

    Keyword Args:
        video_fps: frames per second of logged videos. Defaults to 32.
        **kwargs: passed on to ``wandb.init``.

    Raises:
        ImportError: when ``wandb`` is missing.
    """

    def __init__(
        self,
        exp_name: str,
        offline: bool = False,
        save_dir: str | os.PathLike[str] | None = None,
        id: str | None = None,
        project: str | None = None,
        *,
        video_fps: int = 32,
        **kwargs: Any,
    ) -> None:
        log_dir = kwargs.pop("log_dir", None)
        if save_dir is not None and log_dir is not None:
            raise ValueError(
                "WandbLogger got both save_dir and log_dir, which name the same directory; pass one"
            )
        save_dir = save_dir if save_dir is not None else log_dir
        if save_dir is not None:
            save_dir = os.path.expanduser(os.fspath(save_dir))
            os.makedirs(save_dir, exist_ok=True)
        self.offline = offline
        self.save_dir = save_dir
        self.id = id
        self.project = project
        self.video_fps = video_fps
        self._wandb_kwargs: dict[str, Any] = {
            "name": exp_name,
            "dir": save_dir,
            "id": id,
            "project": project,
            "resume": "allow",
            **kwargs,
        }
        if offline:
            self._wandb_kwargs["mode"] = "offline"
        super().__init__(exp_name=exp_name, log_dir=save_dir)

    def _create_experiment(self) -> Any:
        try:
            import wandb
        except ImportError as err:
            raise ImportError(
                "WandbLogger needs the wandb package: pip install 'rl-trainers[wandb]'"
            ) from err
        run = wandb.init(**self._wandb_kwargs)
        run.define_metric(_STEP_KEY)
        run.define_metric("*", step_metric=_STEP_KEY)
        return run

    def log_scalar(
        self, name: str, value: float, step: int | None = None, commit: bool = True
    ) -> None:
        payload: dict[str, Any] = {name: scalar(value)}
        if step is not None:
            payload[_STEP_KEY] = step
        self.experiment.log(payload, commit=commit)

    def log_video(self, name: str, video: torch.Tensor, step: int | None = None, **kwargs) -> None:
        check_video(video)
        import wandb

        fps = kwargs.pop("fps", self.video_fps)
        fmt = kwargs.pop("format", "mp4")
        payload: dict[str, Any] = {
            name: wandb.Video(video.detach().cpu().numpy(), fps=fps, format=fmt)
        }
        if step is not None:
            payload[_STEP_KEY] = step
        self.experiment.log(payload, **kwargs)

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:
        self.experiment.config.update(flatten(cfg), allow_val_change=True)

    def log_histogram(self, name: str, data: Sequence | torch.Tensor, **kwargs) -> None:
        """Log ``wandb.Histogram(data)``; keyword arguments ``step`` and ``bins`` (``num_bins``)."""
        import wandb

        step = kwargs.pop("step", None)
        num_bins = kwargs.pop("bins", kwargs.pop("num_bins", 64))
        if isinstance(data, torch.Tensor):
            data = data.detach().cpu().numpy()
        payload: dict[str, Any] = {name: wandb.Histogram(data, num_bins=num_bins)}
        if step is not None:
            payload[_STEP_KEY] = step
        self.experiment.log(payload)

    def flush(self) -> None:
        """W&B streams records to its own service process; nothing to flush here."""

    def _close(self) -> None:
        self.experiment.finish()

    def _checkpoint_state(self) -> dict[str, Any]:
        return {"id": getattr(self.experiment, "id", self.id)}

    def _load_checkpoint_state(self, state_dict: Mapping[str, Any]) -> None:
        saved = state_dict.get("id")
        live = getattr(self.experiment, "id", self.id)
        if saved and live and saved != live:
            raise RuntimeError(
                f"this WandbLogger writes run {live!r} but the checkpoint came from run {saved!r}; "
                f"build the logger with WandbLogger(..., id={saved!r}) to resume that run"
            )

    def __repr__(self) -> str:
        return f"WandbLogger(exp_name={self.exp_name!r}, save_dir={self.save_dir!r}, offline={self.offline})"
