"""VecNormV2 against a plain-torch reference of TorchRL's update and bias correction."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from rl_envs import PendulumEnv, TransformedEnv, VecNormV2, check_env_specs


def reference(xs: list[torch.Tensor], decay: float, eps: float, reduce: bool) -> list[torch.Tensor]:
    loc = var = None
    count, outs = 0, []
    for x in xs:
        if reduce:
            n, m, m2 = x.shape[0], x.mean(0), (x**2).mean(0)
        else:
            n, m, m2 = 1, x, x**2
        if loc is None:
            loc, var = torch.zeros_like(m), torch.zeros_like(m)
        count += n
        w = 1 - decay**n if decay != 1 else n / count
        loc = loc + w * (m - loc)
        var = var + w * (m2 - var)
        c = 1 - math.exp(count * math.log(decay)) if decay < 1 else 1.0
        scale = ((var - loc**2) / c).clamp_min(0).sqrt().clamp_min(eps)
        outs.append((x - loc / c) / scale)
    return outs


@pytest.mark.parametrize("decay", [0.9, 1.0])
@pytest.mark.parametrize("reduce", [False, True])
def test_matches_reference(decay: float, reduce: bool) -> None:
    torch.manual_seed(0)
    xs = [torch.randn(4, 3) * 2 + 1 for _ in range(6)]
    t = VecNormV2(in_keys=["obs"], decay=decay, reduce_batch_dims=reduce)
    got = [t(TensorDict(obs=x.clone(), batch_size=[4]))["obs"] for x in xs]
    for g, r in zip(got, reference(xs, decay, 1e-4, reduce), strict=True):
        torch.testing.assert_close(g, r)


def test_freeze_denorm_and_env() -> None:
    t = VecNormV2(in_keys=["obs"], out_keys=["obs_norm"], decay=1.0, reduce_batch_dims=True)
    x = torch.tensor([[1.0], [3.0]])
    t(TensorDict(obs=x, batch_size=[2]))
    frozen = t.frozen_copy()
    before = frozen.loc["obs"].clone()
    out = frozen(TensorDict(obs=torch.tensor([[100.0], [200.0]]), batch_size=[2]))
    assert torch.equal(frozen.loc["obs"], before) and not t.frozen
    back = frozen.denorm(TensorDict(obs_norm=out["obs_norm"], batch_size=[2]))
    torch.testing.assert_close(back["obs"], torch.tensor([[100.0], [200.0]]))
    env = TransformedEnv(PendulumEnv(), VecNormV2(in_keys=["observation", "reward"]))
    assert env.rollout(5).batch_size == (5,)
    check_env_specs(env)
    with pytest.raises(NotImplementedError, match="stateful=False"):
        VecNormV2(in_keys=["obs"], stateful=False)


def test_vecnorm_new_api_builds_vecnorm_v2() -> None:
    from rl_envs import VecNorm

    t = VecNorm(in_keys=["obs"], new_api=True, decay=0.5)
    assert type(t) is VecNormV2 and t.decay == 0.5
    old = VecNorm(in_keys=["obs"], new_api=False)
    assert type(old) is VecNorm and type(old.clone()) is VecNorm
    assert type(VecNorm(in_keys=["obs"])) is VecNorm
