"""Checkpoints: a run cut in two halves with save / fresh objects / load equals a straight run bit for bit."""

from __future__ import annotations

import pytest
import torch
from trainers_testlib import ListBuffer, RegressionLoss, make_collector

from rl_trainers import (
    BatchSubSampler,
    ClearCudaCache,
    CountFramesLog,
    LogScalar,
    ReplayBufferTrainer,
    Trainer,
    UpdateWeights,
)

FPB = 16
N_BATCHES = 10


def _build(total_frames: int, replay: bool, save_file=None) -> tuple[Trainer, RegressionLoss]:
    """Fresh objects, deliberately built under another global seed than the run that saved."""
    torch.manual_seed(1234)
    loss = RegressionLoss()
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2)
    collector = make_collector(frames_per_batch=FPB, seed=7)
    trainer = Trainer(
        collector=collector,
        total_frames=total_frames,
        frame_skip=1,
        optim_steps_per_batch=3,
        loss_module=loss,
        optimizer=optimizer,
        clip_norm=1.0,
        progress_bar=False,
        log_interval=0,
        save_trainer_file=save_file,
    )
    if replay:
        ReplayBufferTrainer(ListBuffer(batch_size=8)).register(trainer)
    else:
        BatchSubSampler(batch_size=8).register(trainer)
    UpdateWeights(collector, update_weights_interval=2).register(trainer)
    CountFramesLog(frame_skip=1).register(trainer)
    LogScalar().register(trainer)
    ClearCudaCache(3).register(trainer)
    return trainer, loss


@pytest.mark.parametrize("replay", [False, True], ids=["subsampler", "replay_buffer"])
def test_resumed_run_equals_straight_run_bit_exact(tmp_path, replay: bool) -> None:
    torch.manual_seed(0)
    straight, straight_loss = _build(FPB * N_BATCHES, replay)
    torch.manual_seed(0)
    straight.train()

    ckpt = tmp_path / "trainer.pt"
    torch.manual_seed(1234)
    first, _ = _build(FPB * N_BATCHES // 2, replay, save_file=ckpt)
    torch.manual_seed(0)
    first.train()
    assert ckpt.exists()

    second, resumed_loss = _build(FPB * N_BATCHES, replay)
    second.load_from_file(ckpt)
    assert second.collected_frames == FPB * N_BATCHES // 2
    second.train()

    assert second.collected_frames == straight.collected_frames
    assert second._optim_count == straight._optim_count
    for a, b in zip(straight_loss.parameters(), resumed_loss.parameters(), strict=True):
        assert torch.equal(a, b)
    sa, sb = straight.optimizer.state_dict()["state"], second.optimizer.state_dict()["state"]
    for k in sa:
        assert torch.equal(sa[k]["exp_avg_sq"], sb[k]["exp_avg_sq"])
    assert (
        straight._modules["count_frames_log"].frame_count
        == second._modules["count_frames_log"].frame_count
    )
    assert straight.collector.weight_updates == 5
    assert second._modules["update_weights"].counter == straight._modules["update_weights"].counter
    # the resumed half logged exactly the straight run's second half
    tail = [float(v) for v in straight._log_dict["loss_value"][N_BATCHES // 2 :]]
    assert [float(v) for v in second._log_dict["loss_value"]] == tail


def test_save_trainer_interval_and_force(tmp_path) -> None:
    ckpt = tmp_path / "sub" / "t.pt"
    trainer, _ = _build(FPB * 4, replay=False, save_file=ckpt)
    trainer.save_trainer_interval = 20
    saves = []
    trainer.register_op("post_steps", lambda: saves.append(ckpt.exists()))
    trainer.train()
    # no file before 20 frames are passed; one from then on; none left half-written
    assert saves == [False, False, True, True]
    assert not list(ckpt.parent.glob("*.tmp"))
    state = torch.load(ckpt, weights_only=True)
    assert state["state"]["collected_frames"] == FPB * 4
    assert {"collector", "loss_module", "optimizer", "replay_buffer", "rng"} - set(state) == {
        "replay_buffer"
    }


def test_state_dict_round_trip_in_memory() -> None:
    a, loss_a = _build(FPB * 2, replay=True)
    a.train()
    b, loss_b = _build(FPB * 2, replay=True)
    b.load_state_dict(a.state_dict())
    assert b._optim_count == a._optim_count
    assert all(
        torch.equal(x, y) for x, y in zip(loss_a.parameters(), loss_b.parameters(), strict=True)
    )
    assert torch.equal(b._modules["replay_buffer"].replay_buffer.data["observation"],
                       a._modules["replay_buffer"].replay_buffer.data["observation"])  # fmt: skip


def test_missing_module_in_checkpoint_is_named(tmp_path) -> None:
    a, _ = _build(FPB, replay=False)
    state = a.state_dict()
    b, _ = _build(FPB, replay=True)
    with pytest.raises(KeyError, match="replay_buffer"):
        b.load_state_dict(state)


def test_loaded_trainer_at_its_budget_collects_nothing(tmp_path) -> None:
    ckpt = tmp_path / "t.pt"
    a, _ = _build(FPB * 2, replay=False, save_file=ckpt)
    a.train()
    b, _ = _build(FPB * 2, replay=False)
    b.load_from_file(ckpt)
    before = b.collector._frames
    b.train()
    assert b.collector._frames == before
