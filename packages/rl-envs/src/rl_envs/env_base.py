"""``EnvBase``: the base class of every environment.

A subclass implements three hooks and sets its specs; ``EnvBase`` does the rest.

Hooks:

* ``_reset(tensordict: TensorDict | None, **kwargs) -> TensorDict``: returns the
  first observations (batch_size ``env.batch_size``). Missing done flags
  (``done``/``terminated``/``truncated`` of ``full_done_spec``) are filled with
  ``False``. If the input holds ``"_reset"`` (bool, ``[*B, 1]`` or ``[*B]``), the
  env may reset only those entries; whatever it returns for the others is
  discarded (see "Partial resets").
* ``_step(tensordict: TensorDict) -> TensorDict``: reads the action (and state
  keys) and returns the next-step content FLAT: observations, ``"reward"``,
  ``"terminated"``, ``"truncated"`` and ``"done"``. ``"done"`` may be left out
  (it is computed as ``terminated | truncated``), and so may ``"truncated"``
  (all ``False``) or ``"terminated"`` when ``"done"`` is given (``done`` where not
  truncated, as in TorchRL).
* ``_set_seed(seed: int | None) -> None``.

Specs (single source of truth for shapes, batch dims included): set
``self.observation_spec`` (a ``Composite``; a leaf spec is wrapped as
``Composite(observation=spec)``), ``self.action_spec`` (stored as
``full_action_spec["action"]``), ``self.reward_spec`` (stored as
``full_reward_spec["reward"]``, default ``Unbounded((*B, 1))``),
``self.done_spec`` (default: ``done``/``terminated``/``truncated`` bool
``Categorical(2)`` of shape ``[*B, 1]``; a leaf spec is copied to the three keys)
and ``self.state_spec`` (default empty). A spec whose leading dims are not the
batch size gets them prepended (``spec.expand(*B, *spec.shape)``), and specs are
moved to ``env.device``. ``*_spec_unbatched`` are the same specs without batch dims.

Public behaviour:

* ``reset(td=None, **kw)`` returns a new TensorDict: the input's root entries
  (except ``"next"``, ``"_reset"``, actions and rewards; e.g. state entries are
  kept) updated with the output of ``_reset``.
  Partial resets: with ``"_reset"`` in the input, every entry produced by
  ``_reset`` takes the new value only where ``_reset`` is ``True`` and keeps
  the input's value elsewhere (entries the input does not hold are taken as
  returned). The output never holds ``"_reset"``.
* ``step(td)`` checks the input (below), calls ``_step``, completes the done
  flags, writes the result under ``"next"`` of ``td`` (in place) and returns ``td``.
  Entries the input already holds under ``"next"`` (e.g. the next recurrent state
  ``("next", "recurrent_state_h")`` written by an LSTM policy) are kept unless
  ``_step`` returns the same key (the env wins, as in TorchRL): ``"next"`` is
  updated, not replaced (``keep_preset_next``).
* Partial steps: with a bool ``"_step"`` mask of shape ``batch_size`` in the input,
  ``step`` steps only the entries where it is ``True`` (TorchRL's behaviour). An
  all-``True`` mask is a plain step; an all-``False`` one does not call ``_step``: the
  ``"next"`` is :meth:`EnvBase.skip_tensordict` (observations and done flags carried
  over, zero rewards). Otherwise ``_step`` gets the mask under ``"_step"`` and steps
  those entries: ``SerialEnv`` / ``ParallelEnv`` step only the flagged sub-envs and
  fill the others with the skip values; a plain env reads the mask itself. The mask
  is removed from the input once stepped.
* ``step_and_maybe_reset(td) -> (td, root)``: ``step``, then ``step_mdp``, then the
  env's post-step-mdp hooks (``env.post_step_mdp_hooks``, ``None`` for plain envs;
  a ``TransformedEnv`` runs those of its transforms, e.g. ``NextObservationDelta``);
  where ``("next", "done")`` is ``True`` the root is reset (a partial reset through
  ``"_reset"``). ``td`` keeps the true final observation under ``"next"``.
* ``rollout(max_steps, policy=None, ...)``: see :meth:`EnvBase.rollout` and
  ``rl_envs._rollout``. Output shape ``[*B, T]`` (time last).
* ``rand_action(td=None)``, ``rand_step(td=None)``, ``set_seed(seed, static_seed=False)``
  (returns the next seed to use), ``close()``.

Exact state (bit-identical resumes from a checkpoint):

* ``get_state() -> dict``: a picklable snapshot of everything the env's next
  steps depend on (simulator state, episode counters, RNG states); save it with
  ``torch.save`` (load with ``weights_only=False``: it holds numpy arrays).
* ``set_state(state)``: restores it, typically into a FRESH instance built the same
  way; the steps that follow are bit-identical to those that followed
  ``get_state()``, given the same actions. The rollout root (``step_mdp`` of the
  last transition) and the global torch RNG (random actions) are the caller's
  to save.
* The default raises ``NotImplementedError`` naming the env class. Implemented by
  ``GymEnv``/``GymWrapper`` (single envs and ``SyncVectorEnv``; ``AsyncVectorEnv``
  raises), ``PendulumEnv`` and ``DMControlEnv``/``DMControlWrapper``, and by
  ``TransformedEnv``, ``SerialEnv`` and ``ParallelEnv`` over envs that implement it.

Input checking (the documented choice for the hot path):

* ``step()`` always checks, at the cost of attribute comparisons, that every
  action present has the spec's shape and device, and that the
  input's root ``"done"`` is not ``True`` (stepping a finished episode without
  a reset: refused, where TorchRL lets the env decide). Errors name the key, what
  was expected, what came and the fix.
* Stepping before the first reset: an env class whose state lives inside the env
  (a simulator, counters) sets ``requires_reset = True``; ``step()``,
  ``step_and_maybe_reset()`` and ``rollout(auto_reset=False)`` then raise a
  ``RuntimeError`` until ``reset()`` or ``set_state()`` has run (one bool read on the
  hot path). ``EnvBase`` defaults to ``False`` (TorchRL's behaviour): a stateless env,
  whose state travels in the TensorDict (a model-based env, TorchRL's stateless
  pendulum), may be stepped from any root. An env whose ``step`` failed half-way
  (e.g. a diverged simulation) sets it again (:meth:`EnvBase.require_reset`).
* Masks are bool: a ``"_reset"`` (``reset``) or ``"_step"`` (``step``) entry of
  another dtype raises a ``TypeError`` naming the key (an int or float mask would
  select rows by value, not by truth).
* A missing action is not an error by itself (TorchRL's behaviour: an env whose
  ``_step`` ignores the action steps without one); a ``_step`` that fails without it
  (a ``KeyError``, or an ``AttributeError`` on ``None``...) raises a ``KeyError``
  naming the key, the fix and the original error (at once with ``validate_actions=True``).
* NaN / inf actions are never valid (no spec holds them and no env can clip them):
  the envs of this package refuse them where they read the action (MuJoCo, Gymnasium,
  PettingZoo, VMAS, ``PendulumEnv``), naming the key; huge finite out-of-spec actions
  follow the out-of-spec policy below (the env clips them), except where the
  simulator itself would discard them (MuJoCo's ``mjMAXVAL``, see ``MujocoEnv``).
* ``set_seed`` takes ``None`` or an int; anything else raises a ``TypeError``.
* An action of another dtype than its spec's goes to the env as it is (TorchRL's
  behaviour: e.g. a float ``1.0`` for an integer counter, which the env casts).
* Out-of-spec actions are passed to the env as they are by default (TorchRL's
  behaviour: the env, or Gymnasium, clips them). ``validate_actions=True``
  (constructor or attribute) turns on a debug mode where ``step()`` checks that
  the action has the spec's dtype and lies inside its spec (``spec.is_in``, a
  reduction plus a host sync) and raises otherwise, and ``rollout()`` checks every step's actions.
* With validation off, each env INSTANCE warns once (``UserWarning``) the first
  time it sees an out-of-spec action, at no cost on the hot path: ``step()``
  probes only the first action it gets, ``rollout()`` probes its stacked actions
  in one vectorised pass per rollout until the instance has warned.
* ``rollout()`` runs the structural checks on its FIRST step only; later steps go
  through the unchecked hot path (the rollout resets done entries itself).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase

from rl_envs import _checks
from rl_envs._env_specs import EnvSpecs
from rl_envs.done import batch_reset_mask, terminated_or_truncated
from rl_envs.rollout_backend import RolloutBackend
from rl_envs.specs import Categorical, Composite, Unbounded
from rl_envs.utils import step_mdp

__all__ = ["EnvBase", "keep_preset_next"]


_PostStepMdpHook = Callable[
    [TensorDictBase, TensorDictBase | None], tuple[TensorDictBase, TensorDictBase | None]
]


class EnvBase(EnvSpecs, torch.nn.Module):
    """Base class of environments: TensorDict in, TensorDict out.

    Args:
        device: where the env's tensors live (default ``"cpu"``).
        batch_size: the env's batch dims (default ``()``: a single env).
        validate_actions: raise when an action lies outside the action spec (see the
            module docstring). Default ``False``: such actions go to the env as they
            are (TorchRL's behaviour), with a one-time warning per env instance.
        allow_done_after_reset: TorchRL's flag; resets are never refused here.
        auto_reset: ``True`` makes the constructor return the env wrapped in an
            ``AutoResetEnv`` (for envs that reset themselves when an episode ends; see
            :mod:`rl_envs.auto_reset`). Read by ``__new__``; ignored here.
        auto_reset_replace: the ``replace`` argument of that ``AutoResetTransform``.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_envs import EnvBase, Unbounded, Bounded
        >>> class Walk(EnvBase):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.observation_spec = Unbounded(shape=(1,))
        ...         self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
        ...     def _reset(self, td):
        ...         self.x = torch.zeros(1)
        ...         return TensorDict(observation=self.x.clone())
        ...     def _step(self, td):
        ...         self.x = self.x + td["action"]
        ...         done = (self.x.abs() > 3).reshape(1)
        ...         return TensorDict(observation=self.x.clone(), reward=-self.x.abs(),
        ...                           terminated=done)
        ...     def _set_seed(self, seed):
        ...         pass
        >>> Walk().rollout(5).batch_size
        torch.Size([5])
    """

    _out_of_spec_warned: bool = False  # set per instance once it warned (validation off)
    _first_action_probed: bool = False  # step() probes only the first action it gets

    requires_reset: bool = False
    """Whether ``step`` is refused until ``reset()`` or ``set_state()`` has run (see the
    module docstring). ``True`` for envs whose state lives inside them (simulators);
    ``False`` (TorchRL's behaviour) for stateless envs stepped from any root."""

    _awaiting_reset: bool = False  # per instance: requires_reset and not reset yet

    post_step_mdp_hooks: _PostStepMdpHook | None = None
    """Called as ``hooks(td, next_root) -> (td, next_root)`` after ``step_mdp`` in
    ``step_and_maybe_reset`` and on every ``rollout`` step (``next_root`` is ``None``
    where the rollout builds none); ``None`` (the default) means there is nothing to run.
    ``TransformedEnv`` sets it when one of its transforms has such a hook. A cross-package
    contract (docs/contract.md, "Rollouts"): collectors that see it non-``None`` build
    every next root with ``step_and_maybe_reset``. ``_post_step_mdp_hooks`` (TorchRL's
    name) reads and writes the same attribute."""

    transformed_env_class: type[EnvBase] | None = None
    """The class :meth:`append_transform` wraps an env in: ``rl_envs.TransformedEnv``,
    which sets it when its module is imported (``import rl_envs`` does), so that this
    module does not import ``transformed_env`` (which imports it: no cycle)."""

    gym_registrar: Callable[..., None] | None = None
    """:func:`rl_envs.libs.gym_export.register_gym`, set when that module is imported
    (``import rl_envs`` does), so that this module does not import it (no cycle)."""

    auto_reset_wrapper: Callable[[EnvBase, bool], EnvBase] | None = None
    """What ``SomeEnv(..., auto_reset=True, auto_reset_replace=True)`` returns, called as
    ``wrapper(env, auto_reset_replace)``: :mod:`rl_envs.auto_reset` sets it to build an
    ``AutoResetEnv`` when it is imported (``import rl_envs`` does; no import cycle)."""

    rollout_backends: tuple[RolloutBackend, ...] = ()
    """The fast rollout loops of this env class, tried in order by ``rollout(backend=
    "auto")`` (see :mod:`rl_envs.rollout_backend`); none on ``EnvBase``."""

    def __new__(cls, *args: Any, **kwargs: Any) -> EnvBase:
        """Creates the env; a class-level ``_output_spec`` / ``_input_spec`` is copied onto it.

        TorchRL's envs may set those two ``Composite`` specs (holding ``full_*_spec``
        entries) on the class, e.g. in their own ``__new__``, before ``__init__`` runs;
        :meth:`__init__` then installs this instance's copy.

        With ``auto_reset=True`` (TorchRL's keyword) the env is built here (its
        ``__init__`` runs without the keyword) and returned wrapped by
        :attr:`auto_reset_wrapper` (an ``AutoResetEnv``): Python then does not call
        ``__init__`` again, since the result is not an instance of ``cls``.
        """
        auto_reset = kwargs.pop("auto_reset", False)
        replace = kwargs.pop("auto_reset_replace", True)
        env = super().__new__(cls)
        env.__dict__["_class_specs"] = {
            name: getattr(cls, name).clone()
            for name in ("_output_spec", "_input_spec")
            if getattr(cls, name, None) is not None
        }
        env.__dict__["_batch_locked"] = bool(kwargs.get("_batch_locked", True))
        # Specs set before ``super().__init__()`` (TorchRL allows it): stored against an
        # empty batch on the CPU here, re-installed by ``__init__`` with the env's own.
        env.__dict__["_batch_size"] = torch.Size(())
        env.__dict__["_device"] = torch.device("cpu")
        if auto_reset:
            wrapper = EnvBase.auto_reset_wrapper
            if wrapper is None:  # pragma: no cover - rl_envs/__init__ imports auto_reset
                raise RuntimeError("EnvBase(auto_reset=True): import rl_envs first.")
            env.__init__(*args, **kwargs)
            return wrapper(env, replace)
        return env

    def __init__(
        self,
        *,
        device: torch.device | str | int | None = None,
        batch_size: Sequence[int] | torch.Size | None = None,
        validate_actions: bool = False,
        allow_done_after_reset: bool = True,
        auto_reset: bool = False,
        auto_reset_replace: bool = True,
    ) -> None:
        early = {name: self.__dict__.pop(name) for name in _SPEC_ATTRS if name in self.__dict__}
        super().__init__()
        self.allow_done_after_reset = (
            allow_done_after_reset  # TorchRL's flag; resets are never refused here
        )
        self.is_closed = False
        self._device = torch.device(device) if device is not None else torch.device("cpu")
        self._batch_size = torch.Size(batch_size) if batch_size is not None else torch.Size(())
        self.validate_actions = validate_actions
        self._awaiting_reset = self.requires_reset
        b = self._batch_size
        self._full_observation_spec = Composite(shape=b, device=self._device)
        self._full_action_spec = Composite(shape=b, device=self._device)
        self._full_state_spec = Composite(shape=b, device=self._device)
        self._full_reward_spec = Composite(
            reward=Unbounded(shape=(*b, 1), device=self._device), shape=b, device=self._device
        )
        self._full_done_spec = self._default_done_spec()
        self._install_class_specs(self.__dict__.pop("_class_specs", None) or {})
        for name, spec in early.items():
            setattr(self, name.removeprefix("_"), spec)

    def __getattr__(self, name: str) -> Any:
        # Before ``__init__`` (no ``_parameters`` yet), a spec read before it is set gets
        # its default, kept so that in-place edits (``spec["x"] = ...``) are re-installed.
        if name in _SPEC_ATTRS and "_parameters" not in self.__dict__:
            spec = _default_spec(name)
            self.__dict__[name] = spec
            return spec
        return super().__getattr__(name)

    @property
    def batch_locked(self) -> bool:
        """Whether ``step`` / ``reset`` take only TensorDicts of batch size ``batch_size``.

        ``True`` by default (TorchRL's name). An env created with ``_batch_locked=False``
        (TorchRL's keyword, read by ``EnvBase.__new__``) and an empty ``batch_size`` steps
        inputs of any batch size: its ``_step`` / ``_reset`` return the input's batch.
        Read-only: it describes what ``_step`` can do.
        """
        return self._batch_locked

    @batch_locked.setter
    def batch_locked(self, value: bool) -> None:
        raise RuntimeError(
            "batch_locked is a read-only property: it says whether the env's _step accepts "
            "other batch sizes. Create the env with _batch_locked=False instead."
        )

    def _install_class_specs(self, specs: dict[str, Any]) -> None:
        parts = {"_output_spec": ("full_observation_spec", "full_reward_spec", "full_done_spec"),
                 "_input_spec": ("full_action_spec", "full_state_spec")}  # fmt: skip
        for name, spec in specs.items():
            for key in parts[name]:
                if key in spec:
                    setattr(self, key, spec[key])

    @property
    def _post_step_mdp_hooks(self) -> _PostStepMdpHook | None:
        """TorchRL's name of :attr:`post_step_mdp_hooks`."""
        return self.post_step_mdp_hooks

    @_post_step_mdp_hooks.setter
    def _post_step_mdp_hooks(self, hooks: _PostStepMdpHook | None) -> None:
        self.post_step_mdp_hooks = hooks

    # ------------------------------------------------------------------ hooks
    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement _reset(tensordict).")

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement _step(tensordict).")

    def _set_seed(self, seed: int | None) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _set_seed(seed).")

    # ------------------------------------------------------------ attributes
    @property
    def batch_size(self) -> torch.Size:
        """The env's batch dims; every spec and TensorDict starts with them."""
        return self._batch_size

    @property
    def shape(self) -> torch.Size:
        """The env's batch dims: :attr:`batch_size` (TorchRL's alias)."""
        return self._batch_size

    @property
    def device(self) -> torch.device:
        """The device of the env's tensors and specs."""
        return self._device

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_size={tuple(self.batch_size)}, device={self.device})"

    # ------------------------------------------------------------------ reset
    def reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        """Resets the env (or the entries flagged by ``"_reset"``) and returns the root.

        Args:
            tensordict: optional input; may hold ``"_reset"`` for a partial reset and
                state entries, which are carried to the output.
            **kwargs: passed to ``_reset``.

        Returns:
            A new TensorDict of batch_size ``env.batch_size`` with the observations and
            done flags (``False`` where reset).
        """
        mask = None
        reset_keys: list[Any] = ["_reset"]
        if tensordict is not None:
            mask = tensordict.get("_reset", None)
            if mask is None:  # nested done groups: ("agents", "_reset"), ...
                reset_keys = self.reset_keys
                for key in reset_keys:
                    _checks.check_bool_mask(tensordict.get(key, None), key, "reset")
                mask = batch_reset_mask(tensordict, reset_keys, len(self._batch_size))
            else:
                _checks.check_bool_mask(mask, "_reset", "reset")
        out = self._reset(tensordict, **kwargs)
        self._awaiting_reset = False
        batch = self._batch_size
        if not self._batch_locked and tensordict is not None and not batch:
            batch = tensordict.batch_size  # a batch-unlocked env resets the input's batch
        _checks.check_batch_size(out, batch, f"{type(self).__name__}._reset")
        self._fill_missing_done(out, reset=True)
        if tensordict is None:
            return out
        prev = tensordict.exclude("next", *reset_keys, *self.action_keys, *self.reward_keys)
        if mask is not None and not bool(mask.all()):
            out = _merge_partial(out, prev, mask, len(self._batch_size))
        prev.update(out)
        return prev

    def _fill_missing_done(self, out: TensorDictBase, reset: bool) -> None:
        spec = self._full_done_spec
        for key in spec.keys(True, True):
            if out.get(key, None) is not None:
                continue
            last = key[-1] if isinstance(key, tuple) else key
            if not reset and last == "done":
                prefix = key[:-1] if isinstance(key, tuple) else ()
                term = out.get((*prefix, "terminated"), None)
                trunc = out.get((*prefix, "truncated"), None)
                if term is not None and trunc is not None:
                    out.set(key, term | trunc)
                    continue
                if term is not None:
                    out.set(key, term.clone())
                    continue
            if not reset and last == "terminated":  # only "done" given: it terminated
                prefix = key[:-1] if isinstance(key, tuple) else ()
                done = out.get((*prefix, "done"), None)
                trunc = out.get((*prefix, "truncated"), None)
                if done is not None:
                    out.set(key, done & ~trunc if trunc is not None else done.clone())
                    continue
            lead = out.batch_size[: out.batch_dims - len(self._batch_size)]
            out.set(key, spec[key].zero(lead) if lead else spec[key].zero())

    # ------------------------------------------------------------------- step
    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Runs one step: reads the action, writes the next step under ``"next"``.

        Args:
            tensordict: the root of the current step with the action(s).

        Returns:
            ``tensordict`` itself with a ``"next"`` entry (observations, reward,
            done, terminated, truncated).

        Raises:
            KeyError / ValueError / RuntimeError: see the module docstring.
        """
        missing = self._check_step_input(tensordict)
        if missing:
            return self._step_without_actions(tensordict, missing)
        if "_step" in tensordict.keys():  # noqa: SIM118 (a partial step; cheaper than get)
            mask = tensordict.get("_step")
            _checks.check_bool_mask(mask, "_step", "step")
            return self._partial_step(tensordict, mask)
        return self._step_unchecked(tensordict)

    def require_reset(self) -> None:
        """Refuses further steps until the next ``reset()`` / ``set_state()``.

        For envs whose ``step`` failed half-way (e.g. MuJoCo after a diverged
        simulation): the caller's root no longer matches the env's state. Only envs
        with ``requires_reset = True`` check it.
        """
        self._awaiting_reset = True

    def _step_without_actions(
        self, tensordict: TensorDictBase, missing: list[Any]
    ) -> TensorDictBase:
        """Steps an input lacking action entries: fine if ``_step`` does not read them
        (TorchRL does not check); a ``KeyError`` naming one becomes a teaching error."""
        try:
            return self._step_unchecked(tensordict)
        except KeyError as exc:
            for key in missing:
                name = key[-1] if isinstance(key, tuple) else key
                if name in str(exc):
                    raise _checks.missing_action_error(
                        tensordict, key, self._full_action_spec
                    ) from exc
            raise
        except (AttributeError, TypeError) as exc:
            # ``tensordict.get(key)`` gives None for a missing key: the env then fails on
            # None (``'NoneType' object has no attribute ...``), far from the cause
            if "NoneType" not in str(exc):
                raise
            raise _checks.missing_action_error(
                tensordict, missing[0], self._full_action_spec, exc
            ) from exc

    def _partial_step(self, tensordict: TensorDictBase, mask: torch.Tensor) -> TensorDictBase:
        """``step`` of an input holding a ``"_step"`` mask (see "Partial steps")."""
        del tensordict["_step"]
        if bool(mask.all()):
            return self._step_unchecked(tensordict)
        if not bool(mask.any()):
            tensordict.set("next", self.skip_tensordict(tensordict))
            return tensordict
        tensordict.set("_step", mask)
        self._step_unchecked(tensordict)
        del tensordict["_step"]
        return tensordict

    def skip_tensordict(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The ``"next"`` of entries that are not stepped (a partial step, ``"_step"``).

        Observations and done flags keep the values ``tensordict`` holds (zeros for the
        entries it lacks), rewards are zero.

        Example:
            >>> from rl_envs import PendulumEnv
            >>> env = PendulumEnv()
            >>> td = env.reset()
            >>> nxt = env.skip_tensordict(td)
            >>> bool((nxt["observation"] == td["observation"]).all()), nxt["reward"].item()
            (True, 0.0)
        """
        skip = self._full_done_spec.zero()
        skip.update(self._full_observation_spec.zero())
        skip.update(self._full_reward_spec.zero())
        reward_keys = set(self.reward_keys)
        for key in list(skip.keys(True, True)):
            if key in reward_keys:
                continue
            value = tensordict.get(key, None)
            if value is not None:
                skip.set(key, value.clone())
        return skip

    def _check_step_input(self, tensordict: TensorDictBase) -> list[Any]:
        """Checks the input of ``step``; returns the action keys it lacks (usually none)."""
        if self._awaiting_reset:
            raise _checks.not_reset_error(self, "step")
        spec = self._full_action_spec
        if tensordict.batch_size != self._batch_size:
            self._check_unlocked_batch(tensordict.batch_size, "step")
            spec = spec.expand(*tensordict.batch_size, *spec.shape)
        keys = self.action_keys
        missing = _checks.check_action_structure(tensordict, keys, spec)
        _checks.check_not_done(tensordict)
        if self.validate_actions:
            if missing:
                raise _checks.missing_action_error(tensordict, missing[0], spec)
            _checks.check_action_in_spec(tensordict, keys, self._full_action_spec)
        elif not self._first_action_probed:
            self._first_action_probed = True
            _checks.warn_once_if_out_of_spec(self, tensordict, keys, self._full_action_spec)
        return missing

    def _check_unlocked_batch(self, batch_size: torch.Size, method: str) -> None:
        """Accepts another batch size only for a batch-unlocked env with an empty batch."""
        if self._batch_locked or self._batch_size:
            raise RuntimeError(
                f"Expected a tensordict with shape==env.batch_size, got {tuple(batch_size)} "
                f"and {tuple(self._batch_size)}: env.{method}() got a TensorDict of another "
                "batch size than the env's. Start from td = env.reset() and keep its batch size."
            )

    def _step_unchecked(self, tensordict: TensorDictBase) -> TensorDictBase:
        next_td = self._step(tensordict)
        self._fill_missing_done(next_td, reset=False)
        if "next" in tensordict.keys():  # noqa: SIM118 (TensorDict has no __contains__)
            keep_preset_next(tensordict.get("next"), next_td)
        tensordict.set("next", next_td)
        return tensordict

    def step_and_maybe_reset(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        """Steps, then builds the next root, resetting the entries that are done.

        Returns:
            ``(td, root)``: ``td`` holds the transition (true final observation under
            ``"next"``); ``root`` is the input of the next step.
        """
        missing = self._check_step_input(tensordict)
        if missing:
            tensordict = self._step_without_actions(tensordict, missing)
            return self._maybe_reset_after_step(tensordict)
        if "_step" in tensordict.keys():  # noqa: SIM118
            tensordict = self.step(tensordict)
            return self._maybe_reset_after_step(tensordict)
        return self._step_and_maybe_reset_unchecked(tensordict)

    def _step_and_maybe_reset_unchecked(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        return self._maybe_reset_after_step(self._step_unchecked(tensordict))

    def _maybe_reset_after_step(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        root = step_mdp(tensordict, reward_keys=self.reward_keys, action_keys=self.action_keys)
        hooks = self.post_step_mdp_hooks
        if hooks is not None:
            tensordict, root = hooks(tensordict, root)
        done = root.get("done", None)
        if done is not None:
            if bool(done.any()):
                root.set("_reset", done)
                root = self.reset(root)
        elif terminated_or_truncated(root, self._full_done_spec):  # writes the nested "_reset"s
            root = self.reset(root)
        return tensordict, root

    def step_mdp(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """The root of the next step of a stepped ``next_tensordict`` (TorchRL's method).

        :func:`rl_envs.utils.step_mdp` with this env's reward and action keys, keeping
        the actions (``exclude_action=False``, as TorchRL's method does).

        Example:
            >>> from rl_envs import PendulumEnv
            >>> env = PendulumEnv()
            >>> td = env.step(env.rand_action(env.reset()))
            >>> root = env.step_mdp(td)
            >>> bool((root["observation"] == td["next", "observation"]).all()), "next" in root
            (True, False)
        """
        return step_mdp(
            next_tensordict,
            reward_keys=self.reward_keys,
            action_keys=self.action_keys,
            exclude_action=False,
        )

    # --------------------------------------------------------------- helpers
    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Writes a random action (from :attr:`full_action_spec`) into ``tensordict``."""
        if tensordict is None:
            tensordict = TensorDict(batch_size=self._batch_size, device=self._device)
        tensordict.update(self._full_action_spec.rand())
        return tensordict

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Steps with a random action; ``tensordict`` defaults to ``env.reset()``."""
        if tensordict is None:
            tensordict = self.reset()
        return self.step(self.rand_action(tensordict))

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seeds the env.

        Args:
            seed: the seed (``None``: unseeded).
            static_seed: if ``True`` the returned seed is ``seed`` itself.

        Returns:
            The seed to give the next env (``seed + 1`` unless ``static_seed``).

        Raises:
            TypeError: ``seed`` is neither ``None`` nor an int.
        """
        seed = _checks.check_seed(seed, type(self).__name__)
        self._set_seed(seed)
        if seed is None or static_seed:
            return seed
        return seed + 1

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Releases the env's resources (nothing by default) and sets :attr:`is_closed`.

        Args:
            raise_if_closed: TorchRL's keyword, for the batched envs (which raise when
                closed twice with it ``True``); a plain env closes twice silently, as there.
        """
        self.is_closed = True

    def fake_tensordict(self) -> TensorDictBase:
        """A zero-filled transition with every entry the specs declare (TorchRL's name).

        The root holds the observations, done flags, states and actions; ``"next"``
        the observations, rewards and done flags. Handy to preallocate storage or
        to check a module's keys without running the env.

        Example:
            >>> from rl_envs import PendulumEnv
            >>> td = PendulumEnv().fake_tensordict()
            >>> sorted(td["next"].keys())
            ['done', 'observation', 'reward', 'terminated', 'truncated']
        """
        root = self._full_state_spec.zero()
        root.update(self._full_observation_spec.zero())
        root.update(self._full_done_spec.zero())
        nxt = root.exclude(*self.state_keys).clone()
        nxt.update(self._full_reward_spec.zero())
        root.update(self._full_action_spec.zero())
        root.set("next", nxt)
        return root

    def check_env_specs(self, *args: Any, **kwargs: Any) -> None:
        """Runs :func:`rl_envs.utils.check_env_specs` on this env (TorchRL's method)."""
        from rl_envs.utils import check_env_specs

        check_env_specs(self, *args, **kwargs)

    def add_truncated_keys(self) -> EnvBase:
        """Adds a ``"truncated"`` flag next to each ``"done"`` that lacks one; returns ``self``.

        The new flag is a copy of the ``"done"`` spec; ``_step`` outputs that leave it
        out get ``False`` (see ``_step``). ``rollout(..., set_truncated=True)`` needs it.
        """
        spec = self._full_done_spec
        for group in self.done_keys_groups:
            prefix = group[0][:-1] if isinstance(group[0], tuple) else ()
            done_key = (*prefix, "done") if prefix else "done"
            trunc_key = (*prefix, "truncated") if prefix else "truncated"
            if done_key in group and trunc_key not in group:
                spec[trunc_key] = spec[done_key].clone()
        return self

    @classmethod
    def register_gym(cls, id: str, **kwargs: Any) -> None:
        """Registers an env with Gymnasium (TorchRL's name); see
        :func:`rl_envs.libs.gym_export.register_gym` (``entry_point`` defaults to ``cls``)."""
        registrar = EnvBase.gym_registrar
        if registrar is None:  # pragma: no cover - rl_envs/__init__ imports gym_export
            raise RuntimeError("EnvBase.register_gym(): import rl_envs first.")
        registrar(id, kwargs.pop("entry_point", cls), **kwargs)

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """The env's exact state, for bit-identical resumes (see the module docstring).

        Returns:
            A picklable dict (``torch.save`` it; load with ``weights_only=False``).

        Raises:
            NotImplementedError: the env does not implement it (the default).
        """
        raise NotImplementedError(self._no_state_message("get_state"))

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` result; the next steps are bit-identical.

        Raises:
            NotImplementedError: the env does not implement it (the default).
        """
        raise NotImplementedError(self._no_state_message("set_state"))

    def _no_state_message(self, method: str) -> str:
        return (
            f"{type(self).__name__} does not implement {method}(): its exact state cannot be "
            f"saved or restored. Envs that support it: {', '.join(_STATEFUL_ENVS)}. A custom "
            "env implements get_state() -> dict (picklable copies of everything its next "
            "steps depend on, RNGs included) and set_state(state)."
        )

    # ---------------------------------------------------------------- rollout
    def append_transform(self, transform: Any) -> Any:
        """A :class:`~rl_envs.TransformedEnv` of this env with ``transform`` (TorchRL's shortcut).

        ``TransformedEnv`` appends to its own stack instead. A ``{key: spec}`` mapping
        becomes a ``TensorDictPrimer``, as there.

        Example:
            >>> from rl_envs import PendulumEnv, StepCounter
            >>> env = PendulumEnv().append_transform(StepCounter())
            >>> type(env).__name__, "step_count" in env.rollout(2).keys()
            ('TransformedEnv', True)
        """
        wrapper = EnvBase.transformed_env_class
        if wrapper is None:  # pragma: no cover - rl_envs/__init__ imports transformed_env
            raise RuntimeError("append_transform(): import rl_envs (TransformedEnv) first.")
        return wrapper(self).append_transform(transform)

    def rollout(
        self,
        max_steps: int,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        callback: Callable[[EnvBase, TensorDictBase], Any] | None = None,
        *,
        auto_reset: bool = True,
        break_when_any_done: bool | None = None,
        break_when_all_done: bool | None = None,
        return_contiguous: bool = True,
        tensordict: TensorDictBase | None = None,
        out: TensorDictBase | None = None,
        backend: str = "auto",
        actions: Iterable[torch.Tensor] | None = None,
        storing_device: torch.device | str | None = None,
        set_truncated: bool = False,
    ) -> TensorDictBase:
        """Runs ``policy`` in the env for up to ``max_steps`` steps.

        Args:
            max_steps: number of steps.
            policy: a callable reading and writing a TensorDict (e.g. a
                ``TensorDictModule``); ``None`` uses random actions. A plain
                ``nn.Module`` is called with the observation tensor(s) (named like
                its ``forward`` arguments, or the only one) and writes the action.
            callback: called as ``callback(env, td)`` after each step.
            auto_reset: reset before the first step (else ``tensordict`` is the start).
            break_when_any_done: stop at the first step where any entry is done
                (default ``True`` unless ``break_when_all_done``). With ``False``, done
                entries are reset and the rollout goes on.
            break_when_all_done: stop once every entry has been done once; entries
                that finished early repeat their last step afterwards.
            return_contiguous: stack into one TensorDict (else a lazy stack).
            tensordict: the start when ``auto_reset=False`` (or passed to ``reset``).
            out: a preallocated TensorDict of batch_size ``[*B, max_steps]`` to fill;
                the result is ``out[..., :T]``.
            backend: ``"auto"`` (the first of the env class's ``rollout_backends`` that
                supports the call, else the generic loop), ``"generic"`` (the reference
                loop) or a backend's name; see :mod:`rl_envs.rollout_backend`. Every
                backend returns the generic loop's result, bit for bit.
            actions: the actions to take, one tensor per step (written under the
                env's action key); a sized iterable caps ``max_steps`` to its length.
                Exclusive with ``policy``.
            storing_device: the device of the returned TensorDict (default the env's).
            set_truncated: mark the last step ``truncated`` (and ``done``), e.g. for a
                value target that bootstraps there; the done spec must hold
                ``"truncated"`` (see :meth:`add_truncated_keys`).

        Returns:
            A TensorDict of batch_size ``[*B, T]``, ``T <= max_steps``. As in TorchRL,
            its last dim is named ``"time"`` (``names == [*[None] * len(B), "time"]``)
            when it is contiguous and not written into ``out``.
        """
        from rl_envs._rollout import run_rollout

        if actions is not None:
            if policy is not None:
                raise ValueError(
                    "rollout(policy=..., actions=...): pass one of them, not both (actions "
                    "replays given actions; policy computes them)."
                )
            if hasattr(actions, "__len__"):
                max_steps = min(max_steps, len(actions))  # type: ignore[arg-type]
            policy = _ReplayActions(iter(actions), self.action_key)
        if _is_tensor_policy(policy):
            policy = _TensorPolicy(policy, self)
        truncated_keys = self._truncated_keys() if set_truncated else []
        result = run_rollout(
            self,
            max_steps,
            policy,
            callback,
            auto_reset=auto_reset,
            break_when_any_done=break_when_any_done,
            break_when_all_done=break_when_all_done,
            return_contiguous=return_contiguous,
            tensordict=tensordict,
            out=out,
            backend=backend,
        )
        if out is None and return_contiguous and not result._has_names():
            result.refine_names(..., "time")
        if truncated_keys:
            last = result[..., -1]
            for key in truncated_keys:
                last.get(("next", *key)).fill_(True)
                done = (*key[:-1], "done")
                if ("next", *done) in last.keys(True, True):
                    last.get(("next", *done)).fill_(True)
        if storing_device is not None:
            result = result.to(storing_device)
        return result

    def _truncated_keys(self) -> list[tuple[str, ...]]:
        keys = [
            key if isinstance(key, tuple) else (key,)
            for key in self.done_keys
            if (key[-1] if isinstance(key, tuple) else key) == "truncated"
        ]
        if not keys:
            raise RuntimeError(
                f"rollout(set_truncated=True): set_truncated was set to True but "
                f"{type(self).__name__}'s done spec holds no 'truncated' key (keys: "
                f"{self.done_keys}). Call env.add_truncated_keys() first."
            )
        return keys


_SPEC_ATTRS = (
    "_full_observation_spec",
    "_full_action_spec",
    "_full_reward_spec",
    "_full_done_spec",
    "_full_state_spec",
)


def _default_spec(name: str) -> Composite:
    """The unbatched CPU default of ``EnvBase``'s spec attribute ``name``."""
    if name == "_full_reward_spec":
        return Composite(reward=Unbounded(shape=(1,)))
    if name == "_full_done_spec":
        flag = Categorical(2, shape=(1,), dtype=torch.bool)
        return Composite(done=flag, terminated=flag.clone(), truncated=flag.clone())
    return Composite()


_STATEFUL_ENVS = (
    "GymEnv/GymWrapper (single envs and gymnasium.vector.SyncVectorEnv; not AsyncVectorEnv)",
    "PendulumEnv",
    "DMControlEnv/DMControlWrapper",
    "TransformedEnv, SerialEnv and ParallelEnv over envs that support it",
)


_TD_ARG_NAMES = frozenset({"td", "tensordict", "tensordict_in", "data"})


def _is_tensor_policy(policy: Any) -> bool:
    """A plain ``nn.Module`` that reads tensors, not a TensorDict (TorchRL wraps those):
    no ``in_keys`` / ``out_keys`` and a ``forward`` whose argument is not a TensorDict's
    usual name (``td``, ``tensordict``...), which a TensorDict-reading module keeps."""
    if not isinstance(policy, torch.nn.Module) or isinstance(policy, TensorDictModuleBase):
        return False
    if hasattr(policy, "in_keys") or hasattr(policy, "out_keys"):
        return False
    if isinstance(policy, torch.nn.Sequential) and any(
        isinstance(m, TensorDictModuleBase) for m in policy
    ):  # a chain of TensorDict modules (e.g. actor then exploration) passes the TensorDict on
        return False
    names = list(inspect.signature(policy.forward).parameters)
    return not (len(names) == 1 and names[0] in _TD_ARG_NAMES)


class _TensorPolicy:
    """A plain ``nn.Module`` policy in a rollout: observations in, the action out (TorchRL).

    The module is called with the observation entries named like its ``forward``
    arguments, or with the only observation when the env has one; its output is
    written under the env's action key.
    """

    def __init__(self, module: torch.nn.Module, env: EnvBase) -> None:
        names = list(inspect.signature(module.forward).parameters)
        obs = env.observation_keys
        if names and all(n in obs for n in names):
            self.in_keys = names
        elif len(obs) == 1:
            self.in_keys = obs
        else:
            raise TypeError(
                f"rollout(policy={type(module).__name__}): a plain nn.Module policy is called "
                "with the observations named like its forward() arguments, or with the only "
                f"observation; this env has {obs} and forward takes {names}. Wrap it in a "
                "TensorDictModule(module, in_keys=[...], out_keys=[...])."
            )
        self.module = module
        self.out_key = env.action_key

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict.set(self.out_key, self.module(*[tensordict.get(k) for k in self.in_keys]))


class _ReplayActions:
    """The policy of ``rollout(actions=...)``: writes the next given action."""

    def __init__(self, actions: Iterator[torch.Tensor], key: Any) -> None:
        self.actions = actions
        self.key = key

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        try:
            action = next(self.actions)
        except StopIteration:
            raise ValueError(
                "rollout(actions=...): the actions ran out before max_steps; pass as many "
                "actions as steps, or a smaller max_steps."
            ) from None
        return tensordict.set(self.key, action)


def keep_preset_next(preset: TensorDictBase, next_td: TensorDictBase) -> TensorDictBase:
    """Copies into ``next_td`` the entries of ``preset`` that ``next_td`` lacks.

    ``preset`` is what the input already held under ``"next"`` before the env
    stepped (e.g. ``("next", "recurrent_state_h")`` written by an LSTM policy);
    the env's own entries win where both have a key, as in TorchRL. Returns
    ``next_td``. Env wrappers that run transforms on the step output (e.g.
    ``TransformedEnv``) call it before the transforms, so they see the preset too.
    """
    if preset is next_td:
        return next_td
    written = set(next_td.keys(True, True))
    for key, value in preset.items(True, True):
        if key not in written:
            next_td.set(key, value)
    return next_td


def _merge_partial(
    new: TensorDictBase, prev: TensorDictBase, mask: torch.Tensor, batch_ndim: int
) -> TensorDictBase:
    """Keeps ``prev``'s values where ``mask`` is ``False`` for keys present in both."""
    mask = mask.reshape(*mask.shape[:batch_ndim], -1).any(-1) if mask.ndim > batch_ndim else mask
    prev_keys = set(prev.keys(True, True))
    for key in list(new.keys(True, True)):
        if key not in prev_keys:
            continue
        value = new.get(key)
        old = prev.get(key)
        if not isinstance(value, torch.Tensor) or old.shape != value.shape:
            continue
        m = mask.reshape(*mask.shape, *([1] * (value.ndim - batch_ndim)))
        new.set(key, torch.where(m, value, old))
    return new
