import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    ActionDiscretizer,
    ActionMask,
    ActionScaling,
    Bounded,
    Categorical,
    Composite,
    EnvBase,
    FlattenAction,
    PendulumEnv,
    TransformedEnv,
    Unbounded,
    check_env_specs,
    step_mdp,
)


class RecordingEnv(EnvBase):
    """Records the action it receives; action [2, 3] in [0, 4]."""

    def __init__(self, shape=(1,), low=0.0, high=4.0):
        super().__init__()
        self.observation_spec = Composite(obs=Unbounded(shape=(1,)))
        self.action_spec = Bounded(low, high, shape=shape)
        self.seen = []

    def _reset(self, td):
        return TensorDict(obs=torch.zeros(1))

    def _step(self, td):
        self.seen.append(td["action"].clone())
        return TensorDict(
            obs=torch.zeros(1), reward=torch.zeros(1), terminated=torch.zeros(1, dtype=torch.bool)
        )

    def _set_seed(self, seed):
        pass


def test_action_scaling_maps_unit_box_to_env_box():
    base = RecordingEnv(shape=(2,), low=0.0, high=4.0)
    env = TransformedEnv(base, ActionScaling())
    assert env.action_spec.space.low.tolist() == [-1.0, -1.0]
    assert env.action_spec.space.high.tolist() == [1.0, 1.0]
    td = env.reset()
    td["action"] = torch.tensor([-1.0, 0.5])
    env.step(td)
    torch.testing.assert_close(base.seen[-1], torch.tensor([0.0, 3.0]))  # 2 + 2 * a
    check_env_specs(env)


def test_flatten_action():
    base = RecordingEnv(shape=(2, 3))
    env = TransformedEnv(base, FlattenAction())
    assert env.action_spec.shape == (6,)
    td = env.reset()
    td["action"] = torch.arange(6.0) / 2
    env.step(td)
    torch.testing.assert_close(base.seen[-1], (torch.arange(6.0) / 2).reshape(2, 3))
    check_env_specs(env)


@pytest.mark.parametrize(("sampling", "offset"), [("median", 0.5), ("low", 0.0), ("high", 1.0)])
def test_action_discretizer(sampling, offset):
    base = RecordingEnv(shape=(2,), low=-1.0, high=1.0)
    env = TransformedEnv(base, ActionDiscretizer(4, sampling=sampling))
    spec = env.action_spec
    assert isinstance(spec, Categorical) and spec.n == 4 and spec.shape == (2,)
    td = env.reset()
    td["action"] = torch.tensor([0, 3])
    env.step(td)
    expected = -1.0 + 2.0 * (torch.tensor([0.0, 3.0]) + offset) / 4
    torch.testing.assert_close(base.seen[-1], expected)
    check_env_specs(env)


class MaskedEnv(EnvBase):
    """4 discrete actions; only action (step % 4) is allowed at each step."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(action_mask=Categorical(2, shape=(4,), dtype=torch.bool))
        self.action_spec = Categorical(4, shape=())
        self.t = 0

    def _mask(self):
        m = torch.zeros(4, dtype=torch.bool)
        m[self.t % 4] = True
        return m

    def _reset(self, td):
        self.t = 0
        return TensorDict(action_mask=self._mask())

    def _step(self, td):
        assert td["action"].item() == self.t % 4, "a masked action was taken"
        self.t += 1
        return TensorDict(
            action_mask=self._mask(),
            reward=torch.zeros(1),
            terminated=torch.zeros(1, dtype=torch.bool),
        )

    def _set_seed(self, seed):
        pass


def test_action_mask_constrains_random_actions():
    env = TransformedEnv(MaskedEnv(), ActionMask())
    td = env.reset()
    actions = []
    for _ in range(8):
        td = env.rand_step(td)
        actions.append(td["action"].item())
        td = step_mdp(td)
    assert actions == [0, 1, 2, 3, 0, 1, 2, 3]
    with pytest.raises(KeyError, match="action_mask"):
        TransformedEnv(PendulumEnv(), ActionMask()).reset()


def test_action_discretizer_sampling_strategy_enum():
    strategy = ActionDiscretizer.SamplingStrategy
    assert [s.value for s in strategy] == [0, 1, 2, 3]
    t = ActionDiscretizer(4, sampling=strategy.HIGH)
    assert t.sampling == strategy.HIGH and ActionDiscretizer(4).sampling == strategy.MEDIAN
    t.set_bounds(torch.tensor([-1.0]), torch.tensor([1.0]))
    assert t.inv(TensorDict(action=torch.tensor([0])))["action"].item() == -0.5
    assert ActionDiscretizer(4, sampling="low").sampling == strategy.LOW


def test_action_discretizer_renamed_key_keeps_the_env_action_in_the_rollout():
    env = PendulumEnv().append_transform(ActionDiscretizer(5, out_action_key="action_disc"))
    assert env.action_keys == ["action_disc"] and env.state_keys == ["action"]
    check_env_specs(env)  # the env action is a state entry, at the root only
    r = env.rollout(4)
    assert r["action_disc"].dtype == torch.int64 and r["action"].dtype == torch.float32
    # bin i of [-2, 2] in 5 bins lands on its middle: -2 + 4 * (i + 0.5) / 5
    expected = -2.0 + 4.0 * (r["action_disc"].float() + 0.5) / 5.0
    torch.testing.assert_close(r["action"], expected)
    same_key = PendulumEnv().append_transform(ActionDiscretizer(5)).rollout(3)
    assert same_key["action"].dtype == torch.int64  # the policy's action is not overwritten


class ScalarActionEnv(EnvBase):
    """A scalar action of shape [*B] in [-1, 1]; the observation echoes it."""

    def __init__(self):
        super().__init__(batch_size=(2,))
        self.action_spec = Bounded(-1.0, 1.0, shape=(2,))
        self.observation_spec = Composite(obs=Unbounded(shape=(2,)), shape=(2,))

    def _reset(self, td):
        return TensorDict(obs=torch.zeros(2), batch_size=(2,))

    def _step(self, td):
        return TensorDict(obs=td["action"].clone(), reward=torch.zeros(2, 1), batch_size=(2,))

    def _set_seed(self, seed):
        pass


@pytest.mark.parametrize("categorical", [True, False])
@pytest.mark.parametrize("num_intervals", [4, torch.tensor([4])])
def test_action_discretizer_scalar_action(categorical, num_intervals):
    t = ActionDiscretizer(num_intervals, categorical=categorical)
    env = ScalarActionEnv().append_transform(t)
    check_env_specs(env)
    assert env.action_spec.shape == ((2,) if categorical else (2, 4))
    r = env.rollout(3)
    idx = r["action"] if categorical else r["action"].long().argmax(-1)
    torch.testing.assert_close(r["next", "obs"], -1.0 + 2.0 * (idx.float() + 0.5) / 4.0)


def test_action_discretizer_unbatched_scalar_action_stays_scalar():
    t = ActionDiscretizer(torch.tensor([4]))
    t.set_bounds(torch.tensor(-1.0), torch.tensor(1.0))
    out = t.inv(TensorDict(action=torch.tensor(1)))["action"]
    assert out.shape == () and out.item() == -1.0 + 2.0 * 1.5 / 4.0
