import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    ActionScaling,
    Bounded,
    Compose,
    Composite,
    DoubleToFloat,
    EnvBase,
    InitTracker,
    ObservationNorm,
    PendulumEnv,
    RewardScaling,
    RewardSum,
    StepCounter,
    Transform,
    TransformedEnv,
    Unbounded,
    check_env_specs,
)


class Recorder(EnvBase):
    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(shape=(1,)))
        self.action_spec = Bounded(-10.0, 10.0, shape=(1,))
        self.seen = []

    def _reset(self, td):
        return TensorDict(observation=torch.ones(1))

    def _step(self, td):
        self.seen.append(td["action"].clone())
        return TensorDict(
            observation=torch.ones(1),
            reward=torch.ones(1),
            terminated=torch.zeros(1, dtype=torch.bool),
        )

    def _set_seed(self, seed):
        pass


class AddOne(Transform):
    """Adds one to outputs; multiplies inputs by 3 on the way in."""

    invertible = True

    def _apply_transform(self, x):
        return x + 1

    def _inv_apply_transform(self, x):
        return x * 3


def test_outputs_first_to_last_inputs_last_to_first():
    base = Recorder()
    env = TransformedEnv(base, AddOne(in_keys=["observation"], in_keys_inv=["action"]))
    env.append_transform(
        ObservationNorm(loc=0.0, scale=10.0, in_keys=["observation"], in_keys_inv=["action"])
    )
    td = env.reset()
    assert td["observation"].item() == (1 + 1) * 10  # AddOne then x10
    td["action"] = torch.tensor([0.5])
    env.step(td)
    # inverse, last to first: /10 (ObservationNorm inverse) then *3 (AddOne inverse)
    assert base.seen[-1].item() == pytest.approx(0.5 / 10 * 3)
    assert td["action"].item() == 0.5  # the caller's action is not modified


def test_stack_editing_recomputes_specs():
    env = TransformedEnv(PendulumEnv(batch_size=[2]))
    assert "step_count" not in env.observation_spec
    env.append_transform(StepCounter())
    env.insert_transform(0, RewardSum())
    assert isinstance(env.transform[0], RewardSum) and isinstance(env.transform[1], StepCounter)
    assert {"step_count", "episode_reward"} <= set(env.observation_spec.keys())
    popped = env.transform.pop()
    assert isinstance(popped, StepCounter) and popped.container is None
    assert "step_count" not in env.observation_spec
    assert len(env.transform) == 1
    del env.transform[0]
    assert "episode_reward" not in env.observation_spec
    check_env_specs(env)


def test_parent_is_env_up_to_the_transform():
    env = TransformedEnv(PendulumEnv(), Compose(StepCounter(), InitTracker(), RewardSum()))
    parent = env.transform[1].parent
    assert isinstance(parent, TransformedEnv)
    assert "step_count" in parent.observation_spec
    assert "is_init" not in parent.observation_spec
    assert RewardSum().parent is None


def test_auto_unwrap_moves_inner_transforms():
    inner = TransformedEnv(PendulumEnv(), StepCounter())
    env = TransformedEnv(inner, RewardSum())
    assert isinstance(env.base_env, PendulumEnv)
    assert [type(t).__name__ for t in env.transform] == ["StepCounter", "RewardSum"]
    nested = TransformedEnv(
        TransformedEnv(PendulumEnv(), StepCounter()), RewardSum(), auto_unwrap=False
    )
    assert isinstance(nested.base_env, TransformedEnv)
    assert "step_count" in nested.rollout(2)["next"]


def test_transform_on_a_bare_tensordict():
    sample = TensorDict(
        observation=torch.ones(5, 3, dtype=torch.float64),
        reward=torch.full((5, 1), 2.0),
        batch_size=[5],
    )
    t = Compose(DoubleToFloat(in_keys=["observation"]), RewardScaling(loc=0.0, scale=0.5))
    out = t(sample)
    assert out["observation"].dtype == torch.float32
    torch.testing.assert_close(out["reward"], torch.ones(5, 1))


def test_a_transform_lives_in_one_env():
    t = StepCounter()
    TransformedEnv(PendulumEnv(), t)
    with pytest.raises(RuntimeError, match="clone"):
        TransformedEnv(PendulumEnv(), t)
    TransformedEnv(PendulumEnv(), t.clone())


def test_missing_in_key_error_names_key_and_fix():
    env = TransformedEnv(PendulumEnv(), ObservationNorm(loc=0.0, scale=1.0, in_keys=["pixels"]))
    td = env.reset()  # reset tolerates keys a reset does not produce
    with pytest.raises(KeyError, match=r"'pixels'.*present.*observation"):
        env.rand_step(td)


