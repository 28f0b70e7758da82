"""Hash: SHA-256 of strings (or a custom hash of tensors), with an inverse through a repertoire."""

from __future__ import annotations

import hashlib

import pytest
import torch
from tensordict import NonTensorData, TensorDict

from rl_envs import Hash, PendulumEnv, TransformedEnv, check_env_specs


def test_reproducible_hash_is_sha256() -> None:
    expected = list(hashlib.sha256(b"seedabc").digest())
    assert Hash.reproducible_hash("abc", "seed").tolist() == expected
    assert Hash.reproducible_hash(None).tolist() == list(hashlib.sha256(b"").digest())


def test_hash_of_non_tensor_data_and_its_inverse() -> None:
    t = Hash(in_keys=["text"], out_keys=["hash"], in_keys_inv=["back"], out_keys_inv=["hash"])
    td = t(TensorDict(text=NonTensorData("abc")))
    assert td["hash"].tolist() == list(hashlib.sha256(b"abc").digest())
    assert td["text"] == "abc"
    assert t.inv(TensorDict(hash=td["hash"]))["back"] == "abc"
    stack = torch.stack([NonTensorData("a"), NonTensorData("b")])
    fn = lambda xs: torch.stack([Hash.reproducible_hash(x) for x in xs])  # noqa: E731
    out = Hash(in_keys=["s"], out_keys=["h"], hash_fn=fn)(TensorDict(s=stack, batch_size=[2]))
    assert torch.equal(out["h"][1], Hash.reproducible_hash("b"))


def test_hash_in_env_with_custom_tensor_hash() -> None:
    fn = lambda x: (x * 1000).round().long().sum(-1, keepdim=True)  # noqa: E731
    env = TransformedEnv(PendulumEnv(), Hash(in_keys=["observation"], out_keys=["h"], hash_fn=fn))
    ro = env.rollout(3)
    assert torch.equal(ro["next", "h"], fn(ro["next", "observation"]))
    check_env_specs(env)


def test_hash_errors() -> None:
    with pytest.raises(ValueError, match="must return a tensor"):
        Hash(in_keys=["x"], out_keys=["h"], hash_fn=lambda x: 3)(TensorDict(x=torch.zeros(1)))
    with pytest.raises(RuntimeError, match="repertoire"):
        Hash(in_keys=["x"], out_keys=["h"]).get_input_from_hash(torch.zeros(32))
