"""Loggers round-trip: what they write is read back with each back-end's own reader."""

from __future__ import annotations

import os
import re

import pytest
import torch
from tensordict import TensorDict

from rl_trainers import CSVLogger, Logger, generate_exp_name, get_logger


def test_csv_scalars_read_back(tmp_path) -> None:
    logger = CSVLogger("exp", log_dir=str(tmp_path))
    for step in range(3):
        logger.log_scalar("loss", step * 0.5, step=step * 10)
    logger.log_scalar("eval/reward", torch.tensor(2.5), step=7)
    path = tmp_path / "exp" / "scalars" / "loss.csv"
    rows = [line.split(",") for line in path.read_text().splitlines()]
    assert [(int(s), float(v)) for s, v in rows] == [(0, 0.0), (10, 0.5), (20, 1.0)]
    assert (tmp_path / "exp" / "scalars" / "eval" / "reward.csv").read_text() == "7,2.5\n"
    logger.close()


def test_csv_step_defaults_to_call_count_and_state_round_trip(tmp_path) -> None:
    logger = CSVLogger("exp", log_dir=str(tmp_path))
    logger.log_scalar("x", 1.0)
    logger.log_scalar("x", 2.0)
    assert logger.experiment.scalars["x"] == [(0, 1.0), (1, 2.0)]
    state = logger.state_dict()
    assert state["exp_name"] == "exp" and state["log_dir"] == str(tmp_path)
    resumed = CSVLogger("exp", log_dir=str(tmp_path))
    resumed.load_state_dict(state)
    resumed.log_scalar("x", 3.0)
    assert (tmp_path / "exp" / "scalars" / "x.csv").read_text().splitlines()[-1] == "2,3.0"


@pytest.mark.parametrize("video_format", ["pt", "memmap"])
def test_csv_video_and_hparams(tmp_path, video_format: str) -> None:
    logger = CSVLogger("exp", log_dir=str(tmp_path), video_format=video_format)
    video = torch.randint(0, 255, (1, 4, 3, 8, 8), dtype=torch.uint8)
    logger.log_video("rollout", video, step=5)
    path = tmp_path / "exp" / "videos" / f"rollout_5.{video_format}"
    if video_format == "pt":
        assert torch.equal(torch.load(path, weights_only=True), video)
    else:
        assert path.stat().st_size == video.numel()
    logger.log_hparams({"lr": 0.1, "net": {"depth": 2}})
    assert (tmp_path / "exp" / "texts" / "hparams0.txt").read_text() == "lr: 0.1\nnet.depth: 2"
    with pytest.raises(NotImplementedError, match="histograms"):
        logger.log_histogram("h", torch.randn(10))


def test_bad_values_are_refused_with_the_fix(tmp_path) -> None:
    logger = CSVLogger("exp", log_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"shape \(3,\).*mean"):
        logger.log_scalar("x", torch.ones(3))
    with pytest.raises(ValueError, match=r"\(N, T, C, H, W\)"):
        logger.log_video("v", torch.zeros(4, 3, 8, 8))
    with pytest.raises(ValueError, match="video_format"):
        CSVLogger("exp", log_dir=str(tmp_path), video_format="mp4")


def test_log_metrics_flattens_dicts_and_tensordicts(tmp_path) -> None:
    logger = CSVLogger("exp", log_dir=str(tmp_path))
    out = logger.log_metrics({"a": 1, "b": {"c": torch.tensor(2.0)}}, step=3)
    assert out == {"a": 1.0, "b/c": 2.0}
    out = logger.log_metrics(TensorDict({("x", "y"): torch.tensor(4.0)}), step=4)
    assert out == {"x/y": 4.0}
    assert logger.experiment.scalars["b/c"] == [(3, 2.0)]


def test_generate_exp_name_is_unique_and_structured() -> None:
    a, b = generate_exp_name("PPO", "cartpole"), generate_exp_name("PPO", "cartpole")
    assert a != b
    assert re.fullmatch(r"PPO_cartpole_[0-9a-f]{8}_\d\d_\d\d_\d\d-\d\d_\d\d_\d\d", a)


