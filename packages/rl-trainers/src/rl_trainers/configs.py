"""Structured configs: plain dataclasses, usable as they are or composed with Hydra.

Every field has a default and a one-line description, so ``TrainerConfig()``
is a valid config without Hydra. With ``hydra-core`` installed,
``register_configs()`` stores them in Hydra's ``ConfigStore`` (groups
``trainer``, ``logger``, ``optimizer``, ``collector``, ``replay_buffer``,
``evaluation`` and the top-level ``rl_trainers_config``), so that
``python train.py trainer.total_frames=10000 optimizer.lr=1e-3`` works.
Registration is an explicit call, never an import side effect.

Examples:
    >>> cfg = RunConfig()
    >>> cfg.optimizer.lr = 1e-3
    >>> opt = make_optimizer(cfg.optimizer, torch.nn.Linear(2, 2).parameters())
    >>> type(opt).__name__, opt.param_groups[0]["lr"]
    ('Adam', 0.001)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_trainers.loggers import Logger, get_logger
from rl_trainers.trainer import Trainer

__all__ = [
    "CollectorConfig",
    "EvaluationConfig",
    "LoggerConfig",
    "OptimizerConfig",
    "ReplayBufferConfig",
    "RunConfig",
    "TrainerConfig",
    "make_logger",
    "make_optimizer",
    "make_trainer",
    "register_configs",
]


@dataclass
class TrainerConfig:
    """Arguments of ``Trainer`` (its defaults, except where noted)."""

    total_frames: int = 1_000_000
    """Frames to collect before training stops."""
    frame_skip: int = 1
    """Env frames per collected step."""
    optim_steps_per_batch: int = 1
    """Optimisation steps on each collected batch (per epoch)."""
    num_epochs: int = 1
    """Passes over each batch."""
    clip_grad_norm: bool = True
    """Clip the total gradient norm (True) or each gradient entry (False)."""
    clip_norm: float | None = None
    """Clipping threshold; None: no clipping."""
    progress_bar: bool = True
    """Show a tqdm progress bar."""
    seed: int | None = None
    """Seed of the collector, torch, numpy and random; None leaves them."""
    save_trainer_interval: int = 10000
    """Frames between checkpoints."""
    log_interval: int = 10000
    """Frames between two logger writes of one value."""
    save_trainer_file: str | None = None
    """Checkpoint path; None: no checkpoints."""


@dataclass
class LoggerConfig:
    """Which logger ``make_logger`` builds (``get_logger`` arguments)."""

    logger_type: str = "csv"
    """csv, tensorboard, wandb, mlflow, or '' for none."""
    logger_name: str = "logs"
    """Root directory of the logs."""
    experiment_name: str = "run"
    """Name of the run."""
    wandb_project: str | None = None
    """W&B project (wandb only)."""
    offline: bool = True
    """W&B offline mode: write locally, no network (wandb only)."""


@dataclass
class OptimizerConfig:
    """A ``torch.optim`` optimiser by class name."""

    name: str = "Adam"
    """Class in torch.optim (Adam, AdamW, SGD, RMSprop, ...)."""
    lr: float = 3e-4
    """Learning rate."""
    weight_decay: float = 0.0
    """L2 penalty / decoupled weight decay."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Further keyword arguments of the optimiser class (betas, eps, momentum...)."""


@dataclass
class CollectorConfig:
    """Sizes a collector is built with (the recipe builds the collector itself)."""

    frames_per_batch: int = 1000
    """Frames per collected batch."""
    total_frames: int = -1
    """Frames the collector yields; -1: endless (the trainer stops it)."""
    init_random_frames: int = 0
    """Frames collected with random actions before the policy acts."""
    device: str = "cpu"
    """Device of the collected batches."""


@dataclass
class ReplayBufferConfig:
    """Replay buffer sizes (the recipe builds the buffer itself)."""

    size: int = 100_000
    """Capacity in transitions."""
    batch_size: int = 256
    """Sample size."""
    prioritized: bool = False
    """Prioritized replay."""
    alpha: float = 0.6
    """Priority exponent (prioritized only)."""
    beta: float = 0.4
    """Importance-sampling exponent (prioritized only)."""


