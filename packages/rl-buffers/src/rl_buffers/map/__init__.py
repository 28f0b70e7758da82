"""Maps from TensorDict rows to stored values (TorchRL's ``torchrl.data.map``): hash modules,
:class:`QueryModule` (rows -> ids) and :class:`TensorDictMap`."""

from rl_buffers.map.hash import BinaryToDecimal, RandomProjectionHash, SipHash
from rl_buffers.map.query import QueryModule
from rl_buffers.map.tensordict_map import TensorDictMap

__all__ = ["BinaryToDecimal", "QueryModule", "RandomProjectionHash", "SipHash", "TensorDictMap"]
