"""BurnInTransform: the returned sequence starts from the state the modules reach after burn_in steps."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_envs import BurnInTransform, PendulumEnv, TransformedEnv


class DecayingSum(torch.nn.Module):
    """h_{t+1} = 0.5 h_t + obs_t over a sequence, from the first stored h (a toy recurrent cell)."""

    def forward(self, obs: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        state, outs = h[:, 0], []
        for t in range(obs.shape[1]):
            state = 0.5 * state + obs[:, t]
            outs.append(state)
        return torch.stack(outs, 1)


def test_burn_in_matches_a_plain_loop() -> None:
    module = TensorDictModule(DecayingSum(), ["obs", "h"], [("next", "h")])
    obs = torch.randn(3, 6, 2)
    h0 = torch.randn(3, 6, 2)
    data = TensorDict(obs=obs, h=h0, batch_size=[3, 6])
    out = BurnInTransform(module, burn_in=4)(data)
    assert out.batch_size == (3, 2)
    state = h0[:, 0]
    for t in range(4):
        state = 0.5 * state + obs[:, t]
    assert torch.allclose(out["h"][:, 0], state)
    assert torch.equal(out["h"][:, 1], h0[:, 5]) and torch.equal(out["obs"], obs[:, 4:])
    assert torch.equal(data["h"], h0)  # the input is left alone
    t = BurnInTransform([module], burn_in=0)
    assert t(data) is data and t.out_keys == ["h"] and t.in_keys == ["obs", "h"]


def test_burn_in_errors() -> None:
    with pytest.raises(ValueError, match="TensorDict module"):
        BurnInTransform(torch.nn.Linear(1, 1), burn_in=1)
    module = TensorDictModule(DecayingSum(), ["obs", "h"], [("next", "h")])
    with pytest.raises(ValueError, match="T > burn_in"):
        BurnInTransform(module, 5)(TensorDict(obs=torch.zeros(1, 5, 1), batch_size=[1, 5]))
    with pytest.raises(RuntimeError, match="replay buffer"):
        TransformedEnv(PendulumEnv(), BurnInTransform(module, 1)).rollout(2)
    with pytest.warns(UserWarning, match="does not need 'next'"):
        BurnInTransform(module, 1, out_keys=[("next", "h")])
