"""Env utilities: ``step_mdp``, ``check_env_specs`` and ``EnvCreator``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import cloudpickle
import torch
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    is_tensor_collection,
)
from tensordict.utils import NestedKey

from rl_envs.done import terminated_or_truncated
from rl_envs.specs import Composite, NonTensor

__all__ = [
    "EnvCreator",
    "EnvMetaData",
    "check_env_specs",
    "get_env_metadata",
    "step_mdp",
    "terminated_or_truncated",
]

_terminated_or_truncated = terminated_or_truncated  # TorchRL's private name (its test helpers)


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


def _is_leaf_or_non_tensor(cls: type) -> bool:
    """``is_leaf`` for ``TensorDict.keys``: non-tensor entries (strings...) count as leaves,
    as ``NonTensor`` specs do in ``Composite.keys(True, True)``."""
    return not is_tensor_collection(cls) or issubclass(cls, (NonTensorData, NonTensorStack))


_DONE_KEYS = ("done", "terminated", "truncated")


def _key_list(keys: NestedKey | Sequence[NestedKey]) -> list[NestedKey]:
    if isinstance(keys, str):
        return [keys]
    if isinstance(keys, tuple) and all(isinstance(k, str) for k in keys):
        return [keys]
    return list(keys)


def step_mdp(
    tensordict: TensorDictBase,
    next_tensordict: TensorDictBase | None = None,
    keep_other: bool = True,
    exclude_reward: bool = True,
    exclude_done: bool = False,
    exclude_action: bool = True,
    reward_keys: NestedKey | Sequence[NestedKey] = "reward",
    done_keys: NestedKey | Sequence[NestedKey] | None = None,
    action_keys: NestedKey | Sequence[NestedKey] = "action",
) -> TensorDictBase:
    """Builds the input of the next step from a transition: moves ``"next"`` to the root.

    The contract (docs/contract.md, section 1; ``rl_collectors`` keeps a copy that
    follows it), with the default arguments. The result is a new TensorDict of the
    batch size of ``tensordict`` holding:

    1. every entry of ``tensordict["next"]`` except the reward keys (observations,
       done flags, states, anything a policy wrote under ``"next"``);
    2. every other root entry of ``tensordict``, i.e. all but ``"next"``, the action
       keys and the reward keys, whose key the result does not already hold: ``"next"``
       wins where both have a key, and entries the policy wrote at the root (e.g.
       ``"count"``, ``"action_log_prob"``, a ``"_"``-free state) are KEPT. Sub-
       TensorDicts merge leaf by leaf.

    Tensors are shared with ``tensordict``, not copied. ``exclude_*`` / ``keep_other``
    change the defaults as in TorchRL: ``exclude_done=True`` drops the done keys from
    both levels, ``exclude_action=False`` keeps the actions, ``exclude_reward=False``
    keeps the rewards of ``"next"``, ``keep_other=False`` drops part 2.

    Args:
        tensordict: a transition (root + ``"next"``), e.g. the output of ``env.step``.
        next_tensordict: if given, the result is written into it (in place) and returned.
        keep_other: keep the root entries of part 2 above.
        exclude_reward: drop the reward entries (default ``True``).
        exclude_done: drop the done flags (default ``False``).
        exclude_action: drop the action entries of the root (default ``True``).
        reward_keys, done_keys, action_keys: the keys of each kind: a key (a string or
            a tuple of strings) or a list of keys. ``done_keys`` defaults to
            ``["done", "terminated", "truncated"]``.

    Returns:
        A new TensorDict (or ``next_tensordict``) with the batch size of ``tensordict``.

    Raises:
        KeyError: ``tensordict`` has no ``"next"`` entry.

    Example:
        >>> from tensordict import TensorDict
        >>> import torch
        >>> td = TensorDict(observation=torch.zeros(3), action=torch.ones(1), count=torch.ones(1),
        ...                 next=TensorDict(observation=torch.ones(3), reward=torch.ones(1)))
        >>> sorted(step_mdp(td).keys())
        ['count', 'observation']
    """
    rewards = _key_list(reward_keys)
    actions = _key_list(action_keys)
    nxt = tensordict.get("next", None)
    if nxt is None:
        raise KeyError(
            "step_mdp: the transition has no 'next' entry; expected the output of env.step(td), "
            f"got keys {sorted(map(str, tensordict.keys()))}."
        )
    defaults = keep_other and exclude_reward and exclude_action and not exclude_done
    if defaults and next_tensordict is None:
        out = _flat_next_root(tensordict, nxt, rewards, actions)
        if out is not None:
            return out
    dones = _key_list(done_keys) if done_keys is not None else list(_DONE_KEYS)
    excluded: list[NestedKey] = []
    for flag, keys in ((exclude_reward, rewards), (exclude_done, dones), (exclude_action, actions)):
        if flag:
            excluded += keys
    out = _next_root(tensordict, keep_other, exclude_action, actions, excluded)
    if next_tensordict is not None:
        next_tensordict.update(out)
        return next_tensordict
    return out


def _next_root(
    tensordict: TensorDictBase,
    keep_other: bool,
    exclude_action: bool,
    actions: list[NestedKey],
    excluded: list[NestedKey],
) -> TensorDictBase:
    """``step_mdp``'s general path: the root's entries (all of them with ``keep_other``,
    else the actions unless excluded), then ``"next"``'s over them, leaf by leaf.

    Sub-TensorDicts are new (``empty()`` of the source: same batch size) and kept only
    when some leaf lands in them; tensors are shared. A lazy stack (heterogeneous
    shapes) is handled one stacked TensorDict at a time.
    """
    if isinstance(tensordict, LazyStackedTensorDict):
        parts = [
            _next_root(td, keep_other, exclude_action, actions, excluded)
            for td in tensordict.tensordicts
        ]
        return LazyStackedTensorDict.lazy_stack(parts, tensordict.stack_dim)
    skip = {_as_tuple(key) for key in excluded}
    nxt = tensordict.get("next")
    out = nxt.empty()
    if keep_other:
        _copy_leaves(tensordict.exclude("next"), out, (), skip)
    elif not exclude_action:
        for key in actions:
            _copy_leaves(tensordict, out, (), skip, only=_as_tuple(key))
    _copy_leaves(nxt, out, (), skip)
    return out


def _is_sub_td(value: Any) -> bool:
    """A TensorDict to copy leaf by leaf; a tensorclass (e.g. a chat history) and
    non-tensor data move whole, as one value."""
    return isinstance(value, TensorDictBase) and not isinstance(
        value, (NonTensorData, NonTensorStack)
    )


def _set_validated(dst: TensorDictBase, name: str, value: Any) -> None:
    """``dst.set(name, value)`` without tensordict's checks: ``value`` comes from a
    TensorDict of the same batch size (the source of the copy), so they hold."""
    dst._set_str(name, value, inplace=False, validated=True, non_blocking=False)


def _copy_leaves(
    src: TensorDictBase,
    dst: TensorDictBase,
    prefix: tuple[str, ...],
    skip: set[tuple[str, ...]],
    only: tuple[str, ...] | None = None,
) -> bool:
    """Sets ``src``'s leaves into ``dst`` (except the keys in ``skip``; only the path
    ``only`` if given), creating sub-TensorDicts as needed. Returns whether any was set."""
    if isinstance(src, LazyStackedTensorDict) and isinstance(dst, LazyStackedTensorDict):
        pairs = zip(src.tensordicts, dst.tensordicts, strict=True)
        found = [_copy_leaves(s, d, prefix, skip, only) for s, d in pairs]
        return any(found)
    items = [(only[0], src.get(only[0], None))] if only else src.items()
    copied = False
    for name, value in items:
        key = (*prefix, name)
        if value is None or key in skip:
            continue
        if not _is_sub_td(value):
            if only is None or len(only) == 1:
                _set_validated(dst, name, value)
                copied = True
            continue
        sub = dst.get(name, None)
        fresh = sub is None
        if fresh:
            sub = value.empty()
        if _copy_leaves(value, sub, key, skip, only[1:] if only and len(only) > 1 else None):
            copied = True
            if fresh:
                _set_validated(dst, name, sub)
    return copied


def _flat_next_root(
    tensordict: TensorDictBase,
    nxt: TensorDictBase,
    rewards: list[NestedKey],
    actions: list[NestedKey],
) -> TensorDictBase | None:
    """``step_mdp``'s defaults for the usual transition, reading the root's top level only.

    Applies when ``tensordict`` is a plain ``TensorDict``, the reward and action keys are
    strings and every root entry to carry is a plain tensor (no sub-TensorDict to merge);
    otherwise ``None``. Same result as the general path, at about half the cost.
    """
    if type(tensordict) is not TensorDict:
        return None
    if not all(isinstance(key, str) for key in (*rewards, *actions)):
        return None
    skip = {"next", *rewards, *actions}
    carried = [(key, value) for key, value in tensordict.items() if key not in skip]
    if not all(type(value) is torch.Tensor for _, value in carried):
        return None
    out = nxt.exclude(*rewards)
    for value in out.values():
        if type(value) is not torch.Tensor:
            return None  # sub-TensorDicts: the general path builds new ones
    present = set(out.keys())
    for key, value in carried:
        if key not in present:
            out.set(key, value)
    return out


def check_env_specs(
    env: Any,
    return_contiguous: bool = True,
    check_dtype: bool = True,
    seed: int | None = None,
    tensordict: TensorDictBase | None = None,
    break_when_any_done: bool | str = False,
) -> None:
    """Checks that a short rollout of ``env`` matches its specs, key by key.

    Runs one ``step_and_maybe_reset``, ``env.rollout(3)`` and a ``reset()``, then
    compares with the entries the specs declare: same keys, shapes and (optionally)
    dtypes, every value inside its spec, and ``done == terminated | truncated``.
    A stored transition holds every spec'd entry at the root and under ``"next"``,
    as rewritten by the env's ``_transform_transition_specs`` when it has one (e.g.
    ``NextObservationDelta`` stores ``("next", "delta", key)`` instead of ``("next", key)``).

    Args:
        env: any env honouring the contract.
        return_contiguous: passed to ``rollout``.
        check_dtype: also compare dtypes.
        seed: seeds the env first (then restores nothing: the env stays seeded).
        tensordict: start of the rollout (passed to ``reset``).
        break_when_any_done: passed to ``rollout`` (``"both"`` runs both modes).

    Raises:
        AssertionError: a key is missing or extra, a shape, dtype or value differs
            from its spec; the message names the key.

    Example:
        >>> from rl_envs import PendulumEnv
        >>> check_env_specs(PendulumEnv())
    """
    if break_when_any_done == "both":
        check_env_specs(env, return_contiguous, check_dtype, seed, tensordict, True)
        check_env_specs(env, return_contiguous, check_dtype, None, tensordict, False)
        return
    if seed is not None:
        env.set_seed(seed)
    batch = tuple(env.batch_size)
    obs_spec, act_spec = env.full_observation_spec, env.full_action_spec
    state_spec, done_spec = env.full_state_spec, env.full_done_spec
    reward_spec = env.full_reward_spec

    expected: dict[NestedKey, Any] = {}
    for spec in (obs_spec, act_spec, state_spec, done_spec):
        for k in spec.keys(True, True):
            expected[_as_tuple(k)] = spec[k]
    for spec in (obs_spec, state_spec, done_spec, reward_spec):
        for k in spec.keys(True, True):
            expected[("next", *_as_tuple(k))] = spec[k]
    # a state entry may stay at the root only (TorchRL's layout: "next" holds observations,
    # rewards and done flags), e.g. the env action ActionDiscretizer writes next to the policy's
    optional = {("next", *_as_tuple(k)) for k in state_spec.keys(True, True)}
    # transforms that change what a stored transition holds (NextObservationDelta) say how
    transition_specs = getattr(env, "_transform_transition_specs", None)
    if transition_specs is not None:
        expected = transition_specs(expected)

    def compare_keys(td: TensorDictBase, what: str) -> None:
        got = {_as_tuple(k) for k in td.keys(True, True, is_leaf=_is_leaf_or_non_tensor)}
        missing, extra = set(expected) - got - optional, got - set(expected)
        if missing or extra:
            raise AssertionError(
                f"The keys of {what} do not match the env's specs: missing {sorted(missing)}, "
                f"extra {sorted(extra)}. Every entry an env writes must be declared in its "
                "observation/action/reward/done/state spec."
            )

    one_step, _ = env.step_and_maybe_reset(env.rand_action(env.reset(tensordict)))
    compare_keys(one_step, "one step_and_maybe_reset()")
    rollout = env.rollout(
        3,
        return_contiguous=return_contiguous,
        tensordict=tensordict,
        break_when_any_done=bool(break_when_any_done),
    )
    t = rollout.shape[len(batch)]
    compare_keys(rollout, "a rollout")
    for key, spec in expected.items():
        value = rollout.get(key, None)
        if value is None and key in optional:
            continue
        if isinstance(spec, NonTensor):  # strings and other objects: presence is the check
            continue
        want = (*batch, t, *spec.shape[len(batch) :])
        if tuple(value.shape) != want:
            raise AssertionError(f"Entry {key}: expected shape {want}, got {tuple(value.shape)}.")
        if check_dtype and value.dtype != spec.dtype:
            raise AssertionError(f"Entry {key}: expected dtype {spec.dtype}, got {value.dtype}.")
        for i in range(t):
            step = value.select(len(batch), i)
            if not spec.is_in(step):
                raise AssertionError(f"Entry {key} at step {i} is outside its spec {spec!r}.")
    for prefix in ((), ("next",)):
        done = rollout.get((*prefix, "done"), None)
        term = rollout.get((*prefix, "terminated"), None)
        trunc = rollout.get((*prefix, "truncated"), None)
        has_all = done is not None and term is not None and trunc is not None
        if has_all and not torch.equal(done, term | trunc):
            raise AssertionError(f"{(*prefix, 'done')} != terminated | truncated.")
    reset = env.reset()
    # entries a transform's inverse writes at each step (ActionDiscretizer's env action)
    step_written = {_as_tuple(k) for k in getattr(env, "_inv_exposed", ())}
    for key, spec in expected.items():
        if key[0] == "next" or key in {_as_tuple(k) for k in act_spec.keys(True, True)}:
            continue
        if key in step_written:
            continue
        value = reset.get(key, None)
        if value is None:
            raise AssertionError(f"env.reset() did not return the entry {key}.")
        if isinstance(spec, NonTensor):
            continue
        if tuple(value.shape) != tuple(spec.shape):
            raise AssertionError(
                f"reset entry {key}: expected shape {tuple(spec.shape)}, got {tuple(value.shape)}."
            )


@dataclass
class EnvMetaData:
    """What an env looks like without the env: its specs, batch size and device.

    ``specs`` holds TorchRL's layout, ``specs["input_spec", "full_action_spec"]`` and
    ``specs["output_spec", "full_observation_spec"]`` (also ``full_reward_spec`` /
    ``full_done_spec`` under ``"output_spec"``, ``full_state_spec`` under ``"input_spec"``);
    ``meta["full_action_spec"]`` reads the same entries by their own name.

    Example:
        >>> from rl_envs import PendulumEnv
        >>> meta = EnvMetaData.from_env(PendulumEnv())
        >>> meta.specs["input_spec", "full_action_spec", "action"].shape
        torch.Size([1])
    """

    specs: Composite
    batch_size: torch.Size
    device: torch.device
    tensordict: TensorDictBase | None = None
    """A zero-filled transition of the env (its ``fake_tensordict()``; TorchRL's field)."""

    @classmethod
    def from_env(cls, env: Any) -> EnvMetaData:
        """Copies ``env``'s specs and a fake transition (``env`` is not kept)."""
        specs = Composite(
            input_spec=env.input_spec.clone(), output_spec=env.output_spec.clone(),
            shape=env.batch_size, device=env.device,
        )  # fmt: skip
        fake = env.fake_tensordict() if hasattr(env, "fake_tensordict") else None
        return cls(specs, torch.Size(env.batch_size), torch.device(env.device), fake)

    def __getitem__(self, name: str) -> Any:
        """``meta["full_action_spec"]`` and the other ``full_*_spec`` by name."""
        for group in ("input_spec", "output_spec"):
            if name in self.specs[group]:
                return self.specs[group, name]
        raise KeyError(f"EnvMetaData has no {name!r}; the specs are {list(self.specs.keys(True))}.")


def get_env_metadata(env_or_creator: Any, kwargs: dict[str, Any] | None = None) -> EnvMetaData:
    """The :class:`EnvMetaData` of an env, or of the env a creator builds (TorchRL's function).

    A creator (a callable, e.g. an :class:`EnvCreator`) is called with ``kwargs``; the env
    it returns is closed afterwards, also when reading its specs fails.

    Example:
        >>> from rl_envs import PendulumEnv
        >>> get_env_metadata(PendulumEnv).batch_size
        torch.Size([])
    """
    if isinstance(env_or_creator, torch.nn.Module) and hasattr(env_or_creator, "input_spec"):
        return EnvMetaData.from_env(env_or_creator)
    if isinstance(env_or_creator, EnvCreator) and not kwargs:
        return env_or_creator.meta_data
    if not callable(env_or_creator):
        raise TypeError(
            f"get_env_metadata() takes an env or a callable returning one, got "
            f"{type(env_or_creator).__name__}."
        )
    env = env_or_creator(**(kwargs or {}))
    try:
        return EnvMetaData.from_env(env)
    finally:
        env.close()


class EnvCreator:
    """A picklable env factory, e.g. for ``ParallelEnv`` and collectors' workers.

    Calls ``create_env_fn(**create_env_kwargs)`` on each call. The env's specs are
    read once (``meta_data``) so consumers can build buffers without making an env.

    Args:
        create_env_fn: a callable returning an env.
        create_env_kwargs: keyword arguments for it.
        **kwargs: more keyword arguments for it (TorchRL's form,
            ``EnvCreator(make_env, max_steps=4)``); ``create_env_kwargs`` wins on a clash.

    Example:
        >>> from rl_envs import PendulumEnv
        >>> make = EnvCreator(PendulumEnv, max_episode_steps=10)
        >>> make().rollout(20).shape
        torch.Size([10])
    """

    def __init__(
        self,
        create_env_fn: Callable[..., Any],
        create_env_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = {**kwargs, **(create_env_kwargs or {})}
        self._specs: EnvMetaData | None = None

    def make_variant(self, **kwargs: Any) -> EnvCreator:
        """A creator of the same env with ``kwargs`` updating the keyword arguments.

        It shares this creator's metadata (the variant must build an env with the same
        specs), e.g. to give sub-envs of a ``ParallelEnv`` different horizons.

        Example:
            >>> from rl_envs import PendulumEnv
            >>> short = EnvCreator(PendulumEnv, max_episode_steps=10)
            >>> longer = short.make_variant(max_episode_steps=15)
            >>> longer().rollout(20).shape, short.create_env_kwargs
            (torch.Size([15]), {'max_episode_steps': 10})
        """
        out = EnvCreator(self.create_env_fn, {**self.create_env_kwargs, **kwargs})
        out._specs = self._specs
        return out

    @property
    def meta_data(self) -> EnvMetaData:
        """The specs, batch size and device of the env this creator builds (read once)."""
        if self._specs is None:
            self._specs = get_env_metadata(self.create_env_fn, self.create_env_kwargs)
        return self._specs

    def __call__(self, **kwargs: Any) -> Any:
        return self.create_env_fn(**{**self.create_env_kwargs, **kwargs})

    def __getstate__(self) -> dict[str, Any]:
        # cloudpickle, as TorchRL: lambdas and locally defined factories reach worker processes.
        state = dict(self.__dict__)
        state["create_env_fn"] = cloudpickle.dumps(self.create_env_fn)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state["create_env_fn"] = cloudpickle.loads(state["create_env_fn"])
        self.__dict__.update(state)

    def __repr__(self) -> str:
        name = getattr(self.create_env_fn, "__name__", repr(self.create_env_fn))
        return f"EnvCreator({name}, kwargs={self.create_env_kwargs})"
