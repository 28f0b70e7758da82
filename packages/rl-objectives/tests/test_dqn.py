"""DQN and C51 against hand-written plain-torch computations."""

from __future__ import annotations

import pytest
import torch
from objectives_testlib import N_ACT, make_action_value, transitions

from rl_objectives import DistributionalDQNLoss, DQNLoss, HardUpdate, SoftUpdate

# These checks build losses with target parameters and no updater (their numerics do not
# need one): TorchRL's warning about it is tested in test_target_updater_warning.py.
pytestmark = pytest.mark.filterwarnings("ignore:No target network updater:UserWarning")


@pytest.mark.parametrize("double_dqn", [False, True])
@pytest.mark.parametrize("action", ["categorical", "one_hot"])
def test_dqn_matches_plain_torch(double_dqn, action):
    net = make_action_value()
    loss = DQNLoss(net, action_space=action, double_dqn=double_dqn, gamma=0.9)
    with torch.no_grad():  # make target differ from online
        loss.target_value_network_params.apply(lambda p: p.add_(0.1))
    td = transitions(16, action=action)
    out = loss(td)
    q = net.module(td["observation"])
    idx = td["action"] if action == "categorical" else td["action"].float().argmax(-1)
    pred = q.gather(-1, idx.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        target_net = torch.func.functional_call(
            net.module, {k.removeprefix("module."): v for k, v in loss.target_value_network_params.flatten_keys(".").items()},
            (td["next", "observation"],),
        )  # fmt: skip
        if double_dqn:
            best = net.module(td["next", "observation"]).argmax(-1, keepdim=True)
            nv = target_net.gather(-1, best).squeeze(-1)
        else:
            nv = target_net.max(-1).values
        y = (
            td["next", "reward"].squeeze(-1)
            + 0.9 * (~td["next", "terminated"]).squeeze(-1).float() * nv
        )
    torch.testing.assert_close(out["loss"], ((pred - y) ** 2).mean())
    torch.testing.assert_close(td["td_error"], (pred - y).detach() ** 2)
    out["loss"].backward()
    assert all(p.grad is not None for p in net.parameters())
    assert all(p.grad is None for p in loss.target_value_network_params.values(True, True))


@pytest.mark.parametrize(
    ("spec_class", "expected"), [("OneHot", "one_hot"), ("Categorical", "categorical")]
)
def test_action_space_is_read_from_the_network_spec(spec_class, expected):
    net = make_action_value()
    net.spec = type(spec_class, (), {})()  # duck-typed spec: only its class name matters
    assert DQNLoss(net).action_space == expected


def test_targets_are_buffers_and_updaters_work():
    net = make_action_value()
    loss = DQNLoss(net, action_space="categorical")
    names = [n for n, _ in loss.named_parameters()]
    assert names and not any("target" in n for n in names)
    assert any("target" in k for k in loss.state_dict())
    online = loss.value_network_params.flatten_keys()
    target = loss.target_value_network_params.flatten_keys()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    soft = SoftUpdate(loss, tau=0.25)  # TorchRL: building the updater syncs the targets
    for k in target.keys():  # noqa: SIM118 (a TensorDict iterates over its batch)
        torch.testing.assert_close(target[k], online[k].data)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    before = target.clone()
    soft.step()
    for k in before.keys():  # noqa: SIM118
        torch.testing.assert_close(target[k], 0.75 * before[k] + 0.25 * online[k].data)
    hard = HardUpdate(loss, value_network_update_interval=2)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    first = next(iter(target.keys()))
    for expected_counter in (1, 2):  # no copy until the counter has reached the interval
        hard.step()
        assert hard.counter == expected_counter
        assert not torch.equal(target[first], online[first].data)
    hard.step()
    assert hard.counter == 0
    for k in target.keys():  # noqa: SIM118
        torch.testing.assert_close(target[k], online[k].data)
    with pytest.raises(RuntimeError, match="Did not find any target parameters"):
        SoftUpdate(
            DQNLoss(make_action_value(), action_space="categorical", delay_value=False), eps=0.9
        )
    with pytest.raises(ValueError, match="One and only one"):
        SoftUpdate(loss, eps=0.9, tau=0.1)
    with pytest.raises(RuntimeError, match="give eps"):
        SoftUpdate(loss)
    with pytest.raises(ValueError, match="must be a LossModule"):
        SoftUpdate(net, eps=0.9)


def test_reduction_and_priority_weights():
    td = transitions(8, action="categorical")
    none = DQNLoss(make_action_value(), action_space="categorical", reduction="none")
    assert none(td)["loss"].shape == (8,)
    loss = DQNLoss(make_action_value(), action_space="categorical", reduction="mean")
    per_sample = DQNLoss(loss.value_network, action_space="categorical", reduction="none")
    per_sample.target_value_network_params.update_(loss.target_value_network_params)
    w = torch.rand(8)
    td["priority_weight"] = w
    raw = per_sample(td.exclude("priority_weight"))["loss"]
    torch.testing.assert_close(loss(td)["loss"], (raw * w).sum() / w.sum())
    torch.testing.assert_close(per_sample(td)["loss"], raw * w)


def test_missing_action_names_key_and_fix():
    td = transitions(4, action="categorical")
    del td["action"]
    with pytest.raises(KeyError, match=r"'action'.*set_keys.action="):
        DQNLoss(make_action_value(), action_space="categorical")(td)


def _project_reference(probs, reward, discount, z):
    """The C51 projection, one atom at a time."""
    vmin, vmax, n = float(z[0]), float(z[-1]), z.numel()
    dz = (vmax - vmin) / (n - 1)
    out = torch.zeros_like(probs)
    for i in range(probs.shape[0]):
        for j in range(n):
            tz = min(max(float(reward[i]) + float(discount[i]) * float(z[j]), vmin), vmax)
            b = (tz - vmin) / dz
            lo, hi = int(b // 1), min(int(-(-b // 1)), n - 1)
            if lo == hi:
                out[i, lo] += probs[i, j]
            else:
                out[i, lo] += probs[i, j] * (hi - b)
                out[i, hi] += probs[i, j] * (b - lo)
    return out


def test_distributional_dqn_matches_reference():
    atoms = 5
    z = torch.linspace(-2, 2, atoms)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, atoms * N_ACT)

        def forward(self, x):
            return self.lin(x).view(*x.shape[:-1], atoms, N_ACT).log_softmax(-2)

    from tensordict.nn import TensorDictModule

    net = TensorDictModule(Net(), ["observation"], ["action_value"])
    loss = DistributionalDQNLoss(
        net, gamma=0.9, support=z, action_space="categorical", delay_value=False
    )
    td = transitions(6, action="categorical")
    out = loss(td)
    log_q = net.module(td["observation"])
    log_p = log_q[torch.arange(6), :, td["action"]]
    with torch.no_grad():
        nq = net.module(td["next", "observation"]).exp()
        best = (nq * z[:, None]).sum(-2).argmax(-1)
        p_next = nq[torch.arange(6), :, best]
        disc = 0.9 * (~td["next", "terminated"]).float().squeeze(-1)
        m = _project_reference(p_next, td["next", "reward"].squeeze(-1), disc, z)
    torch.testing.assert_close(out["loss"], -(m * log_p).sum(-1).mean())


def test_action_space_from_a_composite_spec_or_the_q_value_head():
    net = make_action_value()

    class OneHot:
        pass

    class Composite(dict):
        def keys(self, include_nested=False, leaves_only=False):
            return list(super().keys())

    net.spec = Composite(action=OneHot(), action_value=None)
    assert DQNLoss(net).action_space == "one_hot"

    class Head(torch.nn.Module):
        action_space = "categorical"

    wrapped = torch.nn.Sequential()
    wrapped.add_module("net", make_action_value())
    wrapped.add_module("head", Head())
    assert DQNLoss(wrapped).action_space == "categorical"


def test_distributional_dqn_action_space_from_its_head_and_td0_only():
    z = torch.linspace(-1, 1, 5)

    class Head(torch.nn.Module):  # a DistributionalQValueActor keeps the space on its head
        action_space = "categorical"

    wrapped = torch.nn.Sequential()
    wrapped.add_module("net", make_action_value())
    wrapped.add_module("head", Head())
    assert DistributionalDQNLoss(wrapped, gamma=0.9, support=z).action_space == "categorical"
    loss = DistributionalDQNLoss(make_action_value(), gamma=0.9, support=z, delay_value=False)
    assert loss.action_space == "one_hot"  # nothing to read it from: TorchRL's default
    loss.make_value_estimator()  # the default (TD(0)) is accepted, as TorchRL's
    loss.make_value_estimator("td0")
    for other in ("td1", "tdlambda", "gae", "vtrace"):
        with pytest.raises(NotImplementedError, match="TD0"):
            loss.make_value_estimator(other)
