"""``make_composite_from_td``: infer a Composite spec from one TensorDict (e.g. one reset or step)."""

from __future__ import annotations

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase

from rl_envs.specs._base import ShapeLike, as_size
from rl_envs.specs.composite import Composite
from rl_envs.specs.non_tensor import NonTensor
from rl_envs.specs.unbounded import Unbounded

__all__ = ["make_composite_from_td"]


def make_composite_from_td(
    td: TensorDictBase,
    *,
    unsqueeze_null_shapes: bool = True,
    batch_size: ShapeLike | None = None,
) -> Composite:
    """A Composite of ``Unbounded`` specs with the keys, shapes, dtypes and devices of ``td``.

    Nested TensorDicts become nested Composites; non-tensor entries become
    :class:`NonTensor` specs (their value is kept as ``example_data``).

    Args:
        td: the TensorDict to describe; its batch size becomes the Composite's shape.
        unsqueeze_null_shapes: when ``True`` (default, as in TorchRL), an entry with no
            dims beyond the batch dims (e.g. a reward of shape ``td.batch_size``) gets a
            trailing dim of size 1, so ``spec.zero()`` has ``[*batch, 1]`` there.
        batch_size: extra batch dims prepended to every spec, e.g. ``(num_envs,)`` when
            ``td`` is one unbatched sample and the env is batched.

    Returns:
        The inferred Composite (unlocked).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"obs": torch.zeros(3), "next": {"reward": torch.zeros(())}}, [])
        >>> spec = make_composite_from_td(td, batch_size=(4,))
        >>> spec["obs"].shape, spec["next", "reward"].shape
        (torch.Size([4, 3]), torch.Size([4, 1]))
    """
    spec = _from_td(td, unsqueeze_null_shapes)
    extra = as_size(batch_size)
    if extra:
        spec = spec.expand(*extra, *spec.shape)
    return spec


def _from_td(td: TensorDictBase, unsqueeze: bool) -> Composite:
    nb = td.batch_dims
    out = Composite(shape=td.batch_size)
    for key in td.keys():  # noqa: SIM118 (iterating a TensorDict iterates its first dim)
        value = td.get(key)
        if isinstance(value, (NonTensorData, NonTensorStack)):
            example = value.data if isinstance(value, NonTensorData) else value.tolist()
            while isinstance(example, list) and example:
                example = example[0]
            out[key] = NonTensor(shape=value.batch_size, device=value.device, example_data=example)
        elif isinstance(value, TensorDictBase):
            out[key] = _from_td(value, unsqueeze)
        elif isinstance(value, torch.Tensor):
            shape = value.shape
            if unsqueeze and len(shape) == nb:
                shape = torch.Size([*shape, 1])
            out[key] = Unbounded(shape=shape, device=value.device, dtype=value.dtype)
        else:
            raise TypeError(
                f"make_composite_from_td: entry {key!r} is a {type(value).__name__}, expected a "
                f"tensor, a TensorDict or non-tensor data."
            )
    return out
