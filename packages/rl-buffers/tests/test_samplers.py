import itertools

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import (
    LazyTensorStorage,
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
    TensorDictReplayBuffer,
)

from ._data import rollout


def _storage(n, cap=None):
    s = LazyTensorStorage(cap or n)
    s.set(slice(0, n), torch.arange(float(n)))
    return s


def test_uniform_frequencies():
    torch.manual_seed(0)
    n, draws = 10, 50_000
    index, _ = RandomSampler().sample(_storage(n, 20), draws)
    counts = torch.bincount(index, minlength=n).double()
    assert index.max() < n
    chi2 = ((counts - draws / n) ** 2 / (draws / n)).sum()
    assert chi2 < 30  # chi-square, 9 dof: p < 1e-3 beyond ~27.9


@pytest.mark.parametrize("drop_last", [False, True])
def test_without_replacement_covers_each_index_once_per_epoch(drop_last):
    storage, sampler = _storage(23), SamplerWithoutReplacement(drop_last=drop_last)
    for _ in range(3):
        seen = []
        while True:
            index, _ = sampler.sample(storage, 5)
            seen.append(index)
            if sampler.ran_out:
                break
        seen = torch.cat(seen)
        assert seen.numel() == (20 if drop_last else 23)
        assert seen.unique().numel() == seen.numel()


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_prioritized_frequencies_and_weights(alpha):
    torch.manual_seed(1)
    n, draws, beta = 8, 80_000, 0.7
    storage = _storage(n, 16)
    sampler = PrioritizedSampler(16, alpha, beta, eps=0.0, backend="torch")
    sampler.extend(torch.arange(n))
    p = torch.arange(1.0, n + 1)
    sampler.update_priority(torch.arange(n), p)
    index, info = sampler.sample(storage, draws)
    p = p.double()
    expected = p**alpha / (p**alpha).sum()
    freq = torch.bincount(index, minlength=n).double() / draws
    std = (expected * (1 - expected) / draws).sqrt()
    assert ((freq - expected).abs() < 5 * std).all()
    # closed form: w_i = (N P(i))^-beta / max_j (N P(j))^-beta
    w = (n * expected) ** -beta / ((n * expected) ** -beta).max()
    assert torch.allclose(info["priority_weight"].double(), w[index], rtol=1e-5)


def test_prioritized_new_items_get_max_priority():
    sampler = PrioritizedSampler(8, 1.0, 1.0, eps=0.0, backend="torch")
    sampler.extend(torch.arange(2))
    sampler.update_priority(torch.tensor([0]), 5.0)
    sampler.extend(torch.tensor([2]))
    assert sampler.priorities()[:3].tolist() == [5.0, 1.0, 5.0]
    with pytest.raises(IndexError, match="capacity"):
        sampler.update_priority(torch.tensor([8]), 1.0)


def _traj_buffer(sampler, envs=3, steps=40, ndim=1, cap=400):
    data, _ = rollout(envs, steps, seed=0)
    done = data["next", "done"].squeeze(-1).long()
    # trajectory ids as a collector writes them: unique per env and episode
    data["traj"] = torch.arange(envs).unsqueeze(-1) * 1000 + torch.cumsum(done, 1) - done
    # the sampler marks slice starts in a stored is_init
    data["is_init"] = torch.zeros(envs, steps, 1, dtype=torch.bool)
    storage = LazyTensorStorage(cap, ndim=ndim)
    rb = TensorDictReplayBuffer(storage=storage, sampler=sampler)
    rb.extend(data.reshape(-1) if ndim == 1 else data)
    return rb, data


