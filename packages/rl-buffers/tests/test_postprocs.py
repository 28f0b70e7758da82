"""MultiStep and DensifyReward against plain Python loops over each step's look-ahead window."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import DensifyReward, MultiStep


def _batch(done_at: list[list[int]], T: int) -> TensorDict:
    B = len(done_at)
    done = torch.zeros(B, T, 1, dtype=torch.bool)
    for b, steps in enumerate(done_at):
        done[b, steps] = True
    torch.manual_seed(0)
    obs = torch.randn(B, T + 1, 2)
    return TensorDict(
        {
            "obs": obs[:, :-1],
            "next": {
                "obs": obs[:, 1:],
                "reward": torch.randn(B, T, 1),
                "done": done,
                "terminated": done.clone(),
                "truncated": torch.zeros_like(done),
            },
        },
        [B, T],
    )


def _reference(
    td: TensorDict, gamma: float, n: int, b: int, t: int
) -> tuple[float, torch.Tensor, int]:
    """Sum rewards from t while inside the segment (stop after a done or at the batch end)."""
    T = td.shape[-1]
    total, k = 0.0, 0
    for j in range(n):
        if t + j >= T:
            break
        total += gamma**j * float(td["next", "reward"][b, t + j])
        k = j
        if td["next", "done"][b, t + j]:
            break
    return total, td["next", "obs"][b, t + k], k


@pytest.mark.parametrize("n_steps", [1, 3, 5])
def test_multistep_matches_a_python_loop(n_steps: int) -> None:
    td = _batch([[2, 7], [9]], T=10)
    gamma = 0.9
    out = MultiStep(gamma=gamma, n_steps=n_steps)(td)
    for b in range(2):
        for t in range(10):
            reward, next_obs, k = _reference(td, gamma, n_steps, b, t)
            assert float(out["next", "reward"][b, t]) == pytest.approx(reward, rel=1e-6)
            assert torch.equal(out["next", "obs"][b, t], next_obs)
            assert int(out["steps_to_next_obs"][b, t]) == k + 1
            assert float(out["gamma"][b, t]) == pytest.approx(gamma ** (k + 1))
            assert bool(out["nonterminal"][b, t]) == (k != 0)
    # Done flags are not shifted; the one-step reward is kept; the input is untouched.
    assert torch.equal(out["next", "done"], td["next", "done"])
    assert torch.equal(out["next", "original_reward"], td["next", "reward"])
    assert td.get(("next", "original_reward"), None) is None


def test_collector_mask_clears_nonterminal_and_bad_input_is_explained() -> None:
    td = _batch([[]], T=4)
    td["collector", "mask"] = torch.tensor([[True, True, False, False]])
    out = MultiStep(0.99, 2)(td)
    assert out["nonterminal"].tolist() == [[True, True, False, False]]
    with pytest.raises(ValueError, match="n_steps"):
        MultiStep(0.99, 0)
    with pytest.raises(ValueError, match="gamma"):
        MultiStep(1.5, 2)
    with pytest.raises(KeyError, match="done"):
        MultiStep(0.99, 2)(TensorDict({"next": {"reward": torch.zeros(3, 1)}}, [3]))


@pytest.mark.parametrize("discount", [1.0, 0.9])
def test_densify_reward_matches_a_step_by_step_reference(discount):
    gen = torch.Generator().manual_seed(0)
    reward = torch.randn(3, 12, 1, generator=gen)
    done = torch.rand(3, 12, 1, generator=gen) < 0.25
    td = TensorDict({("next", "reward"): reward.clone(), ("next", "done"): done}, [3, 12])
    out = DensifyReward(discount=discount, reward_key_out="dense")(td)
    expected = torch.zeros_like(reward)
    for b in range(3):
        for t in range(12):
            total, scale = 0.0, 1.0
            for u in range(t, 12):
                total += scale * float(reward[b, u])
                scale *= discount
                if done[b, u]:
                    break
            expected[b, t] = total
    assert out is td and torch.equal(td["next", "reward"], reward)
    torch.testing.assert_close(td["next", "dense"], expected)
