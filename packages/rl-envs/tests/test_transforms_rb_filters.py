"""Replay-buffer transforms: NextStateReconstructor, PolicyAgeFilter, MultiStepTransform."""

from __future__ import annotations

import logging

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    MultiStepTransform,
    NextStateReconstructor,
    PendulumEnv,
    PolicyAgeFilter,
    TransformedEnv,
)

TRAJ = ("collector", "traj_ids")


def _flat_sample(traj_ids, done, obs=None):
    n = len(traj_ids)
    obs = torch.arange(2 * n, dtype=torch.float32).reshape(n, 2) if obs is None else obs
    return TensorDict(
        {
            "observation": obs,
            ("next", "done"): torch.tensor(done).reshape(n, 1),
            TRAJ: torch.tensor(traj_ids),
        },
        batch_size=[n],
    )


def test_next_state_reconstructor_matches_a_python_loop():
    traj = [0, 0, 0, 1, 1, 2, 2, 2]
    done = [False, False, True, False, False, False, True, False]
    td = _flat_sample(traj, done)
    obs = td["observation"].clone()
    out = NextStateReconstructor()(td)["next", "observation"]
    for i in range(len(traj)):
        follows = i + 1 < len(traj) and traj[i + 1] == traj[i] and not done[i]
        if follows:
            assert torch.equal(out[i], obs[i + 1])
        else:
            assert torch.isnan(out[i]).all()


def test_next_state_reconstructor_step_count_and_fill_value():
    td = _flat_sample([0, 0, 0], [False, False, False])
    td["step_count"] = torch.tensor([[0], [5], [6]])
    out = NextStateReconstructor(step_count_key="step_count", fill_value=-7.0)(td)
    assert out["next", "observation"][:, 0].tolist() == [-7.0, 4.0, -7.0]


def test_next_state_reconstructor_errors():
    no_marker = TensorDict(observation=torch.zeros(3, 1), batch_size=[3])
    with pytest.raises(KeyError, match="trajectory key"):
        NextStateReconstructor()(no_marker)
    out = NextStateReconstructor(strict=False)(no_marker.clone())
    assert torch.isnan(out["next", "observation"][-1]).all()
    assert (out["next", "observation"][:-1] == 0).all()
    ints = _flat_sample([0, 0], [False, False], obs=torch.ones(2, 1, dtype=torch.long))
    with pytest.raises(TypeError, match="fill_value"):
        NextStateReconstructor()(ints)
    assert NextStateReconstructor(fill_value=-1)(ints)["next", "observation"].tolist() == [
        [1],
        [-1],
    ]
    with pytest.raises(ValueError, match="flat"):
        NextStateReconstructor()(TensorDict(observation=torch.zeros(2, 2), batch_size=[2, 2]))


def test_policy_age_filter_drops_stale_rows():
    version = {"now": 5}
    filt = PolicyAgeFilter(lambda: version["now"], max_policy_lag=2)
    td = TensorDict(policy_version=torch.tensor([[3, 5], [5, 2], [4, 4]]), batch_size=[3, 2])
    assert filt(td)["policy_version"].tolist() == [[3, 5], [4, 4]]
    assert filt.inv(td).batch_size[0] == 2
    version["now"] = 6
    assert filt(td)["policy_version"].tolist() == [[4, 4]]


def test_policy_age_filter_missing_key_and_errors(caplog):
    td = TensorDict(observation=torch.zeros(2), batch_size=[2])
    with caplog.at_level(logging.WARNING):
        assert PolicyAgeFilter(1, max_policy_lag=0)(td) is td
    assert "policy_version" in caplog.text
    with pytest.raises(KeyError, match="policy_version"):
        PolicyAgeFilter(1, max_policy_lag=0, strict=True)(td)
    with pytest.raises(ValueError, match="non-negative"):
        PolicyAgeFilter(1, max_policy_lag=-1)


def test_policy_age_filter_is_a_no_op_in_an_env():
    env = TransformedEnv(PendulumEnv(), PolicyAgeFilter(100, max_policy_lag=0))
    assert env.rollout(3).batch_size == torch.Size([3])


def _transitions(T, done_at=(), batch=()):
    reward = torch.arange(1.0, T + 1).expand(*batch, T).unsqueeze(-1).clone()
    done = torch.zeros(*batch, T, 1, dtype=torch.bool)
    for t in done_at:
        done[..., t, :] = True
    return TensorDict(
        {
            "obs": torch.arange(T).expand(*batch, T).clone(),
            "next": {
                "obs": torch.arange(1, T + 1).expand(*batch, T).clone(),
                "reward": reward,
                "done": done,
                "terminated": done.clone(),
                "truncated": torch.zeros_like(done),
            },
        },
        batch_size=[*batch, T],
    )


def _reference(data, n, gamma):
    """Plain loops over time: k_t = min(n, steps left in the trajectory) - 1."""
    reward = data["next", "reward"].squeeze(-1).tolist()
    done = data["next", "done"].squeeze(-1).tolist()
    T = len(reward)
    out = []
    for t in range(T):
        end = next((s for s in range(t, T) if done[s]), T - 1)
        k = min(n, end - t + 1) - 1
        out.append((sum(gamma**j * reward[t + j] for j in range(k + 1)), k))
    return out


@pytest.mark.parametrize("chunks", [[12], [5, 7], [1, 2, 3, 6], [4, 4, 4]])
def test_multi_step_matches_loops_whatever_the_chunking(chunks):
    n, gamma = 3, 0.9
    data = _transitions(12, done_at=(4, 9))
    expected = _reference(data, n, gamma)[: 12 - n]
    t = MultiStepTransform(n, gamma)
    outs = [t.inv(piece) for piece in data.split(chunks, 0)]
    out = torch.cat([o for o in outs if o is not None], 0)
    assert out.shape == torch.Size([12 - n])
    for i, (ret, k) in enumerate(expected):
        assert out["next", "reward"][i].item() == pytest.approx(ret)
        assert out["steps_to_next_obs"][i].item() == k + 1
        assert out["gamma"][i].item() == pytest.approx(gamma ** (k + 1))
        assert out["nonterminal"][i].item() == (k != 0)
        assert out["next", "obs"][i].item() == i + k + 1
        assert out["next", "original_reward"][i].item() == i + 1
    assert torch.equal(out["obs"], torch.arange(12 - n))


def test_multi_step_batched_time_last_and_errors():
    t = MultiStepTransform(2, 0.5)
    out = t.inv(_transitions(5, batch=(3,)))
    assert out.shape == torch.Size([3, 3])
    assert out["next", "reward"][:, 0, 0].tolist() == [2.0, 2.0, 2.0]  # 1 + 0.5 * 2
    with pytest.raises(ValueError, match="strictly positive"):
        MultiStepTransform(0, 0.9)
    env = TransformedEnv(PendulumEnv(), MultiStepTransform(2, 0.9))
    with pytest.raises(ValueError, match="replay-buffer"):
        env.rand_step(env.reset())
