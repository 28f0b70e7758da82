"""``RandomCropTensorDict``: a random window of fixed length along a trajectory dim."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import Transform


class RandomCropTensorDict(Transform):
    """Crops each trajectory of a batch to a random window of ``sub_seq_len`` steps.

    A data transform (e.g. on replay-buffer samples of whole trajectories): along
    ``sample_dim`` every row gets its own uniformly drawn start, the window staying inside
    the row, or inside its valid prefix when ``mask_key`` marks which steps are valid
    (``True`` first, as a collector's mask). Every entry is cropped alike.

    Args:
        sub_seq_len: the window length.
        sample_dim: the (batch) dim of time (default -1).
        mask_key: a bool entry with the TensorDict's batch shape marking valid steps.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.arange(10).expand(3, 10), batch_size=[3, 10])
        >>> out = RandomCropTensorDict(4)(td)
        >>> out.shape, bool((out["a"].diff(dim=-1) == 1).all())
        (torch.Size([3, 4]), True)
    """

    def __init__(
        self, sub_seq_len: int, sample_dim: int = -1, mask_key: NestedKey | None = None
    ) -> None:
        super().__init__()
        self.sub_seq_len = int(sub_seq_len)
        self.sample_dim = int(sample_dim)
        self.mask_key = mask_key

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        dim = self.sample_dim if self.sample_dim >= 0 else tensordict.batch_dims + self.sample_dim
        if not 0 <= dim < tensordict.batch_dims:
            raise ValueError(
                f"RandomCropTensorDict: sample_dim={self.sample_dim} is not a batch dim of a "
                f"TensorDict of batch size {tuple(tensordict.batch_size)}."
            )
        shape = list(tensordict.batch_size)
        size = self.sub_seq_len
        if self.mask_key is not None:
            mask = tensordict.get(self.mask_key).reshape(tensordict.batch_size)
            valid = mask.sum(dim, keepdim=True)
        else:
            shape_1 = list(shape)
            shape_1[dim] = 1
            valid = torch.full(shape_1, shape[dim], device=tensordict.device or None)
        if bool((valid < size).any()):
            raise RuntimeError(
                f"Cannot sample trajectories of length {size} along dimension {dim}: some hold "
                f"only {int(valid.min())} valid steps. Use a shorter sub_seq_len."
            )
        start = (torch.rand(valid.shape, device=valid.device) * (valid - size + 1)).floor().long()
        steps = torch.arange(size, device=valid.device).reshape(
            [size if i == dim else 1 for i in range(len(shape))]
        )
        shape[dim] = size
        index = (start + steps).expand(shape)
        return torch.gather(tensordict, dim, index)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # in an env: nothing to crop

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def extra_repr(self) -> str:
        return f"sub_seq_len={self.sub_seq_len}, sample_dim={self.sample_dim}, mask_key={self.mask_key!r}"
