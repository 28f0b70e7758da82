"""WorldModel: encoder / dynamics / heads routed by keys, checked against the same linear maps
applied by hand."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_modules import WorldModel


class _Cat(torch.nn.Module):
    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(n_in, n_out)

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.cat(xs, -1))


def _model(done_head: bool = False, decoder: bool = False) -> WorldModel:
    torch.manual_seed(0)
    enc = TensorDictModule(torch.nn.Linear(5, 3), ["observation"], ["latent"])
    dyn = TensorDictModule(_Cat(3 + 2, 3), ["latent", "action"], [("next", "latent")])
    rew = TensorDictModule(torch.nn.Linear(3, 1), [("next", "latent")], [("next", "reward")])
    done = TensorDictModule(lambda z: z[..., :1] > 0, [("next", "latent")], [("next", "done")])
    dec = TensorDictModule(torch.nn.Linear(3, 5), ["latent"], ["reconstruction"])
    return WorldModel(
        enc, dyn, rew, done_head=done if done_head else None, decoder=dec if decoder else None
    )


def _data() -> TensorDict:
    g = torch.Generator().manual_seed(1)
    return TensorDict(
        observation=torch.randn(4, 5, generator=g),
        action=torch.randn(4, 2, generator=g),
        batch_size=[4],
    )


def test_forward_matches_the_composed_maps():
    wm = _model(done_head=True, decoder=True)
    td = wm(_data())
    obs, act = _data()["observation"], _data()["action"]
    z = wm.encoder.module(obs)
    z2 = wm.dynamics.module.lin(torch.cat([z, act], -1))
    torch.testing.assert_close(td["latent"], z)
    torch.testing.assert_close(td["next", "latent"], z2)
    torch.testing.assert_close(td["next", "reward"], wm.reward_head.module(z2))
    assert torch.equal(td["next", "done"], z2[..., :1] > 0)
    torch.testing.assert_close(td["reconstruction"], wm.decoder.module(z))


def test_keys_are_the_components_keys():
    wm = _model()
    assert set(wm.in_keys) == {"observation", "action"}
    assert {"latent", ("next", "latent"), ("next", "reward")} <= set(wm.out_keys)


def test_step_does_not_encode_and_encode_does_not_step():
    wm = _model()
    encoded = wm.encode(_data())
    assert "latent" in encoded and "next" not in encoded
    start = TensorDict(latent=torch.zeros(4, 3), action=torch.zeros(4, 2), batch_size=[4])
    stepped = wm.step(start)
    torch.testing.assert_close(stepped["next", "latent"], wm.dynamics.module.lin.bias.expand(4, 3))
    via_module = wm.step_module(start.exclude("next"))
    torch.testing.assert_close(via_module["next", "reward"], stepped["next", "reward"])


def test_decode_needs_a_decoder():
    with pytest.raises(RuntimeError, match="decoder="):
        _model().decode(_model().encode(_data()))
    out = _model(decoder=True).decode(TensorDict(latent=torch.zeros(4, 3), batch_size=[4]))
    assert out["reconstruction"].shape == (4, 5)
