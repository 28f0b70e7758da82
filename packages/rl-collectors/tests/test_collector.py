"""The single-process Collector against a plain reference loop, option by option."""

from __future__ import annotations

import pytest
import torch
from rl_collectors_toy_env import (
    PrivateOutputPolicy,
    ScalePolicy,
    StatefulToyEnv,
    ToyEnv,
    ToyEnvWithStepAndMaybeReset,
    reference_rollout,
)
from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import nn

from rl_collectors import Collector, SyncDataCollector, split_trajectories

ENV_CLASSES = [ToyEnv, ToyEnvWithStepAndMaybeReset]
BATCHES = [(), (3,), (2, 2)]


def _expected_traj_ids(batch: TensorDict) -> torch.Tensor:
    """Independent reference: a new id wherever the (sub-env, episode) pair changes."""
    obs = batch["observation"]
    return obs[..., 1] * 1000 + obs[..., 2]


@pytest.mark.parametrize("env_class", ENV_CLASSES)
@pytest.mark.parametrize("batch_size", BATCHES)
def test_matches_reference_loop(env_class: type, batch_size: tuple[int, ...]) -> None:
    numel = torch.Size(batch_size).numel()
    steps = 12
    policy = ScalePolicy(init=1.0)
    collector = Collector(
        env_class(batch_size),
        policy,
        frames_per_batch=steps * numel,
        total_frames=2 * steps * numel,
    )
    batches = list(collector)
    reference = reference_rollout(ToyEnv(batch_size), policy, 2 * steps)
    assert [b.shape for b in batches] == [torch.Size([*batch_size, steps])] * 2
    got = torch.cat(batches, -1)
    for key in ["observation", "action", ("next", "observation"), ("next", "reward"), ("next", "done"),
                ("next", "terminated"), ("next", "truncated"), "done"]:  # fmt: skip
        torch.testing.assert_close(got[key], reference[key], msg=f"{key}")
    assert got["collector", "traj_ids"].dtype == torch.int64


@pytest.mark.parametrize("batch_size", BATCHES)
def test_traj_ids_unique_and_continuous_across_batches(batch_size: tuple[int, ...]) -> None:
    numel = torch.Size(batch_size).numel()
    collector = Collector(
        ToyEnv(batch_size), None, frames_per_batch=5 * numel, total_frames=40 * numel
    )
    got = torch.cat(list(collector), -1)
    ids = got["collector", "traj_ids"].reshape(-1, got.shape[-1])
    key = _expected_traj_ids(got).reshape(-1, got.shape[-1])
    # Same id <=> same (sub-env, episode), across batch boundaries too.
    pairs = {(int(i), float(k)) for i, k in zip(ids.flatten(), key.flatten(), strict=True)}
    assert len({i for i, _ in pairs}) == len(pairs) == len({k for _, k in pairs})
    assert ids.min() == 0


@pytest.mark.parametrize("total", [30, 35, 8])
def test_exact_total_frames_with_short_last_batch(total: int) -> None:
    collector = Collector(ToyEnv(()), None, frames_per_batch=10, total_frames=total)
    sizes = [b.numel() for b in collector]
    assert sum(sizes) == total == collector.frames
    assert sizes[:-1] == [10] * (len(sizes) - 1)
    assert len(collector) == len(sizes)


def test_init_random_frames_counted_in_total() -> None:
    policy = ScalePolicy(init=0.0)  # always action 0
    collector = Collector(
        ToyEnv((2,)), policy, frames_per_batch=10, total_frames=30, init_random_frames=14
    )
    got = torch.cat(list(collector), -1)
    assert got.numel() == 30
    random_steps = (got["action"] != 0).squeeze(-1).all(0)
    # 14 random frames over 2 sub-envs = the first 7 steps (uniform draws are never exactly 0).
    assert random_steps.tolist() == [True] * 7 + [False] * 8


