"""CSV logger: one ``step,value`` file per scalar, no dependency beyond torch."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from rl_trainers.loggers._values import check_video, flatten, scalar
from rl_trainers.loggers.common import Logger

__all__ = ["CSVExperiment", "CSVLogger"]

_VIDEO_FORMATS = ("pt", "memmap")


class CSVExperiment:
    """The files of one CSV experiment: ``scalars/<name>.csv``, ``videos/``, ``texts/``.

    Args:
        log_dir: the experiment's directory (created).
        video_format: ``"pt"`` (``torch.save``) or ``"memmap"`` (a raw memory-mapped tensor).
        video_fps: kept for the record; frame files carry no timing.
    """

    def __init__(self, log_dir: str, *, video_format: str = "pt", video_fps: int = 30) -> None:
        if video_format not in _VIDEO_FORMATS:
            raise ValueError(
                f"video_format must be one of {_VIDEO_FORMATS}, got {video_format!r} "
                "(mp4 encoding needs a video encoder this package does not ship)"
            )
        self.log_dir = log_dir
        self.video_format = video_format
        self.video_fps = video_fps
        self.scalars: defaultdict[str, list[tuple[int, float]]] = defaultdict(list)
        self.videos_counter: defaultdict[str, int] = defaultdict(int)
        self.text_counter: defaultdict[str, int] = defaultdict(int)
        for sub in ("scalars", "videos", "texts"):
            os.makedirs(os.path.join(log_dir, sub), exist_ok=True)

    def add_scalar(self, name: str, value: float, global_step: int | None = None) -> None:
        """Append ``step,value`` to ``scalars/<name>.csv`` (``/`` in the name makes folders)."""
        if global_step is None:
            global_step = len(self.scalars[name])
        value = float(value)
        self.scalars[name].append((global_step, value))
        path = os.path.join(self.log_dir, "scalars", f"{name}.csv")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # Opened per call: every point is on disk at once and no handle outlives the logger.
        with open(path, "a") as fd:
            fd.write(f"{global_step},{value!r}\n")

    def add_video(self, tag: str, vid_tensor: torch.Tensor, global_step: int | None = None) -> str:
        """Write the video tensor to ``videos/<tag>_<step>.<format>``; return the path."""
        if global_step is None:
            global_step = self.videos_counter[tag]
            self.videos_counter[tag] += 1
        path = os.path.join(self.log_dir, "videos", f"{tag}_{global_step}.{self.video_format}")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        if self.video_format == "pt":
            torch.save(vid_tensor.detach().cpu(), path)
        else:
            from tensordict import MemoryMappedTensor

            MemoryMappedTensor.from_tensor(vid_tensor.detach().cpu(), filename=path)
        return path

    def add_text(self, tag: str, text: str, global_step: int | None = None) -> None:
        """Write ``text`` to ``texts/<tag><step>.txt``."""
        if global_step is None:
            global_step = self.text_counter[tag]
            self.text_counter[tag] += 1
        path = os.path.join(self.log_dir, "texts", f"{tag}{global_step}.txt")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as fd:
            fd.write(text)

    def __repr__(self) -> str:
        return f"CSVExperiment(log_dir={self.log_dir!r})"


class CSVLogger(Logger):
    """A logger that writes plain CSV files (TorchRL's ``CSVLogger``).

    Scalars go to ``<log_dir>/<exp_name>/scalars/<name>.csv``, one ``step,value``
    line per call, flushed at once so a crashed run keeps every point.

    Args:
        exp_name: name of the experiment (a sub-directory of ``log_dir``).
        log_dir: root directory. Defaults to ``"csv_logs"``.
        video_format: ``"pt"`` or ``"memmap"``.
        video_fps: frames per second recorded with videos.

    Examples:
        >>> import tempfile
        >>> logger = CSVLogger("demo", log_dir=tempfile.mkdtemp())
        >>> logger.log_scalar("reward", 1.5, step=10)
        >>> logger.experiment.scalars["reward"]
        [(10, 1.5)]
    """

    experiment: CSVExperiment

    def __init__(
        self,
        exp_name: str,
        log_dir: str | None = None,
        video_format: str = "pt",
        video_fps: int = 30,
    ) -> None:
        self.video_format = video_format
        self.video_fps = video_fps
        super().__init__(exp_name=exp_name, log_dir="csv_logs" if log_dir is None else log_dir)

    def _create_experiment(self) -> CSVExperiment:
        return CSVExperiment(
            os.path.join(self.log_dir, self.exp_name),
            video_format=self.video_format,
            video_fps=self.video_fps,
        )

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        self.experiment.add_scalar(name, scalar(value), global_step=step)

    def log_video(self, name: str, video: torch.Tensor, step: int | None = None, **kwargs) -> None:
        check_video(video)
        self.experiment.add_video(name, video, global_step=step)

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:
        flat = flatten(cfg)
        self.experiment.add_text("hparams", "\n".join(f"{k}: {flat[k]}" for k in sorted(flat)))

    def log_histogram(self, name: str, data: Sequence | torch.Tensor, **kwargs) -> None:
        raise NotImplementedError(
            "CSVLogger cannot log histograms; use TensorboardLogger or WandbLogger for them"
        )

    def _checkpoint_state(self) -> dict[str, Any]:
        return {
            "scalars": {k: list(v) for k, v in self.experiment.scalars.items()},
            "videos_counter": dict(self.experiment.videos_counter),
            "text_counter": dict(self.experiment.text_counter),
        }

    def _load_checkpoint_state(self, state_dict: Mapping[str, Any]) -> None:
        for name in ("scalars", "videos_counter", "text_counter"):
            target = getattr(self.experiment, name)
            target.clear()
            target.update(state_dict.get(name, {}))

    def __repr__(self) -> str:
        return f"CSVLogger(exp_name={self.exp_name!r}, experiment={self.experiment!r})"
