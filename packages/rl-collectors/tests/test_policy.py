"""Policy helpers: the lean TensorDictModule call matches the module's own forward."""

from __future__ import annotations

import pytest
import torch
from rl_collectors_toy_env import ScalePolicy, ToyEnv
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from rl_collectors import Collector
from rl_collectors._policy import fast_policy_call, load_weights_, resolve_exploration_type


class TwoHeads(nn.Module):
    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return obs[..., :1] * 0.1, obs.sum(-1, keepdim=True)


@pytest.mark.parametrize(
    "policy",
    [
        TensorDictModule(nn.Linear(3, 1), ["observation"], ["action"]),
        TensorDictModule(TwoHeads(), ["observation"], ["action", ("extra", "sum")]),
    ],
)
def test_fast_call_matches_forward(policy: TensorDictModule) -> None:
    call = fast_policy_call(policy)
    assert call is not None
    td = TensorDict({"observation": torch.randn(4, 3)}, [4])
    expected = policy(td.clone())
    got = call(td)
    assert got is td
    assert set(got.keys(True, True)) == set(expected.keys(True, True))
    for key in expected.keys(True, True):
        torch.testing.assert_close(got[key], expected[key])


def test_fast_call_declines_what_it_cannot_mirror() -> None:
    assert fast_policy_call(ScalePolicy()) is None
    assert (
        fast_policy_call(
            TensorDictModule(nn.Linear(3, 1), ["observation"], ["action"], inplace=False)
        )
        is None
    )
    hooked = TensorDictModule(nn.Linear(3, 1), ["observation"], ["action"])
    hooked.register_forward_hook(lambda *args: None)
    assert fast_policy_call(hooked) is None


def test_fast_call_falls_back_for_non_tensor_outputs() -> None:
    policy = TensorDictModule(lambda obs: {"action": obs[..., :1]}, ["observation"], ["action"])
    call = fast_policy_call(policy)
    out = call(TensorDict({"observation": torch.ones(2, 3)}, [2]))
    assert out["action"].shape == (2, 1)


def test_collector_with_td_module_matches_plain_policy() -> None:
    linear = nn.Linear(3, 1)
    module = TensorDictModule(linear, ["observation"], ["action"])

    class Plain(nn.Module):
        def forward(self, td: TensorDict) -> TensorDict:
            return td.set("action", linear(td["observation"]))

    fast = Collector(ToyEnv((2,)), module, frames_per_batch=20, total_frames=20).next()
    plain = Collector(ToyEnv((2,)), Plain(), frames_per_batch=20, total_frames=20).next()
    torch.testing.assert_close(fast["action"], plain["action"])


def test_load_weights_and_exploration_names() -> None:
    target = ScalePolicy(0.0)
    load_weights_(target, ScalePolicy(2.0))
    assert target.weight.item() == 2.0
    with pytest.raises(TypeError, match=r"nn\.Module"):
        load_weights_(lambda td: td, ScalePolicy())
    with pytest.raises(TypeError, match="state_dict"):
        load_weights_(target, 3.0)
    assert resolve_exploration_type("DETERMINISTIC").value == "deterministic"
