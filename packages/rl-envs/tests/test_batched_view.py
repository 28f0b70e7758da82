"""SerialEnv / ParallelEnv: env[i] views, start(), serial_for_single, TorchRL's errors,
nested batch dims in the exchange buffers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_envs import (
    Composite,
    EnvBase,
    ParallelEnv,
    PendulumEnv,
    SerialEnv,
    TransformedEnv,
    Unbounded,
    check_env_specs,
)


class InternalCountEnv(EnvBase):
    """Counts its steps in an attribute (not in the TensorDict): the observation is the count."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Composite(count=Unbounded((1,), dtype=torch.long))
        self.action_spec = Unbounded((1,))
        self.count = 0

    def _reset(self, td):
        self.count = 0
        return self._out()

    def _step(self, td):
        self.count += 1
        return self._out().set("reward", torch.zeros(1))

    def _out(self):
        done = self.full_done_spec.zero()
        return done.set("count", torch.tensor([self.count]))

    def _set_seed(self, seed):
        pass


def counted() -> InternalCountEnv:
    return InternalCountEnv()


def make(cls, n=4, **kwargs):
    if cls is ParallelEnv:
        return ParallelEnv(n, counted, mp_start_method="fork", **kwargs)
    return SerialEnv(n, counted, **kwargs)


CLASSES = [SerialEnv, ParallelEnv]


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("use_buffers", [True, False])
@pytest.mark.parametrize(
    "item, rows",
    [
        (2, [2]),
        (-1, [3]),
        (slice(1, 3), [1, 2]),
        (np.array([0, 3]), [0, 3]),
        (torch.tensor([1, 3]), [1, 3]),
    ],
)
def test_view_steps_only_its_rows_of_the_parent(cls, use_buffers, item, rows):
    env = make(cls, use_buffers=use_buffers)
    try:
        root = env.reset()
        view = env[item]
        assert isinstance(view, cls)
        assert view.num_workers == len(rows) and view.batch_size == (len(rows),)
        out = view.step(view.rand_action())
        assert out["next", "count"].flatten().tolist() == [1] * len(rows)
        # the parent sees its sub-envs move: a step of the parent continues the view's rows
        step = env.step(env.rand_action(root))
        expected = torch.ones(4, dtype=torch.long)
        expected[rows] = 2
        assert torch.equal(step["next", "count"].flatten(), expected)
        view.close()
        assert view.is_closed and not env.is_closed
    finally:
        env.close()


@pytest.mark.parametrize("cls", CLASSES)
def test_view_checks_its_specs_and_closes_alone(cls):
    env = make(cls)
    try:
        view = env[1:]
        check_env_specs(view)
        view.close()
        with pytest.raises(RuntimeError, match="closed indexed"):
            view.reset()
        env.rollout(2)
    finally:
        env.close()
    with pytest.raises(RuntimeError, match="parent environment has been closed"):
        env[0].reset()


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("mask", [np.ones(4, dtype=bool), torch.ones(4, dtype=torch.bool)])
def test_boolean_masks_and_writeback_are_refused(cls, mask):
    env = make(cls)
    try:
        with pytest.raises(NotImplementedError, match="Boolean masks"):
            env[mask]
        with pytest.raises(NotImplementedError, match="snapshot writeback"):
            env[0] = PendulumEnv()
    finally:
        env.close()


@pytest.mark.parametrize("cls", CLASSES)
def test_worker_count_mismatch_is_torchrl_runtime_error(cls):
    with pytest.raises(RuntimeError, match=r"len\(create_env_fn\) and num_workers mismatch"):
        cls(4, [counted, counted])
    with pytest.raises(RuntimeError, match=r"len\(create_env_kwargs\) and num_workers mismatch"):
        cls(4, counted, create_env_kwargs=[{}, {}])
    env = make(cls, n=2)
    try:
        with pytest.raises(RuntimeError, match=r"len\(kwargs\) and num_workers mismatch"):
            env.update_kwargs([{}])
    finally:
        env.close()


def test_start_starts_the_workers_and_serial_start_is_a_no_op():
    env = make(ParallelEnv, n=2)
    try:
        assert not env.is_started
        env.start()
        assert env.is_started
    finally:
        env.close()
    serial = make(SerialEnv, n=2)
    serial.start()
    serial.close()
    with pytest.raises(RuntimeError, match="closed"):
        serial.start()


def test_serial_for_single():
    single = ParallelEnv(1, counted, serial_for_single=True, use_buffers=False)
    assert type(single) is SerialEnv and single.use_buffers is False
    single.close()
    for n in (1, 2):
        env = ParallelEnv(n, counted, serial_for_single=n == 2, mp_start_method="spawn")
        assert type(env) is ParallelEnv
        assert env.serial_for_single is (n == 2)
        env.close()


class NestedObsEnv(EnvBase):
    """Batch [3]; an observation under a nested Composite of shape [3, 5]."""

    def __init__(self) -> None:
        super().__init__(batch_size=(3,))
        self.observation_spec = Composite(
            data=Composite(obs=Unbounded((3, 5, 2)), shape=(3, 5)), shape=(3,)
        )
        self.action_spec = Unbounded((3, 1))

    def _reset(self, td):
        return self.full_observation_spec.zero().update(self.full_done_spec.zero())

    def _step(self, td):
        out = self.full_observation_spec.zero().update(self.full_done_spec.zero())
        out.set("reward", torch.zeros(3, 1))
        return out

    def _set_seed(self, seed):
        pass


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("use_buffers", [True, False])
def test_nested_batch_dims_survive_the_batched_env(cls, use_buffers):
    env = cls(2, NestedObsEnv, use_buffers=use_buffers)
    try:
        assert env.reset()["data"].batch_size == (2, 3, 5)
        rollout = env.rollout(4)
        assert rollout["next", "data"].batch_size == (2, 3, 4, 5)
    finally:
        env.close()


def test_cpu_device_index_is_not_a_different_device():
    from rl_envs import DeviceCastTransform

    spec = Unbounded((2,), device="cpu:1")
    assert spec.is_in(torch.zeros(2, device="cpu:1"))  # a CPU tensor reports plain "cpu"
    assert spec.is_in(torch.zeros(2))
    env = TransformedEnv(
        PendulumEnv(),
        DeviceCastTransform("cpu:1", in_keys=["observation"], in_keys_inv=["action"]),
    )
    assert env.device is None  # outputs on two devices
    check_env_specs(env)


@pytest.mark.parametrize("cls", CLASSES)
def test_batched_env_of_mixed_device_sub_envs_has_no_device(cls):
    from rl_envs import DeviceCastTransform

    def make():
        return TransformedEnv(PendulumEnv(), DeviceCastTransform("cpu:1", in_keys=["observation"]))

    env = cls(2, make)
    try:
        assert env.device is None
        check_env_specs(env)
    finally:
        env.close()


def test_composite_data_cls_builds_that_class():
    from tensordict import tensorclass

    @tensorclass
    class Pair:
        x: torch.Tensor
        y: torch.Tensor

    spec = Composite(x=Unbounded((2, 3)), y=Unbounded((2,)), shape=(2,), data_cls=Pair)
    for value in (spec.zero(), spec.rand(), spec.expand(4, 2).zero(), spec.clone().one()):
        assert isinstance(value, Pair)
    assert spec.zero().x.shape == (2, 3)


@pytest.mark.parametrize("cls", CLASSES)
def test_consolidate_is_accepted(cls):
    env = make(cls, n=2, consolidate=False)
    assert env.consolidate is False
    env.close()
