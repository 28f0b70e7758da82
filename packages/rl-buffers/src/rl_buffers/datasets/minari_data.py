"""Minari datasets stored locally: read episodes into TED transitions, write episodes as a dataset."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from rl_buffers.datasets._buffer import DatasetReplayBuffer
from rl_buffers.datasets.transitions import DatasetFormatError


def _minari() -> Any:
    try:
        import minari
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            "Minari datasets need the minari package: pip install 'rl-buffers[offline]'."
        ) from err
    return minari


@contextlib.contextmanager
def _datasets_path(root: str | Path | None) -> Iterator[None]:
    """Points Minari at ``root`` (its ``MINARI_DATASETS_PATH``) for the duration."""
    if root is None:
        yield
        return
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(Path(root).resolve())  # Minari joins it twice
    try:
        yield
    finally:
        if old is None:
            del os.environ["MINARI_DATASETS_PATH"]
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def _episode_transitions(episode: Any, index: int) -> TensorDict:
    obs = torch.as_tensor(np.asarray(episode.observations))
    steps = len(episode.rewards)
    if obs.shape[0] != steps + 1:
        raise DatasetFormatError(
            f"episode {index} has {obs.shape[0]} observations for {steps} steps; Minari stores "
            "steps + 1 (the last is the final next observation)."
        )
    terminated = torch.as_tensor(np.asarray(episode.terminations)).bool().reshape(steps, 1)
    truncated = torch.as_tensor(np.asarray(episode.truncations)).bool().reshape(steps, 1)
    zeros = torch.zeros(steps, 1, dtype=torch.bool)
    return TensorDict(
        {
            "observation": obs[:-1],
            "action": torch.as_tensor(np.asarray(episode.actions)),
            "episode": torch.full((steps,), index, dtype=torch.long),
            "done": zeros,
            "terminated": zeros.clone(),
            "truncated": zeros.clone(),
            "next": {
                "observation": obs[1:],
                "reward": torch.as_tensor(np.asarray(episode.rewards)).float().reshape(steps, 1),
                "done": terminated | truncated,
                "terminated": terminated,
                "truncated": truncated,
            },
        },
        batch_size=[steps],
    )


def load_minari_transitions(dataset_id: str, root: str | Path | None = None) -> TensorDict:
    """Every episode of a locally stored Minari dataset, as ``[N]`` TED transitions.

    Raises:
        FileNotFoundError: no such dataset under ``root`` (or Minari's default folder).
    """
    minari = _minari()
    with _datasets_path(root):
        if dataset_id not in minari.list_local_datasets():
            where = (
                root
                if root is not None
                else os.environ.get("MINARI_DATASETS_PATH", "~/.minari/datasets")
            )
            raise FileNotFoundError(
                f"Minari dataset {dataset_id!r} is not stored under {str(where)!r}; remote datasets "
                "cannot be downloaded here. Write one with rl_buffers.datasets.write_minari_dataset."
            )
        dataset = minari.load_dataset(dataset_id)
        parts = [_episode_transitions(ep, i) for i, ep in enumerate(dataset.iterate_episodes())]
    return torch.cat(parts)


def write_minari_dataset(dataset_id: str, episodes: Sequence[dict[str, Any]], *,
                         observation_space: Any, action_space: Any, root: str | Path | None = None,
                         algorithm_name: str | None = None) -> Path:  # fmt: skip
    """Writes episodes as a local Minari dataset (``<root>/<dataset_id>``).

    Each episode is a dict of arrays: ``observations`` (``T + 1`` entries), ``actions``,
    ``rewards``, ``terminations``, ``truncations`` (``T`` each). The spaces are
    Gymnasium spaces. Minari ids are ``namespace/name-v0``.
    """
    minari = _minari()
    from minari.data_collector import EpisodeBuffer

    buffers = []
    for i, ep in enumerate(episodes):
        steps = len(ep["rewards"])
        if len(ep["observations"]) != steps + 1:
            raise DatasetFormatError(
                f"episode {i}: 'observations' has {len(ep['observations'])} entries for {steps} "
                "steps; Minari needs steps + 1 (the final next observation)."
            )
        buffers.append(EpisodeBuffer(
            id=i, observations=list(ep["observations"]), actions=list(ep["actions"]),
            rewards=list(ep["rewards"]), terminations=list(ep["terminations"]),
            truncations=list(ep["truncations"]), infos={},
        ))  # fmt: skip
    with _datasets_path(root), warnings.catch_warnings():
        # Minari warns that no env / eval env / env spec is given: the spaces stand for them.
        warnings.simplefilter("ignore", UserWarning)
        minari.create_dataset_from_buffers(
            dataset_id, buffers, observation_space=observation_space, action_space=action_space,
            algorithm_name=algorithm_name,
        )  # fmt: skip
    base = Path(root) if root is not None else Path.home() / ".minari" / "datasets"
    return base / dataset_id


class MinariExperienceReplay(DatasetReplayBuffer):
    """A locally stored Minari dataset as a replay buffer of TED transitions (TorchRL's name).

    Args:
        dataset_id: the Minari id, e.g. ``"mujoco/halfcheetah/medium-v0"``.
        batch_size: the default of :meth:`sample`.
        root: Minari's datasets folder (default: ``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``).
        download: TorchRL's flag; a dataset not stored locally raises either way (no network here).
        **kwargs: as :class:`DatasetReplayBuffer`.
    """

    def __init__(self, dataset_id: str, batch_size: int | None = None, *, root: str | Path | None = None,
                 download: bool = True, **kwargs: Any) -> None:  # fmt: skip
        self.dataset_id = dataset_id
        self.root = root
        super().__init__(load_minari_transitions(dataset_id, root), batch_size, **kwargs)
