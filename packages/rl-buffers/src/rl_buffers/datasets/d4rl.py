"""D4RL-format HDF5 files: read into TED transitions, write from arrays, serve as a replay buffer."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rl_buffers.datasets._buffer import DatasetReplayBuffer
from rl_buffers.datasets.transitions import DatasetFormatError, transitions_from_arrays

D4RL_FIELDS = ("observations", "actions", "rewards", "terminals", "timeouts", "next_observations")


def _h5py() -> Any:
    try:
        import h5py
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            "reading D4RL HDF5 files needs h5py: pip install 'rl-buffers[offline]'."
        ) from err
    return h5py


def read_d4rl_hdf5(path: str | Path) -> dict[str, np.ndarray]:
    """The top-level D4RL arrays of an HDF5 file (``observations``, ``actions``, ...).

    Raises:
        FileNotFoundError: no file at ``path``.
        DatasetFormatError: the file is not HDF5 or has no ``observations``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no D4RL dataset file at {str(path)!r}.")
    h5py = _h5py()
    try:
        with h5py.File(path, "r") as f:
            return {name: f[name][()] for name in D4RL_FIELDS if name in f}
    except OSError as err:
        raise DatasetFormatError(f"{str(path)!r} is not a readable HDF5 file: {err}") from err


def write_d4rl_hdf5(path: str | Path, fields: Mapping[str, Any]) -> Path:
    """Writes D4RL-named arrays (``observations``, ``actions``, ``rewards``, ``terminals``,
    ``timeouts``, optional ``next_observations``) to an HDF5 file, after checking them.

    Examples:
        >>> import numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "toy-v0.hdf5")
        >>> _ = write_d4rl_hdf5(path, {"observations": np.zeros((3, 2)), "actions": np.zeros((3, 1)),
        ...     "rewards": np.ones(3), "terminals": [0, 0, 1], "timeouts": [0, 0, 0]})
        >>> sorted(read_d4rl_hdf5(path))
        ['actions', 'observations', 'rewards', 'terminals', 'timeouts']
    """
    transitions_from_arrays(fields)  # refuse inconsistent data before writing a file
    h5py = _h5py()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        for name in D4RL_FIELDS:
            if name in fields:
                value = np.asarray(fields[name])
                if name in ("terminals", "timeouts"):
                    value = value.astype(bool)
                f.create_dataset(name, data=value, compression="gzip")
    return path


def _default_root() -> Path:
    return Path(os.environ.get("D4RL_DATASET_DIR", Path.home() / ".d4rl" / "datasets"))


class D4RLExperienceReplay(DatasetReplayBuffer):
    """A D4RL dataset from a local HDF5 file, as a replay buffer of TED transitions (TorchRL's name).

    The file is ``<root>/<dataset_id>.hdf5`` (D4RL's own cache layout; ``root``
    defaults to ``$D4RL_DATASET_DIR`` or ``~/.d4rl/datasets``). Nothing is ever
    downloaded: generate files with ``recipes/make_dataset.py`` or copy them there.

    Args:
        dataset_id: e.g. ``"halfcheetah-medium-v2"``.
        batch_size: the default of :meth:`sample`.
        root: the folder holding the file.
        download: TorchRL's flag; a missing file raises either way (no network here).
        use_truncated_as_done: ``("next", "done") = terminated | truncated`` (default) or ``terminated``.
        **kwargs: as :class:`DatasetReplayBuffer` (``sampler``, ``writer``, ``transform``, ...).

    Examples:
        >>> import numpy as np, tempfile
        >>> root = tempfile.mkdtemp()
        >>> _ = write_d4rl_hdf5(f"{root}/toy-v0.hdf5", {"observations": np.zeros((4, 2)),
        ...     "actions": np.zeros((4, 1)), "rewards": np.ones(4), "terminals": [0, 1, 0, 1]})
        >>> rb = D4RLExperienceReplay("toy-v0", batch_size=2, root=root)
        >>> len(rb), rb.sample()["next", "reward"].shape
        (4, torch.Size([2, 1]))
    """

    def __init__(self, dataset_id: str, batch_size: int | None = None, *, root: str | Path | None = None,
                 download: bool = True, use_truncated_as_done: bool = True, **kwargs: Any) -> None:  # fmt: skip
        self.dataset_id = dataset_id
        self.root = Path(root) if root is not None else _default_root()
        path = self.root / f"{dataset_id}.hdf5"
        if not path.is_file():
            raise FileNotFoundError(
                f"D4RL dataset {dataset_id!r} not found at {str(path)!r}; datasets cannot be "
                "downloaded here. Generate one with `uv run recipes/make_dataset.py` or copy the "
                "HDF5 file there (root= or $D4RL_DATASET_DIR chooses the folder)."
            )
        data = transitions_from_arrays(
            read_d4rl_hdf5(path), use_truncated_as_done=use_truncated_as_done
        )
        super().__init__(data, batch_size, **kwargs)
