"""NextObservationDelta: deltas in an env, full observations at the next root, rebuilt on samples."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Composite,
    EnvBase,
    NextObservationDelta,
    PendulumEnv,
    SerialEnv,
    TransformedEnv,
    Unbounded,
    check_env_specs,
    step_mdp,
)

# float16 roundings of 0.1 and 1/3, written out by hand (1638 / 2**14 and 2730 / 2**13)
FP16_TENTH = 0.0999755859375
FP16_THIRD = 0.333251953125


class Drift(EnvBase):
    """``observation`` starts at [1, -2] and moves by the action; ``count`` (int64) counts
    steps; an episode lasts 3 steps (terminated at the third)."""

    def __init__(self, batch_size=()):
        super().__init__(batch_size=batch_size)
        b = tuple(batch_size)
        self.observation_spec = Composite(
            observation=Unbounded(shape=(*b, 2)),
            count=Unbounded(shape=(*b, 1), dtype=torch.int64),
            shape=b,
        )
        self.action_spec = Unbounded(shape=(*b, 2))
        self.obs = torch.zeros(*b, 2)
        self.count = torch.zeros(*b, 1, dtype=torch.int64)

    def _reset(self, td):
        mask = td.get("_reset", None) if td is not None else None
        if mask is None:
            mask = torch.ones(*self.batch_size, 1, dtype=torch.bool)
        self.obs = torch.where(mask, torch.tensor([1.0, -2.0]), self.obs)
        self.count = torch.where(mask, torch.zeros_like(self.count), self.count)
        return TensorDict(
            observation=self.obs.clone(), count=self.count.clone(), batch_size=self.batch_size
        )

    def _step(self, td):
        self.obs = self.obs + td["action"]
        self.count = self.count + 1
        return TensorDict(
            observation=self.obs.clone(),
            count=self.count.clone(),
            reward=torch.zeros(*self.batch_size, 1),
            terminated=self.count == 3,
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


def tenth_third(td):
    """Action [0.1, 1/3] on every row."""
    return td.set("action", torch.tensor([0.1, 1 / 3]).expand(*td.batch_size, 2).clone())


def growing(td):
    """Action (count + 1) * [0.1, -0.25]: differs from step to step."""
    scale = (td["count"] + 1).to(torch.float32)
    return td.set("action", scale * torch.tensor([0.1, -0.25]))


def assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key


def test_step_and_maybe_reset_stores_the_delta_and_carries_the_full_observation():
    env = TransformedEnv(Drift(), NextObservationDelta())
    td, root = env.step_and_maybe_reset(tenth_third(env.reset()))
    expected = torch.tensor([FP16_TENTH, FP16_THIRD], dtype=torch.float16)
    assert torch.equal(td["next", "delta", "observation"], expected)
    assert ("next", "observation") not in td.keys(True, True)
    assert td["next", "count"].item() == 1  # int64 entries are not compressed
    # the next root holds the full-precision observation and no delta
    assert root["observation"].dtype == torch.float32
    assert torch.equal(root["observation"], torch.tensor([1.0, -2.0]) + torch.tensor([0.1, 1 / 3]))
    assert "delta" not in set(root.keys())
    # a second step's delta is taken from that full observation
    td2, _ = env.step_and_maybe_reset(tenth_third(root))
    assert torch.equal(td2["next", "delta", "observation"], expected)
    assert torch.equal(td2["observation"], root["observation"])


def test_plain_step_keeps_the_full_next_observation():
    # as TorchRL: only step_and_maybe_reset / rollout drop it (after step_mdp)
    env = TransformedEnv(Drift(), NextObservationDelta())
    td = env.step(tenth_third(env.reset()))
    assert ("next", "observation") in td.keys(True, True)
    assert ("next", "delta", "observation") in td.keys(True, True)
    # continuing from step_mdp of that (complete) transition is fine
    td2 = env.step(tenth_third(step_mdp(td)))
    assert torch.equal(td2["observation"], td["next", "observation"])


def _loop(env, root, policy, steps):
    out = []
    for _ in range(steps):
        td, root = env.step_and_maybe_reset(policy(root))
        out.append(td)
    return torch.stack(out, dim=len(env.batch_size)), root


@pytest.mark.parametrize(
    "make",
    [
        lambda: TransformedEnv(Drift(), NextObservationDelta()),
        lambda: TransformedEnv(Drift(batch_size=[3]), NextObservationDelta()),
        lambda: TransformedEnv(SerialEnv(2, Drift), NextObservationDelta()),
    ],
    ids=["single", "batched", "serial"],
)
def test_rollout_matches_a_step_and_maybe_reset_loop(make):
    # what a collector stores either way: env.rollout(T, policy, auto_reset=False,
    # tensordict=root, break_when_any_done=False) or T calls of step_and_maybe_reset
    env_a, env_b = make(), make()
    _, root_a = _loop(env_a, env_a.reset(), growing, 2)  # start mid-episode
    _, root_b = _loop(env_b, env_b.reset(), growing, 2)
    got = env_a.rollout(7, growing, auto_reset=False, tensordict=root_a, break_when_any_done=False)
    want, _ = _loop(env_b, root_b, growing, 7)
    assert_same(got, want)
    assert ("next", "observation") not in got.keys(True, True)
    # the stored deltas are the hand-computed differences of consecutive observations
    obs = got["observation"]
    done = got["next", "done"].squeeze(-1)
    nb = len(env_a.batch_size)
    for t in range(6):
        step_done = done.select(nb, t)
        diff = (obs.select(nb, t + 1) - obs.select(nb, t)).to(torch.float16)
        delta = got["next", "delta", "observation"].select(nb, t)
        assert torch.equal(delta[~step_done], diff[~step_done])
    # episodes end every 3 steps: 3 rows start at count 2, so the third step is done
    assert bool(done.select(nb, 0).any()) and bool(done.select(nb, 3).any())


def test_break_when_any_done_rollout_drops_the_full_observation_on_every_step():
    env = TransformedEnv(Drift(), NextObservationDelta())
    out = env.rollout(10, tenth_third)  # stops at the 3rd step (done)
    assert out.batch_size == (3,)
    assert ("next", "observation") not in out.keys(True, True)
    expected = torch.tensor([FP16_TENTH, FP16_THIRD], dtype=torch.float16).expand(3, 2)
    assert torch.equal(out["next", "delta", "observation"], expected)


def test_fast_random_rollout_matches_the_generic_loop():
    env = TransformedEnv(PendulumEnv(batch_size=[2]), NextObservationDelta())
    torch.manual_seed(0)
    env.set_seed(0)
    fast = env.rollout(6, break_when_any_done=False, backend="transformed")  # raises if unsupported
    torch.manual_seed(0)
    env.set_seed(0)
    generic = env.rollout(6, break_when_any_done=False, backend="generic")
    assert_same(fast, generic)
    assert ("next", "observation") not in fast.keys(True, True)
    diff = (fast["observation"][:, 1:] - fast["observation"][:, :-1]).to(torch.float16)
    assert torch.equal(fast["next", "delta", "observation"][:, :-1], diff)


def test_forward_rebuilds_the_next_observation_by_hand():
    data = TensorDict(
        observation=torch.tensor([1.0, -2.0]),
        next=TensorDict(
            delta=TensorDict(observation=torch.tensor([FP16_TENTH, FP16_THIRD]).half())
        ),
    )
    out = NextObservationDelta(in_keys=["observation"])(data.clone())
    # 1 + 1638/2**14 and -2 + 2730/2**13 are exact in float32
    assert torch.equal(out["next", "observation"], torch.tensor([1.0999755859375, -1.666748046875]))
    assert list(out["next"].keys()) == ["observation"]  # the delta is dropped
    assert NextObservationDelta(in_keys=["observation"])(out) is out  # already rebuilt: no-op
    kept = NextObservationDelta(
        in_keys=["observation"], restore_dtype=torch.float64, drop_delta=False
    )(data.clone())
    assert kept["next", "observation"].dtype == torch.float64
    assert ("next", "delta", "observation") in kept.keys(True, True)


def test_same_instance_round_trips_a_rollout():
    env = TransformedEnv(Drift(batch_size=[2]), NextObservationDelta())
    reference = Drift(batch_size=[2]).rollout(5, growing, break_when_any_done=False)
    stored = env.rollout(5, growing, break_when_any_done=False)
    rebuilt = env.transform(stored.clone())
    assert set(rebuilt.keys(True, True)) == set(reference.keys(True, True))
    torch.testing.assert_close(
        rebuilt["next", "observation"], reference["next", "observation"], atol=1e-3, rtol=0
    )


def test_in_keys_are_the_float_observations_of_the_parent():
    env = TransformedEnv(Drift(), NextObservationDelta())
    assert env.transform.in_keys == ["observation"]  # "count" is int64
    td, _ = env.step_and_maybe_reset(tenth_third(env.reset()))
    assert ("next", "count") in td.keys(True, True)
    none = TransformedEnv(Drift(), NextObservationDelta(excluded_dtypes=(torch.float32,)))
    assert none.transform.in_keys == []
    td, _ = none.step_and_maybe_reset(tenth_third(none.reset()))
    assert ("next", "observation") in td.keys(True, True)


def test_specs_keep_full_observations_and_check_env_specs_passes():
    base = Drift(batch_size=[2])
    env = TransformedEnv(Drift(batch_size=[2]), NextObservationDelta())
    assert env.observation_spec == base.observation_spec
    check_env_specs(env)
    check_env_specs(TransformedEnv(Drift(), NextObservationDelta(delta_dtype=torch.bfloat16)))


def test_continuing_from_step_mdp_of_a_stored_step_raises():
    env = TransformedEnv(Drift(batch_size=[2]), NextObservationDelta())
    batch = env.rollout(2, tenth_third, break_when_any_done=False)
    stale = step_mdp(batch[:, -1])  # its "observation" is the previous step's
    with pytest.raises(RuntimeError, match=r"step_mdp.*use_env_rollout=False"):
        env.rollout(2, tenth_third, auto_reset=False, tensordict=stale)
    env.reset()  # a full reset starts clean
    env.rollout(2, tenth_third)


def test_inside_a_batched_env_raises():
    with pytest.raises(ValueError, match=r"Put the transform outside"):
        SerialEnv(2, lambda: TransformedEnv(Drift(), NextObservationDelta()))


def test_errors():
    with pytest.raises(ValueError, match="delta_dtype"):
        NextObservationDelta(delta_dtype=torch.int32)
    with pytest.raises(ValueError, match="restore_dtype"):
        NextObservationDelta(restore_dtype="float16")
    with pytest.raises(ValueError, match="in_keys"):
        NextObservationDelta()(TensorDict(observation=torch.zeros(2)))
    env = TransformedEnv(Drift(), NextObservationDelta(in_keys=["pixels"]))
    with pytest.raises(KeyError, match="'pixels'"):
        env.step_and_maybe_reset(tenth_third(env.reset()))
    with pytest.raises(KeyError, match=r"'next', 'delta', 'observation'"):
        NextObservationDelta(in_keys=["observation"])(TensorDict(observation=torch.zeros(2)))


class NestedDrift(EnvBase):
    """``("agent", "pos")`` starts at [1, -2] and moves by the action (never done)."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(agent=Composite(pos=Unbounded(shape=(2,))))
        self.action_spec = Unbounded(shape=(2,))
        self.pos = torch.zeros(2)

    def _reset(self, td):
        self.pos = torch.tensor([1.0, -2.0])
        return TensorDict(agent=TensorDict(pos=self.pos.clone()))

    def _step(self, td):
        self.pos = self.pos + td["action"]
        return TensorDict(agent=TensorDict(pos=self.pos.clone()), reward=torch.zeros(1))

    def _set_seed(self, seed):
        pass