def _check_slices(sample, slice_len):
    obs, nxt = sample["observation"], sample["next", "observation"]
    done = sample["next", "done"].squeeze(-1)
    for s in range(sample.shape[0] // slice_len):
        sl = slice(s * slice_len, (s + 1) * slice_len)
        # consecutive steps of one trajectory: next obs of step k is obs of step k+1
        assert torch.equal(nxt[sl][:-1], obs[sl][1:])
        assert sample["next", "truncated"][sl][-1].all() and done[sl][-1]
        assert sample["is_init"][sl][0].all() and not sample["is_init"][sl][1:].any()


@pytest.mark.parametrize("ndim", [1, 2])
@pytest.mark.parametrize("cls", [SliceSampler, SliceSamplerWithoutReplacement])
def test_slices_never_cross_trajectories(cls, ndim):
    # flattened [envs * T] data needs ids (env rows meet without a done flag); [envs, T] data uses flags
    rb, _ = _traj_buffer(cls(slice_len=4, traj_key="traj" if ndim == 1 else None), ndim=ndim)
    for _ in range(20):
        _check_slices(rb.sample(32), 4)


def test_slices_by_trajectory_id_and_ring_seam():
    ids = torch.arange(30) // 6
    storage = LazyTensorStorage(25)
    rb = TensorDictReplayBuffer(storage=storage, sampler=SliceSampler(slice_len=3, traj_key="traj"))
    rb.extend(
        TensorDict(traj=ids, step=torch.arange(30), batch_size=[30])
    )  # wraps: 25..29 over 0..4
    for _ in range(30):
        s = rb.sample(30)
        t, step = s["traj"].view(10, 3), s["step"].view(10, 3)
        assert (t == t[:, :1]).all()
        assert (step[:, 1:] - step[:, :-1] == 1).all()


def test_slice_without_replacement_visits_each_trajectory_once():
    rb, _data = _traj_buffer(
        SliceSamplerWithoutReplacement(slice_len=2, traj_key="traj"), envs=1, steps=60
    )
    starts = []
    while True:
        s = rb.sample(4)
        starts.append(s["index"][::2])
        if rb.sampler.ran_out:
            break
    trajs = rb.sampler.trajectories(rb.storage)
    traj_of = trajs.traj_of[torch.cat(starts)]
    assert traj_of.unique().numel() == traj_of.numel() == int((trajs.length >= 2).sum())


def test_prioritized_slice_sampler_follows_priorities():
    sampler = PrioritizedSliceSampler(400, 1.0, 1.0, slice_len=3, traj_key="traj", backend="torch")
    rb, _ = _traj_buffer(sampler)
    p = torch.zeros(len(rb))
    p[50] = 1.0
    rb.update_priority(torch.arange(len(rb)), p)
    s = rb.sample(9)
    _check_slices(s, 3)
    assert all((s["index"].view(3, 3) == 50).any(-1))
    assert "priority_weight" in s


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), float("-inf")])
def test_priority_check_finds_each_bad_value_and_accepts_huge_finite_ones(bad):
    sampler = PrioritizedSampler(4, 1.0, 1.0, eps=0.0, backend="torch", dtype=torch.float64)
    sampler.extend(torch.arange(4))
    with pytest.raises(ValueError, match=r"finite and >= 0.*at positions \[2\]"):
        sampler.update_priority(torch.arange(4), torch.tensor([1.0, 2.0, bad, 3.0]))
    assert sampler.priorities().tolist() == [1.0] * 4
    huge = torch.full((4,), 1e308, dtype=torch.float64)  # the sum overflows, no value is bad
    sampler.update_priority(torch.arange(4), huge)
    assert torch.equal(sampler.priorities(), huge)
    with pytest.raises(IndexError, match="holds 4 priorities"):
        sampler.extend(torch.tensor([4]))


