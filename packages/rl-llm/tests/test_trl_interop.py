"""TorchRLBufferDataset (replay buffer -> dict rows) and HFRewardModelWrapper (reward model -> module)."""

from __future__ import annotations

import itertools

import pytest
import torch
from tensordict import TensorDict

from rl_llm import HFRewardModelWrapper, TorchRLBufferDataset


class _Buffer:
    """The replay-buffer surface the dataset uses: sample(batch_size) -> TensorDict."""

    def sample(self, n):
        return TensorDict(
            {
                "prompt": [f"q{i}" for i in range(n)],
                "tokens": TensorDict({"full": torch.arange(3).expand(n, 3)}, [n]),
            },
            batch_size=[n],
        )


def test_dataset_rows_flat_keys_strings_and_batches():
    rows = list(TorchRLBufferDataset(_Buffer(), batch_size=2, num_batches=2))
    assert len(rows) == 4
    assert set(rows[0]) == {"prompt", "tokens.full"}
    assert rows[0]["prompt"] == "q0" and rows[0]["tokens.full"].shape == (3,)
    only = next(iter(TorchRLBufferDataset(_Buffer(), batch_size=1, keys=[("tokens", "full")])))
    assert set(only) == {"tokens.full"}
    assert len(list(itertools.islice(TorchRLBufferDataset(_Buffer(), 2, num_batches=None), 5))) == 5
    assert "TorchRLBufferDataset" in repr(TorchRLBufferDataset(_Buffer(), 2))


def test_dataset_validation():
    with pytest.raises(TypeError, match="ReplayBuffer"):
        TorchRLBufferDataset("nope", batch_size=2)
    with pytest.raises(ValueError, match="positive integer"):
        TorchRLBufferDataset(_Buffer(), batch_size=0)
    with pytest.raises(ValueError, match="num_batches"):
        TorchRLBufferDataset(_Buffer(), batch_size=2, num_batches=0)


class _Scorer(torch.nn.Module):
    def __init__(self, width=1, kind="object"):
        super().__init__()
        self.width, self.kind, self.grad = width, kind, None

    def forward(self, input_ids, attention_mask=None):
        self.grad = torch.is_grad_enabled()
        logits = input_ids.float().sum(-1, keepdim=True).expand(-1, self.width)
        if self.kind == "dict":
            return {"logits": logits}
        if self.kind == "object":
            return type("Out", (), {"logits": logits})()
        return "garbage"


def test_reward_wrapper_reads_tokens_and_mask_and_writes_rewards():
    td = TensorDict(
        {
            ("tokens", "full"): torch.ones(2, 4, dtype=torch.long),
            ("masks", "all_attention_mask"): torch.ones(2, 4, dtype=torch.long),
        },
        batch_size=[2],
    )
    out = HFRewardModelWrapper(_Scorer(kind="dict"), reward_key=("reward", "value"))(td)
    assert out["reward", "value"].tolist() == [4.0, 4.0]
    assert out["reward", "value"].dtype == torch.float32


def test_reward_wrapper_errors_and_no_grad():
    td = TensorDict({"ids": torch.ones(2, 4, dtype=torch.long)}, batch_size=[2])
    with pytest.raises(KeyError, match="attention_mask"):
        HFRewardModelWrapper(_Scorer(), token_key="ids", attention_mask_key="attention_mask")(td)
    with pytest.raises(KeyError, match="input_ids"):
        HFRewardModelWrapper(_Scorer(), token_key="input_ids", attention_mask_key=None)(td)
    with pytest.raises(RuntimeError, match="one scalar reward per input"):
        HFRewardModelWrapper(_Scorer(width=2), token_key="ids", attention_mask_key=None)(td)
    with pytest.raises(RuntimeError, match="could not extract reward"):
        HFRewardModelWrapper(_Scorer(kind="bad"), token_key="ids", attention_mask_key=None)(td)
    scorer = _Scorer()
    HFRewardModelWrapper(scorer, token_key="ids", attention_mask_key=None, inference_mode=True)(td)
    assert scorer.grad is False
