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


class _ObservationSpec:
    def __init__(self, batch_size: torch.Size) -> None:
        self.batch_size = batch_size

    def keys(self) -> list[str]:
        return ["observation"]

    def zero(self) -> TensorDict:
        return TensorDict({"observation": torch.zeros(*self.batch_size, 3)}, self.batch_size)


class _SpecToyEnv(ToyEnv):
    """ToyEnv with the observation spec auto-wrapping reads."""

    def __init__(self, batch_size: tuple[int, ...] = ()) -> None:
        super().__init__(batch_size)
        self.observation_spec = _ObservationSpec(self.batch_size)


class TensorNet(nn.Module):
    def __init__(self, tuple_out: bool = False) -> None:
        super().__init__()
        self.linear, self.tuple_out = nn.Linear(3, 1), tuple_out

    def forward(self, observation: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        out = self.linear(observation).tanh()
        return (out, out.sum(-1)) if self.tuple_out else out


class TwoInputs(nn.Module):
    def forward(self, observation: torch.Tensor, other_stuff: torch.Tensor) -> torch.Tensor:
        return observation[..., :1]


@pytest.mark.parametrize(
    ("tuple_out", "out_keys"), [(False, ["action"]), (True, ["action", "output1"])]
)
def test_tensor_module_policy_is_wrapped_like_torchrl(tuple_out: bool, out_keys: list) -> None:
    net = TensorNet(tuple_out)
    collector = Collector(_SpecToyEnv((2,)), net, frames_per_batch=4)
    assert isinstance(collector._wrapped_policy, TensorDictModule)
    assert collector._wrapped_policy.out_keys == out_keys and collector.policy is net
    batch = collector.next()
    expected = net.linear(batch["observation"]).tanh()
    torch.testing.assert_close(batch["action"], expected)
    with torch.no_grad():
        net.linear.weight.zero_(), net.linear.bias.zero_()
    assert (collector.next()["action"] == 0).all(), "the wrapper shares the module's weights"


def test_unwrappable_policy_is_explained_and_trust_policy_skips_wrapping() -> None:
    with pytest.raises(TypeError, match=r"Arguments to policy\.forward are incompatible"):
        Collector(_SpecToyEnv(), TwoInputs(), frames_per_batch=2)
    trusted = Collector(_SpecToyEnv(), TensorNet(), frames_per_batch=2, trust_policy=True)
    assert trusted._wrapped_policy is trusted.policy
    sequential = nn.Sequential(ScalePolicy(1.0))  # forward(input): takes the TensorDict
    assert Collector(_SpecToyEnv(), sequential, frames_per_batch=2)._wrapped_policy is sequential