def test_slice_samplers_take_traj_key_and_end_key_together() -> None:
    """TorchRL: traj_key is used when stored, else end_key; neither: collector ids, then flags."""
    from rl_buffers import PrioritizedSliceSampler, SliceSampler

    ids = torch.tensor([0] * 4 + [1] * 4 + [2] * 4)
    done = torch.zeros(12, 1, dtype=torch.bool)
    done[[5, 11]] = True  # flags that disagree with the ids: [0..5], [6..11]

    def storage_with(**entries: torch.Tensor) -> LazyTensorStorage:
        storage = LazyTensorStorage(12)
        storage.set(slice(0, 12), TensorDict(entries, batch_size=[12]))
        return storage

    def lengths(sampler: object, storage: LazyTensorStorage) -> list[int]:
        return sampler.trajectories(storage).length.tolist()

    both = dict(traj_key="traj", end_key=("next", "done"))
    with_ids = storage_with(traj=ids, next=TensorDict(done=done, batch_size=[12]))
    flags_only = storage_with(next=TensorDict(done=done, batch_size=[12]))
    for cls, extra in (
        (SliceSampler, {}),
        (PrioritizedSliceSampler, {"max_capacity": 12, "alpha": 1.0, "beta": 1.0}),
    ):
        assert lengths(cls(slice_len=2, **both, **extra), with_ids) == [4, 4, 4]
        assert lengths(cls(slice_len=2, **both, **extra), flags_only) == [6, 6]
    collector_ids = storage_with(collector=TensorDict(traj_ids=ids, batch_size=[12]),
                                 next=TensorDict(done=done, batch_size=[12]))  # fmt: skip
    assert lengths(SliceSampler(slice_len=2), collector_ids) == [4, 4, 4]
    assert lengths(SliceSampler(slice_len=2, end_key=("next", "done")), collector_ids) == [6, 6]
    with pytest.raises(KeyError, match="none of"):
        SliceSampler(slice_len=2, traj_key="traj", end_key="missing").trajectories(
            storage_with(other=ids)
        )


def _two_trajectories(first: int = 3, second: int = 10) -> LazyTensorStorage:
    traj = torch.cat([torch.zeros(first, dtype=torch.long), torch.ones(second, dtype=torch.long)])
    step = torch.cat([torch.arange(first), torch.arange(second)])
    storage = LazyTensorStorage(first + second)
    storage.set(
        slice(0, first + second), TensorDict(traj=traj, step=step, batch_size=[traj.numel()])
    )
    return storage


def _sampled_slices(sampler, storage, batch_size, draws=300):
    """Every slice drawn as a list of (traj, step) pairs, split at the `_slice_start` markers."""
    slices = []
    for _ in range(draws):
        index, info = sampler.sample(storage, batch_size)
        data = storage.get(index)
        starts = [*info["_slice_start"].nonzero().squeeze(-1).tolist(), index.numel()]
        for a, b in itertools.pairwise(starts):
            slices.append(
                list(zip(data["traj"][a:b].tolist(), data["step"][a:b].tolist(), strict=True))
            )
    return slices


@pytest.mark.parametrize("span", [(2, 2), (0, True), (True, 0)])
def test_slice_span_lets_slices_run_past_a_trajectory_by_at_most_the_span(span):
    left, right = (4 if side is True else side for side in span)
    sampler = SliceSampler(slice_len=5, traj_key="traj", span=span)
    slices = _sampled_slices(sampler, _two_trajectories(), 10)
    lengths = {0: 3, 1: 10}
    missing_left, missing_right = set(), set()
    for sl in slices:
        trajs, steps = {t for t, _ in sl}, [s for _, s in sl]
        assert len(trajs) == 1 and steps == list(range(steps[0], steps[-1] + 1))
        (t,) = trajs
        # with the slice's (virtual) start at `steps[0] - miss_left`, steps past the ends are missing
        miss_left = 5 - len(sl) if steps[0] == 0 and steps[-1] < lengths[t] - 1 else 0
        miss_right = 5 - len(sl) if steps[-1] == lengths[t] - 1 and steps[0] > 0 else 0
        assert miss_left <= left and miss_right <= right
        missing_left.add(miss_left)
        missing_right.add(miss_right)
    # every allowed amount shows up, and the 3-step trajectory is reachable through the span
    assert missing_left == set(range(left + 1)) and missing_right == set(range(right + 1))
    assert any(t == 0 for sl in slices for t, _ in sl)


