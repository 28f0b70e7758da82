"""MLflow logger (needs the ``mlflow`` extra); works against a local store with no server."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl_trainers.loggers._values import check_video, flatten, scalar
from rl_trainers.loggers.common import Logger

__all__ = ["MLFlowLogger"]


class MLFlowLogger(Logger):
    """Log to an MLflow run (TorchRL's ``MLFlowLogger``).

    The logger talks to MLflow through an ``MlflowClient`` bound to
    ``tracking_uri``: it never changes MLflow's process-wide tracking URI or
    active run, so two loggers in one process do not interfere.

    A local store is ``sqlite:///<path>/mlflow.db`` (what ``get_logger("mlflow", ...)``
    builds). MLflow 3.10 and later refuse the older ``file:`` directory store unless
    ``MLFLOW_ALLOW_FILE_STORE=true`` is set by the user; such a URI is passed through
    as it is.

    Args:
        exp_name: name of the MLflow experiment (created if missing).
        tracking_uri: the store, e.g. ``"sqlite:////tmp/runs/mlflow.db"``.
        tags: tags of the run.

    Keyword Args:
        artifact_location: where artifacts (videos) go for a new experiment.
        video_fps: recorded with videos.
        run_name: name of the run (default: ``exp_name``).

    Raises:
        ImportError: when ``mlflow`` is missing.
    """

    def __init__(
        self,
        exp_name: str,
        tracking_uri: str,
        tags: dict[str, Any] | None = None,
        *,
        artifact_location: str | None = None,
        video_fps: int = 30,
        **kwargs: Any,
    ) -> None:
        if artifact_location is None and tracking_uri.startswith("file:"):
            artifact_location = tracking_uri
        self.tracking_uri = tracking_uri
        self.tags = dict(tags or {})
        self.artifact_location = artifact_location
        self.video_fps = video_fps
        self.run_name = kwargs.pop("run_name", exp_name)
        if kwargs:
            raise TypeError(f"MLFlowLogger got unexpected arguments {sorted(kwargs)}")
        self.video_log_counter = 0
        super().__init__(exp_name=exp_name, log_dir=tracking_uri)

    def _create_experiment(self) -> Any:
        try:
            from mlflow import MlflowClient
        except ImportError as err:
            raise ImportError(
                "MLFlowLogger needs the mlflow package: pip install 'rl-trainers[mlflow]'"
            ) from err
        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        experiment = self.client.get_experiment_by_name(self.exp_name)
        if experiment is None:
            self.id = self.client.create_experiment(
                self.exp_name, artifact_location=self.artifact_location
            )
        else:
            self.id = experiment.experiment_id
        run = self.client.create_run(
            self.id, tags={str(k): str(v) for k, v in self.tags.items()}, run_name=self.run_name
        )
        self.run_id = run.info.run_id
        return run

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        self.client.log_metric(self.run_id, name, scalar(value), step=step)

    def log_video(self, name: str, video: torch.Tensor, step: int | None = None, **kwargs) -> None:
        """Store the video tensor as an artifact ``videos/<name>_<step>.pt`` (read it with ``torch.load``)."""
        check_video(video)
        self.video_log_counter += 1
        step = self.video_log_counter if step is None else step
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"{name.replace('/', '_')}_{step}.pt")
            torch.save(video.detach().cpu(), path)
            self.client.log_artifact(self.run_id, path, artifact_path="videos")

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        params = [Param(k, str(v)) for k, v in flatten(cfg).items()]
        self.client.log_batch(self.run_id, params=params)

    def log_histogram(self, name: str, data: Sequence | torch.Tensor, **kwargs) -> None:
        raise NotImplementedError(
            "MLflow has no histogram type; log summary scalars or use TensorboardLogger / WandbLogger"
        )

    def flush(self) -> None:
        """The client writes synchronously; nothing is buffered."""

    def _close(self) -> None:
        self.client.set_terminated(self.run_id)

    def _checkpoint_state(self) -> dict[str, Any]:
        return {"id": self.id, "run_id": self.run_id, "video_log_counter": self.video_log_counter}

    def _load_checkpoint_state(self, state_dict: Mapping[str, Any]) -> None:
        self.video_log_counter = state_dict.get("video_log_counter", self.video_log_counter)

    def __repr__(self) -> str:
        return f"MLFlowLogger(exp_name={self.exp_name!r}, tracking_uri={self.tracking_uri!r})"