def test_get_logger_types(tmp_path) -> None:
    assert get_logger("", str(tmp_path), "e") is None
    assert get_logger(None, str(tmp_path), "e") is None
    assert isinstance(get_logger("csv", str(tmp_path), "e"), CSVLogger)
    with pytest.raises(ValueError, match=r"csv.*tensorboard"):
        get_logger("neptune", str(tmp_path), "e")


def test_base_logger_is_abstract() -> None:
    with pytest.raises(NotImplementedError):
        Logger("e", None)


def test_tensorboard_events_read_back(tmp_path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rl_trainers import TensorboardLogger

    logger = get_logger("tensorboard", str(tmp_path), "exp")
    assert isinstance(logger, TensorboardLogger)
    for step in range(4):
        logger.log_scalar("loss", float(step) / 2, step=step)
    logger.log_histogram("weights", torch.arange(100.0), step=1)
    logger.close()
    acc = EventAccumulator(str(tmp_path / "exp"))
    acc.Reload()
    events = acc.Scalars("loss")
    assert [(e.step, e.value) for e in events] == [(0, 0.0), (1, 0.5), (2, 1.0), (3, 1.5)]
    (hist,) = acc.Histograms("weights")
    assert hist.step == 1 and hist.histogram_value.num == 100


def test_tensorboard_hparams(tmp_path) -> None:
    pytest.importorskip("tensorboard")
    logger = get_logger("tensorboard", str(tmp_path), "exp")
    logger.log_hparams({"lr": 0.1, "algo": {"name": "ppo"}, "sizes": [1, 2]})
    logger.close()
    assert any(f.startswith("events.out.tfevents") for _, _, fs in os.walk(tmp_path) for f in fs)


# MLflow's own SQLAlchemy models use a loader SQLAlchemy 2.1 deprecates: their warning, not ours.
@pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning")
def test_mlflow_local_store_queried_with_client(tmp_path) -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from mlflow import MlflowClient

    logger = get_logger("mlflow", str(tmp_path), "exp")
    for step in range(3):
        logger.log_scalar("loss", step * 1.5, step=step)
    logger.log_hparams({"lr": 0.01, "net": {"depth": 3}})
    logger.log_video("rollout", torch.zeros(1, 2, 3, 4, 4, dtype=torch.uint8), step=2)
    logger.close()
    client = MlflowClient(tracking_uri=logger.tracking_uri)
    assert logger.tracking_uri.startswith("sqlite:///") and (tmp_path / "mlflow.db").exists()
    run = client.get_run(logger.run_id)
    assert run.data.params == {"lr": "0.01", "net.depth": "3"}
    assert run.info.status == "FINISHED"
    history = client.get_metric_history(logger.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 0.0), (1, 1.5), (2, 3.0)]
    (artifact,) = client.list_artifacts(logger.run_id, "videos")
    assert artifact.path == "videos/rollout_2.pt"
    # a second logger on the same experiment name reuses the experiment
    again = get_logger("mlflow", str(tmp_path), "exp")
    assert again.id == logger.id and again.run_id != logger.run_id
    again.close()


def test_wandb_offline_run_directory_written(tmp_path, monkeypatch) -> None:
    pytest.importorskip("wandb")
    from rl_trainers import WandbLogger

    # keep W&B's own settings and caches inside the test directory; no network is used
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = get_logger(
        "wandb", str(tmp_path / "logs"), "exp", wandb_kwargs={"offline": True, "project": "p"}
    )
    assert isinstance(logger, WandbLogger)
    for step in range(3):
        logger.log_scalar("loss", float(step), step=step)
    logger.log_hparams({"lr": 0.1})
    logger.log_histogram("w", torch.randn(50), step=2)
    run_id = logger.experiment.id
    assert logger.state_dict()["local"]["id"] == run_id
    logger.close()
    runs = list((tmp_path / "logs" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert list(runs[0].glob(f"run-{run_id}.wandb"))
    assert (runs[0] / f"run-{run_id}.wandb").stat().st_size > 0
