"""ActionTokenizerTransform: tokens in, continuous actions to the env (and the reverse)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import ActionTokenizerTransform, PendulumEnv, TransformedEnv, check_env_specs
from rl_envs.vla import ACTION_TOKENS_KEY, UniformActionTokenizer


class Recorder(PendulumEnv):
    def _step(self, td):
        self.seen = td["action"].clone()
        return super()._step(td)


def test_env_reads_the_decoded_tokens():
    tok = UniformActionTokenizer(8, low=-2.0, high=2.0)
    env = TransformedEnv(Recorder(batch_size=[3]), ActionTokenizerTransform(tok))
    spec = env.full_action_spec[ACTION_TOKENS_KEY]
    assert spec.n == 8 and spec.dtype == torch.long and spec.shape == (3, 1)
    assert "action" not in env.full_action_spec.keys(True, True)
    check_env_specs(env)
    td = env.reset().set(ACTION_TOKENS_KEY, torch.tensor([[0], [4], [7]]))
    env.step(td)
    # bin centres of 8 bins over [-2, 2]: -2 + (k + 0.5) * 0.5
    assert env.base_env.seen.flatten().tolist() == [-1.75, 0.25, 1.75]
    with pytest.raises(KeyError, match="tokens"):
        env.step(env.reset().set("action", torch.zeros(3, 1)))


def test_forward_encodes_and_inverse_is_lenient_outside_an_env():
    t = ActionTokenizerTransform(UniformActionTokenizer(4, low=0.0, high=1.0))
    td = t(TensorDict(action=torch.tensor([[0.1, 0.3, 0.6, 0.99]]), batch_size=[1]))
    assert td[ACTION_TOKENS_KEY].tolist() == [[0, 1, 2, 3]]
    raw = TensorDict(action=torch.ones(1, 4), batch_size=[1])
    assert ACTION_TOKENS_KEY not in t.inv(raw).keys(True, True)
    back = t.inv(TensorDict({ACTION_TOKENS_KEY: torch.tensor([[0, 3]])}, batch_size=[1]))
    assert back["action"].tolist() == [[0.125, 0.875]]


def test_decode_mode_and_errors():
    tok = UniformActionTokenizer(4, low=0.0, high=1.0)
    t = ActionTokenizerTransform(tok, in_key="act", out_key="tok", mode="decode")
    assert t(TensorDict(tok=torch.tensor([1]), batch_size=[]))["act"].tolist() == [0.375]
    assert t.inv(TensorDict(act=torch.tensor([0.9]), batch_size=[]))["tok"].tolist() == [3]
    env = TransformedEnv(PendulumEnv(), ActionTokenizerTransform(tok, mode="decode"))
    assert "action" in env.full_action_spec.keys()  # noqa: SIM118 (a spec, not a dict)
    with pytest.raises(TypeError, match="tokenizer"):
        ActionTokenizerTransform(object())
    with pytest.raises(ValueError, match="mode"):
        ActionTokenizerTransform(tok, mode="both")
