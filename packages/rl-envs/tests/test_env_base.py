"""EnvBase: the env contract, partial resets, rollouts and every input error."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.nn import TensorDictModule

from rl_envs import Bounded, Categorical, Composite, EnvBase, Unbounded, step_mdp
from rl_envs.utils import check_env_specs


class CountEnv(EnvBase):
    """x += action each step; terminated when x >= limit. Reference dynamics are trivial."""

    def __init__(self, batch_size=(), limit=3.0):
        super().__init__(batch_size=batch_size)
        self.limit = limit
        self.observation_spec = Composite(observation=Unbounded(shape=(1,)))
        self.action_spec = Bounded(0.0, 1.0, shape=(1,))
        self.x = torch.zeros(*self.batch_size, 1)

    def _reset(self, td):
        mask = None if td is None else td.get("_reset", None)
        fresh = torch.zeros_like(self.x)
        self.x = fresh if mask is None else torch.where(mask, fresh, self.x)
        return TensorDict(observation=self.x.clone(), batch_size=self.batch_size)

    def _step(self, td):
        self.x = self.x + td["action"]
        terminated = self.x >= self.limit
        return TensorDict(
            observation=self.x.clone(),
            reward=td["action"].clone(),
            terminated=terminated,
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


def ones(env, value=1.0):
    return lambda td: td.set("action", torch.full((*env.batch_size, 1), value))


@pytest.mark.parametrize("batch_size", [(), (4,), (2, 3)])
def test_contract_keys_shapes_dtypes(batch_size):
    env = CountEnv(batch_size)
    td = env.reset()
    assert td.batch_size == torch.Size(batch_size)
    for key in ("done", "terminated", "truncated"):
        assert td[key].shape == (*batch_size, 1) and td[key].dtype == torch.bool
        assert not td[key].any()
    td = env.step(ones(env)(td))
    assert td["next", "observation"].shape == (*batch_size, 1)
    assert td["next", "reward"].shape == (*batch_size, 1)
    nxt = td["next"]
    assert torch.equal(nxt["done"], nxt["terminated"] | nxt["truncated"])
    assert torch.equal(td["next", "observation"], torch.ones(*batch_size, 1))
    check_env_specs(env)


def test_specs_are_batched_and_unbatched():
    env = CountEnv((5,))
    assert env.action_spec.shape == (5, 1)
    assert env.action_spec_unbatched.shape == (1,)
    assert env.observation_spec["observation"].shape == (5, 1)
    assert env.full_done_spec["done"].shape == (5, 1)
    assert env.reward_spec.shape == (5, 1)
    assert env.action_keys == ["action"] and env.reward_keys == ["reward"]
    assert set(env.done_keys) == {"done", "terminated", "truncated"}


def test_step_mdp_moves_next_to_root():
    env = CountEnv()
    td = env.step(ones(env)(env.reset()))
    root = step_mdp(td)
    assert set(root.keys()) == {"observation", "done", "terminated", "truncated"}
    assert torch.equal(root["observation"], td["next", "observation"])


def test_partial_reset_keeps_other_entries():
    env = CountEnv((3,))
    td = env.reset()
    for _ in range(2):
        td = step_mdp(env.step(ones(env)(td)))
    td.set("_reset", torch.tensor([[True], [False], [True]]))
    out = env.reset(td)
    assert "_reset" not in out
    assert torch.equal(out["observation"], torch.tensor([[0.0], [2.0], [0.0]]))


def test_step_and_maybe_reset_resets_done_entries_only():
    env = CountEnv((2,), limit=2.0)
    td = env.reset()
    td.set("action", torch.tensor([[1.0], [0.0]]))
    td, root = env.step_and_maybe_reset(td)
    td, root = env.step_and_maybe_reset(root.set("action", torch.tensor([[1.0], [0.0]])))
    assert td["next", "done"].flatten().tolist() == [True, False]
    assert td["next", "observation"].flatten().tolist() == [2.0, 0.0]  # true final obs
    assert root["observation"].flatten().tolist() == [0.0, 0.0]
    assert not root["done"].any()


@pytest.mark.parametrize(
    ("kwargs", "steps"),
    [({}, 3), ({"break_when_any_done": False}, 7), ({"break_when_all_done": True}, 3)],
)
def test_rollout_break_modes(kwargs, steps):
    env = CountEnv(limit=3.0)
    r = env.rollout(7, ones(env), **kwargs)
    assert r.batch_size == (steps,)
    if kwargs.get("break_when_any_done") is False:
        # reference: x counts 1,2,3 then resets -> 1,2,3,1
        assert r["next", "observation"].flatten().tolist() == [1, 2, 3, 1, 2, 3, 1]
        assert r["observation"].flatten().tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_rollout_break_when_all_done_freezes_finished_entries():
    env = CountEnv((2,), limit=2.0)

    def policy(td):
        return td.set("action", torch.tensor([[1.0], [0.5]]))

    r = env.rollout(10, policy, break_when_all_done=True)
    assert r.batch_size == (2, 4)
    # entry 0 is done at step 1 and repeats it afterwards
    assert r["next", "observation"][0].flatten().tolist() == [1.0, 2.0, 2.0, 2.0]
    assert r["next", "observation"][1].flatten().tolist() == [0.5, 1.0, 1.5, 2.0]


def test_rollout_out_and_lazy_and_callback():
    env = CountEnv((2,), limit=100.0)
    ref = env.rollout(5, ones(env))
    out = ref.clone().zero_()
    res = env.rollout(5, ones(env), out=out)
    assert torch.equal(out["next", "observation"], ref["next", "observation"])
    assert res.batch_size == (2, 5)
    lazy = env.rollout(5, ones(env), return_contiguous=False)
    assert isinstance(lazy, LazyStackedTensorDict)
    seen = []
    env.rollout(4, ones(env), callback=lambda e, td: seen.append(td["next", "observation"]))
    assert len(seen) == 4


def test_rollout_auto_reset_false_continues():
    env = CountEnv(limit=100.0)
    first = env.rollout(2, ones(env))
    start = step_mdp(first[-1])
    second = env.rollout(2, ones(env), auto_reset=False, tensordict=start)
    assert second["next", "observation"].flatten().tolist() == [3.0, 4.0]
    with pytest.raises(RuntimeError, match=r"auto_reset=False\) needs the start"):
        env.rollout(2, auto_reset=False)


def test_rollout_random_actions_are_in_spec_and_seeded():
    env = CountEnv((3,), limit=1e9)
    torch.manual_seed(0)
    a = env.rollout(6)
    torch.manual_seed(0)
    b = env.rollout(6)
    assert torch.equal(a["action"], b["action"])
    assert ((a["action"] >= 0) & (a["action"] <= 1)).all()
    assert env.rand_step()["next", "observation"].shape == (3, 1)


def test_set_seed_returns_next_seed():
    env = CountEnv()
    assert env.set_seed(3) == 4
    assert env.set_seed(3, static_seed=True) == 3


# ----------------------------------------------------------------- errors
def test_error_missing_action():
    env = CountEnv()
    with pytest.raises(KeyError, match=r"'action'.*shape \(1,\)"):
        env.step(env.reset())


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (torch.zeros(2), r"wrong shape: expected \(1,\).*got \(2,\)"),
        (
            torch.zeros(1, dtype=torch.float64),
            "wrong dtype: expected torch.float32, got torch.float64",
        ),
        (torch.zeros(1, device="meta"), "wrong device: expected cpu, got meta"),
        (torch.full((1,), 5.0), r"outside its spec Bounded.*got values starting with \[5.0\]"),
    ],
)
def test_error_bad_action(action, match):
    env = CountEnv()
    env.validate_actions = True  # the in-spec check is opt-in; the others always run
    with pytest.raises(ValueError, match=match):
        env.step(env.reset().set("action", action))


def test_out_of_spec_action_passes_by_default_with_one_warning():
    env = CountEnv()
    assert env.validate_actions is False
    with pytest.warns(UserWarning, match="CountEnv: action entry 'action' is outside its spec"):
        td = env.step(env.reset().set("action", torch.full((1,), 5.0)))
    assert td["next", "observation"].item() == 5.0


class IntCountEnv(CountEnv):
    """CountEnv with an int8 action, which ``_step`` casts (as TorchRL's CountingEnv)."""

    def __init__(self, batch_size=()):
        super().__init__(batch_size, limit=100.0)
        self.action_spec = Unbounded(shape=(1,), dtype=torch.int8)
        self.seen = []

    def _step(self, td):
        self.seen.append(td["action"].dtype)
        return super()._step(td.set("action", td["action"].to(torch.float32)))


@pytest.mark.parametrize("batch_size", [(), (3,)])
def test_action_of_another_dtype_goes_to_the_env_as_is(batch_size, recwarn):
    env = IntCountEnv(batch_size)
    td = env.step(env.reset().set("action", torch.ones(*batch_size, 1)))  # float, spec int8
    assert env.seen == [torch.float32]
    assert torch.equal(td["next", "observation"], torch.ones(*batch_size, 1))
    out = env.rollout(4, ones(env))
    assert torch.equal(out["next", "observation"][..., -1, :], torch.full((*batch_size, 1), 4.0))
    assert out["action"].dtype == torch.float32  # stored as the policy wrote it
    assert not [w for w in recwarn if "outside its spec" in str(w.message)]


def test_action_of_another_dtype_raises_when_validating():
    env = IntCountEnv()
    env.validate_actions = True
    with pytest.raises(ValueError, match=r"wrong dtype: expected torch\.int8, got torch\.float32"):
        env.step(env.reset().set("action", torch.ones(1)))


def test_error_out_of_spec_checked_on_first_rollout_step():
    env = CountEnv()
    env.validate_actions = True
    with pytest.raises(ValueError, match="outside its spec"):
        env.rollout(3, ones(env, 7.0))


def test_error_step_done_env_without_reset():
    env = CountEnv((2,), limit=1.0)
    td = step_mdp(env.step(ones(env)(env.reset())))
    with pytest.raises(RuntimeError, match=r"'done'=True.*batch entries \[0, 1\].*reset"):
        env.step(ones(env)(td))


def test_error_wrong_batch_size():
    env = CountEnv((2,))
    with pytest.raises(RuntimeError, match=r"shape==env.batch_size, got \(3,\) and \(2,\)"):
        env.step(TensorDict(action=torch.zeros(3, 1), batch_size=[3]))


def test_error_rollout_break_both():
    with pytest.raises(TypeError, match="cannot both be True"):
        CountEnv().rollout(2, break_when_any_done=True, break_when_all_done=True)


def test_error_out_of_wrong_shape():
    env = CountEnv()
    with pytest.raises(ValueError, match=r"expected a TensorDict of batch_size \(5,\)"):
        env.rollout(5, out=TensorDict(batch_size=[2]))


def test_done_spec_from_leaf_and_categorical_default():
    env = CountEnv()
    env.done_spec = Categorical(2, shape=(1,), dtype=torch.bool)
    assert set(env.done_keys) == {"done", "terminated", "truncated"}


def counting_state_policy(env, value=1.0):
    """Writes the action and ("next", "state") = state + 1 (state 0 when the root has none).

    A plain callable on TensorDicts, like a recurrent policy writing its next hidden state.
    """

    def policy(td):
        state = td.get("state", None)
        if state is None:  # first step: start from zeros (as a primer would)
            state = torch.zeros(*env.batch_size, 1)
            td.set("state", state)
        td.set("action", torch.full((*env.batch_size, 1), value))
        td.set(("next", "state"), state + 1)
        return td

    return policy


@pytest.mark.parametrize("batch_size", [(), (3,)])
def test_step_keeps_entries_the_policy_wrote_under_next(batch_size):
    env = CountEnv(batch_size, limit=100.0)
    policy = counting_state_policy(env)
    td = env.step(policy(env.reset()))
    assert torch.equal(td["next", "state"], torch.ones(*batch_size, 1))
    assert torch.equal(td["next", "observation"], torch.ones(*batch_size, 1))  # env's entries too
    root = step_mdp(td)
    assert torch.equal(root["state"], torch.ones(*batch_size, 1))
    td = env.step(policy(root))
    assert torch.equal(td["next", "state"], torch.full((*batch_size, 1), 2.0))


def test_step_env_entries_win_over_preset_next():
    env = CountEnv(limit=100.0)
    td = env.reset().set("action", torch.ones(1))
    td.set(("next", "observation"), torch.full((1,), -7.0))
    td.set(("next", "extra"), torch.full((2,), 5.0))
    env.step(td)
    assert td["next", "observation"].item() == 1.0  # the env wrote it
    assert torch.equal(td["next", "extra"], torch.full((2,), 5.0))  # kept


@pytest.mark.parametrize("batch_size", [(), (2,)])
def test_step_and_maybe_reset_carries_policy_next_entries(batch_size):
    env = CountEnv(batch_size, limit=2.0)
    policy = counting_state_policy(env)
    root = env.reset()
    for t in range(5):  # episodes end every 2 steps: the state crosses resets
        td, root = env.step_and_maybe_reset(policy(root))
        assert torch.equal(td["next", "state"], torch.full((*batch_size, 1), t + 1.0))
        assert torch.equal(root["state"], torch.full((*batch_size, 1), t + 1.0))
    assert "next" not in root.keys()  # noqa: SIM118


@pytest.mark.parametrize("break_when_any_done", [True, False])
@pytest.mark.parametrize("batch_size", [(), (2,)])
def test_rollout_carries_policy_next_entries(batch_size, break_when_any_done):
    env = CountEnv(batch_size, limit=3.0)
    r = env.rollout(7, counting_state_policy(env), break_when_any_done=break_when_any_done)
    t = r.batch_size[-1]
    assert t == (3 if break_when_any_done else 7)
    steps = torch.arange(t, dtype=torch.float32).reshape(t, 1).expand(*batch_size, t, 1)
    assert torch.equal(r["next", "state"], steps + 1)
    assert torch.equal(r["state"], steps)


def test_get_set_state_default_raises_naming_the_env():
    env = CountEnv()
    with pytest.raises(
        NotImplementedError, match=r"CountEnv does not implement get_state.*PendulumEnv"
    ):
        env.get_state()
    with pytest.raises(NotImplementedError, match="CountEnv does not implement set_state"):
        env.set_state({})


@pytest.mark.parametrize("nested", [False, True])
def test_step_and_maybe_reset_root_keeps_root_only_entries(nested):
    # The root of the next step: "next" moved up, rewards and actions dropped, root
    # entries that "next" lacks kept (the flat fast path and the nested generic path).
    env = CountEnv((2,), limit=10.0)
    root = env.reset()
    root.set("hidden", torch.full((2, 3), 7.0))
    if nested:
        root.set(("policy", "loc"), torch.full((2, 1), 2.0))
    root.set("action", torch.full((2, 1), 0.5))
    td, nxt = env.step_and_maybe_reset(root)
    expected = {"observation", "done", "terminated", "truncated", "hidden"}
    if nested:
        expected.add(("policy", "loc"))
        assert torch.equal(nxt["policy", "loc"], torch.full((2, 1), 2.0))
    assert set(nxt.keys(True, True)) == expected
    assert torch.equal(nxt["observation"], torch.full((2, 1), 0.5))
    assert torch.equal(nxt["hidden"], torch.full((2, 3), 7.0))
    assert nxt["observation"] is td["next", "observation"]  # shared, not copied


class Unlocked(CountEnv):
    """CountEnv whose _step / _reset follow the input's batch (TorchRL's batch-unlocked env)."""

    def _reset(self, td):
        batch = () if td is None else td.batch_size
        self.x = torch.zeros(*batch, 1)
        return TensorDict(observation=self.x.clone(), batch_size=batch)

    def _step(self, td):
        self.x = self.x + td["action"]
        return TensorDict(observation=self.x.clone(), reward=td["action"].clone(),
                          batch_size=td.batch_size)  # fmt: skip


def test_batch_locked_is_read_only_and_refuses_other_batches():
    env = CountEnv()
    assert env.batch_locked
    with pytest.raises(RuntimeError, match="batch_locked is a read-only property"):
        env.batch_locked = False
    td = env.reset().expand(2).clone().set("action", torch.zeros(2, 1))
    with pytest.raises(RuntimeError, match=r"Expected a tensordict with shape==env\.batch_size"):
        env.step(td)


def test_batch_unlocked_env_steps_any_batch():
    env = Unlocked.__new__(Unlocked, _batch_locked=False)
    env.__init__()
    assert not env.batch_locked
    td = env.reset(TensorDict(batch_size=[3]))
    assert td.batch_size == (3,) and td["done"].shape == (3, 1)
    out = env.step(td.set("action", torch.ones(3, 1)))
    assert torch.equal(out["next", "observation"], torch.ones(3, 1))
    assert out["next", "truncated"].shape == (3, 1)  # filled for the input's batch
    with pytest.raises(ValueError, match="wrong shape"):
        env.step(td.set("action", torch.ones(3, 2)))


class EarlySpecs(EnvBase):
    """Sets its specs before super().__init__() (TorchRL's mocking envs do)."""

    def __init__(self):
        self.observation_spec = Composite(observation=Unbounded((1,)))
        self.action_spec = Unbounded((1,))
        self.observation_spec["extra"] = Unbounded((2,))  # reads the spec set above
        self.counter = 0
        super().__init__(batch_size=(2,))

    def _reset(self, td):
        return self.full_observation_spec.zero()

    def _step(self, td):
        return self.full_observation_spec.zero().update(self.full_reward_spec.zero())

    def _set_seed(self, seed):
        pass


def test_specs_set_before_init_get_the_batch_dims():
    env = EarlySpecs()
    assert env.observation_spec["observation"].shape == (2, 1)
    assert env.observation_spec["extra"].shape == (2, 2)
    assert env.action_spec.shape == (2, 1)
    assert env.full_done_spec["done"].shape == (2, 1)
    check_env_specs(env)


def test_close_sets_is_closed_and_accepts_raise_if_closed():
    env = CountEnv()
    assert env.is_closed is False
    env.close()
    env.close(raise_if_closed=True)  # a plain env closes twice silently (TorchRL)
    assert env.is_closed


def test_action_that_broadcasts_to_the_spec_goes_to_the_env():
    env = CountEnv()
    td = env.step(env.reset().set("action", torch.tensor(1.0)))  # () for the spec's (1,)
    assert torch.equal(td["next", "observation"], torch.ones(1))
    env.validate_actions = True
    with pytest.raises(ValueError, match=r"broadcasts to the spec's \(1,\)"):
        env.step(env.reset().set("action", torch.tensor(1.0)))


def test_fake_tensordict_holds_every_declared_entry_as_zeros():
    env = CountEnv((2,))
    td = env.fake_tensordict()
    assert td.batch_size == (2,)
    assert set(td.keys()) == {"observation", "done", "terminated", "truncated", "action", "next"}
    assert set(td["next"].keys()) == {"observation", "reward", "done", "terminated", "truncated"}
    assert not td["next", "reward"].any() and not td["action"].any()
    env.check_env_specs()  # TorchRL's method form


class DoneOnly(CountEnv):
    """CountEnv declaring only a "done" flag."""

    def __init__(self):
        super().__init__(limit=100.0)
        self.done_spec = Composite(done=Categorical(2, shape=(1,), dtype=torch.bool))

    def _step(self, td):
        out = super()._step(td)
        return out.set("done", out.pop("terminated"))


def test_set_truncated_marks_the_last_step_and_needs_the_key():
    env = DoneOnly()
    with pytest.raises(RuntimeError, match="set_truncated was set to True"):
        env.rollout(3, set_truncated=True)
    assert env.add_truncated_keys() is env
    assert set(env.done_keys) == {"done", "terminated", "truncated"}
    r = env.rollout(4, ones(env), set_truncated=True, break_when_any_done=False)
    assert r["next", "truncated"].squeeze(-1).tolist() == [False, False, False, True]
    assert r["next", "done"].squeeze(-1).tolist() == [False, False, False, True]


def test_rollout_replays_given_actions():
    env = CountEnv(limit=100.0)
    r = env.rollout(50, actions=[torch.full((1,), 0.5) for _ in range(4)])
    assert r.batch_size == (4,)  # a sized iterable caps max_steps
    assert r["next", "observation"].squeeze(-1).tolist() == [0.5, 1.0, 1.5, 2.0]
    r = env.rollout(3, actions=(torch.ones(1) for _ in range(3)))
    assert r["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="not both"):
        env.rollout(3, ones(env), actions=[torch.ones(1)])
    with pytest.raises(ValueError, match="ran out"):
        env.rollout(3, actions=(torch.ones(1) for _ in range(2)))


def test_rollout_storing_device():
    r = CountEnv().rollout(2, storing_device="meta")
    assert r.device == torch.device("meta") and r["next", "observation"].device.type == "meta"


class Halve(torch.nn.Module):
    def forward(self, observation):
        return observation * 0 + 0.5


def test_plain_module_policy_reads_the_observation_and_writes_the_action():
    r = CountEnv(limit=100.0).rollout(3, Halve())
    assert r["action"].squeeze(-1).tolist() == [0.5, 0.5, 0.5]
    assert r["next", "observation"].squeeze(-1).tolist() == [0.5, 1.0, 1.5]
    r = CountEnv(limit=100.0).rollout(2, torch.nn.Sequential(Halve()))  # the only observation
    assert r["next", "observation"].squeeze(-1).tolist() == [0.5, 1.0]


class TdModule(torch.nn.Module):
    def forward(self, td):
        return td.set("action", torch.full((1,), 0.25))


def test_module_reading_a_tensordict_is_called_with_it():
    r = CountEnv(limit=100.0).rollout(2, TdModule())
    assert r["action"].squeeze(-1).tolist() == [0.25, 0.25]


def test_sequential_of_tensordict_modules_is_called_with_the_tensordict():
    first = TensorDictModule(Halve(), in_keys=["observation"], out_keys=["action"])
    double = TensorDictModule(lambda a: a * 2, in_keys=["action"], out_keys=["action"])
    r = CountEnv(limit=100.0).rollout(2, torch.nn.Sequential(first, double))
    assert r["action"].squeeze(-1).tolist() == [1.0, 1.0]


class IgnoresAction(CountEnv):
    def _step(self, td):
        return super()._step(td.clone(False).set("action", torch.ones(1)))


def test_missing_action_is_fine_when_step_does_not_read_it():
    env = IgnoresAction()
    td = env.step(env.reset())  # TorchRL's mock envs step without an action
    assert td["next", "observation"].item() == 1.0
    env.validate_actions = True
    with pytest.raises(KeyError, match=r"needs the action entry 'action'"):
        env.step(env.reset())


class DoneFlagOnly(CountEnv):
    def _step(self, td):
        out = super()._step(td)
        return out.set("done", out.pop("terminated"))


def test_terminated_is_completed_from_done():
    env = DoneFlagOnly((2,), limit=1.0)
    td = env.step(env.reset().set("action", torch.tensor([[1.0], [0.0]])))
    assert td["next", "done"].squeeze(-1).tolist() == [True, False]
    assert td["next", "terminated"].squeeze(-1).tolist() == [True, False]
    assert not td["next", "truncated"].any()


@pytest.mark.parametrize("given", ["done", "terminated"])
def test_done_spec_is_completed(given):
    env = CountEnv()
    flag = Categorical(2, shape=(1,), dtype=torch.bool)
    env.done_spec = Composite({given: flag, "group": Composite({given: flag.clone()})})
    assert set(env.done_keys) == {
        "done", "terminated", ("group", "done"), ("group", "terminated")
    }  # fmt: skip


def test_cpu_device_index_is_the_same_device():
    env = CountEnv()
    env.action_spec = Bounded(0.0, 1.0, shape=(1,), device="cpu:0")
    td = env.step(env.reset().set("action", torch.ones(1)))  # torch drops the CPU index
    assert td["next", "observation"].item() == 1.0


def test_step_mdp_method_keeps_the_action_and_drops_the_reward():
    env = CountEnv(batch_size=(2,))
    td = env.reset().set("action", torch.full((2, 1), 0.5))
    root = env.step_mdp(env.step(td))
    assert torch.equal(root["observation"], torch.full((2, 1), 0.5))
    assert torch.equal(root["action"], torch.full((2, 1), 0.5))  # TorchRL's method keeps it
    assert set(root.keys()) == {"observation", "action", "done", "terminated", "truncated"}
    assert "action" not in set(step_mdp(td).keys())  # the function's default drops it


def test_shape_is_the_batch_size():
    assert CountEnv(batch_size=(3, 2)).shape == (3, 2)
    assert CountEnv().shape == ()


class StatefulCountEnv(CountEnv):
    """CountEnv whose state lives inside it: steps are refused before the first reset."""

    requires_reset = True

    def get_state(self):
        return {"x": self.x.clone()}

    def set_state(self, state):
        self.x = state["x"].clone()
        self._awaiting_reset = False


def test_requires_reset_refuses_step_before_reset():
    env = StatefulCountEnv()
    td = TensorDict(action=torch.ones(1))
    with pytest.raises(RuntimeError, match=r"StatefulCountEnv.step\(\) was called before reset"):
        env.step(td)
    with pytest.raises(RuntimeError, match=r"before reset"):
        env.step_and_maybe_reset(td)
    with pytest.raises(RuntimeError, match=r"rollout\(auto_reset=False\).*before reset"):
        env.rollout(2, auto_reset=False, tensordict=TensorDict(observation=torch.zeros(1)))
    root = env.reset()
    assert env.step(ones(env)(root))["next", "observation"].item() == 1.0


def test_requires_reset_lifted_by_set_state_and_set_again_by_require_reset():
    env = StatefulCountEnv()
    env.set_state({"x": torch.full((1,), 2.0)})
    td = env.step(TensorDict(action=torch.ones(1)))
    assert td["next", "observation"].item() == 3.0
    env.require_reset()
    with pytest.raises(RuntimeError, match=r"before reset"):
        env.step(TensorDict(action=torch.ones(1)))


def test_stateless_env_steps_without_reset_as_in_torchrl():
    env = CountEnv()  # requires_reset is False by default: state may travel in the input
    assert not env.requires_reset
    assert env.step(TensorDict(action=torch.ones(1)))["next", "observation"].item() == 1.0


def test_transformed_env_follows_its_base_env_reset_requirement():
    from rl_envs import StepCounter, TransformedEnv

    env = TransformedEnv(StatefulCountEnv(), StepCounter())
    with pytest.raises(RuntimeError, match=r"TransformedEnv.step\(\) was called before reset"):
        env.step(TensorDict(action=torch.ones(1)))
    root = env.reset()
    assert not env.base_env._awaiting_reset  # reset through the wrapper counts for the base
    assert env.step(ones(env)(root))["next", "step_count"].item() == 1
    base = StatefulCountEnv()
    base.reset()
    TransformedEnv(base).step(TensorDict(action=torch.ones(1)))  # wrapped after its reset


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_non_bool_reset_mask_raises_naming_the_key(dtype):
    env = CountEnv((2,))
    td = env.reset()
    td.set("_reset", torch.tensor([[1], [0]], dtype=dtype))
    with pytest.raises(TypeError, match=rf"'_reset' must be a bool tensor.*{dtype}"):
        env.reset(td)


def test_non_bool_nested_reset_mask_raises():
    env = CountEnv((2,))
    env.full_done_spec = Composite(
        agents=Composite(
            done=Categorical(2, shape=(2, 1), dtype=torch.bool),
            terminated=Categorical(2, shape=(2, 1), dtype=torch.bool),
            shape=(2,),
        ),
        shape=(2,),
    )
    td = TensorDict(agents=TensorDict(_reset=torch.ones(2, 1), batch_size=(2,)), batch_size=(2,))
    with pytest.raises(TypeError, match=r"\('agents', '_reset'\) must be a bool tensor"):
        env.reset(td)


def test_non_bool_step_mask_raises():
    env = CountEnv((2,))
    td = ones(env)(env.reset())
    td.set("_step", torch.tensor([1, 0]))
    with pytest.raises(TypeError, match=r"'_step' must be a bool tensor.*int64"):
        env.step(td)


class NoneReadingEnv(CountEnv):
    """Reads the action with ``get`` (None when missing), as most envs do."""

    def _step(self, td):
        self.x = self.x + td.get("action").clamp(0, 1)
        return TensorDict(observation=self.x.clone(), reward=self.x.clone())


def test_missing_action_read_as_none_names_the_key():
    env = NoneReadingEnv()
    td = env.reset()
    with pytest.raises(KeyError, match=r"needs the action entry 'action'.*NoneType.*clamp"):
        env.step(td)


@pytest.mark.parametrize("seed", ["abc", 1.5, True, torch.tensor(1.0), [1]])
def test_set_seed_of_wrong_type_raises(seed):
    with pytest.raises(TypeError, match=r"CountEnv.set_seed\(\): expected an int or None"):
        CountEnv().set_seed(seed)


def test_set_seed_accepts_numpy_and_torch_integers():
    import numpy as np

    env = CountEnv()
    assert env.set_seed(np.int64(3)) == 4
    assert env.set_seed(torch.tensor(5)) == 6
    assert env.set_seed(None) is None
