"""Storage checkpointers: the on-disk format ``rb.dumps`` / ``rb.loads`` use for a storage.

Set one on a tensor storage of TensorDicts (``rb.storage.checkpointer =
NestedStorageCheckpointer()``); without one the storage writes its own
``torch.save`` file. Every format keeps the stored items, the write cursor and
the layout, so the loaded buffer reads and writes as the saved one:

- :class:`NestedStorageCheckpointer`: a memory-mapped TensorDict, one folder per
  nested key (``next/observation.memmap``), readable with
  ``TensorDict.load_memmap``.
- :class:`FlatStorageCheckpointer`: the same with the keys flattened into one
  folder (``next.observation.memmap``).
- :class:`H5StorageCheckpointer`: one HDF5 file, a dataset per flattened key
  (needs ``h5py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rl_buffers._layout import Layout

_META = "storage_meta.pt"


class StorageCheckpointerBase:
    """Writes a tensor storage of TensorDicts to a folder and reads it back.

    Subclasses say how the stored TensorDict is written (:meth:`write_data`) and
    read (:meth:`read_data`); the cursor, fill level and layout go to a small
    metadata file beside it.
    """

    def write_data(self, data: TensorDictBase, path: Path) -> None:
        raise NotImplementedError

    def read_data(self, path: Path) -> TensorDictBase:
        raise NotImplementedError

    def dumps(self, storage: Any, path: str | Path) -> None:
        """Saves ``storage`` (contents and write state) into folder ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = storage.state_dict()
        if state["layout"] is not None:
            layout = Layout.from_meta(state["layout"], state["treespec"])
            if layout.kind != "tensordict":
                raise TypeError(
                    f"{type(self).__name__} saves storages of TensorDicts; this one holds "
                    f"{layout.kind} data: remove the checkpointer (storage.checkpointer = None)."
                )
            leaves = state.pop("leaves")
            batch = leaves[0].shape[: storage.ndim] if leaves else torch.Size([0])
            self.write_data(layout.build(leaves, batch), path)
        torch.save(state, path / _META)

    def loads(self, storage: Any, path: str | Path) -> None:
        """Restores into ``storage`` what :meth:`dumps` saved at ``path``."""
        path = Path(path)
        if not (path / _META).exists():
            raise FileNotFoundError(
                f"{str(path)!r} holds no storage saved by {type(self).__name__} (no {_META})."
            )
        state = torch.load(path / _META, weights_only=False)
        if state["layout"] is not None:
            layout = Layout.from_meta(state["layout"], state["treespec"])
            data = self.read_data(path)
            state["leaves"] = [data.get(key).contiguous() for key in layout.keys]
        storage.load_state_dict(state)


class NestedStorageCheckpointer(StorageCheckpointerBase):
    """Saves the stored TensorDict memory-mapped, one folder per nested key.

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage, ReplayBuffer
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(4))
        >>> rb.storage.checkpointer = NestedStorageCheckpointer()
        >>> _ = rb.extend(TensorDict({("next", "obs"): torch.arange(3.0)}, [3]))
        >>> path = tempfile.mkdtemp()
        >>> rb.dumps(path)
        >>> other = ReplayBuffer(storage=LazyTensorStorage(4))
        >>> other.storage.checkpointer = NestedStorageCheckpointer()
        >>> other.loads(path)
        >>> other[:]["next", "obs"].tolist()
        [0.0, 1.0, 2.0]
    """

    def write_data(self, data: TensorDictBase, path: Path) -> None:
        data.memmap(path / "data")

    def read_data(self, path: Path) -> TensorDictBase:
        return TensorDict.load_memmap(path / "data")


class FlatStorageCheckpointer(StorageCheckpointerBase):
    """Saves the stored TensorDict memory-mapped, keys flattened into one folder.

    Args:
        separator: joins nested key names into one file name. Default: ``"."``.
    """

    def __init__(self, separator: str = ".") -> None:
        self.separator = separator

    def write_data(self, data: TensorDictBase, path: Path) -> None:
        for key in data.keys(include_nested=True, leaves_only=True):
            parts = key if isinstance(key, tuple) else (key,)
            if any(self.separator in part for part in parts):
                raise ValueError(
                    f"entry {key!r} holds the separator {self.separator!r} in a name: build "
                    "FlatStorageCheckpointer(separator=...) with another one."
                )
        data.flatten_keys(self.separator).memmap(path / "flat")

    def read_data(self, path: Path) -> TensorDictBase:
        return TensorDict.load_memmap(path / "flat").unflatten_keys(self.separator)


class H5StorageCheckpointer(StorageCheckpointerBase):
    """Saves the stored TensorDict into one HDF5 file (``data.h5``), a dataset per key.

    Args:
        separator: joins nested key names into dataset names. Default: ``"/"``
            (HDF5 groups).

    Raises:
        ImportError: ``h5py`` is not installed (``pip install h5py``).
    """

    def __init__(self, separator: str = "/") -> None:
        try:
            import h5py  # noqa: F401
        except ImportError as error:
            raise ImportError(
                "H5StorageCheckpointer needs h5py: install it (pip install h5py, or the "
                "rl-buffers[offline] extra)."
            ) from error
        self.separator = separator

    def write_data(self, data: TensorDictBase, path: Path) -> None:
        import h5py

        flat = data.flatten_keys(self.separator)
        with h5py.File(path / "data.h5", "w") as file:
            file.attrs["batch_size"] = list(data.batch_size)
            for key, value in flat.items():
                file.create_dataset(key, data=value.cpu().numpy())

    def read_data(self, path: Path) -> TensorDictBase:
        import h5py

        with h5py.File(path / "data.h5", "r") as file:
            batch = [int(n) for n in file.attrs["batch_size"]]
            values: dict[str, torch.Tensor] = {}
            file.visititems(
                lambda name, item: (
                    values.__setitem__(name, torch.from_numpy(item[()]))
                    if isinstance(item, h5py.Dataset)
                    else None
                )
            )
        return TensorDict(values, batch_size=batch).unflatten_keys(self.separator)
