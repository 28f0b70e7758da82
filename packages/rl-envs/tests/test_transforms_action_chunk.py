import pytest
import torch
from tensordict import TensorDict

from rl_envs import ActionChunkTransform, PendulumEnv, TransformedEnv


def _loop_reference(action, done, size):
    """Chunks by plain loops: stop at the window's end or at the first done at/after t."""
    *batch, horizon, dim = action.shape
    flat_a = action.reshape(-1, horizon, dim)
    flat_d = done.reshape(-1, horizon)
    chunks = torch.empty(flat_a.shape[0], horizon, size, dim)
    pads = torch.empty(flat_a.shape[0], horizon, size, dtype=torch.bool)
    for b in range(flat_a.shape[0]):
        for t in range(horizon):
            end = t
            while end < horizon - 1 and not flat_d[b, end]:
                end += 1
            for h in range(size):
                chunks[b, t, h] = flat_a[b, min(t + h, end)]
                pads[b, t, h] = t + h > end
    return chunks.reshape(*batch, horizon, size, dim), pads.reshape(*batch, horizon, size)


@pytest.mark.parametrize("size", [1, 3, 8])
def test_chunks_match_a_loop_with_trajectory_ends(size):
    torch.manual_seed(0)
    action = torch.randn(3, 2, 6, 4)
    done = torch.rand(3, 2, 6, 1) < 0.3
    td = TensorDict({"action": action, ("next", "done"): done}, batch_size=[3, 2, 6])
    out = ActionChunkTransform(size)(td)
    chunk, pad = _loop_reference(action, done, size)
    assert torch.equal(out["vla_action", "chunk"], chunk)
    assert torch.equal(out["action_is_pad"], pad)
    ignored = ActionChunkTransform(size, done_key=None)(td.clone())
    chunk, pad = _loop_reference(action, torch.zeros_like(done), size)
    assert torch.equal(ignored["vla_action", "chunk"], chunk)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="chunk_size"):
        ActionChunkTransform(0)
    td = TensorDict({"action": torch.zeros(2, 4, 3)}, batch_size=[2, 4])
    with pytest.raises(ValueError, match="immediately follow"):
        ActionChunkTransform(2, time_dim=0)(td)
    td.set(("next", "done"), torch.zeros(2, 4, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not line up"):
        ActionChunkTransform(2)(td)
    with pytest.raises(KeyError, match="action"):
        ActionChunkTransform(2)(TensorDict(other=torch.zeros(3)))


def test_in_an_env_it_changes_nothing():
    env = TransformedEnv(PendulumEnv(), ActionChunkTransform(3))
    assert env.full_action_spec == PendulumEnv().full_action_spec
    rollout = env.rollout(3)
    assert ("vla_action", "chunk") not in rollout.keys(True)
    action = torch.zeros(2, 1)
    assert torch.equal(env.transform.inv(TensorDict(action=action))["action"], action)
