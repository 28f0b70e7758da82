"""``get_logger`` and ``generate_exp_name`` (TorchRL's ``torchrl.record.loggers.utils``)."""

from __future__ import annotations

import os
import pathlib
import uuid
from datetime import datetime
from typing import Any

from rl_trainers.loggers.common import Logger
from rl_trainers.loggers.csv import CSVLogger

__all__ = ["LOGGER_TYPES", "generate_exp_name", "get_logger"]

LOGGER_TYPES = ("csv", "tensorboard", "wandb", "mlflow")


def generate_exp_name(model_name: str, experiment_name: str) -> str:
    """A unique run name: ``<model>_<experiment>_<8 hex chars>_<yy_mm_dd-HH_MM_SS>``.

    Examples:
        >>> name = generate_exp_name("PPO", "cartpole")
        >>> name.startswith("PPO_cartpole_")
        True
    """
    stamp = datetime.now().strftime("%y_%m_%d-%H_%M_%S")
    return "_".join((model_name, experiment_name, uuid.uuid4().hex[:8], stamp))


def get_logger(
    logger_type: str | None,
    logger_name: str,
    experiment_name: str,
    **kwargs: Any,
) -> Logger | None:
    """Build a logger by type name.

    Args:
        logger_type: ``"csv"``, ``"tensorboard"``, ``"wandb"`` or ``"mlflow"``;
            ``""`` or ``None`` gives ``None`` (no logging).
        logger_name: the root directory of the logs.
        experiment_name: the run's name.
        **kwargs: ``wandb_kwargs`` / ``mlflow_kwargs`` (dicts) passed to those loggers;
            ``video_format`` for CSV.

    Returns:
        The logger, or ``None``.

    Raises:
        ValueError: for an unknown ``logger_type``.

    The MLflow store defaults to ``sqlite:///<logger_name>/mlflow.db`` with artifacts
    under ``<logger_name>/artifacts`` (TorchRL used a ``file:`` directory store, which
    MLflow 3.10 and later refuse); ``mlflow_kwargs={"tracking_uri": ...}`` overrides it.

    Examples:
        >>> import tempfile
        >>> logger = get_logger("csv", tempfile.mkdtemp(), "run0")
        >>> type(logger).__name__
        'CSVLogger'
    """
    if not logger_type:
        return None
    if logger_type == "csv":
        return CSVLogger(
            exp_name=experiment_name,
            log_dir=logger_name,
            video_format=kwargs.get("video_format", "pt"),
        )
    if logger_type == "tensorboard":
        from rl_trainers.loggers.tensorboard import TensorboardLogger

        return TensorboardLogger(exp_name=experiment_name, log_dir=logger_name)
    if logger_type == "wandb":
        from rl_trainers.loggers.wandb import WandbLogger

        wandb_kwargs = dict(kwargs.get("wandb_kwargs", {}))
        wandb_kwargs.setdefault("save_dir", logger_name)
        return WandbLogger(exp_name=experiment_name, **wandb_kwargs)
    if logger_type == "mlflow":
        from rl_trainers.loggers.mlflow import MLFlowLogger

        mlflow_kwargs = dict(kwargs.get("mlflow_kwargs", {}))
        root = os.path.abspath(logger_name)
        if "tracking_uri" not in mlflow_kwargs:
            os.makedirs(root, exist_ok=True)
            mlflow_kwargs["tracking_uri"] = f"sqlite:///{os.path.join(root, 'mlflow.db')}"
            mlflow_kwargs.setdefault("artifact_location", pathlib.Path(root, "artifacts").as_uri())
        return MLFlowLogger(exp_name=experiment_name, **mlflow_kwargs)
    raise ValueError(
        f"logger_type must be one of {LOGGER_TYPES} (or '' / None for no logger), "
        f"got {logger_type!r}"
    )