def test_max_frames_per_traj_truncates_and_resets() -> None:
    env = ToyEnv((2,), min_len=50, span=1)  # would never terminate within the test
    collector = Collector(env, None, frames_per_batch=20, total_frames=40, max_frames_per_traj=4)
    got = torch.cat(list(collector), -1)
    trunc = got["next", "truncated"].squeeze(-1)
    assert trunc[:, 3::4].all() and trunc.sum() == 20 // 4 * 2
    assert (got["next", "done"] == got["next", "truncated"]).all()
    assert got["observation"][..., 0].max() == 3  # steps 0..3 within each trajectory
    # TorchRL's StepCounter entries: steps so far in the trajectory, before and after.
    assert torch.equal(got["step_count"].squeeze(-1), got["observation"][..., 0].long())
    assert torch.equal(got["next", "step_count"], got["step_count"] + 1)


class _NoTruncatedFlagEnv(ToyEnv):
    """A ToyEnv whose steps carry no "truncated" entry (as many TorchRL mock envs)."""

    def step(self, tensordict: TensorDict) -> TensorDict:
        tensordict = super().step(tensordict)
        tensordict.set("next", tensordict.get("next").exclude("truncated"))
        return tensordict


def test_max_frames_per_traj_adds_truncated_flag_when_env_has_none() -> None:
    env = _NoTruncatedFlagEnv((2,), min_len=50, span=1)
    collector = Collector(env, None, frames_per_batch=12, total_frames=12, max_frames_per_traj=3)
    got = collector.next()
    assert got["next", "truncated"].squeeze(-1).tolist() == [[False, False, True] * 2] * 2
    assert got["observation"][..., 0].max() == 2


@pytest.mark.parametrize("no_limit", [0, -1])
def test_non_positive_max_frames_per_traj_means_no_limit(no_limit: int) -> None:
    """TorchRL's reading (its tutorials pass -1): nothing is truncated."""
    env = ToyEnv((2,), min_len=50, span=1)
    kwargs = {"frames_per_batch": 20, "total_frames": 40}
    got = torch.cat(list(Collector(env, None, max_frames_per_traj=no_limit, **kwargs)), -1)
    assert not got["next", "truncated"].any()
    assert got["observation"][..., 0].max() == 19


def test_reset_at_each_iter_starts_every_batch_fresh() -> None:
    collector = Collector(ToyEnv((2,), min_len=50, span=1), None, frames_per_batch=6, total_frames=18,
                          reset_at_each_iter=True)  # fmt: skip
    batches = list(collector)
    for batch in batches:
        assert batch["observation"][..., 0].tolist() == [[0, 1, 2], [0, 1, 2]]
    ids = [set(b["collector", "traj_ids"].flatten().tolist()) for b in batches]
    assert ids[0].isdisjoint(ids[1]) and ids[1].isdisjoint(ids[2])


def test_reset_restarts_every_sub_env_at_the_next_step() -> None:
    collector = Collector(
        ToyEnv((2,), min_len=50, span=1), None, frames_per_batch=6, total_frames=18
    )
    batches = iter(collector)
    assert next(batches)["observation"][..., 0].tolist() == [[0, 1, 2], [0, 1, 2]]
    collector.reset()
    after = next(batches)
    assert after["observation"][..., 0].tolist() == [[0, 1, 2], [0, 1, 2]]
    assert collector.frames == 12 and not after["next", "done"].any()
    assert next(batches)["observation"][..., 0].tolist() == [[3, 4, 5], [3, 4, 5]]


def test_split_trajs_pads_and_masks() -> None:
    collector = Collector(
        ToyEnv((2,)), None, frames_per_batch=20, total_frames=20, split_trajs=True
    )
    out = collector.next()
    mask = out["collector", "mask"]
    assert mask.dtype == torch.bool and mask.shape == out.shape
    assert int(mask.sum()) == 20
    # Every row is one trajectory: one id, steps counting up from where it started.
    for row in range(out.shape[0]):
        ids = out["collector", "traj_ids"][row][mask[row]]
        assert ids.unique().numel() == 1
        steps = out["observation"][row, :, 0][mask[row]]
        assert (steps.diff() == 1).all()
        assert (out["observation"][row][~mask[row]] == 0).all()