@dataclass
class EvaluationConfig:
    """Arguments of the evaluation hook ``LogValidationReward``."""

    record_interval: int = 10
    """Collected batches between two evaluations."""
    record_frames: int = 1000
    """Env steps of an evaluation rollout."""
    exploration_type: str = "deterministic"
    """deterministic, random, mode or mean."""


@dataclass
class RunConfig:
    """The whole run: one of each config."""

    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    """Trainer arguments."""
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    """Logger choice."""
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    """Optimiser choice."""
    collector: CollectorConfig = field(default_factory=CollectorConfig)
    """Collector sizes."""
    replay_buffer: ReplayBufferConfig = field(default_factory=ReplayBufferConfig)
    """Replay buffer sizes."""
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    """Evaluation schedule."""


_GROUPS = {
    "trainer": TrainerConfig,
    "logger": LoggerConfig,
    "optimizer": OptimizerConfig,
    "collector": CollectorConfig,
    "replay_buffer": ReplayBufferConfig,
    "evaluation": EvaluationConfig,
}


def _plain(cfg: Any, cls: type) -> Any:
    """A dataclass instance from a dataclass, a dict or an OmegaConf node."""
    if isinstance(cfg, cls):
        return cfg
    if dataclasses.is_dataclass(cfg):
        cfg = dataclasses.asdict(cfg)
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(cfg):
            cfg = OmegaConf.to_container(cfg, resolve=True)
    except ImportError:
        pass
    if not isinstance(cfg, dict):
        raise TypeError(
            f"expected a {cls.__name__}, a dict or a DictConfig, got {type(cfg).__name__}"
        )
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(cfg) - known
    if unknown:
        raise KeyError(
            f"{cls.__name__} has no field(s) {sorted(unknown)}; its fields are {sorted(known)}"
        )
    return cls(**cfg)


def make_optimizer(
    cfg: OptimizerConfig | Any, params: Iterable[torch.nn.Parameter]
) -> torch.optim.Optimizer:
    """Build ``torch.optim.<cfg.name>(params, lr=..., weight_decay=..., **cfg.kwargs)``."""
    cfg = _plain(cfg, OptimizerConfig)
    cls = getattr(torch.optim, cfg.name, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise ValueError(
            f"optimizer.name={cfg.name!r} is not an optimiser class of torch.optim (e.g. 'Adam')"
        )
    return cls(params, lr=cfg.lr, weight_decay=cfg.weight_decay, **dict(cfg.kwargs))


def make_logger(cfg: LoggerConfig | Any) -> Logger | None:
    """Build the logger ``cfg`` names through ``get_logger``."""
    cfg = _plain(cfg, LoggerConfig)
    wandb_kwargs = {"offline": cfg.offline, "project": cfg.wandb_project}
    return get_logger(
        cfg.logger_type, cfg.logger_name, cfg.experiment_name, wandb_kwargs=wandb_kwargs
    )


def make_trainer(
    cfg: TrainerConfig | Any,
    *,
    collector: Iterable[TensorDictBase],
    loss_module: Callable[[TensorDictBase], TensorDictBase],
    optimizer: torch.optim.Optimizer | None = None,
    logger: Logger | None = None,
) -> Trainer:
    """A ``Trainer`` with ``cfg``'s arguments around the given components."""
    cfg = _plain(cfg, TrainerConfig)
    return Trainer(
        collector=collector,
        loss_module=loss_module,
        optimizer=optimizer,
        logger=logger,
        **dataclasses.asdict(cfg),
    )


def register_configs(config_store: Any = None) -> Any:
    """Store the configs in Hydra's ``ConfigStore``; returns the store.

    Groups: ``trainer/base``, ``logger/base``, ``optimizer/base``, ``collector/base``,
    ``replay_buffer/base``, ``evaluation/base``; the whole run as ``rl_trainers_config``.

    Raises:
        ImportError: when ``hydra-core`` is missing.
    """
    if config_store is None:
        try:
            from hydra.core.config_store import ConfigStore
        except ImportError as err:
            raise ImportError(
                "register_configs needs hydra-core: pip install 'rl-trainers[hydra]'; "
                "the dataclass configs themselves work without it"
            ) from err
        config_store = ConfigStore.instance()
    for group, node in _GROUPS.items():
        config_store.store(group=group, name="base", node=node)
    config_store.store(name="rl_trainers_config", node=RunConfig)
    return config_store
