"""FinancialRegimeEnv: holdings follow the actions, rewards are the position's returns."""

from __future__ import annotations

import pytest
import torch

from rl_envs import FinancialRegimeEnv, check_env_specs


@pytest.mark.parametrize("batch", [(), (3,)])
def test_specs(batch):
    check_env_specs(FinancialRegimeEnv(window_size=8, batch_size=batch))


def test_holdings_entry_price_and_rewards_follow_the_actions():
    env = FinancialRegimeEnv(window_size=4, transaction_cost=0.01)
    td = env.reset()
    expected_holdings = {0: False, 1: True, 2: False}
    holdings = False
    for action in (0, 1, 0, 1, 2, 2, 1):
        price = td["price_history"][-1].item()
        entry = td["entry_price"].item()
        td = env.step(td.set("action", torch.tensor([action])))
        nxt = td["next"]
        new = expected_holdings[action] if action else holdings
        traded = new != holdings
        next_price = nxt["price_history"][-1].item()
        reward = new * (next_price / price - 1) - 0.01 * traded
        assert nxt["current_holdings"].item() is new
        assert nxt["reward"].item() == pytest.approx(reward, rel=1e-5, abs=1e-7)
        want_entry = (price if new else 0.0) if traded else entry
        assert nxt["entry_price"].item() == pytest.approx(want_entry)
        torch.testing.assert_close(nxt["price_history"][:-1], td["price_history"][1:])
        holdings = new
        td = env.step_mdp(td)


def test_truncated_after_max_steps_and_seeded():
    env = FinancialRegimeEnv(window_size=3, max_steps=5)
    r = env.rollout(12, break_when_any_done=False)
    assert (
        r["next", "truncated"].flatten().tolist()
        == [False] * 4 + [True] + [False] * 4 + [True] + [False] * 2
    )
    a = FinancialRegimeEnv(window_size=3, seed=7).reset()["price_history"]
    b = FinancialRegimeEnv(window_size=3, seed=7).reset()["price_history"]
    c = FinancialRegimeEnv(window_size=3, seed=8).reset()["price_history"]
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a[-1].item() == 100.0