def test_flatten_postproc_and_return_same_td() -> None:
    seen = []

    def postproc(td: TensorDict) -> TensorDict:
        seen.append(td.shape)
        return td.set("extra", torch.ones(td.shape))

    collector = Collector(
        ToyEnv((2,)), None, frames_per_batch=8, total_frames=16, flatten=True, postproc=postproc
    )
    batches = list(collector)
    assert seen == [torch.Size([8])] * 2 and all(b["extra"].shape == (8,) for b in batches)
    same = Collector(ToyEnv(()), None, frames_per_batch=4, total_frames=8, return_same_td=True)
    first, second = list(same)
    assert first is second
    fresh = Collector(ToyEnv(()), None, frames_per_batch=4, total_frames=8)
    first, second = list(fresh)
    assert first["observation"].data_ptr() != second["observation"].data_ptr()


def test_replay_buffer_receives_batches() -> None:
    class ListBuffer:
        def __init__(self) -> None:
            self.items: list[TensorDict] = []

        def extend(self, td: TensorDict) -> None:
            self.items.append(td)

    buffer = ListBuffer()
    collector = Collector(
        ToyEnv(()), None, frames_per_batch=5, total_frames=15, replay_buffer=buffer
    )
    assert list(collector) == [None, None, None]
    assert [b.shape for b in buffer.items] == [torch.Size([5])] * 3


