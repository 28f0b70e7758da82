"""Each hook on its own: what it reads, returns, stores and where it registers."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import InteractionType
from trainers_testlib import ListBuffer, RecordingPolicy, RegressionLoss, ToyEnv, make_collector

from rl_trainers import (
    BatchSubSampler,
    ClearCudaCache,
    CountFramesLog,
    LogReward,
    LogScalar,
    LogValidationReward,
    OptimizerHook,
    Recorder,
    ReplayBufferTrainer,
    SelectKeys,
    Trainer,
    UpdateWeights,
    episode_returns,
    mask_batch,
)


def _trainer(**kwargs) -> Trainer:
    loss = RegressionLoss()
    kwargs.setdefault("collector", make_collector())
    return Trainer(
        total_frames=kwargs.pop("total_frames", 64),
        frame_skip=1,
        optim_steps_per_batch=kwargs.pop("optim_steps_per_batch", 2),
        loss_module=loss,
        optimizer=torch.optim.SGD(loss.parameters(), lr=0.01),
        progress_bar=False,
        log_interval=0,
        **kwargs,
    )


def _masked_batch() -> TensorDict:
    td = TensorDict(
        {("next", "reward"): torch.tensor([[1.0], [2.0], [3.0], [100.0]])},
        batch_size=[4],
    )
    td.set(("collector", "mask"), torch.tensor([True, True, True, False]))
    return td


@pytest.mark.parametrize(
    ("reduction", "expected"), [("mean", 2.0), ("sum", 6.0), ("min", 1.0), ("max", 3.0)]
)
def test_log_scalar_reductions_skip_masked_steps(reduction: str, expected: float) -> None:
    out = LogScalar(logname="r", reduction=reduction)(_masked_batch())
    assert out["r"] == expected
    assert out["r_std"] == pytest.approx(1.0)
    assert out["log_pbar"] is False


def test_log_scalar_errors_and_registration() -> None:
    with pytest.raises(ValueError, match="reduction"):
        LogScalar(reduction="median")
    with pytest.raises(KeyError, match=r"no entry .*missing"):
        LogScalar("missing")(_masked_batch())
    trainer = _trainer()
    LogScalar(("next", "reward"), "r_training").register(trainer)
    trainer.train()
    assert len(trainer._log_dict["r_training"]) == 4
    assert "log_r_training" in trainer._modules


def test_log_reward_is_torchrl_old_name() -> None:
    out = LogReward()(_masked_batch())
    assert out == {"r_training": 2.0, "log_pbar": False}


def test_count_frames_log_and_state() -> None:
    hook = CountFramesLog(frame_skip=2)
    assert hook(_masked_batch())["n_frames"] == 6
    assert hook(TensorDict(batch_size=[5]))["n_frames"] == 16
    other = CountFramesLog(frame_skip=2)
    other.load_state_dict(hook.state_dict())
    assert other.frame_count == 16


def test_select_keys_and_mask_batch() -> None:
    td = _masked_batch().set("other", torch.zeros(4))
    assert set(SelectKeys([("next", "reward")])(td).keys(True, True)) == {("next", "reward")}
    with pytest.raises(TypeError, match="sequence of keys"):
        SelectKeys("other")
    assert mask_batch(td).shape == torch.Size([3])
    assert mask_batch(TensorDict(batch_size=[2])).shape == torch.Size([2])


def test_batch_subsampler_one_dim() -> None:
    td = TensorDict(x=torch.arange(20), batch_size=[20])
    out = BatchSubSampler(batch_size=8)(td)
    assert out.shape == torch.Size([8])
    assert out["x"].unique().numel() == 8


def test_batch_subsampler_windows_are_consecutive() -> None:
    td = TensorDict(x=torch.arange(60).view(3, 20), batch_size=[3, 20])
    out = BatchSubSampler(batch_size=12, sub_traj_len=4)(td)
    assert out.shape == torch.Size([3, 4])
    assert (out["x"].diff(dim=-1) == 1).all()
    whole = BatchSubSampler(batch_size=40)(td)
    assert whole.shape == torch.Size([2, 20])


def test_batch_subsampler_respects_masks_and_explains_empty_batches() -> None:
    td = TensorDict(x=torch.arange(20).view(2, 10), batch_size=[2, 10])
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[0, :6] = True
    mask[1, :8] = True
    td.set(("collector", "mask"), mask)
    for _ in range(20):
        out = BatchSubSampler(batch_size=10, sub_traj_len=5)(td)
        assert out.get(("collector", "mask")).all()
    with pytest.raises(RuntimeError, match="smaller than one window"):
        BatchSubSampler(batch_size=2, sub_traj_len=5)(td)


def test_replay_buffer_trainer_in_the_loop() -> None:
    buffer = ListBuffer(batch_size=5)
    trainer = _trainer()
    seen = []
    ReplayBufferTrainer(buffer).register(trainer)
    trainer.register_op("post_loss", lambda td: seen.append(td.shape))
    trainer.train()
    assert len(buffer.data) == 64
    assert seen == [torch.Size([5])] * 8
    assert buffer.priority_updates == 8
    assert trainer._modules["replay_buffer"].state_dict()["replay_buffer"]["n"] == 64


def test_replay_buffer_trainer_flatten_marks_row_ends_truncated() -> None:
    buffer = ListBuffer()
    batch = make_collector(frames_per_batch=12, env_batch=(3,)).next_batch()
    assert batch.shape == torch.Size([3, 4])
    ReplayBufferTrainer(buffer, flatten_tensordicts=True).extend(batch)
    truncated = buffer.data["next", "truncated"].view(3, 4)
    assert truncated[:, -1].all()
    assert buffer.data["next", "done"].view(3, 4)[:, -1].all()
    assert not batch["next", "truncated"][:, -1].all()  # the collector's batch is untouched


def test_replay_buffer_trainer_padding_and_batch_size() -> None:
    buffer = ListBuffer()
    rbt = ReplayBufferTrainer(buffer, batch_size=3, max_dims=(2, 6))
    batch = TensorDict(x=torch.ones(2, 4), batch_size=[2, 4])
    out = rbt.extend(batch)
    assert out.shape == torch.Size([2, 6])
    assert rbt.sample(out).shape == torch.Size([3])
    with pytest.raises(ValueError, match="one size per batch dim"):
        ReplayBufferTrainer(buffer, max_dims=(2,)).extend(batch)


def test_update_weights_intervals_and_sources() -> None:
    collector = make_collector()
    hook = UpdateWeights(collector, update_weights_interval=3)
    for _ in range(7):
        hook()
    assert collector.weight_updates == 2
    calls = []

    class Recording:
        def update_policy_weights_(self, *args, **kwargs):
            calls.append((args, kwargs))

    UpdateWeights(Recording(), policy_weights_getter=lambda: "w")()
    assert calls[-1] == (("w",), {})
    sender = type(
        "S", (), {"n": 0, "update_weights": lambda self: setattr(self, "n", self.n + 1)}
    )()
    UpdateWeights(sender=sender)()
    assert sender.n == 1
    with pytest.raises(ValueError, match="collector or a sender"):
        UpdateWeights()


def test_update_weights_by_optim_steps_and_map() -> None:
    trainer = _trainer(optim_steps_per_batch=3)
    UpdateWeights(
        trainer.collector, update_weights_interval=2, interval_unit="optim_steps"
    ).register(trainer)
    trainer.train()
    assert trainer.collector.weight_updates == 6  # 12 optimiser steps, one push every 2
    calls = []

    class Recording:
        def update_policy_weights_(self, **kwargs):
            calls.append(kwargs)

    hook = UpdateWeights(
        Recording(), weight_update_map={"policy": "loss_module.net"}, trainer=trainer
    )
    hook()
    assert set(calls[0]["weights_dict"]) == {"policy"}
    assert isinstance(calls[0]["weights_dict"]["policy"], TensorDict)


def test_optimizer_hook_components() -> None:
    net = torch.nn.Linear(2, 1)
    hook = OptimizerHook(torch.optim.SGD(net.parameters(), lr=1.0), loss_components=["loss_a"])
    before = net.weight.detach().clone()
    losses = TensorDict(
        loss_a=net(torch.ones(2)).sum(), loss_b=torch.tensor(5.0, requires_grad=True)
    )
    out = hook(losses, True, None, 1)
    assert out["grad_norm_1"] > 0
    assert not torch.equal(before, net.weight)
    assert all(p.grad is None or (p.grad == 0).all() for p in net.parameters())
    with pytest.raises(KeyError, match="loss_c"):
        OptimizerHook(torch.optim.SGD(net.parameters(), lr=1.0), ["loss_c"])(losses, True, None, 0)
    with pytest.raises(KeyError, match="no 'loss\\*' entry"):
        OptimizerHook(torch.optim.SGD(net.parameters(), lr=1.0))(
            TensorDict(x=torch.ones(())), True, None, 0
        )
    with pytest.raises(ValueError, match="empty"):
        OptimizerHook(torch.optim.SGD(net.parameters(), lr=1.0), [])


def test_two_optimizer_hooks_train_two_parts() -> None:
    loss = RegressionLoss()
    first, last = loss.net[0], loss.net[2]
    trainer = Trainer(
        collector=make_collector(),
        total_frames=32,
        frame_skip=1,
        optim_steps_per_batch=1,
        loss_module=loss,
        progress_bar=False,
        log_interval=0,
    )
    OptimizerHook(torch.optim.SGD(first.parameters(), lr=0.1), ["loss_value"]).register(
        trainer, "opt_a"
    )
    before = last.weight.detach().clone()
    trainer.train()
    assert torch.equal(before, last.weight)  # only the first layer's optimiser stepped
    assert "grad_norm_0" in trainer._log_dict


def test_clear_cuda_cache_counts() -> None:
    hook = ClearCudaCache(2)
    for _ in range(5):
        hook()
    assert hook.state_dict() == {"count": 5}
    with pytest.raises(ValueError, match="interval"):
        ClearCudaCache(0)


def test_episode_returns() -> None:
    reward = torch.ones(2, 10, 1)
    done = torch.zeros(2, 10, 1, dtype=torch.bool)
    done[:, 4] = True
    # each row: one episode of 5 then a cut-off one of 5 -> 4 trajectories, 20 reward
    assert episode_returns(reward, done).item() == 5.0
    with pytest.raises(ValueError, match="one shape"):
        episode_returns(reward, done[..., 0])


def test_log_validation_reward_runs_deterministic_eval_every_interval() -> None:
    env, policy = ToyEnv(period=5), RecordingPolicy()
    hook = LogValidationReward(
        record_interval=2, record_frames=10, policy_exploration=policy, environment=env
    )
    trainer = _trainer(total_frames=16 * 5)
    hook.register(trainer)
    trainer.train()
    assert len(env.calls) == 3  # batches 1, 3, 5
    assert env.calls[0] == {"auto_reset": True, "break_when_any_done": False}
    assert trainer._log_dict["r_evaluation"] == [1.0] * 3
    assert trainer._log_dict["total_r_evaluation"] == [5.0] * 3
    assert {seen for seen in policy.seen} == {(InteractionType.DETERMINISTIC, False, True)}
    assert policy.training  # restored after each evaluation
    assert hook.state_dict()["_count"] == 5


def test_recorder_is_the_old_name_and_checks_its_env() -> None:
    assert Recorder is LogValidationReward
    hook = Recorder(record_interval=1, record_frames=4, policy_exploration=RecordingPolicy(),
                    recorder=ToyEnv(period=2, batch=(3,)), frame_skip=2,
                    log_keys=[("next", "reward"), "action"], out_keys={"action": "a"})  # fmt: skip
    out = hook()
    assert out["r_evaluation"] == 0.5 and out["total_r_evaluation"] == 2.0 and "a" in out
    with pytest.raises(TypeError, match="rollout"):
        LogValidationReward(
            record_interval=1, record_frames=1, policy_exploration=None, environment=object()
        )
