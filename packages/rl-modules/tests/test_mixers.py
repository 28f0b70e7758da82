"""VDN and QMIX mixers against plain-torch formulas written per sample."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_modules import QMixer, VDNMixer


def test_vdn_sums_agents():
    q = torch.randn(4, 5, 3, 1)
    out = VDNMixer(n_agents=3, device="cpu")(q)
    assert out.shape == (4, 5, 1)
    expected = torch.stack([q[..., a, 0] for a in range(3)], 0).sum(0).unsqueeze(-1)
    torch.testing.assert_close(out, expected)


def _qmix_reference(mixer: QMixer, q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """One sample at a time, with explicit weight matrices."""
    out = []
    for qi, si in zip(q.reshape(-1, mixer.n_agents), s.reshape(-1, mixer.state_dim), strict=True):
        w1 = (mixer.hyper_w_1.weight @ si + mixer.hyper_w_1.bias).abs()
        w1 = w1.reshape(mixer.n_agents, mixer.embed_dim)
        b1 = mixer.hyper_b_1.weight @ si + mixer.hyper_b_1.bias
        hidden = torch.nn.functional.elu(qi @ w1 + b1)
        w2 = (mixer.hyper_w_final.weight @ si + mixer.hyper_w_final.bias).abs()
        lin1, lin2 = mixer.V[0], mixer.V[2]
        v = lin2.weight @ torch.relu(lin1.weight @ si + lin1.bias) + lin2.bias
        out.append(hidden @ w2 + v)
    return torch.stack(out).reshape(*q.shape[:-2], 1)


def test_qmixer_matches_per_sample_reference_and_is_monotonic():
    torch.manual_seed(0)
    mixer = QMixer(state_shape=(2, 3), mixing_embed_dim=8, n_agents=4, device="cpu")
    q = torch.randn(5, 7, 4, 1, requires_grad=True)
    s = torch.randn(5, 7, 2, 3)
    out = mixer(q, s)
    assert out.shape == (5, 7, 1)
    torch.testing.assert_close(out, _qmix_reference(mixer, q.detach(), s), rtol=1e-5, atol=1e-5)
    (grad,) = torch.autograd.grad(out.sum(), q)
    assert (grad >= 0).all()  # QMIX's monotonicity: dQ_tot / dQ_a >= 0


def test_mixers_in_tensordict_modules():
    n = 3
    td = TensorDict(
        {
            "agents": TensorDict({"chosen_action_value": torch.randn(6, n, 1)}, [6, n]),
            "state": torch.randn(6, 5),
        },
        [6],
    )
    vdn = TensorDictModule(
        VDNMixer(n), [("agents", "chosen_action_value")], ["chosen_action_value"]
    )
    torch.testing.assert_close(
        vdn(td.clone())["chosen_action_value"], td["agents", "chosen_action_value"].sum(-2)
    )
    qmix = TensorDictModule(
        QMixer((5,), 4, n), [("agents", "chosen_action_value"), "state"], ["chosen_action_value"]
    )
    assert qmix(td.clone())["chosen_action_value"].shape == (6, 1)


def test_mixers_refuse_wrong_shapes():
    vdn = VDNMixer(n_agents=3)
    with pytest.raises(ValueError, match=r"n_agents=3, 1\], got \(8, 2, 1\)"):
        vdn(torch.randn(8, 2, 1))
    with pytest.raises(ValueError, match="trailing"):
        vdn(torch.randn(8, 3))
    with pytest.raises(ValueError, match="expected 1 input"):
        vdn(torch.randn(8, 3, 1), torch.randn(8, 4))
    qmix = QMixer(state_shape=(4,), mixing_embed_dim=8, n_agents=3)
    with pytest.raises(ValueError, match="expected 2 input"):
        qmix(torch.randn(8, 3, 1))
    with pytest.raises(ValueError, match=r"expected state with ending shape \[4\]"):
        qmix(torch.randn(8, 3, 1), torch.randn(8, 5))
    # the state is checked first (as TorchRL), whatever the chosen values
    with pytest.raises(ValueError, match=r"expected state with ending shape"):
        qmix(torch.randn(8, 3, 3), torch.randn(8, 4, 1))
    with pytest.raises(ValueError, match=r"state of shape"):
        qmix(torch.randn(8, 3, 1), torch.randn(7, 4))
    with pytest.raises(ValueError, match="n_agents=3"):
        qmix(torch.randn(8, 4, 1), torch.randn(8, 4))
