import pickle

import pytest
import torch
from tensordict import TensorDict

from rl_envs import Compose, PendulumEnv, SerialEnv, StepCounter, TrajCounter, TransformedEnv


def _env(max_steps, t):
    return TransformedEnv(PendulumEnv(), Compose(StepCounter(max_steps=max_steps), t))


def test_each_reset_takes_the_next_number_and_steps_carry_it():
    env = _env(3, TrajCounter())
    r = env.rollout(9, break_when_any_done=False)
    assert r["traj_count"].squeeze(-1).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert torch.equal(r["next", "traj_count"], r["traj_count"])
    assert env.observation_spec["traj_count"].dtype == torch.int64


def test_clones_share_the_counter_and_a_batch_numbers_each_env():
    t = TrajCounter()
    a, b = _env(2, t), _env(3, t.clone())
    ra, rb = a.rollout(6, break_when_any_done=False), b.rollout(6, break_when_any_done=False)
    assert not set(ra["traj_count"].flatten().tolist()) & set(rb["traj_count"].flatten().tolist())
    batched = TransformedEnv(SerialEnv(3, PendulumEnv), TrajCounter())
    assert batched.reset()["traj_count"].squeeze(-1).tolist() == [0, 1, 2]
    partial = TensorDict(
        {
            "_reset": torch.tensor([[False], [True], [False]]),
            "traj_count": torch.tensor([[0], [1], [2]]),
        },
        batch_size=[3],
    )
    assert batched.reset(partial)["traj_count"].squeeze(-1).tolist() == [0, 3, 2]


def test_plain_copies_start_a_new_counter_and_calls_outside_an_env_raise():
    t = TrajCounter()
    _env(2, t).rollout(4, break_when_any_done=False)
    assert pickle.loads(pickle.dumps(t)).state_dict() == {"traj_count": 0}
    assert t.state_dict()["traj_count"] == 2
    with pytest.raises(RuntimeError, match="within an environment step or reset"):
        t(TensorDict())


def test_nested_tuple_keys_are_flattened():
    from rl_envs.transforms._utils import as_key_list

    assert as_key_list([("nested", (("traj_count",),))]) == [("nested", "traj_count")]
    assert TrajCounter(out_key=("a", ("b",))).out_keys == [("a", "b")]
