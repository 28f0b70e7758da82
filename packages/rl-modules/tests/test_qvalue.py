"""Q-value heads against plain argmax / gather."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from rl_modules import (
    DistributionalQValueActor,
    DistributionalQValueHook,
    DistributionalQValueModule,
    QValueActor,
    QValueHook,
    QValueModule,
)

_spec = importlib.util.spec_from_file_location(
    "_specs", pathlib.Path(__file__).with_name("_specs.py")
)
specs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(specs)


@pytest.mark.parametrize(
    "space",
    ["categorical", "one_hot", specs.Categorical(5), specs.OneHot(5)],
    ids=["str-categorical", "str-one_hot", "spec-categorical", "spec-one_hot"],
)
def test_qvalue_actor_argmax_and_chosen_values(space):
    torch.manual_seed(0)
    net = nn.Linear(4, 5)
    kwargs = {"action_space": space} if isinstance(space, str) else {"spec": space}
    actor = QValueActor(net, in_keys=["observation"], **kwargs)
    obs = torch.randn(32, 4)
    td = actor(TensorDict(observation=obs, batch_size=[32]))
    values = net(obs)
    best = values.argmax(-1)
    one_hot = space == "one_hot" or isinstance(space, specs.OneHot)
    if one_hot:
        assert torch.equal(td["action"], nn.functional.one_hot(best, 5).to(td["action"].dtype))
    else:
        assert torch.equal(td["action"], best)
    torch.testing.assert_close(td["chosen_action_value"], values.max(-1, keepdim=True).values)
    torch.testing.assert_close(td["action_value"], values)


def test_qvalue_module_respects_mask():
    m = QValueModule(action_space="categorical", action_mask_key="action_mask")
    td = TensorDict(
        action_value=torch.tensor([[5.0, 1.0, 3.0]]),
        action_mask=torch.tensor([[False, True, True]]),
        batch_size=[1],
    )
    td = m(td)
    assert td["action"].item() == 2 and td["chosen_action_value"].item() == 3.0


def test_qvalue_errors():
    with pytest.raises(ValueError, match="action_space"):
        QValueModule()
    with pytest.raises(ValueError, match="unknown action space"):
        QValueModule(action_space="binary-ish")
    with pytest.raises(ValueError, match="cannot tell"):
        QValueModule(spec=specs.ShapeOnly())
    with pytest.raises(KeyError, match="action_value"):
        QValueModule(action_space="one_hot")(TensorDict(batch_size=[]))
    actor = QValueActor(nn.Linear(4, 2), action_space="categorical")
    with pytest.raises(KeyError, match="'observation'"):
        actor(TensorDict(pixels=torch.zeros(1, 4), batch_size=[1]))


def test_distributional_qvalue_expected_value_argmax():
    torch.manual_seed(0)
    support = torch.linspace(-2, 2, 7)
    net = nn.Sequential(nn.Linear(4, 7 * 3), nn.Unflatten(-1, (7, 3)))
    actor = DistributionalQValueActor(net, support=support, action_space="categorical")
    obs = torch.randn(16, 4)
    td = actor(TensorDict(observation=obs, batch_size=[16]))
    probs = torch.softmax(net(obs), dim=-2)
    q = (probs * support[:, None]).sum(-2)
    assert torch.equal(td["action"], q.argmax(-1))
    torch.testing.assert_close(td["action_value"].exp().sum(-2), torch.ones(16, 3))
    with pytest.raises(ValueError, match="n_atoms=7"):
        DistributionalQValueModule("categorical", support=support)(
            TensorDict(action_value=torch.zeros(2, 5, 3), batch_size=[2])
        )


def test_mult_one_hot_q_value_module_against_per_group_argmax():
    values = torch.tensor([[1.0, 5.0, 2.0, 0.5, -1.0], [3.0, 0.0, 1.0, 0.0, 2.0]])
    m = QValueModule(action_space="mult_one_hot", var_nums=[3, 2])
    td = m(TensorDict(action_value=values, batch_size=[2]))
    expected = torch.tensor([[0, 1, 0, 1, 0], [1, 0, 0, 0, 1]])
    assert torch.equal(td["action"], expected)
    torch.testing.assert_close(td["chosen_action_value"], torch.tensor([[5.5], [5.0]]))

    # group sizes read from a multi one-hot spec's nvec; dashed alias accepted
    class MultiOneHot:
        nvec = (3, 2)
        dtype = torch.long

    m = QValueModule(action_space="mult-one-hot", spec=MultiOneHot())
    assert torch.equal(m(TensorDict(action_value=values, batch_size=[2]))["action"], expected)
    assert QValueModule(spec=MultiOneHot()).action_space == "mult_one_hot"
    with pytest.raises(ValueError, match="var_nums"):
        QValueModule(action_space="mult_one_hot")(TensorDict(action_value=values, batch_size=[2]))
    with pytest.raises(ValueError, match="do not match"):
        QValueModule(action_space="one_hot", spec=MultiOneHot())
    with pytest.raises(ValueError, match="Neither action_space nor spec"):
        QValueModule()


def test_distributional_mult_one_hot_and_default_action_value_key():
    support = torch.tensor([0.0, 1.0])
    m = DistributionalQValueModule("mult_one_hot", support=support, var_nums=[2, 2])
    # expected values per action: p(atom=1)
    p1 = torch.tensor([[0.9, 0.2, 0.3, 0.6]])
    logp = torch.log(torch.stack([1 - p1, p1], -2))
    td = m(TensorDict(action_value=logp, batch_size=[1]))
    assert torch.equal(td["action"], torch.tensor([[1, 0, 0, 1]]))
    actor = QValueActor(torch.nn.Linear(4, 3), action_space="one_hot", action_value_key=None)
    assert actor(TensorDict(observation=torch.zeros(2, 4), batch_size=[2]))[
        "action_value"
    ].shape == (2, 3)


def test_q_value_heads_take_tensors_as_keywords_and_name_a_missing_mask():
    values = torch.tensor([[1.0, 3.0, 2.0]])
    action, action_value, chosen = QValueModule(action_space="categorical")(action_value=values)
    assert action.tolist() == [1] and chosen.tolist() == [[3.0]]
    torch.testing.assert_close(action_value, values)
    with pytest.raises(KeyError, match="Action mask key mask not found in TensorDict"):
        QValueModule(action_space="one_hot", action_mask_key="mask")(
            TensorDict(action_value=values, batch_size=[1])
        )


def test_q_value_hooks_on_a_plain_network():
    torch.manual_seed(0)
    net = nn.Linear(4, 5)
    obs = torch.randn(3, 4)
    ref = net(obs)
    handle = net.register_forward_hook(QValueHook("one_hot"))
    action, values, chosen = net(obs)
    handle.remove()
    torch.testing.assert_close(values, ref)
    assert torch.equal(action, nn.functional.one_hot(ref.argmax(-1), 5))
    torch.testing.assert_close(chosen, ref.max(-1, keepdim=True).values)
    with pytest.raises(ValueError, match="action_space was not specified/not compatible"):
        QValueHook("wrong")
    support = torch.tensor([-1.0, 0.0, 2.0])
    logp = torch.randn(2, 3, 5).log_softmax(-2)
    action, values = DistributionalQValueHook("categorical", support)(None, None, logp)
    expected = (logp.exp() * support[:, None]).sum(-2)
    assert torch.equal(action, expected.argmax(-1)) and values is logp


def test_qvalue_module_writes_masked_values_back_and_actor_takes_tensors():
    values = torch.tensor([[1.0, 5.0, 3.0], [2.0, 0.0, -1.0]])
    mask = torch.tensor([[True, False, True], [False, True, True]])
    td = QValueModule(action_space="categorical", action_mask_key="mask")(
        TensorDict(action_value=values.clone(), mask=mask, batch_size=[2])
    )
    lowest = torch.finfo(values.dtype).min
    torch.testing.assert_close(td["action_value"], torch.where(mask, values, lowest))
    assert td["action"].tolist() == [2, 1]
    actor = QValueActor(nn.Identity(), action_space="categorical")
    action, out_values, chosen = actor(values)
    assert action.tolist() == [1, 0] and torch.equal(out_values, values)
    torch.testing.assert_close(chosen, torch.tensor([[5.0], [2.0]]))
