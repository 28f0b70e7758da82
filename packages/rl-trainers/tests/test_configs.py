"""Structured configs: plain dataclasses, builders, and Hydra composition when hydra-core is present."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from trainers_testlib import RegressionLoss, make_collector

from rl_trainers import (
    CSVLogger,
    LoggerConfig,
    OptimizerConfig,
    RunConfig,
    TrainerConfig,
    make_logger,
    make_optimizer,
    make_trainer,
    register_configs,
)


def test_defaults_match_the_trainer() -> None:
    import inspect

    from rl_trainers import Trainer

    params = inspect.signature(Trainer).parameters
    for f in dataclasses.fields(TrainerConfig):
        default = params[f.name].default
        if default is not inspect.Parameter.empty and f.name != "total_frames":
            assert f.default == default, f.name


def test_every_field_is_documented() -> None:
    import ast
    import inspect

    import rl_trainers.configs as configs

    tree = ast.parse(inspect.getsource(configs))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("Config"):
            body = node.body[1:]  # after the class docstring
            for stmt, nxt in zip(body, [*body[1:], None], strict=True):
                if isinstance(stmt, ast.AnnAssign):
                    assert isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant), (
                        f"{node.name}.{stmt.target.id} lacks a docstring"
                    )


def test_make_optimizer() -> None:
    net = torch.nn.Linear(2, 2)
    opt = make_optimizer(
        OptimizerConfig(name="SGD", lr=0.5, kwargs={"momentum": 0.9}), net.parameters()
    )
    assert isinstance(opt, torch.optim.SGD)
    assert opt.param_groups[0]["momentum"] == 0.9
    opt = make_optimizer({"name": "AdamW", "lr": 1e-3}, net.parameters())
    assert isinstance(opt, torch.optim.AdamW)
    with pytest.raises(ValueError, match="Adamm"):
        make_optimizer(OptimizerConfig(name="Adamm"), net.parameters())
    with pytest.raises(KeyError, match="learning_rate"):
        make_optimizer({"learning_rate": 1.0}, net.parameters())


def test_make_trainer_and_logger(tmp_path) -> None:
    cfg = RunConfig()
    cfg.trainer = TrainerConfig(total_frames=32, optim_steps_per_batch=2, progress_bar=False)
    cfg.logger = LoggerConfig(logger_name=str(tmp_path), experiment_name="e")
    loss = RegressionLoss()
    logger = make_logger(cfg.logger)
    assert isinstance(logger, CSVLogger)
    trainer = make_trainer(
        cfg.trainer,
        collector=make_collector(),
        loss_module=loss,
        optimizer=make_optimizer(cfg.optimizer, loss.parameters()),
        logger=logger,
    )
    trainer.train()
    assert trainer._optim_count == 4
    assert make_logger(LoggerConfig(logger_type="")) is None


def test_hydra_compose_with_overrides() -> None:
    pytest.importorskip("hydra")
    from hydra import compose, initialize
    from hydra.core.config_store import ConfigStore
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    register_configs(ConfigStore.instance())
    GlobalHydra.instance().clear()
    with initialize(version_base=None, config_path=None):
        cfg = compose(
            config_name="rl_trainers_config",
            overrides=[
                "trainer.total_frames=48",
                "optimizer.lr=0.001",
                "optimizer.name=SGD",
                "logger.logger_type=''",
            ],
        )
    run = OmegaConf.to_object(cfg)
    assert isinstance(run, RunConfig)
    assert run.trainer.total_frames == 48 and run.optimizer.lr == 0.001
    # the composed config drives the builders as the dataclasses do
    loss = RegressionLoss()
    trainer = make_trainer(cfg.trainer, collector=make_collector(), loss_module=loss,
                           optimizer=make_optimizer(cfg.optimizer, loss.parameters()))  # fmt: skip
    trainer.progress_bar = False
    trainer.train()
    assert trainer.collected_frames == 48
    assert make_logger(cfg.logger) is None
    # a typo is caught by the structured schema
    GlobalHydra.instance().clear()
    with (
        initialize(version_base=None, config_path=None),
        pytest.raises(Exception, match="total_frame"),
    ):
        compose(config_name="rl_trainers_config", overrides=["trainer.total_frame=1"])
    GlobalHydra.instance().clear()


def test_register_configs_groups() -> None:
    stored = {}

    class Store:
        def store(self, name, node, group=None):
            stored[(group, name)] = node

    register_configs(Store())
    assert stored[("trainer", "base")] is TrainerConfig
    assert stored[(None, "rl_trainers_config")] is RunConfig
