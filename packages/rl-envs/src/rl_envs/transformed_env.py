"""``TransformedEnv``: an env seen through a stack of transforms."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.auto_unwrap import auto_unwrap_transformed_env
from rl_envs.env_base import EnvBase, keep_preset_next
from rl_envs.rollout_backend import RolloutBackend, choose_backend
from rl_envs.transforms.callable import as_transform
from rl_envs.transforms.compose import Compose
from rl_envs.transforms.primer import primer_from_mapping
from rl_envs.transforms.transform import EnvSpecs, Transform

__all__ = ["InnerEnv", "TransformedEnv"]


def _flatten(transform: Transform) -> list[Transform]:
    if not isinstance(transform, Compose):
        return [transform]
    out: list[Transform] = []
    for t in transform.transforms:
        out.extend(_flatten(t))
    return out


def _as_transform(transform: Any) -> Transform:
    """A Transform from a transform, a ``{key: spec}`` mapping (a primer) or a callable."""
    if isinstance(transform, Mapping) and not isinstance(transform, Transform):
        return primer_from_mapping(transform)
    return as_transform(transform)


def _detach_all(transform: Transform) -> list[Transform]:
    """The transforms of ``transform`` (its members if a Compose), each detached."""
    if isinstance(transform, Compose):
        return [transform.pop(0) for _ in range(len(transform))]
    transform.reset_parent()
    return [transform]


def _keep_policy_next(tensordict: TensorDictBase, next_td: TensorDictBase) -> None:
    """Entries a policy wrote under ``"next"`` (recurrent states) reach the transforms.

    Without this, a ``TensorDictPrimer`` would fill ``("next", state)`` with the old
    root value and the policy's new state would be lost.
    """
    preset = tensordict.get("next", None)
    if preset is not None:
        keep_preset_next(preset, next_td)


class InnerEnv:
    """The base env seen through the transforms placed before one transform.

    What a TransformedEnv hands to transforms that step the env beneath them
    (``Transform.steps_inner_env``: ``FrameSkipTransform``, ``NoopResetEnv``), so that
    they call down into it instead of reaching up through their container.

    Args:
        base_env: the TransformedEnv's base env.
        transforms: the transforms before the one this view is for, in order.
    """

    def __init__(self, base_env: EnvBase, transforms: list[Transform]) -> None:
        self.base_env = base_env
        self.transforms = list(transforms)

    @property
    def full_action_spec(self) -> Any:
        """The base env's action spec (actions reach it uninverted)."""
        return self.base_env.full_action_spec

    @property
    def reward_keys(self) -> list[Any]:
        """The base env's reward keys."""
        return self.base_env.reward_keys

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """One step of the base env, then the transforms: the flat next-step content.

        ``tensordict`` is the base env's input (actions already inverted).
        """
        next_td = self.base_env._step(tensordict)
        self.base_env._fill_missing_done(next_td, reset=False)
        _keep_policy_next(tensordict, next_td)
        for t in self.transforms:
            next_td = t.step(tensordict, next_td)
        return next_td

    def reset(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """A reset of the base env, then the transforms."""
        out = self.base_env._reset(tensordict)
        self.base_env._fill_missing_done(out, reset=True)
        source = tensordict if tensordict is not None else out.empty()
        for t in self.transforms:
            out = t.reset(source, out)
        return out


_SPEC_NAMES = frozenset(
    f"{prefix}{kind}_spec"
    for prefix in ("", "full_")
    for kind in ("action", "done", "observation", "reward", "state", "input", "output")
)
# read before the base env exists (nn.Module init, pickling): never forwarded
_NOT_FORWARDED = frozenset({"base_env", "transform", "_modules", "_parameters", "_buffers"})


class TransformedEnv(EnvBase):
    """Wraps ``base_env`` so that every output goes through ``transform``.

    Reset and step outputs are transformed first-to-last; inputs (actions,
    states) go through the transforms' inverses last-to-first before the base
    env reads them. The specs (``observation_spec``, ``action_spec``,
    ``reward_spec``, ``done_spec``, ``state_spec`` and their ``full_*`` forms)
    are the base env's specs rewritten by every transform, recomputed whenever
    the stack changes (``append_transform``, ``insert_transform``,
    ``env.transform.pop()``).

    Args:
        base_env: the env to wrap. A ``TransformedEnv`` is unwrapped (its
            transforms move to the front of the new stack) unless ``auto_unwrap=False``
            (or, when ``auto_unwrap`` is ``None``, an enclosing
            ``set_auto_unwrap_transformed_env(False)``) or either class is a subclass
            (e.g. ``AutoResetEnv``).
        transform: a transform, a ``Compose`` or a callable ``TensorDict -> TensorDict``
            (default: an empty ``Compose``). ``env.transform`` is that object itself, as
            in TorchRL; ``append_transform`` / ``insert_transform`` turn a single transform
            into a ``Compose`` holding it.
        cache_specs: kept for TorchRL parity; specs are always cached and
            recomputed when the stack changes.
        auto_unwrap: see ``base_env``.
        validate_actions: see :class:`~rl_envs.EnvBase` (default: the base env's).
        device: moves the base env there first (``base_env.to(device)``).

    Example:
        >>> from rl_envs import PendulumEnv, TransformedEnv, StepCounter, RewardSum
        >>> env = TransformedEnv(PendulumEnv(), StepCounter(max_steps=5))
        >>> env.append_transform(RewardSum())
        TransformedEnv(...)
        >>> env.rollout(10)["next", "step_count"][-1].item()
        5
    """

    def __init__(
        self,
        base_env: EnvBase,
        transform: Transform | None = None,
        cache_specs: bool = True,
        *,
        auto_unwrap: bool | None = None,
        validate_actions: bool | None = None,
        device: Any = None,
    ) -> None:
        if not isinstance(base_env, EnvBase):
            raise TypeError(
                f"TransformedEnv wraps an EnvBase, got {type(base_env).__name__}. Wrap a "
                "Gymnasium env with GymWrapper first."
            )
        if device is not None and torch.device(device) != base_env.device:
            base_env = base_env.to(device)
        inner: list[Transform] = []
        # exact types, as in TorchRL: a subclass (e.g. AutoResetEnv) keeps its own stack
        if (
            type(base_env) is TransformedEnv
            and type(self) is TransformedEnv
            and (auto_unwrap_transformed_env() if auto_unwrap is None else auto_unwrap)
        ):
            inner = _detach_all(base_env.transform)
            base_env = base_env.base_env
        super().__init__(
            device=base_env.device,
            batch_size=base_env.batch_size,
            validate_actions=(
                base_env.validate_actions if validate_actions is None else validate_actions
            ),
        )
        self.base_env = base_env
        # a base env that refuses steps before a reset makes this env refuse them too (until
        # either is reset: the base env may be wrapped after its first reset)
        self._awaiting_reset = base_env._awaiting_reset
        # a batch-unlocked base env makes the TransformedEnv unlocked too (EnvBase reads it)
        self.__dict__["_batch_locked"] = bool(getattr(base_env, "batch_locked", True))
        self.cache_specs = cache_specs
        if transform is None:
            transform = Compose()
        transform = _as_transform(transform)
        if inner:
            transform = Compose(*inner, *_detach_all(transform))
        transform.set_container(self)
        transform.eval()
        self.transform = transform
        self._needs_inv = False
        self._inv_exposed: list[Any] = []
        self._last_reset: tuple[TensorDictBase, TensorDictBase] | None = None
        self.empty_cache()

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "transform" and "transform" in self.__dict__.get("_modules", {}):
            self._replace_transform(value)
            return
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:
        """Attributes the env does not have are read from the base env, as in TorchRL."""
        try:
            return super().__getattr__(name)
        except AttributeError as err:
            if name.startswith("__") or name in _NOT_FORWARDED:
                raise
            if name in _SPEC_NAMES:
                raise AttributeError(
                    f"Could not get {name} because an internal error was raised. To find what "
                    "this error is, call env.transform.transform_<kind>_spec(...) on the base "
                    "env's spec directly."
                ) from err
            base = self.__dict__.get("_modules", {}).get("base_env")
            if base is None:
                raise
            return getattr(base, name)

    def _replace_transform(self, transform: Any) -> None:
        """``env.transform = t``: detaches the old stack, installs ``t`` and recomputes specs."""
        transform = _as_transform(transform)
        old = self._modules["transform"]
        if old is not None and old is not transform and old.container is self:
            old.reset_parent()
        transform.set_container(self)
        transform.eval()
        self._modules["transform"] = transform
        self.empty_cache()

    def _env_with(self, transforms: list[Transform]) -> TransformedEnv:
        """A new ``TransformedEnv``: the base env seen through ``transforms`` (a Compose).

        Always the plain class: a subclass's ``__init__`` may build its own transforms.
        """
        return TransformedEnv(self.base_env, Compose(*transforms), auto_unwrap=False)

    @property
    def batch_locked(self) -> bool:
        """Whether the env only accepts its own batch size (the base env's setting)."""
        return getattr(self.base_env, "batch_locked", True)

    @batch_locked.setter
    def batch_locked(self, value: bool) -> None:
        raise RuntimeError("batch_locked is a read-only property of a TransformedEnv.")

    def __repr__(self) -> str:
        return f"TransformedEnv(\n    env={self.base_env!r},\n    transform={self.transform!r})"

    # ------------------------------------------------------------------ specs
    def empty_cache(self) -> None:
        """Recomputes the specs from the base env's through the transform stack."""
        base = self.base_env
        specs = EnvSpecs(
            observation=base.full_observation_spec.clone(),
            reward=base.full_reward_spec.clone(),
            done=base.full_done_spec.clone(),
            action=base.full_action_spec.clone(),
            state=base.full_state_spec.clone(),
        )
        self._batch_size = self.transform.transform_env_batch_size(base.batch_size)
        self._device = self.transform.transform_env_device(base.device)
        specs = self.transform.transform_specs(specs)
        self._full_observation_spec = specs.observation
        self._full_reward_spec = specs.reward
        self._full_done_spec = specs.done
        self._full_action_spec = specs.action
        self._full_state_spec = specs.state
        self._stacked_actions = self.transform._stacked_action_dims(
            list(specs.action.keys(True, True))
        )
        flat = _flatten(self.transform)
        self._needs_inv = any(t._has_inverse() for t in flat)
        self._inv_exposed = [k for t in flat if t.inv_writes_input for k in t.in_keys_inv]
        self._has_hooks = self.transform._has_post_step_mdp_hook()
        for i, t in enumerate(flat):
            if t.steps_inner_env:
                t.set_inner_env(InnerEnv(self.base_env, flat[:i]))

    @property
    def post_step_mdp_hooks(self) -> Any:
        """The post-step-mdp hooks of the transforms (and of the base env), or ``None``."""
        if self._has_hooks or self.base_env.post_step_mdp_hooks is not None:
            return self._run_post_step_mdp_hooks
        return None

    def _run_post_step_mdp_hooks(
        self, tensordict: TensorDictBase, next_root: TensorDictBase | None
    ) -> tuple[TensorDictBase, TensorDictBase | None]:
        base_hooks = self.base_env.post_step_mdp_hooks
        if base_hooks is not None:
            tensordict, next_root = base_hooks(tensordict, next_root)
        return self.transform._post_step_mdp_hooks(tensordict, next_root)

    def _transform_transition_specs(self, specs: dict[Any, Any]) -> dict[Any, Any]:
        """The stored transition's leaf specs (see ``Transform._transform_transition_specs``)."""
        base = getattr(self.base_env, "_transform_transition_specs", None)
        if base is not None:
            specs = base(specs)
        return self.transform._transform_transition_specs(specs)

    # ------------------------------------------------------------- the stack
    def append_transform(self, transform: Transform | Mapping[Any, Any]) -> TransformedEnv:
        """Adds ``transform`` at the end of the stack; returns the env.

        A ``{key: spec-like}`` mapping (e.g. ``lstm.make_tensordict_primer()``) becomes a
        :class:`TensorDictPrimer`, as in TorchRL.
        """
        transform = _as_transform(transform)
        transform.eval()
        if not isinstance(self.transform, Compose):
            self.transform = Compose(*_detach_all(self.transform))
        if isinstance(transform, Compose) and type(transform) is Compose:
            for t in _detach_all(transform):
                self.transform.append(t)
        else:
            self.transform.append(transform)
        return self

    def insert_transform(self, index: int, transform: Transform) -> TransformedEnv:
        """Inserts ``transform`` at ``index`` of the stack; returns the env."""
        transform = _as_transform(transform)
        transform.eval()
        if not isinstance(self.transform, Compose):
            self.transform = Compose(*_detach_all(self.transform))
        self.transform.insert(index, transform)
        return self

    # ------------------------------------------------------------------ hooks
    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        inner_in = self.transform._reset_env_preprocess(tensordict)
        out = self.base_env._reset(inner_in, **kwargs)
        self.base_env._awaiting_reset = False
        self.base_env._fill_missing_done(out, reset=True)
        base_root = out.clone(False) if tensordict is None else None
        if tensordict is None:
            tensordict = out.empty()
        out = self.transform.reset(tensordict, out)
        # remembered for the "transformed" rollout backend: the base env's view of a full reset
        self._last_reset = (out, base_root) if base_root is not None else None
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._last_reset = None
        if self._needs_inv:
            inner = self.transform.inv(tensordict.clone(False))
            for key in self._inv_exposed:
                tensordict.set(key, inner.get(key))
            tensordict = inner
            mask = tensordict.get("_step", None)
            if mask is not None:  # a transform asked for a partial step (ConditionalSkip)
                return self._masked_step(tensordict, mask)
        return self._step_inner(tensordict)

    def _step_inner(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Steps the base env with the (inverted) input, then the transforms."""
        next_td = self.base_env._step(tensordict)
        if (
            next_td.get("done", None) is None
            or next_td.get("terminated", None) is None
            or next_td.get("truncated", None) is None
        ):
            self.base_env._fill_missing_done(next_td, reset=False)
        _keep_policy_next(tensordict, next_td)
        return self.transform.step(tensordict, next_td)

    def _masked_step(self, tensordict: TensorDictBase, mask: torch.Tensor) -> TensorDictBase:
        """A step where ``"_step"`` (written by an inverse) flags the entries to step.

        None flagged: the base env and the transforms are skipped, the next step repeats
        the observations and done flags with zero rewards (``skip_tensordict``). A
        batch-locked base env gets the mask and steps the flagged entries itself; an
        unlocked one is stepped with the flagged entries only, the others repeating
        their input.
        """
        mask = mask.reshape(tensordict.batch_size)
        if bool(mask.all()):
            return self._step_inner(tensordict.exclude("_step"))
        if not bool(mask.any()):
            skip = self.skip_tensordict(tensordict.exclude("_step"))
            for key in self._full_observation_spec.keys(True, True):  # non-tensor entries too
                value = tensordict.get(key, None)
                if value is not None and not isinstance(value, torch.Tensor):
                    skip.set(key, value)
            return skip
        if self.batch_locked:
            return self._step_inner(tensordict)
        tensordict = tensordict.exclude("_step")
        stepped = self._step_inner(tensordict[mask])
        out = stepped.new_zeros(tensordict.batch_size)
        kept = tensordict[~mask]
        out[~mask] = kept.select(
            *[k for k in stepped.keys(True, True) if k in kept.keys(True, True)]
        )
        out[mask] = stepped
        return out

    def _check_step_input(self, tensordict: TensorDictBase) -> list[Any]:
        """Checks the actions; of a stack of actions (``MultiAction``) the first one."""
        if not self._stacked_actions:
            return super()._check_step_input(tensordict)
        view = tensordict.clone(False)
        if any(view.get(key, None) is None for key in self._stacked_actions):
            self.transform.inv(view)  # the transform reading the stack says what it expected
        for key, offset in self._stacked_actions.items():
            value = view.get(key, None)
            dim = view.batch_dims + offset
            if isinstance(value, torch.Tensor) and value.ndim > dim and value.shape[dim] > 0:
                view.set(key, value.narrow(dim, 0, 1))
        return super()._check_step_input(view)

    def _set_seed(self, seed: int | None) -> None:
        self.base_env._set_seed(seed)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seeds the base env; returns the seed for the next env."""
        return self.base_env.set_seed(seed, static_seed=static_seed)

    def get_state(self) -> dict[str, Any]:
        """The base env's exact state and the transforms' buffers (e.g. VecNorm statistics).

        Per-step transform state that lives in the TensorDict (step counts, episode
        rewards, stacked frames) travels with the data, not here.
        """
        buffers = copy.deepcopy(self.transform.state_dict())
        return {"base_env": self.base_env.get_state(), "transform": buffers}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` result into this env (same transform stack)."""
        self.base_env.set_state(state["base_env"])
        self.transform.load_state_dict(state["transform"])
        self._awaiting_reset = False

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Closes the base env (``raise_if_closed`` is passed on where it accepts it)."""
        if "raise_if_closed" in inspect.signature(self.base_env.close).parameters:
            self.base_env.close(raise_if_closed=raise_if_closed)
        else:
            self.base_env.close()


def _base_backend(env: TransformedEnv, root: TensorDictBase, mode: str) -> RolloutBackend | None:
    """The base env's backend for the base env's view of ``root``, if it has one."""
    last = env.__dict__.get("_last_reset")
    if last is None or last[0] is not root or env._needs_inv:
        return None
    if not env.transform.supports_rollout_map():
        return None
    return choose_backend(env.base_env, last[1], None, mode, "auto", stepwise=False)


def _supports(env: TransformedEnv, root: TensorDictBase, policy: Any, mode: str) -> bool:
    return (
        type(env) is TransformedEnv
        and policy is None
        and _base_backend(env, root, mode) is not None
    )


def _run(
    env: TransformedEnv,
    root: TensorDictBase,
    max_steps: int,
    policy: Any,
    mode: str,
    actions: dict[Any, Any] | None,
) -> TensorDictBase:
    """The base env's backend, then every transform on the whole trajectory.

    Applies to random-action rollouts started by a full reset, when no transform has an
    inverse and each one maps a whole trajectory as it maps each step (per-key maps,
    StepCounter without max_steps, RewardSum, InitTracker, NextObservationDelta: see
    ``Transform.rollout_map``) and the base env has a backend for the call. Post-step-mdp
    hooks then run once on the whole trajectory.
    """
    inner = _base_backend(env, root, mode)
    assert inner is not None  # supports() said so
    base_root = env.__dict__["_last_reset"][1]
    traj = inner.run(env.base_env, base_root, max_steps, None, mode, actions)
    have = set(traj.keys(True, True))
    start = root.select(*[k for k in root.keys(True, True) if k not in have])
    nb = len(env.batch_size)
    for key, value in start.items(True, True):
        traj.set(
            key,
            value.unsqueeze(nb)
            .expand(*value.shape[:nb], traj.shape[nb], *value.shape[nb:])
            .clone(),
        )
    traj = env.transform.rollout_map(traj)
    hooks = env.post_step_mdp_hooks
    if hooks is not None:
        traj, _ = hooks(traj, None)
    return traj


TransformedEnv.rollout_backends = (RolloutBackend("transformed", _supports, _run),)
EnvBase.transformed_env_class = TransformedEnv  # what EnvBase.append_transform wraps in
