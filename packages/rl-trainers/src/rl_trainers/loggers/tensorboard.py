"""TensorBoard logger through ``torch.utils.tensorboard`` (needs the ``tensorboard`` extra)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl_trainers.loggers._values import check_video, flatten, scalar
from rl_trainers.loggers.common import Logger

__all__ = ["TensorboardLogger"]


class TensorboardLogger(Logger):
    """Write TensorBoard event files under ``<log_dir>/<exp_name>`` (TorchRL's ``TensorboardLogger``).

    Args:
        exp_name: name of the experiment (a sub-directory of ``log_dir``).
        log_dir: root directory. Defaults to ``"tb_logs"``.

    Raises:
        ImportError: when the ``tensorboard`` package is missing.

    Examples:
        >>> import tempfile
        >>> logger = TensorboardLogger("demo", log_dir=tempfile.mkdtemp())
        >>> logger.log_scalar("reward", 1.5, step=10)
        >>> logger.close()
    """

    def __init__(self, exp_name: str, log_dir: str = "tb_logs") -> None:
        super().__init__(exp_name=exp_name, log_dir=log_dir)
        # TorchRL exposes the writer's directory (root joined with the experiment) as log_dir.
        self.log_dir = self.experiment.log_dir

    def _create_experiment(self) -> Any:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            raise ImportError(
                "TensorboardLogger needs the tensorboard package: "
                "pip install 'rl-trainers[tensorboard]'"
            ) from err
        return SummaryWriter(log_dir=os.path.join(self.log_dir, self.exp_name))

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        self.experiment.add_scalar(name, scalar(value), global_step=step)

    def log_video(self, name: str, video: torch.Tensor, step: int | None = None, **kwargs) -> None:
        check_video(video)
        try:
            import moviepy  # noqa: F401  - TensorBoard encodes GIFs with it
        except ImportError as err:
            raise ImportError(
                "TensorBoard video logging needs moviepy (pip install moviepy); "
                "CSVLogger stores raw video tensors without it"
            ) from err
        self.experiment.add_video(name, video, global_step=step, **kwargs)

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:
        flat = {
            k: v if isinstance(v, (int, float, str, bool, torch.Tensor)) else str(v)
            for k, v in flatten(cfg).items()
        }
        self.experiment.add_hparams(flat, metric_dict={})

    def log_histogram(self, name: str, data: Sequence | torch.Tensor, **kwargs) -> None:
        """Add a histogram of ``data``; keyword arguments ``step`` and ``bins`` (default ``"tensorflow"``)."""
        step = kwargs.pop("step", None)
        bins = kwargs.pop("bins", "tensorflow")
        if not isinstance(data, torch.Tensor):
            data = torch.as_tensor(data)
        self.experiment.add_histogram(name, data.detach().cpu(), global_step=step, bins=bins)

    def __repr__(self) -> str:
        return f"TensorboardLogger(exp_name={self.exp_name!r}, log_dir={self.log_dir!r})"