def test_slice_without_span_keeps_full_slices_and_refuses_an_impossible_span():
    slices = _sampled_slices(SliceSampler(slice_len=5, traj_key="traj"), _two_trajectories(), 10)
    assert all(len(sl) == 5 and sl[0][0] == 1 for sl in slices)
    with pytest.raises(ValueError, match="lower than slice_len"):
        SliceSampler(slice_len=5, traj_key="traj", span=5).sample(_two_trajectories(), 10)


def test_prioritized_slice_span_keeps_the_right_side_only():
    with pytest.warns(UserWarning, match="left span"):
        sampler = PrioritizedSliceSampler(13, 1.0, 1.0, slice_len=5, traj_key="traj", span=2,
                                          backend="torch")  # fmt: skip
    assert sampler.span == (False, 2)
    sampler.extend(torch.arange(13))
    p = torch.zeros(13)
    p[12] = 1.0  # the last step of the 10-step trajectory: slices must end there, 3 steps long
    sampler.update_priority(torch.arange(13), p)
    index, _ = sampler.sample(_two_trajectories(), 10)
    assert index.tolist() == [10, 11, 12, 10, 11, 12]


def test_max_priority_within_buffer_follows_the_stored_items():
    history = PrioritizedSampler(3, 1.0, 1.0, backend="torch")
    within = PrioritizedSampler(3, 1.0, 1.0, backend="torch", max_priority_within_buffer=True)
    for sampler in (history, within):
        sampler.extend(torch.arange(3))
        sampler.update_priority(torch.arange(3), torch.tensor([9.0, 4.0, 2.0]))
        sampler.extend(torch.tensor([0]))  # overwrites the item of priority 9
    assert history.default_priority == 9.0
    # the stored raw priorities are now 4 (new item: the max of the others), 4, 2
    assert within.default_priority == 4.0
    assert within.priorities()[:3].tolist() == pytest.approx([4.0, 4.0, 2.0])
    within.update_priority(torch.tensor([0, 1]), torch.tensor([1.0, 3.0]))  # the max is lowered
    assert within.default_priority == 3.0
    state = within.state_dict()
    within.empty()
    assert within.default_priority == 1.0
    within.load_state_dict(state)
    assert within.default_priority == 3.0


def test_extend_with_update_priority_false_ignores_the_data_priorities():
    def buffer():
        return TensorDictReplayBuffer(
            storage=LazyTensorStorage(4), sampler=PrioritizedSampler(4, 1.0, 1.0, eps=0.0,
                                                                     backend="torch"),
        )  # fmt: skip

    data = TensorDict(td_error=torch.tensor([0.5, 3.0]), batch_size=[2])
    read, ignored = buffer(), buffer()
    read.extend(data)
    ignored.extend(data, update_priority=False)
    assert read.sampler.priorities()[:2].tolist() == [0.5, 3.0]
    assert ignored.sampler.priorities()[:2].tolist() == [1.0, 1.0]


def test_pad_output_repeats_the_last_real_step_and_masks_it():
    with pytest.raises(ValueError, match="pad_output=True is incompatible"):
        SliceSampler(slice_len=5, traj_key="traj", pad_output=True)
    storage = _two_trajectories(first=3, second=10)
    sampler = SliceSampler(slice_len=5, traj_key="traj", strict_length=False, pad_output=True)
    for _ in range(50):
        index, info = sampler.sample(storage, 10)
        data = storage.get(index)
        data["next", "truncated"] = torch.ones(
            10, 1, dtype=torch.bool
        )  # stored flags, cleared on repeats
        data = sampler.annotate(data, info)
        traj, step = data["traj"].view(2, 5), data["step"].view(2, 5)
        mask = data["collector", "mask"].view(2, 5)
        for t, st, m in zip(traj, step, mask, strict=True):
            real = int(m.sum())
            assert m.tolist() == [True] * real + [False] * (5 - real)
            assert st[:real].tolist() == list(range(int(st[0]), int(st[0]) + real))
            assert (st[real:] == st[real - 1]).all() and (t == t[0]).all()
            assert real == (3 if t[0] == 0 else 5)
        trunc = data["next", "truncated"].view(2, 5)
        assert torch.equal(trunc, mask)  # stored True flags kept on real steps, cleared on repeats
        assert "is_init" not in data  # not in the storage: none is made up


