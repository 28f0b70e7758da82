"""The Trainer loop: stage order, frame counting, optimisation, logging, stopping, errors."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from trainers_testlib import RegressionLoss, make_collector

from rl_trainers import HOOK_STAGES, CSVLogger, Trainer


def _trainer(collector=None, loss=None, optimizer=True, **kwargs) -> Trainer:
    collector = make_collector() if collector is None else collector
    loss = RegressionLoss() if loss is None else loss
    opt = torch.optim.Adam(loss.parameters(), lr=1e-2) if optimizer else None
    kwargs.setdefault("total_frames", 64)
    kwargs.setdefault("frame_skip", 1)
    kwargs.setdefault("optim_steps_per_batch", 3)
    kwargs.setdefault("progress_bar", False)
    return Trainer(collector=collector, loss_module=loss, optimizer=opt, **kwargs)


def test_train_counts_frames_and_steps() -> None:
    trainer = _trainer(total_frames=64, optim_steps_per_batch=3)
    trainer.train()
    assert trainer.collected_frames == 64
    assert trainer._optim_count == 4 * 3
    assert trainer.collector.is_shutdown


def test_training_changes_parameters_and_lowers_loss() -> None:
    loss = RegressionLoss()
    before = [p.clone() for p in loss.parameters()]
    trainer = _trainer(loss=loss, total_frames=16 * 40, optim_steps_per_batch=5, log_interval=0)
    trainer.train()
    assert any(not torch.equal(a, b) for a, b in zip(before, loss.parameters(), strict=True))
    values = [float(v) for v in trainer._log_dict["loss_value"]]
    assert len(values) == 40
    assert sum(values[-10:]) < sum(values[:10])
    assert "grad_norm_0" in trainer._log_dict
    assert trainer._log_dict["optim_steps"][-1] == 200


def test_stages_run_in_torchrl_order() -> None:
    calls: list[str] = []

    def recorder(stage):
        def op(*args, **kwargs):
            calls.append(stage)
            return None

        return op

    trainer = _trainer(total_frames=16, optim_steps_per_batch=2, num_epochs=1, optimizer=False)
    for stage in HOOK_STAGES:
        trainer.register_op(stage, recorder(stage))
    trainer.train()
    step = [
        "process_optim_batch",
        "post_loss",
        "process_loss",
        "optimizer",
        "post_optim",
        "post_optim_log",
    ]
    assert calls == [
        "setup",
        "batch_process",
        "pre_steps_log",
        "pre_optim_steps",
        "pre_epoch_log",
        "pre_epoch",
        *step,
        *step,
        "post_epoch_log",
        "post_epoch",
        "post_optim_complete_log",
        "post_steps",
        "post_steps_log",
        "shutdown",
    ]


def test_register_op_passes_kwargs_and_rejects_unknown_stage() -> None:
    seen = []
    trainer = _trainer(total_frames=32)
    trainer.register_op("post_steps", lambda tag: seen.append(tag), tag="x")
    with pytest.raises(RuntimeError, match=r"not recognised.*batch_process"):
        trainer.register_op("post_step", print)
    with pytest.raises(TypeError, match="callable"):
        trainer.register_op("post_steps", 3)
    trainer.train()
    assert seen == ["x", "x"]


def test_batch_process_output_replaces_the_batch() -> None:
    trainer = _trainer(total_frames=16, optim_steps_per_batch=1)
    trainer.register_op("batch_process", lambda td: td[:4])
    seen = []
    trainer.register_op("pre_steps_log", lambda td: seen.append(td.shape) or None)
    trainer.train()
    # 4 elements counted per batch: 4 batches needed to reach 16 frames
    assert seen == [torch.Size([4])] * 4
    assert trainer.collected_frames == 16


def test_mask_and_frame_skip_count_frames() -> None:
    collector = make_collector(frames_per_batch=8)
    trainer = _trainer(collector=collector, total_frames=24, frame_skip=2)

    def add_mask(td):
        mask = torch.zeros(8, dtype=torch.bool)
        mask[:3] = True
        td.set(("collector", "mask"), mask)
        return td

    trainer.register_op("batch_process", add_mask)
    trainer.train()
    assert trainer.collected_frames == 24  # 4 batches x 3 valid x frame_skip 2


def test_init_random_frames_delays_optimisation() -> None:
    trainer = _trainer(
        collector=make_collector(init_random_frames=40), total_frames=64, optim_steps_per_batch=1
    )
    trainer.train()
    assert trainer._optim_count == 2  # frames 48 and 64 only


def test_epochs_and_open_ended_steps() -> None:
    trainer = _trainer(total_frames=32, optim_steps_per_batch=2, num_epochs=3)
    trainer.train()
    assert trainer._optim_count == 2 * 2 * 3

    remaining = {"n": 0}

    def sampler(td):
        remaining["n"] -= 1
        if remaining["n"] < 0:
            raise StopIteration
        return td

    def refill():
        remaining["n"] = 5

    trainer = _trainer(total_frames=32, optim_steps_per_batch=None)
    trainer.register_op("pre_optim_steps", refill)
    trainer.register_op("process_optim_batch", sampler)
    trainer.train()
    assert trainer._optim_count == 10


def test_no_optimizer_leaves_parameters() -> None:
    loss = RegressionLoss()
    before = [p.clone() for p in loss.parameters()]
    _trainer(loss=loss, optimizer=False).train()
    assert all(torch.equal(a, b) for a, b in zip(before, loss.parameters(), strict=True))


@pytest.mark.parametrize("clip_grad_norm", [True, False])
def test_gradient_clipping(clip_grad_norm: bool) -> None:
    loss = RegressionLoss()
    grads = []
    opt = torch.optim.SGD(loss.parameters(), lr=0.0)
    trainer = Trainer(
        collector=make_collector(),
        total_frames=16,
        frame_skip=1,
        optim_steps_per_batch=1,
        loss_module=lambda td: TensorDict(loss_big=1e3 * loss(td)["loss_value"]),
        optimizer=opt,
        clip_grad_norm=clip_grad_norm,
        clip_norm=0.5,
        progress_bar=False,
    )
    # read the clipped gradients just before the optimizer step
    opt.register_step_pre_hook(lambda *a: grads.append([p.grad.clone() for p in loss.parameters()]))
    trainer.train()
    (g,) = grads
    if clip_grad_norm:
        assert torch.linalg.vector_norm(torch.cat([x.flatten() for x in g])) <= 0.5 + 1e-5
    else:
        assert max(x.abs().max() for x in g) <= 0.5
    assert float(trainer._log_dict["grad_norm_0"][0]) > 0.5


def test_logger_receives_values_every_log_interval(tmp_path) -> None:
    logger = CSVLogger("run", log_dir=str(tmp_path))
    trainer = _trainer(total_frames=128, logger=logger, log_interval=30)
    trainer.train()
    logged = logger.experiment.scalars["loss_value"]
    assert [step for step, _ in logged] == [32, 64, 96, 128]
    assert len(trainer._log_dict["loss_value"]) == 8  # the history keeps every batch


def test_request_stop_ends_after_the_batch(tmp_path) -> None:
    trainer = _trainer(total_frames=10_000, save_trainer_file=tmp_path / "ckpt.pt")
    trainer.register_op(
        "post_steps",
        lambda: trainer.request_stop("enough") if trainer.collected_frames >= 48 else None,
    )
    trainer.train()
    assert trainer.collected_frames == 48
    assert (tmp_path / "ckpt.pt").exists()


def test_progress_bar_runs() -> None:
    pytest.importorskip("tqdm")
    trainer = _trainer(total_frames=32, progress_bar=True)
    trainer.register_op(
        "pre_steps_log", lambda td: {"r": td["next", "reward"].mean().item(), "log_pbar": True}
    )
    trainer.train()
    assert trainer._pbar_str["r"] == pytest.approx(trainer._log_dict["r"][-1])


@pytest.mark.parametrize(
    ("name", "value"),
    [("total_frames", 0), ("frame_skip", 0), ("optim_steps_per_batch", -1), ("num_epochs", 1.5)],
)
def test_bad_arguments_are_named(name: str, value) -> None:
    with pytest.raises(ValueError, match=name):
        _trainer(**{name: value})


def test_non_iterable_collector_is_refused() -> None:
    with pytest.raises(TypeError, match="iterable"):
        Trainer(
            collector=3,
            total_frames=1,
            frame_skip=1,
            optim_steps_per_batch=1,
            loss_module=RegressionLoss(),
        )


def test_register_module_refuses_duplicates() -> None:
    trainer = _trainer()
    with pytest.raises(RuntimeError, match="optimizer is already registered"):
        trainer.register_module("optimizer", object())


def test_seed_seeds_collector_and_torch() -> None:
    a = _trainer(seed=3)
    x = torch.rand(3)
    b = _trainer(seed=3)
    assert torch.equal(x, torch.rand(3))
    assert torch.equal(
        next(iter(a.collector))["observation"], next(iter(b.collector))["observation"]
    )
