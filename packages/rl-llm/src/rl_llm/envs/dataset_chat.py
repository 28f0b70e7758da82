"""``DatasetChatEnv``: a :class:`ChatEnv` whose resets draw prompts from a dataset."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_llm.envs.chat import ChatEnv


class DatasetChatEnv(ChatEnv):
    """A chat env fed by a dataset of prompts (RL with verifiable rewards, RLHF).

    Each reset draws the next samples: dicts holding the query under ``data_key``
    (a ``"text"`` entry is renamed to ``"query"``, as TorchRL's default collate does)
    and any other entries (e.g. ``"answer"``), which are copied into the env's
    TensorDict for reward transforms to read. With ``repeats=R`` each sample is used
    ``R`` times in a row, so that a GRPO group of ``R`` replies shares one prompt;
    ``group_repeats=True`` additionally checks that each reset of the whole batch
    holds whole groups (``num_envs`` a multiple of ``R``).

    Nothing is downloaded: pass a local ``datasets.Dataset`` (e.g. from
    ``datasets.load_from_disk`` or ``Dataset.from_list``), any sequence of dicts
    (shuffled per epoch with ``shuffle=True``) or any iterable of dicts (read in order;
    a one-shot iterator raises once exhausted).

    Args:
        dataset: the samples (see above).
        shuffle: reshuffle a sized dataset at each epoch.
        num_envs: the batch size ``B`` of the env.
        repeats: use each sample this many times in a row.
        seed: seed of the shuffling (``None``: drawn from torch's generator).
        group_repeats: check that each full reset holds whole groups of ``repeats``.
        tokenizer, template_kwargs, input_mode, data_key, system_prompt, device,
        max_turns: as in :class:`ChatEnv`.

    Examples:
        >>> env = DatasetChatEnv(dataset=[{"query": "1+1=", "answer": "2"}, {"query": "2+3=", "answer": "5"}],
        ...     num_envs=4, repeats=2, group_repeats=True, shuffle=False, max_turns=1)
        >>> td = env.reset()
        >>> list(td["query"]), list(td["answer"])
        (['1+1=', '1+1=', '2+3=', '2+3='], ['2', '2', '5', '5'])
    """

    def __init__(
        self,
        *,
        dataset: Iterable[Mapping[str, Any]],
        shuffle: bool = True,
        num_envs: int = 1,
        repeats: int | None = None,
        seed: int | None = None,
        group_repeats: bool = False,
        tokenizer: Any = None,
        device: torch.device | str | None = None,
        template_kwargs: dict[str, Any] | None = None,
        input_mode: str = "history",
        data_key: str | None = None,
        system_prompt: str | None = None,
        max_turns: int | None = None,
    ) -> None:
        super().__init__(
            input_mode=input_mode,
            batch_size=(num_envs,),
            system_prompt=system_prompt,
            tokenizer=tokenizer,
            template_kwargs=template_kwargs,
            data_key=data_key,
            device=device,
            max_turns=max_turns,
        )
        if isinstance(dataset, (str, bytes)):
            raise TypeError(
                f"DatasetChatEnv: dataset={dataset!r} is a name; nothing is downloaded here. Load it "
                "yourself (datasets.load_from_disk(path), Dataset.from_list(rows)) and pass the dataset."
            )
        if not isinstance(dataset, Iterable):
            raise TypeError(
                f"DatasetChatEnv: dataset must be an iterable of dicts; got {type(dataset).__name__}."
            )
        repeats = 1 if repeats is None else repeats
        if repeats <= 0:
            raise ValueError(f"DatasetChatEnv: repeats must be None or > 0; got {repeats}.")
        if group_repeats and num_envs % repeats:
            raise ValueError(
                f"DatasetChatEnv: group_repeats=True needs num_envs ({num_envs}) to be a multiple of "
                f"repeats ({repeats}) so that each reset holds whole groups."
            )
        self.dataset = dataset
        self.shuffle = shuffle
        self.repeats = repeats
        self.group_repeats = group_repeats
        self._sized = hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")
        if self._sized and len(dataset) == 0:
            raise ValueError("DatasetChatEnv: the dataset is empty.")
        self._generator = torch.Generator()
        self._generator.manual_seed(int(torch.randint(2**62, ()).item()) if seed is None else seed)
        self._queue: deque[dict[str, Any]] = deque()
        self._samples: Iterator[Mapping[str, Any]] | None = None
        self._drawn = 0

    def reset_dataloader(self) -> DatasetChatEnv:
        """Starts the dataset over (a new epoch, pending repeats dropped); returns the env."""
        self._queue.clear()
        self._samples = None
        return self

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seeds the shuffling and starts the dataset over."""
        self._generator.manual_seed(seed)
        self.reset_dataloader()
        return super().set_seed(seed, static_seed)

    def _epoch(self) -> Iterator[Mapping[str, Any]]:
        if self._sized:
            n = len(self.dataset)
            order = (
                torch.randperm(n, generator=self._generator) if self.shuffle else torch.arange(n)
            )
            return (self.dataset[int(i)] for i in order)
        return iter(self.dataset)

    def _next_sample(self) -> dict[str, Any]:
        if self._samples is None:
            self._samples = self._epoch()
        try:
            sample = next(self._samples)
        except StopIteration:
            self._samples = self._epoch()
            try:
                sample = next(self._samples)
            except StopIteration:
                raise RuntimeError(
                    "DatasetChatEnv: the dataset gave no sample; a one-shot iterator is exhausted after "
                    "one pass, pass a list or a datasets.Dataset to iterate over it again."
                ) from None
        return self._check_sample(sample)

    def _check_sample(self, sample: Any) -> dict[str, Any]:
        if not isinstance(sample, Mapping):
            raise TypeError(
                f"DatasetChatEnv: samples must be dicts; got {type(sample).__name__}: {sample!r}."
            )
        sample = dict(sample)
        if self.data_key not in sample and self.data_key == "query" and "text" in sample:
            sample["query"] = sample.pop("text")
        if self.data_key not in sample:
            raise KeyError(
                f"DatasetChatEnv: a sample lacks the query key {self.data_key!r}; its keys are "
                f"{sorted(sample)}. Pass data_key=... to name the entry that holds the prompt."
            )
        for key, value in sample.items():
            if not isinstance(value, str):
                raise TypeError(
                    f"DatasetChatEnv: sample entry {key!r} must be a str (prompts and answers are text); "
                    f"got {type(value).__name__}: {value!r}."
                )
        return sample

    def _draw(self, count: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(count):
            if not self._queue:
                sample = self._next_sample()
                self._queue.extend(dict(sample) for _ in range(self.repeats))
            out.append(self._queue.popleft())
        self._drawn += count
        return out

    def _reset_data(
        self, tensordict: TensorDictBase | None, rows: list[int]
    ) -> list[dict[str, Any]]:
        if self.group_repeats and len(rows) == self.batch_size[0] and self._queue:
            # A previous partial reset left a group half used: start the batch on a new group.
            self._queue.clear()
        return self._draw(len(rows))
