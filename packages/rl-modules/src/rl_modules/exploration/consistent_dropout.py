"""Dropout whose mask is stored with the data, so an update reuses the rollout's mask.

Consistent dropout (Hausknecht & Wagener, 2022, "Consistent Dropout for Policy
Gradient Reinforcement Learning"): a policy with dropout is a different function
at every draw, so the log-probabilities of an update disagree with those of the
rollout unless the same masks are applied. Here the mask is an entry of the
TensorDict: drawn when absent, reused when present.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey
from torch import nn
from torch.nn import functional as F

from rl_modules.recurrent.primer import RecurrentStatePrimer, StateSpec


def _check_p(p: float) -> None:
    if not 0 <= p < 1:
        raise ValueError(f"ConsistentDropout: p must be in [0, 1), got {p}.")


class ConsistentDropout(nn.Module):
    """Dropout with an explicit mask: ``forward(x, mask=None) -> (x * mask, mask)`` in training.

    The mask holds 0 (dropped) or ``1 / (1 - p)`` (kept, rescaled), as
    ``F.dropout`` of ones; a given ``mask`` is applied as is. In eval mode the
    input is returned unchanged (and alone).

    Args:
        p: drop probability, in ``[0, 1)``.

    Examples:
        >>> import torch
        >>> drop = ConsistentDropout(0.5)
        >>> y, mask = drop(torch.ones(2, 3))
        >>> torch.equal(drop(torch.ones(2, 3), mask)[0], y)
        True
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        _check_p(p)
        self.p = p

    def make_mask(self, x: torch.Tensor) -> torch.Tensor:
        """A fresh mask shaped like ``x``."""
        return F.dropout(torch.ones_like(x), self.p, training=True)

    def mask_of_shape(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        """A fresh mask of ``shape`` and ``dtype`` (what an env primer draws at reset)."""
        return F.dropout(torch.ones(shape, dtype=dtype), self.p, training=True)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if not self.training:
            return x
        if mask is None:
            mask = self.make_mask(x)
        return x * mask, mask


class ConsistentDropoutModule(TensorDictModuleBase):
    """:class:`ConsistentDropout` on a TensorDict entry, its mask kept in another entry.

    In training mode the mask is read from ``in_keys[1]`` (drawn when absent)
    and written to ``out_keys[1]``; in eval mode the entry passes unchanged.
    The mask key defaults to ``"mask_<id>"``, unique to the module.

    Args:
        p: drop probability, in ``[0, 1)``.
        in_keys: the entry to drop out, or ``[entry, mask entry]``.
        out_keys: where to write ``[entry, mask]`` (default: ``in_keys``).
        input_shape: the shape of one entry, as the env holds it (for :meth:`make_tensordict_primer`).
        input_dtype: its dtype (default: torch's default dtype).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> m = ConsistentDropoutModule(0.5, in_keys="hidden")
        >>> td = m(TensorDict(hidden=torch.ones(4, 3), batch_size=[4]))
        >>> again = m(td.clone().set("hidden", torch.ones(4, 3)))
        >>> torch.equal(again["hidden"], td["hidden"])
        True
    """

    def __init__(
        self,
        p: float,
        in_keys: NestedKey | Sequence[NestedKey],
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        input_shape: torch.Size | Sequence[int] | None = None,
        input_dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        mask_key = f"mask_{id(self)}"
        if isinstance(in_keys, str | tuple):
            in_keys = [in_keys, mask_key]
        if out_keys is None:
            out_keys = list(in_keys)
        elif isinstance(out_keys, str | tuple):
            out_keys = [out_keys, mask_key]
        if len(in_keys) != 2 or len(out_keys) != 2:
            raise ValueError(
                "ConsistentDropoutModule: in_keys and out_keys must be [entry, mask entry] "
                f"(or a single entry), got in_keys={in_keys}, out_keys={out_keys}."
            )
        self.in_keys, self.out_keys = list(in_keys), list(out_keys)
        self.input_shape, self.input_dtype = input_shape, input_dtype
        self.consistent_dropout = ConsistentDropout(p)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        x = tensordict.get(self.in_keys[0])
        if not self.training:
            tensordict.set(self.out_keys[0], x)
            return tensordict
        x, mask = self.consistent_dropout(x, tensordict.get(self.in_keys[1], None))
        tensordict.set(self.out_keys[0], x)
        tensordict.set(self.out_keys[1], mask)
        return tensordict

    def make_tensordict_primer(self) -> RecurrentStatePrimer:
        """The mask entry for an env primer: a fresh mask at each reset, kept between steps.

        Append it to the env (``env.append_transform(module.make_tensordict_primer())``)
        so one trajectory uses one mask. Needs ``input_shape``.

        Raises:
            RuntimeError: no ``input_shape`` was given at construction.

        Examples:
            >>> m = ConsistentDropoutModule(0.5, in_keys="hidden", input_shape=(3,))
            >>> primer = m.make_tensordict_primer()
            >>> [tuple(spec.shape) for spec in primer.values()], primer.default_value().shape
            ([(3,)], torch.Size([3]))
        """
        if self.input_shape is None:
            raise RuntimeError(
                "ConsistentDropoutModule.make_tensordict_primer: the mask's shape is unknown; "
                "pass input_shape= (the entry's shape as the env holds it) at construction."
            )
        shape = torch.Size(self.input_shape)
        dtype = self.input_dtype or torch.get_default_dtype()
        return RecurrentStatePrimer(
            {self.in_keys[1]: StateSpec(shape, dtype)},
            default_value=partial(self.consistent_dropout.mask_of_shape, shape, dtype),
            expand_specs=False,
        )