def test_action_transform_with_policy_and_rollout_specs():
    env = TransformedEnv(PendulumEnv(batch_size=[3]), ActionScaling())
    torch.testing.assert_close(env.action_spec.space.high, torch.ones(3, 1))
    r = env.rollout(4, policy=lambda td: td.set("action", torch.ones(3, 1)))
    assert r.batch_size == (3, 4)
    check_env_specs(env)


@pytest.mark.parametrize("break_when_any_done", [False, True])
def test_fast_rollout_matches_step_by_step(break_when_any_done):
    from rl_envs import SerialEnv

    def stack():
        return Compose(
            StepCounter(),
            RewardSum(),
            InitTracker(),
            DoubleToFloat(),
            ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"]),
        )

    env = TransformedEnv(SerialEnv(2, lambda: PendulumEnv(max_episode_steps=3)), stack())
    assert env.transform._supports_rollout_map()
    results = []
    for backend in ("transformed", "generic"):
        env.set_seed(0)
        torch.manual_seed(0)
        results.append(env.rollout(8, break_when_any_done=break_when_any_done, backend=backend))
    fast, slow = results
    assert set(fast.keys(True, True)) == set(slow.keys(True, True))
    assert fast.shape == slow.shape and (fast == slow).all()
    assert not TransformedEnv(
        PendulumEnv(), StepCounter(max_steps=3)
    ).transform._supports_rollout_map()


def test_policy_state_written_under_next_survives_a_primer():
    from rl_envs import PendulumEnv, TensorDictPrimer, Unbounded

    env = TransformedEnv(PendulumEnv(), TensorDictPrimer(state=Unbounded(shape=(2,))))

    def policy(td):
        td.set("action", torch.zeros(1))
        td.set(("next", "state"), td.get("state") + 1)  # what a recurrent policy does
        return td

    rollout = env.rollout(4, policy)
    # the state counts steps: each step's next state is the policy's, carried to the next root
    assert rollout["next", "state"][:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert rollout["state"][:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_append_transform_on_a_plain_env_wraps_it():
    from rl_envs import PendulumEnv, StepCounter, TransformedEnv

    base = PendulumEnv()
    env = base.append_transform(StepCounter())
    assert isinstance(env, TransformedEnv) and env.base_env is base
    assert env.rollout(3)["next", "step_count"].flatten().tolist() == [1, 2, 3]
    assert env.append_transform(StepCounter(step_count_key="other")) is env


def test_a_single_transform_is_env_transform_itself():
    norm = ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"])
    env = TransformedEnv(PendulumEnv(), norm)
    assert env.transform is norm and not norm.training
    obs = env.reset()["observation"]
    env.append_transform(StepCounter())
    assert isinstance(env.transform, Compose) and env.transform[0] is norm
    assert not env.transform[1].training
    assert env.transform[0].parent.transform.__class__ is Compose
    env.insert_transform(0, RewardSum())
    assert [type(t).__name__ for t in env.transform] == [
        "RewardSum",
        "ObservationNorm",
        "StepCounter",
    ]
    assert obs.shape == (3,) and "step_count" in env.observation_spec


def test_plain_functions_are_transforms():
    def add_y(td):
        return td.set("y", td.get("y", torch.zeros(td.shape)) + 1)

    env = TransformedEnv(PendulumEnv(), add_y)
    env.append_transform(add_y)
    env.transform.append(add_y)
    assert env.reset()["y"] == 3
    env.transform = add_y
    assert env.reset()["y"] == 1


def test_unknown_attributes_are_read_from_the_base_env():
    base = PendulumEnv()
    base.some_setting = 7
    env = TransformedEnv(base, StepCounter())
    assert env.some_setting == 7
    with pytest.raises(AttributeError, match="tralala"):
        _ = env.tralala


def test_device_argument_and_step_count_keys():
    env = TransformedEnv(PendulumEnv(), StepCounter(max_steps=3), device="cpu")
    assert env.device == torch.device("cpu")
    assert env.transform.step_count_keys == ["step_count"]
    assert env.transform.all_truncated_keys == ["truncated"]
    assert env.rollout(5)["next", "truncated"][-1].item()


def test_parent_of_a_subclass_env_is_a_plain_transformed_env():
    class OwnStack(TransformedEnv):
        def __init__(self, *args, **kwargs):
            super().__init__(PendulumEnv(), Compose(StepCounter(), RewardSum()))

    env = OwnStack()
    parent = env.transform[1].parent
    assert type(parent) is TransformedEnv and len(parent.transform) == 1
