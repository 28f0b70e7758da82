"""Rollout backends: the one seam through which an env offers a faster rollout loop.

``EnvBase.rollout(..., backend=...)`` runs either the generic loop (``rl_envs._rollout``,
the reference: one ``step`` / ``step_mdp`` / partial ``reset`` per step) or a backend
that produces the same TensorDict faster. An env class lists its backends in the class
attribute ``rollout_backends`` (a tuple of :class:`RolloutBackend`, empty on
``EnvBase``); there is no global registry and nothing is registered at import time.

* ``backend="auto"`` (default): the first backend of ``type(env).rollout_backends``
  whose ``supports(env, root, policy, mode)`` is ``True``; the generic loop when none
  does, or when a ``callback`` is given or ``return_contiguous=False``.
* ``backend="generic"``: always the generic loop.
* ``backend="<name>"``: that backend; ``ValueError`` when the env has no backend of
  that name or it does not support the call (the message says why and what to pass).

A backend must return exactly what the generic loop returns for the same seeds, every
leaf bit-equal (``torch.equal``); ``packages/rl-envs/tests/test_rollout_backends.py``
checks that for every backend over envs x policies x modes. Random actions are drawn
once by ``rollout`` (one ``spec.rand((max_steps,))`` per action key, in
``full_action_spec`` order) and handed to both, so both consume the RNG alike.

Example:
    >>> from rl_envs import PendulumEnv
    >>> env = PendulumEnv()
    >>> [b.name for b in type(env).rollout_backends]
    ['pendulum']
    >>> env.rollout(3, backend="generic").batch_size
    torch.Size([3])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase

__all__ = ["ROLLOUT_MODES", "RolloutBackend", "choose_backend"]

ROLLOUT_MODES = ("any", "none", "all")
"""``"any"``: stop at the first done step; ``"none"``: reset the done entries and go
on; ``"all"``: go on until every entry has been done once (``rollout`` freezes the
entries that finished early afterwards, for every backend alike)."""

RandomActions = dict[Any, torch.Tensor]


@dataclass(frozen=True)
class RolloutBackend:
    """A rollout loop an env class offers beside the generic one.

    Attributes:
        name: what ``rollout(backend=name)`` selects, unique within one env class.
        supports: ``supports(env, root, policy, mode) -> bool``: whether ``run`` gives
            the generic loop's result for this call. ``root`` is the first step's root
            (after the reset), ``policy`` ``None`` for random actions (a plain
            ``TensorDictModule`` arrives as ``rl_envs._rollout.PlainPolicy``), ``mode``
            one of :data:`ROLLOUT_MODES`. It must be cheap and have no side effects.
        run: ``run(env, root, max_steps, policy, mode, actions) -> TensorDict``: the
            stacked rollout, batch_size ``[*B, T]``. ``actions`` holds the random
            actions (``{key: [max_steps, *B, ...]}``) when ``policy`` is ``None``, else
            ``None``; with a policy the backend checks its first step with
            ``env._check_step_input`` (``rollout`` checked the random first step).
    """

    name: str
    supports: Callable[[Any, TensorDictBase, Any, str], bool]
    run: Callable[[Any, TensorDictBase, int, Any, str, RandomActions | None], TensorDictBase]


def choose_backend(
    env: Any,
    root: TensorDictBase,
    policy: Any,
    mode: str,
    backend: str,
    *,
    stepwise: bool,
) -> RolloutBackend | None:
    """The backend to run, or ``None`` for the generic loop (see the module docstring).

    Args:
        env: the env rolled out.
        root: the first step's root.
        policy: the policy (``None``: random actions).
        mode: one of :data:`ROLLOUT_MODES`.
        backend: ``"auto"``, ``"generic"`` or a backend name.
        stepwise: the caller needs the generic loop's per-step behaviour (a
            ``callback`` or a lazy stack): ``"auto"`` then picks the generic loop and a
            named backend raises.

    Raises:
        ValueError: ``backend`` names no backend of the env, or one that does not
            support this call.
    """
    if backend == "generic":
        return None
    backends: tuple[RolloutBackend, ...] = tuple(getattr(type(env), "rollout_backends", ()))
    if backend == "auto":
        if stepwise:
            return None
        for candidate in backends:
            if candidate.supports(env, root, policy, mode):
                return candidate
        return None
    named = [b for b in backends if b.name == backend]
    if not named:
        names = ["auto", "generic", *(b.name for b in backends)]
        raise ValueError(
            f"rollout(backend={backend!r}): {type(env).__name__} has no such rollout backend; "
            f"expected one of {names}."
        )
    if stepwise:
        raise ValueError(
            f"rollout(backend={backend!r}) runs the whole rollout at once: it takes no "
            "callback and returns a contiguous TensorDict. Pass backend='generic' (or 'auto') "
            "with callback= or return_contiguous=False."
        )
    if not named[0].supports(env, root, policy, mode):
        kind = "random actions" if policy is None else f"a {type(policy).__name__} policy"
        raise ValueError(
            f"rollout(backend={backend!r}) does not support this call on "
            f"{type(env).__name__} ({kind}, mode {mode!r}, root keys "
            f"{sorted(map(str, root.keys(True, True)))}); its docstring lists what it "
            "handles. Pass backend='auto' to fall back to the generic loop."
        )
    return named[0]
