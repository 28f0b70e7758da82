"""Epsilon-greedy exploration with linear annealing and action masks."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from rl_modules._keys import check_in_keys
from rl_modules._spec import require_attr, spec_of_key
from rl_modules.exploration_type import ExplorationType, exploration_type


def linear_annealing(init: float, end: float, num_steps: int, step: int) -> float:
    """Value after ``step`` steps of linear annealing from ``init`` to ``end`` over ``num_steps``."""
    if num_steps <= 0:
        return end
    frac = min(step / num_steps, 1.0)
    return init + frac * (end - init)


def random_allowed_action(mask: torch.Tensor, one_hot: bool) -> torch.Tensor:
    """A uniformly random allowed action per row of ``mask`` (``[..., n]``, True = allowed)."""
    if not bool(mask.any(-1).all()):
        raise ValueError("EGreedyModule: an action mask row allows no action.")
    idx = torch.multinomial(mask.reshape(-1, mask.shape[-1]).float(), 1).reshape(mask.shape[:-1])
    if one_hot:
        return torch.zeros(mask.shape, dtype=torch.long, device=mask.device).scatter_(
            -1, idx.unsqueeze(-1), 1
        )
    return idx


class EGreedyModule(TensorDictModuleBase):
    """Replaces the action by a random one with probability ``eps`` (when exploring).

    Exploration happens when the exploration type is ``RANDOM`` or unset; in
    a ``set_exploration_type(DETERMINISTIC/MODE/MEAN)`` block the action
    passes through. ``eps`` goes linearly from ``eps_init`` to ``eps_end``
    over ``annealing_num_steps`` calls to :meth:`step`. Random actions come
    from ``spec.rand()``, or, with ``action_mask_key``, uniformly among the
    allowed actions (categorical actions ``[*B]`` or one-hot ``[*B, n]``,
    told apart by the action's shape against the mask's).

    Args:
        spec: spec-like action spec (``rand`` is used). May be ``None`` when every
            call carries an action mask, or set later (``module.spec = ...``).
        eps_init: initial epsilon.
        eps_end: final epsilon.
        annealing_num_steps: steps to go from one to the other.
        action_key: the action entry.
        action_mask_key: optional mask entry.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Discrete:
        ...     def rand(self, shape=()):
        ...         return torch.randint(0, 4, shape)
        >>> explore = EGreedyModule(Discrete(), eps_init=1.0, eps_end=0.0, annealing_num_steps=10)
        >>> td = explore(TensorDict(action=torch.zeros(100, dtype=torch.long), batch_size=[100]))
        >>> explore.step(10)
        >>> float(explore.eps)
        0.0
    """

    def __init__(
        self,
        spec: Any,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        *,
        action_key: NestedKey = "action",
        action_mask_key: NestedKey | None = None,
    ) -> None:
        super().__init__()
        if spec is not None:
            require_attr(spec, "rand", "EGreedyModule", "to draw random actions")
        self.spec = spec
        self.eps_init, self.eps_end = float(eps_init), float(eps_end)
        self.annealing_num_steps = int(annealing_num_steps)
        self.action_key, self.action_mask_key = action_key, action_mask_key
        self.in_keys = [action_key] + ([action_mask_key] if action_mask_key else [])
        self.out_keys = [action_key]
        self.register_buffer("eps", torch.tensor(self.eps_init))
        self.register_buffer("_steps", torch.tensor(0, dtype=torch.long))

    def step(self, frames: int = 1) -> None:
        """Advance the annealing by ``frames`` steps."""
        self._steps += frames
        self.eps.fill_(
            linear_annealing(
                self.eps_init, self.eps_end, self.annealing_num_steps, int(self._steps)
            )
        )

    def _spec_rand(self, action: torch.Tensor, batch: torch.Size) -> torch.Tensor:
        if self.spec is None:
            raise RuntimeError(
                "EGreedyModule: spec must be provided to the exploration wrapper to draw random "
                "actions: pass spec= (the env's action spec), set module.spec, or give "
                "action_mask_key so random actions come from the mask."
            )
        spec = spec_of_key(self.spec, self.action_key, type(self).__name__)
        shape = getattr(spec, "shape", None)
        if shape is not None and tuple(action.shape[len(batch) :]) != tuple(shape):
            raise ValueError(
                f"EGreedyModule: Action spec shape does not match the action shape: spec "
                f"{tuple(shape)}, action {tuple(action.shape)} with batch {tuple(batch)}. Give "
                "the spec of the action this module reads (action_key)."
            )
        return spec.rand(batch).to(action.device)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if exploration_type() not in (ExplorationType.RANDOM, None):
            return tensordict
        check_in_keys(tensordict, self.in_keys, type(self).__name__)
        action = tensordict.get(self.action_key)
        batch = tensordict.batch_size
        if self.action_mask_key is not None:
            mask = tensordict.get(self.action_mask_key)
            one_hot = action.shape == mask.shape
            if not one_hot and action.shape != mask.shape[:-1]:
                raise ValueError(
                    f"EGreedyModule: action {tuple(action.shape)} and mask {tuple(mask.shape)} "
                    "disagree: expected a one-hot action of the mask's shape or an index action "
                    "of the mask's shape without its last dim."
                )
            random = random_allowed_action(mask, one_hot).to(action.dtype)
        else:
            random = self._spec_rand(action, batch)
        explore = torch.rand(batch, device=action.device) < self.eps
        explore = explore.reshape(*batch, *([1] * (action.ndim - len(batch))))
        tensordict.set(self.action_key, torch.where(explore, random, action))
        return tensordict
