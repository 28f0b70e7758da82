"""TorchRL's call and constructor forms: tensors as keywords, select_out_keys, functional=,
separate_losses=, actor=/critic= aliases and the removed key arguments."""

from __future__ import annotations

import pytest
import torch
from objectives_testlib import (
    ACT,
    OBS,
    make_categorical_actor,
    make_qvalue,
    make_value,
    transitions,
)
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_objectives import A2CLoss, ClipPPOLoss, DDPGLoss, PPOLoss, ReinforceLoss

# These checks build losses with target parameters and no updater (their numerics do not
# need one): TorchRL's warning about it is tested in test_target_updater_warning.py.
pytestmark = pytest.mark.filterwarnings("ignore:No target network updater:UserWarning")


def _ddpg():
    torch.manual_seed(0)
    actor = TensorDictModule(torch.nn.Linear(OBS, ACT), ["observation"], ["action"])
    return DDPGLoss(actor, make_qvalue())


def _kwargs(td):
    return {
        "observation": td["observation"],
        "action": td["action"],
        "next_observation": td["next", "observation"],
        "next_reward": td["next", "reward"],
        "next_done": td["next", "done"],
        "next_terminated": td["next", "terminated"],
    }


def test_tensors_as_keywords_return_the_out_keys_in_order():
    loss, td = _ddpg(), transitions(8)
    out_td = loss(td.clone())
    values = loss(**_kwargs(td))
    assert loss.out_keys == [
        "loss_actor", "loss_value", "pred_value", "target_value", "pred_value_max",
        "target_value_max",
    ]  # fmt: skip
    assert len(values) == len(loss.out_keys)
    for key, value in zip(loss.out_keys, values, strict=True):
        torch.testing.assert_close(value, out_td[key])


def test_select_out_keys_narrows_both_call_forms():
    loss, td = _ddpg(), transitions(8)
    full = loss(td.clone())
    loss.select_out_keys("loss_actor", "target_value")
    loss_actor, target_value = loss(**_kwargs(td))
    torch.testing.assert_close(loss_actor, full["loss_actor"])
    torch.testing.assert_close(target_value, full["target_value"])
    assert set(loss(td.clone()).keys()) == {"loss_actor", "target_value"}
    loss.select_out_keys("loss_value")
    torch.testing.assert_close(loss(**_kwargs(td)), full["loss_value"])  # one key: one tensor
    loss.reset_out_keys()
    assert "pred_value" in set(loss(td.clone()).keys())
    with pytest.raises(ValueError, match="not output keys"):
        loss.select_out_keys("loss_nope")
    with pytest.raises(TypeError, match="must be a tensor"):
        loss(observation=[1.0, 2.0])


def _pg_batch(n=8):
    td = transitions(n, action="categorical")
    g = torch.Generator().manual_seed(1)
    td["action_log_prob"] = -torch.rand(n, generator=g) - 0.5
    td["advantage"] = torch.randn(n, 1, generator=g)
    td["value_target"] = torch.randn(n, 1, generator=g)
    return td


@pytest.mark.parametrize("loss_class", [PPOLoss, ClipPPOLoss, A2CLoss, ReinforceLoss])
def test_functional_false_gives_the_same_losses_and_no_params_views(loss_class):
    torch.manual_seed(0)
    actor, critic = make_categorical_actor(), make_value()
    td = _pg_batch()
    on = loss_class(actor, critic)(td.clone())
    off_loss = loss_class(actor=actor, critic=critic, functional=False)
    off = off_loss(td.clone())
    assert off_loss.functional is False
    assert off_loss.actor_network_params is None and off_loss.critic_network_params is None
    for key in on.keys():  # noqa: SIM118 (a TensorDict iterates over its batch)
        torch.testing.assert_close(on[key], off[key])
    with pytest.raises(RuntimeError, match="set_keys"):
        loss_class(actor, critic, advantage_key="adv")


class _Trunk(torch.nn.Module):
    def __init__(self, trunk, head):
        super().__init__()
        self.trunk, self.head = trunk, head

    def forward(self, obs):
        return self.head(torch.tanh(self.trunk(obs)))


