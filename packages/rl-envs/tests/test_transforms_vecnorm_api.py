"""VecNorm / VecNormV2: TorchRL's loc / scale / denorm / frozen_copy / to_observation_norm."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import VecNorm, VecNormV2

KEYS = ["a", ("b", "c")]
OUT = ["a_avg", ("b", "c_avg")]


def _td(shift=0.0):
    torch.manual_seed(0)
    return TensorDict({"a": torch.randn(3, 4) + shift, ("b", "c"): torch.randn(3, 4)}, [3, 4])


@pytest.mark.parametrize("cls", [VecNorm, VecNormV2])
def test_frozen_copy_needs_statistics(cls):
    with pytest.raises(RuntimeError, match="Make sure the VecNorm has been initialized"):
        cls(in_keys=KEYS, out_keys=OUT).frozen_copy()


def test_vecnorm_frozen_copy_reads_the_live_statistics():
    live = VecNorm(in_keys=KEYS, out_keys=OUT)
    first = live._step(_td(), _td())
    frozen = live.frozen_copy()
    torch.testing.assert_close(frozen._step(_td(), _td())["a_avg"], first["a_avg"])
    updated = live._step(_td(1.0), _td(1.0))  # only the live one updates ...
    seen = frozen._step(_td(1.0), _td(1.0))  # ... and the frozen copy normalises with it
    torch.testing.assert_close(seen["a_avg"], updated["a_avg"])
    assert frozen.frozen


@pytest.mark.parametrize("cls", [VecNorm, VecNormV2])
def test_loc_scale_and_observation_norm_agree(cls):
    t = cls(in_keys=KEYS, out_keys=OUT)
    out = t._step(_td(), _td())
    assert set(t.loc.keys(True, True)) == {"a", ("b", "c")}
    expected = (_td().select(*KEYS) - t.loc) / t.scale
    torch.testing.assert_close(out["a_avg"], expected["a"], atol=1e-4, rtol=1e-4)
    again = t.to_observation_norm()._step(_td(), _td())
    torch.testing.assert_close(again["a_avg"], out["a_avg"], atol=1e-4, rtol=1e-4)


def test_vecnorm_denorm_recovers_the_input():
    t = VecNorm(in_keys=["observation"])
    original = TensorDict({"observation": torch.randn(10, 1)}, [10])
    normed = original.clone()
    t._step(normed, normed)
    torch.testing.assert_close(t.denorm(normed)["observation"], original["observation"])


def test_vecnorm_scalar_per_sample_entries():
    t = VecNorm(in_keys=["r"])
    out = t._step(
        TensorDict(r=torch.randn(5), batch_size=[5]), TensorDict(r=torch.randn(5), batch_size=[5])
    )
    assert out["r"].shape == (5,)