def test_slice_start_marks_the_stored_init_flag_only():
    storage = _two_trajectories()
    sampler = SliceSampler(slice_len=2, traj_key="traj")
    index, info = sampler.sample(storage, 4)
    bare = sampler.annotate(storage.get(index), info)
    assert "is_init" not in bare
    with_flag = storage.get(index)
    with_flag["is_init"] = torch.zeros(4, 1, dtype=torch.bool)
    assert sampler.annotate(with_flag, info)["is_init"].view(2, 2)[:, 0].all()


def test_without_replacement_reports_what_the_epoch_has_left():
    sampler = SamplerWithoutReplacement(shuffle=False)
    storage = _storage(5)
    assert sampler._sample_list is None
    sampler.sample(storage, 2)
    assert sampler._sample_list.tolist() == [2, 3, 4]
    sampler.sample(storage, 3)
    assert sampler._sample_list is None  # the next call starts a new epoch
    with pytest.raises(ValueError, match="greater than the storage capacity"):
        SamplerWithoutReplacement(drop_last=True).sample(storage, 6)


@pytest.mark.parametrize("make", [lambda: SliceSampler(slice_len=3, traj_key="traj"),
                                  lambda: SliceSamplerWithoutReplacement(slice_len=3, traj_key="traj")])  # fmt: skip
def test_slice_samplers_report_end_flags_in_info(make):
    storage = LazyTensorStorage(12)
    terminated = torch.zeros(12, 1, dtype=torch.bool)
    terminated[[5, 11]] = True
    storage.set(slice(0, 12), TensorDict({"traj": torch.arange(12) // 6, ("next", "done"): terminated,
                                          ("next", "terminated"): terminated}, [12]))  # fmt: skip
    index, info = make().sample(storage, 6)
    truncated = info["next", "truncated"].view(2, 3)
    assert truncated[:, -1].all() and not truncated[:, :-1].any()
    stored = terminated[index]
    assert torch.equal(info["next", "terminated"], stored)
    assert torch.equal(info["next", "done"], stored | info["next", "truncated"])


@pytest.mark.parametrize("within", [False, True])
def test_prioritized_alpha_change_reexpresses_stored_priorities(within):
    sampler = PrioritizedSampler(8, alpha=1.0, beta=1.0, max_priority_within_buffer=within)
    raw = torch.arange(1.0, 5.0)
    sampler.update_priority(torch.arange(4), raw)
    sampler.alpha = 0.5
    expected = (raw.double() + sampler.eps) ** 0.5
    torch.testing.assert_close(sampler.priorities()[:4].double(), expected, rtol=1e-5, atol=0)
    assert (sampler.priorities()[4:] == 0).all()  # unwritten leaves stay empty
    assert sampler._max_priority[0] == 4.0  # the default priority stays raw
    sampler.mark_update(torch.tensor([5]))
    torch.testing.assert_close(
        float(sampler._sum_tree[5]), (4.0 + sampler.eps) ** 0.5, rtol=1e-5, atol=0
    )
    with pytest.raises(ValueError, match="greater or equal"):
        sampler.alpha = -1.0


def test_prioritized_alpha_away_from_zero_warns():
    sampler = PrioritizedSampler(4, alpha=0.0, beta=1.0)
    sampler.alpha = 0.5  # nothing stored: nothing lost
    sampler.alpha = 0.0
    sampler.update_priority(torch.tensor([0]), torch.tensor([3.0]))
    with pytest.warns(UserWarning, match="away from 0"):
        sampler.alpha = 0.5
