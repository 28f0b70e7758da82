"""``gSDENoise``: the primer of a gSDE exploration module's noise matrix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl_envs.specs import Composite, Unbounded
from rl_envs.transforms.primer import TensorDictPrimer


class gSDENoise(TensorDictPrimer):
    """Writes ``"_eps_gSDE"``, the noise a gSDE exploration module reads, at reset.

    With both ``state_dim`` and ``action_dim`` the entry is a random ``[*shape, action_dim,
    state_dim]`` draw (fresh at every reset, carried through steps); otherwise it is a
    ``[*shape, 1]`` zero placeholder that the module fills on its first call.

    Args:
        state_dim: the feature size the noise multiplies.
        action_dim: the action size.
        shape: the leading (batch) shape of the entry (default ``()``: the env's batch
            dims are prepended).
        **kwargs: passed to :class:`TensorDictPrimer` (e.g. ``expand_specs``).

    Example:
        >>> from tensordict import TensorDict
        >>> gSDENoise(state_dim=3, action_dim=2)(TensorDict())["_eps_gSDE"].shape
        torch.Size([2, 3])
    """

    def __init__(
        self,
        state_dim: int | None = None,
        action_dim: int | None = None,
        shape: Sequence[int] | None = None,
        **kwargs: Any,
    ) -> None:
        self.state_dim = state_dim
        self.action_dim = action_dim
        shape = tuple(shape) if shape is not None else ()
        sized = state_dim is not None and action_dim is not None
        tail = (action_dim, state_dim) if sized else (1,)
        primers = Composite(_eps_gSDE=Unbounded(shape=(*shape, *tail)), shape=shape)
        super().__init__(primers=primers, random=sized, **kwargs)