@pytest.mark.parametrize("loss_class", [A2CLoss, ReinforceLoss])
def test_separate_losses_keeps_critic_gradients_off_shared_parameters(loss_class):
    from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential

    torch.manual_seed(0)
    trunk = torch.nn.Linear(OBS, 8)
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(_Trunk(trunk, torch.nn.Linear(8, 4)), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            ["logits"], ["action"], distribution_class=torch.distributions.Categorical
        ),
    )
    critic = TensorDictModule(
        _Trunk(trunk, torch.nn.Linear(8, 1)), ["observation"], ["state_value"]
    )
    td = _pg_batch()
    critic_key = "loss_critic" if loss_class is A2CLoss else "loss_value"
    for separate in (False, True):
        loss = loss_class(actor, critic, separate_losses=separate)
        trunk.zero_grad()
        critic.module.head.zero_grad()
        loss(td.clone())[critic_key].backward()
        assert critic.module.head.weight.grad.abs().sum() > 0
        shared_grad = trunk.weight.grad
        if separate:
            assert shared_grad is None or shared_grad.abs().sum() == 0
        else:
            assert shared_grad.abs().sum() > 0


def test_ppo_out_keys_follow_its_options():
    actor, critic = make_categorical_actor(), make_value()
    assert PPOLoss(actor, critic).out_keys == [
        "loss_objective",
        "entropy",
        "loss_entropy",
        "loss_critic",
    ]
    assert PPOLoss(actor, entropy_bonus=False).out_keys == ["loss_objective"]
    assert A2CLoss(actor, critic).out_keys == [
        "loss_objective",
        "loss_critic",
        "entropy",
        "loss_entropy",
    ]
    td = TensorDict({k: v for k, v in _pg_batch().items() if k != "next"}, batch_size=[8])
    values = PPOLoss(actor, critic)(**dict(td.items()))
    assert len(values) == 4


def test_reset_parameters_recursive_reinitialises_and_syncs_targets():
    loss = _ddpg()
    loss.delay_actor = False
    before = loss.value_network_params.flatten_keys().clone()
    loss.reset_parameters_recursive()
    after = loss.value_network_params.flatten_keys()
    assert all(not torch.equal(before[k], after[k]) for k in after.keys())  # noqa: SIM118
    target = loss.target_value_network_params.flatten_keys()
    for key, value in after.items():
        torch.testing.assert_close(target[key], value.detach())
    # no delayed actor: its "target" is the detached live actor
    actor_view = loss.target_actor_network_params.flatten_keys()
    for key, value in loss.actor_network_params.flatten_keys().items():
        assert torch.equal(actor_view[key], value) and not actor_view[key].requires_grad


def test_one_step_losses_accept_a_single_transition():
    from rl_objectives import DQNLoss

    net = TensorDictModule(torch.nn.Linear(OBS, 4), ["observation"], ["action_value"])
    loss = DQNLoss(net, action_space="categorical")
    td = TensorDict(
        {
            "observation": torch.randn(OBS),
            "action": torch.tensor(2),
            ("next", "observation"): torch.randn(OBS),
            ("next", "reward"): torch.randn(1),
            ("next", "done"): torch.zeros(1, dtype=torch.bool),
            ("next", "terminated"): torch.zeros(1, dtype=torch.bool),
        },
        batch_size=[],
    )
    single = loss(td.clone())["loss"]
    batched = loss(td.unsqueeze(0))["loss"]
    torch.testing.assert_close(single, batched)


def test_sac_hints_keep_the_values_and_removed_key_arguments_raise():
    from objectives_testlib import make_tanh_actor

    from rl_objectives import SACLoss, TD3Loss

    actor, td = make_tanh_actor(), transitions(8)
    torch.manual_seed(0)
    ref = SACLoss(actor, make_qvalue())
    hinted = SACLoss(actor, make_qvalue(), skip_done_states=True, deactivate_vmap=True)
    hinted.load_state_dict(ref.state_dict())
    torch.manual_seed(1)
    a = ref(td.clone())
    torch.manual_seed(1)
    b = hinted(td.clone())
    for key in ("loss_actor", "loss_qvalue", "loss_alpha"):
        torch.testing.assert_close(a[key], b[key])
    with pytest.raises(RuntimeError, match="set_keys"):
        SACLoss(actor, make_qvalue(), priority_key="p")
    with pytest.raises(RuntimeError, match="set_keys"):
        TD3Loss(actor, make_qvalue(), bounds=(-1.0, 1.0), priority_key="p")


def test_ppo_device_argument_and_estimator_keys_alias():
    from dataclasses import asdict

    from rl_objectives import GAE

    actor, critic = make_categorical_actor(), make_value()
    td = _pg_batch()
    ref = ClipPPOLoss(actor, critic)(td.clone())
    out = ClipPPOLoss(actor, critic, device="cpu")(td.clone())
    torch.testing.assert_close(out["loss_objective"], ref["loss_objective"])
    assert ClipPPOLoss(actor, critic, device="cpu").device == torch.device("cpu")
    assert "advantage" in asdict(GAE._AcceptedKeys())