def test_nested_observation_keys():
    env = TransformedEnv(NestedDrift(), NextObservationDelta())
    assert env.transform.in_keys == [("agent", "pos")]
    td, root = env.step_and_maybe_reset(tenth_third(env.reset()))
    expected = torch.tensor([FP16_TENTH, FP16_THIRD], dtype=torch.float16)
    assert torch.equal(td["next", "delta", "agent", "pos"], expected)
    assert ("next", "agent", "pos") not in td.keys(True, True)
    # the next root shares sub-TensorDicts with the transition: it must keep its position
    assert torch.equal(root["agent", "pos"], torch.tensor([1.0, -2.0]) + torch.tensor([0.1, 1 / 3]))
    assert "delta" not in set(root.keys())
    got = env.rollout(4, tenth_third, auto_reset=False, tensordict=root.clone())
    other = TransformedEnv(NestedDrift(), NextObservationDelta())
    _, other_root = other.step_and_maybe_reset(tenth_third(other.reset()))
    want, _ = _loop(other, other_root, tenth_third, 4)
    assert_same(got, want)
    check_env_specs(env)
    rebuilt = env.transform(got.clone())
    torch.testing.assert_close(
        rebuilt["next", "agent", "pos"][:-1], got["agent", "pos"][1:], atol=1e-3, rtol=0
    )
