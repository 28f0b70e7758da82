"""Bridges to Hugging Face trainers: a replay buffer as an iterable dataset, a reward model as a module.

:class:`TorchRLBufferDataset` streams samples of any replay buffer (anything with
``sample(batch_size)`` returning a TensorDict) as plain ``dict`` rows, the form TRL's
trainers and ``datasets`` read; :class:`HFRewardModelWrapper` turns a sequence-classification
model (one logit per sequence) into a TensorDict module writing one reward per row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
from tensordict import NestedKey, NonTensorData, NonTensorStack, TensorDictBase
from tensordict.nn import TensorDictModuleBase


def _flat_name(key: NestedKey) -> str:
    return key if isinstance(key, str) else ".".join(key)


def _is_leaf(cls: type) -> bool:
    # non-tensor entries (strings) are leaves too, not sub-TensorDicts
    return not issubclass(cls, TensorDictBase) or issubclass(cls, (NonTensorData, NonTensorStack))


def _plain(value: Any) -> Any:
    if isinstance(value, (NonTensorData, NonTensorStack)):
        return value.tolist()
    return value


class TorchRLBufferDataset(torch.utils.data.IterableDataset):
    """A replay buffer as an iterable of ``dict`` rows (for TRL / ``datasets``).

    Each replay batch of ``batch_size`` is split into its rows; a row is a ``dict`` from
    flat key names (``("tokens", "full")`` becomes ``"tokens.full"``) to tensors, or to
    Python values for non-tensor entries (prompts as ``str``).

    Args:
        replay_buffer: any buffer with ``sample(batch_size)`` returning a TensorDict.
        batch_size: rows per replay sample (> 0).
        keys: the entries to yield (default: every leaf).
        device: where tensors are moved (default: left where they are).
        num_batches: replay samples per iteration (default 1); ``None`` streams forever.

    Raises:
        TypeError: if ``replay_buffer`` cannot ``sample``.
        ValueError: for a non-positive ``batch_size`` or ``num_batches``.

    Examples:
        >>> from tensordict import TensorDict
        >>> class Buffer:
        ...     def sample(self, n):
        ...         return TensorDict({"input_ids": torch.zeros(n, 3, dtype=torch.long)}, [n])
        >>> [row["input_ids"].shape for row in TorchRLBufferDataset(Buffer(), batch_size=2)]
        [torch.Size([3]), torch.Size([3])]
    """

    def __init__(
        self,
        replay_buffer: Any,
        batch_size: int,
        *,
        keys: Sequence[NestedKey] | None = None,
        device: torch.device | str | None = None,
        num_batches: int | None = 1,
    ) -> None:
        super().__init__()
        if not callable(getattr(replay_buffer, "sample", None)):
            raise TypeError(
                f"TorchRLBufferDataset reads a ReplayBuffer (an object with sample(batch_size)), got "
                f"{type(replay_buffer).__name__}."
            )
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
        if num_batches is not None and (not isinstance(num_batches, int) or num_batches <= 0):
            raise ValueError(
                f"num_batches must be a positive integer (or None to stream forever), got {num_batches!r}."
            )
        self.replay_buffer = replay_buffer
        self.batch_size = batch_size
        self.keys = list(keys) if keys is not None else None
        self.device = torch.device(device) if device is not None else None
        self.num_batches = num_batches

    def _rows(self, batch: TensorDictBase) -> Iterator[dict[str, Any]]:
        keys = self.keys
        if keys is None:
            keys = list(batch.keys(True, True, is_leaf=_is_leaf))
        for row in batch.unbind(0):
            out = {}
            for key in keys:
                value = _plain(row.get(key))
                if self.device is not None and isinstance(value, torch.Tensor):
                    value = value.to(self.device)
                out[_flat_name(key)] = value
            yield out

    def __iter__(self) -> Iterator[dict[str, Any]]:
        done = 0
        while self.num_batches is None or done < self.num_batches:
            yield from self._rows(self.replay_buffer.sample(self.batch_size))
            done += 1

    def as_hf_dataset(self) -> Any:
        """The same stream as a ``datasets.IterableDataset`` (the type TRL's trainers take)."""
        from datasets import IterableDataset

        return IterableDataset.from_generator(self.__iter__)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(replay_buffer={type(self.replay_buffer).__name__}, "
            f"batch_size={self.batch_size}, keys={self.keys}, num_batches={self.num_batches})"
        )


class HFRewardModelWrapper(TensorDictModuleBase):
    """A Hugging Face reward model (one logit per sequence) as a TensorDict module.

    Reads token ids (``[B, L]``) and, unless ``attention_mask_key`` is ``None``, their
    attention mask; calls ``model(input_ids=..., attention_mask=...)`` and writes the
    scalar rewards (float32 ``[B]``) at ``reward_key``. The model's output may be a
    tensor, an object with ``.logits`` or a mapping with ``"logits"``, of shape ``[B]``
    or ``[B, 1]``.

    Args:
        model: e.g. ``AutoModelForSequenceClassification`` with ``num_labels=1``.
        token_key: token ids. Defaults to ``("tokens", "full")``.
        attention_mask_key: the mask, or ``None`` to call the model without one.
            Defaults to ``("masks", "all_attention_mask")``.
        reward_key: where rewards go. Defaults to ``"reward"``.
        inference_mode: run the model without gradients (the rewards stay usable in
            later autograd graphs).

    Raises:
        KeyError: when an input entry is missing (from ``forward``).
        RuntimeError: when no reward can be read from the output, or it is not one scalar per row.

    Examples:
        >>> from tensordict import TensorDict
        >>> class Model(torch.nn.Module):
        ...     def forward(self, input_ids, attention_mask=None):
        ...         return input_ids.float().sum(-1, keepdim=True)
        >>> rm = HFRewardModelWrapper(Model(), token_key="ids", attention_mask_key=None)
        >>> rm(TensorDict(ids=torch.ones(2, 3, dtype=torch.long), batch_size=[2]))["reward"]
        tensor([3., 3.])
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        token_key: NestedKey = ("tokens", "full"),
        attention_mask_key: NestedKey | None = ("masks", "all_attention_mask"),
        reward_key: NestedKey = "reward",
        inference_mode: bool = False,
    ) -> None:
        super().__init__()
        self.model = model
        self.token_key = token_key
        self.attention_mask_key = attention_mask_key
        self.reward_key = reward_key
        self.inference_mode = inference_mode
        self.in_keys = [token_key] + (
            [attention_mask_key] if attention_mask_key is not None else []
        )
        self.out_keys = [reward_key]

    def _read(self, td: TensorDictBase, key: NestedKey) -> torch.Tensor:
        value = td.get(key, None)
        if value is None:
            raise KeyError(
                f"HFRewardModelWrapper reads {key!r}, which is missing; keys present: "
                f"{sorted(map(str, td.keys(True, True)))}."
            )
        return value

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes one reward per row of ``tensordict``."""
        kwargs = {"input_ids": self._read(tensordict, self.token_key)}
        if self.attention_mask_key is not None:
            kwargs["attention_mask"] = self._read(tensordict, self.attention_mask_key)
        with torch.no_grad() if self.inference_mode else torch.enable_grad():
            output = self.model(**kwargs)
        logits = output
        if isinstance(output, dict) or hasattr(output, "keys"):
            logits = output.get("logits", None) if hasattr(output, "get") else None
        elif not isinstance(output, torch.Tensor):
            logits = getattr(output, "logits", None)
        if not isinstance(logits, torch.Tensor):
            raise RuntimeError(
                f"HFRewardModelWrapper could not extract rewards from the model's output "
                f"({type(output).__name__}): expected a tensor, an object with .logits or a dict with 'logits'."
            )
        rows = kwargs["input_ids"].shape[0]
        if logits.numel() != rows or logits.shape[0] != rows:
            raise RuntimeError(
                f"HFRewardModelWrapper expects one scalar reward per input row ({rows}), got logits of shape "
                f"{tuple(logits.shape)}; use a model with num_labels=1."
            )
        tensordict.set(self.reward_key, logits.reshape(rows).float())
        return tensordict
