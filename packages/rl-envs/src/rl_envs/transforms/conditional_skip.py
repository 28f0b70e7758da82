"""``ConditionalSkip``: skips env steps where a condition holds."""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase

from rl_envs.transforms.transform import FORWARD_NOT_IMPLEMENTED, Transform


class ConditionalSkip(Transform):
    """Skips the step of the env beneath it wherever ``cond(tensordict)`` is ``True``.

    On the way in, the transform writes ``"_step" = ~cond(td)`` (and-ed with any
    ``"_step"`` already there) into the input of its ``TransformedEnv``'s base env.
    Where no entry steps, neither the base env nor the transforms of that
    ``TransformedEnv`` run: the next step repeats the root's observations and done
    flags with a zero reward. A batch-locked base env (e.g. ``SerialEnv``) steps the
    flagged entries itself; an unlocked one gets only the flagged entries. Wrap the
    result in another ``TransformedEnv`` (``auto_unwrap=False``) for transforms that
    must see every step.

    Args:
        cond: ``td -> bool tensor`` (batch-shaped, or a single element): ``True`` skips.

    Example:
        >>> from rl_envs import PendulumEnv, StepCounter, TransformedEnv, Compose
        >>> inner = TransformedEnv(PendulumEnv(), Compose(
        ...     StepCounter(step_count_key="inner_count"),
        ...     ConditionalSkip(lambda td: td["step_count"] % 2 == 1)))
        >>> env = TransformedEnv(inner, StepCounter(), auto_unwrap=False)
        >>> env.rollout(5)["next", "inner_count"].flatten().tolist()
        [1, 1, 2, 2, 3]
    """

    def __init__(self, cond: Callable[[TensorDictBase], bool | torch.Tensor]) -> None:
        super().__init__()
        self.cond = cond

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        skip = torch.as_tensor(self.cond(tensordict), device=tensordict.device)
        step = tensordict.get("_step", None)
        step = ~skip if step is None else step & ~skip
        if step.shape != tensordict.batch_size:
            step = step.reshape(tensordict.batch_size)
        tensordict.set("_step", step)
        return tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))

    def extra_repr(self) -> str:
        return f"cond={self.cond!r}"