@pytest.mark.parametrize(
    ("exploration_type", "deterministic"),
    [(InteractionType.RANDOM, False), (InteractionType.DETERMINISTIC, True), ("mode", True)],
)
def test_exploration_type(exploration_type: InteractionType | str, deterministic: bool) -> None:
    class LocScale(nn.Module):
        def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return obs[..., :1] / 10, torch.ones_like(obs[..., :1])

    policy = ProbabilisticTensorDictSequential(
        TensorDictModule(LocScale(), ["observation"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(
            ["loc", "scale"], ["action"], distribution_class=torch.distributions.Normal
        ),
    )
    collector = Collector(
        ToyEnv(()), policy, frames_per_batch=10, total_frames=10, exploration_type=exploration_type
    )
    batch = collector.next()
    assert torch.equal(batch["action"], batch["loc"]) == deterministic


def test_update_policy_weights_and_version() -> None:
    trainer_policy = ScalePolicy(init=0.0)
    collector = Collector(
        ToyEnv(()), trainer_policy, frames_per_batch=6, total_frames=18, track_policy_version=True
    )
    first = collector.next()
    with torch.no_grad():
        trainer_policy.weight.fill_(5.0)
    collector.update_policy_weights_()
    second = collector.next()
    assert first["policy_version"].unique().tolist() == [0]
    assert second["policy_version"].unique().tolist() == [1]
    # TorchRL's PolicyVersion keys: the root and "next" hold the same version.
    assert torch.equal(second["next", "policy_version"], second["policy_version"])
    assert second["policy_version"].dtype == torch.int64
    assert (first["action"] == 0).all() and (second["action"] != 0).any()
    collector.update_policy_weights_({"weight": torch.tensor(0.0)})
    assert trainer_policy.weight.item() == 0.0  # same module: weights loaded in place
    assert collector.next() is not None and collector.next() is None


def test_state_dict_resume_keeps_frames_and_ids() -> None:
    policy = ScalePolicy(init=2.0)
    first = Collector(ToyEnv((2,)), policy, frames_per_batch=10, total_frames=50)
    seen = [first.next(), first.next()]
    state = first.state_dict()
    resumed_policy = ScalePolicy(init=0.0)
    resumed = Collector(ToyEnv((2,)), resumed_policy, frames_per_batch=10, total_frames=50)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert resumed_policy.weight.item() == 2.0
    assert sum(b.numel() for b in seen + rest) == 50 and resumed.frames == 50
    old = set(torch.cat([b["collector", "traj_ids"].flatten() for b in seen]).tolist())
    new = set(torch.cat([b["collector", "traj_ids"].flatten() for b in rest]).tolist())
    assert old.isdisjoint(new) and min(new) > max(old)


def test_flatten_applies_without_trajectory_ids_too() -> None:
    kwargs = {"frames_per_batch": 8, "total_frames": 8, "flatten": True}
    batch = Collector(ToyEnv((2,)), None, track_traj_ids=False, **kwargs).next()
    assert batch.shape == torch.Size([8]) and "collector" not in batch


def test_traj_pool_gives_the_next_id_and_moves_on_when_a_state_is_loaded() -> None:
    first = Collector(ToyEnv((2,)), None, frames_per_batch=10, total_frames=-1)
    ids = first.next()["collector", "traj_ids"]
    state = first.state_dict()
    saved = state["traj_pool"]["traj_id"].item()
    assert saved == ids.max().item() + 1  # TorchRL's _TrajectoryPool: the next id to give
    resumed = Collector(ToyEnv((2,)), None, frames_per_batch=10, total_frames=-1)
    resumed.load_state_dict(state)
    # the restarted sub-envs got their ids at load time, as in TorchRL
    assert resumed.state_dict()["traj_pool"]["traj_id"].item() == saved + 2
    first_ids = resumed.next()["collector", "traj_ids"][:, 0]
    assert first_ids.tolist() == [saved, saved + 1]
    untracked = Collector(ToyEnv(), None, frames_per_batch=2, track_traj_ids=False)
    assert "traj_pool" not in untracked.state_dict()


@pytest.mark.parametrize("batch", [(), (3,)])
def test_resume_with_a_stateful_env_continues_the_trajectories_in_flight_exactly(batch) -> None:
    def run(env: ToyEnv) -> Collector:
        return Collector(
            env, ScalePolicy(init=3.0), frames_per_batch=4 * max(1, len(batch) * 3), total_frames=-1
        )

    straight = run(StatefulToyEnv(batch))
    expected = [straight.next() for _ in range(4)]
    first = run(StatefulToyEnv(batch))
    got = [first.next(), first.next()]
    state = first.state_dict()
    assert "live" in state
    resumed = run(StatefulToyEnv(batch))  # a fresh env, as after a process restart
    resumed.load_state_dict(state)
    got += [resumed.next(), resumed.next()]
    for want, have in zip(expected, got, strict=True):
        assert (want == have).all(), "a resumed collector must reproduce the uninterrupted run"


def test_resume_without_env_state_restarts_from_a_reset() -> None:
    collector = Collector(ToyEnv((2,)), None, frames_per_batch=4, total_frames=-1)
    collector.next()
    assert "live" not in collector.state_dict()  # ToyEnv has no get_state


class _ExtraOutputPolicy(nn.Module):
    """Writes an action and a diagnostic, as Q-value or Gaussian policies do."""

    def forward(self, td):
        td.set("action", torch.full((*td.batch_size, 1), 0.5))
        td.set("extra", torch.ones(*td.batch_size, 2))
        return td


def test_random_frames_carry_the_policys_other_outputs_as_zeros() -> None:
    collector = Collector(
        ToyEnv((2,)), _ExtraOutputPolicy(), frames_per_batch=4, total_frames=8, init_random_frames=4
    )
    random_batch, policy_batch = list(collector)
    assert set(random_batch.keys(True, True)) == set(policy_batch.keys(True, True))
    assert (random_batch["extra"] == 0).all() and (policy_batch["extra"] == 1).all()
    assert not (random_batch["action"] == 0.5).all() and (policy_batch["action"] == 0.5).all()


def test_timings_context_manager_and_alias() -> None:
    env = ToyEnv(())
    with SyncDataCollector(
        env, None, frames_per_batch=4, total_frames=4, progress_bar=True
    ) as collector:
        collector.next()
        timings = collector.last_timings
        assert timings.frames == 4 and timings.total_s >= timings.env_s + timings.policy_s > 0
        assert "Collector" in repr(collector)
    assert env.closed
    collector.shutdown()  # twice is fine


def test_endless_collector() -> None:
    collector = Collector(ToyEnv(()), None, frames_per_batch=3)
    for index, batch in enumerate(collector):
        assert batch.shape == (3,)
        if index == 4:
            break
    assert collector.frames == 15
    with pytest.raises(TypeError, match="endless"):
        len(collector)


def test_constructor_and_factory() -> None:
    collector = Collector(ToyEnv, None, create_env_kwargs={"batch_size": (2,)}, frames_per_batch=4)
    assert collector.next().shape == (2, 2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"frames_per_batch": 0}, ValueError, "frames_per_batch must be > 0"),
        ({"frames_per_batch": 4, "total_frames": -3}, ValueError, "total_frames must be"),
        ({"frames_per_batch": 4, "split_trajs": True, "flatten": True}, ValueError, "pick one"),
        ({"frames_per_batch": 4, "exploration_type": "sometimes"}, ValueError, "sometimes"),
    ],
)
def test_bad_arguments_are_explained(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        Collector(ToyEnv((2,)), None, **kwargs)


def test_frame_counts_are_rounded_up_to_whole_env_steps_with_a_warning() -> None:
    """As TorchRL: 5 frames over 2 sub-envs become 6 (3 steps), total 7 becomes 8."""
    with (
        pytest.warns(UserWarning, match="frames_per_batch=5 .* rounded up to 6"),
        pytest.warns(UserWarning, match="total_frames=7 .* 8 frames"),
    ):
        collector = Collector(ToyEnv((2,)), None, frames_per_batch=5, total_frames=7)
    assert [batch.numel() for batch in collector] == [6, 2]
    assert len(collector) == 2


def test_policy_without_action_key_is_reported() -> None:
    collector = Collector(ToyEnv(()), lambda td: td, frames_per_batch=4)
    with pytest.raises(KeyError, match="action"):
        collector.next()


def test_split_trajectories_on_collected_batch_round_trips() -> None:
    batch = Collector(ToyEnv((3,)), None, frames_per_batch=30, total_frames=30).next()
    split = split_trajectories(batch)
    mask = split["collector", "mask"]
    assert sorted(split["observation"][mask][:, 1:].tolist()) == sorted(
        batch["observation"].reshape(-1, 3)[:, 1:].tolist()
    )


def test_set_seed_seeds_the_env_returns_the_next_seed_and_restarts_episodes() -> None:
    from rl_collectors_toy_env import SeededToyEnv

    collector = Collector(SeededToyEnv(batch_size=(2,)), None, frames_per_batch=8)
    first = collector.next()
    assert first["observation"][..., 1].max() < 100  # unseeded: sub-env indices 0 and 1
    assert collector.set_seed(7) == 8 and collector.set_seed(7, static_seed=True) == 7
    second = collector.next()
    assert torch.equal(second["observation"][:, 0, 1], torch.tensor([700.0, 701.0]))
    assert (second["observation"][:, 0, 0] == 0).all(), "seeding starts every episode afresh"
    # Trajectory ids restart from 0 at each seeding (TorchRL's reset renumbers them), so a
    # re-seeded collector repeats its ids too.
    assert second["collector", "traj_ids"][:, 0].tolist() == [0, 1]
    collector.set_seed(7)
    assert collector.next()["collector", "traj_ids"][:, 0].tolist() == [0, 1]


def test_set_seed_without_env_set_seed_names_the_fix() -> None:
    collector = Collector(ToyEnv(), None, frames_per_batch=4)
    with pytest.raises(TypeError, match="has no set_seed"):
        collector.set_seed(0)


@pytest.mark.parametrize("close_env", [True, False])
def test_async_shutdown_closes_the_env_unless_asked_not_to(close_env: bool) -> None:
    env = ToyEnv(())
    collector = Collector(env, None, frames_per_batch=4, total_frames=8)
    collector.next()
    collector.async_shutdown(timeout=1.0, close_env=close_env)
    assert bool(getattr(env, "closed", False)) is close_env


class _ListBuffer:
    def __init__(self) -> None:
        self.items: list[TensorDict] = []

    def extend(self, td: TensorDict) -> None:
        self.items.append(td.clone())


def test_extend_buffer_false_writes_one_time_step_at_a_time() -> None:
    whole, steps = _ListBuffer(), _ListBuffer()
    for buffer, extend_buffer in ((whole, True), (steps, False)):
        collector = Collector(ToyEnv((3,)), ScalePolicy(0.5), frames_per_batch=12, total_frames=12,
                              replay_buffer=buffer, extend_buffer=extend_buffer)  # fmt: skip
        assert list(collector) == [None]
    assert [b.shape for b in whole.items] == [torch.Size([3, 4])]
    assert [b.shape for b in steps.items] == [torch.Size([3])] * 4
    for t, step in enumerate(steps.items):
        assert torch.equal(step["observation"], whole.items[0]["observation"][:, t])


def test_extend_buffer_false_refuses_whole_batch_options() -> None:
    with pytest.raises(ValueError, match="extend_buffer=False"):
        Collector(ToyEnv(()), None, frames_per_batch=4, replay_buffer=_ListBuffer(),
                  extend_buffer=False, postproc=lambda td: td)  # fmt: skip


def test_reset_when_done_false_is_refused_and_use_buffers_keeps_the_batch() -> None:
    with pytest.raises(ValueError, match="reset_when_done"):
        Collector(ToyEnv(()), None, frames_per_batch=4, reset_when_done=False)
    batches = [
        Collector(
            ToyEnv((2,)),
            ScalePolicy(0.5),
            frames_per_batch=8,
            total_frames=8,
            use_buffers=use_buffers,
        ).next()
        for use_buffers in (None, False)
    ]
    assert (batches[0] == batches[1]).all()


def test_start_collects_into_the_buffer_in_the_background_until_async_shutdown() -> None:
    import time

    buffer = _ListBuffer()
    collector = Collector(ToyEnv((2,)), None, frames_per_batch=4, total_frames=-1,
                          replay_buffer=buffer)  # fmt: skip
    collector.start()
    with pytest.raises(RuntimeError, match="already started"):
        collector.start()
    deadline = time.monotonic() + 30
    while len(buffer.items) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    collector.async_shutdown(timeout=30)
    count = len(buffer.items)
    assert count >= 3 and all(b.shape == (2, 2) for b in buffer.items)
    time.sleep(0.05)
    assert len(buffer.items) == count, "no batch after async_shutdown"


def test_start_needs_a_buffer_and_reraises_the_threads_error() -> None:
    with pytest.raises(RuntimeError, match="replay_buffer"):
        Collector(ToyEnv(()), None, frames_per_batch=4).start()

    class Broken(_ListBuffer):
        def extend(self, td: TensorDict) -> None:
            raise ValueError("full")

    collector = Collector(ToyEnv(()), None, frames_per_batch=4, total_frames=8,
                          replay_buffer=Broken())  # fmt: skip
    collector.start()
    with pytest.raises(RuntimeError, match="background") as info:
        collector.async_shutdown(timeout=30)
    assert isinstance(info.value.__cause__, ValueError)


def test_pause_holds_the_background_collection_between_batches() -> None:
    import time

    buffer = _ListBuffer()
    collector = Collector(ToyEnv((2,)), None, frames_per_batch=4, replay_buffer=buffer)
    collector.start()
    deadline = time.monotonic() + 30
    while not buffer.items and time.monotonic() < deadline:
        time.sleep(0.01)
    with collector.pause():
        count = len(buffer.items)
        time.sleep(0.1)
        assert len(buffer.items) == count, "no batch is written while paused"
    while len(buffer.items) == count and time.monotonic() < deadline:
        time.sleep(0.01)
    collector.async_shutdown(timeout=30)
    assert len(buffer.items) > count, "collection resumes after the pause"


def test_the_time_dim_is_named_as_in_torchrl() -> None:
    assert Collector(ToyEnv((2,)), None, frames_per_batch=4).next().names == [None, "time"]


def test_policy_factory_builds_the_policy() -> None:
    collector = Collector(
        ToyEnv(()), policy_factory=lambda: ScalePolicy(init=0.0), frames_per_batch=4
    )
    assert isinstance(collector.policy, ScalePolicy)
    assert (collector.next()["action"] == 0).all()
    with pytest.raises(ValueError, match="not both"):
        Collector(ToyEnv(()), ScalePolicy(), policy_factory=ScalePolicy, frames_per_batch=4)


def test_a_spec_less_policy_takes_the_env_action_spec() -> None:
    class SpecLessRandomPolicy:
        action_spec = None

        def set_action_spec_from_env(self, env: ToyEnv) -> None:
            self.action_spec = env.action_spec

        def __call__(self, td: TensorDict) -> TensorDict:
            return td.set("action", self.action_spec.rand())

    policy = SpecLessRandomPolicy()
    env = ToyEnv((2,))
    collector = Collector(env, policy, frames_per_batch=4)
    assert policy.action_spec is env.action_spec
    assert collector.next()["action"].shape == (2, 2, 1)


class _ZerosSpec:
    """Duck-typed composite spec: ``zero()`` gives zeros of a fixed layout."""

    def __init__(self, **leaves: torch.Tensor) -> None:
        self.leaves = leaves

    def zero(self) -> TensorDict:
        return TensorDict({k: torch.zeros_like(v) for k, v in self.leaves.items()}, [2])


class _ToyEnvWithSpecs(ToyEnv):
    def __init__(self) -> None:
        super().__init__((2,))
        flag = torch.zeros(2, 1, dtype=torch.bool)
        self.full_observation_spec = _ZerosSpec(observation=torch.zeros(2, 3))
        self.full_done_spec = _ZerosSpec(done=flag, terminated=flag, truncated=flag)
        self.full_reward_spec = _ZerosSpec(reward=torch.zeros(2, 1))
        self.full_action_spec = _ZerosSpec(action=torch.zeros(2, 1))


@pytest.mark.parametrize("policy", [None, ScalePolicy(init=1.0)])
def test_fake_tensordict_mirrors_a_real_batch(policy: ScalePolicy | None) -> None:
    collector = Collector(_ToyEnvWithSpecs(), policy, frames_per_batch=8, track_policy_version=True)
    fake = collector.fake_tensordict()
    real = collector.next()
    assert fake.batch_size == real.batch_size and fake.names == real.names
    assert sorted(map(str, fake.keys(True, True))) == sorted(map(str, real.keys(True, True)))
    for key, value in fake.items(True, True):
        assert value.dtype == real[key].dtype and not value.any(), key
    with pytest.raises(TypeError, match="full_observation_spec"):
        Collector(ToyEnv(()), None, frames_per_batch=4).fake_tensordict()


def test_max_frames_per_traj_refuses_an_env_that_counts_steps() -> None:
    class _Spec:
        def keys(self, include_nested: bool, leaves_only: bool) -> list:
            return [("full_observation_spec", "step_count")]

    env = ToyEnv(())
    env.output_spec = _Spec()
    Collector(env, None, frames_per_batch=4)  # fine without max_frames_per_traj
    with pytest.raises(ValueError, match="already counts steps"):
        Collector(env, None, frames_per_batch=4, max_frames_per_traj=2)


def test_non_tensor_entries_are_collected() -> None:
    from rl_collectors_toy_env import LabelledToyEnv, as_python_list

    batch = Collector(LabelledToyEnv(), None, frames_per_batch=6).next()
    steps = batch["observation"][:, 0].long().tolist()  # step within the episode
    labels = as_python_list(batch["label"])
    assert labels == ["reset" if n == 0 else f"step {n}" for n in steps]
    assert as_python_list(batch["next", "label"]) == [f"step {n + 1}" for n in steps]


@pytest.mark.parametrize("exclude", [True, False])
def test_private_keys_are_dropped_from_batches_unless_asked(exclude: bool) -> None:
    collector = Collector(
        ToyEnv((2,)), PrivateOutputPolicy(1.0), frames_per_batch=8, total_frames=8
    )
    assert collector._exclude_private_keys  # TorchRL's default
    collector._exclude_private_keys = exclude
    keys = set(next(iter(collector)).keys(True, True))
    assert ("out", "kept") in keys
    assert ("_noise" in keys, ("out", "_state") in keys) == (not exclude, not exclude)
