"""``VmasWrapper`` / ``VmasEnv``: VMAS multi-agent scenarios as batched ``EnvBase``.

VMAS (https://github.com/proroklab/VectorizedMultiAgentSimulator, Bettini et al. 2022,
arXiv:2207.03530) simulates ``num_envs`` copies of a scenario in pure torch, so the
env is batched from the start: ``batch_size == [num_envs]``.

Layout (TorchRL 0.14's): the agents of a group (see ``rl_envs.libs.marl``; by default
``"agent_<i>"`` agents form the group ``"agents"``) are stacked along an agent dim:

* ``(group, "observation")`` ``[B, n, *obs]`` (a nested Composite for dict observations),
  ``(group, "info", name)`` ``[B, n, k]`` float32 (the scenario's ``info(agent)``);
* ``(group, "action")``: ``Bounded`` ``[B, n, d]`` for continuous actions; for discrete
  ones ``Categorical`` ``[B, n]`` (``categorical_actions=True``, the default) or
  ``OneHot`` ``[B, n, n_actions]`` (int64); ``MultiCategorical`` / ``MultiOneHot`` for
  VMAS's ``multidiscrete_actions=True``;
* ``(group, "reward")`` ``[B, n, 1]``;
* ``"done"``, ``"terminated"``, ``"truncated"`` ``[B, 1]`` at the root: VMAS has one done
  flag per env, shared by its agents. As in TorchRL, reaching ``max_steps`` sets
  ``terminated`` (``truncated`` stays ``False``); build the VMAS env with
  ``terminated_truncated=True`` to get the two flags apart.

Partial resets (``"_reset"`` ``[B, 1]``) reset only those sub-envs (``reset_at``).
Seeding: ``set_seed(s)`` / ``seed=s`` seed VMAS's own RNG state, as VMAS does.

Exact state: ``get_state()`` captures every tensor and number held by the VMAS env, its
scenario, world, entities and their states (found by walking the attributes of VMAS's
objects) plus VMAS's process-wide RNG states; ``set_state`` writes them back into an env
built the same way (in place where shapes match, so aliased tensors stay aliased).
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.env_base import EnvBase
from rl_envs.libs.marl import MarlGroupMapType, resolve_group_map
from rl_envs.specs import (
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
)

__all__ = ["VmasEnv", "VmasWrapper"]

_INSTALL = "VMAS is not installed: install the extra with `pip install 'rl-envs[vmas]'`."


def _import_vmas() -> Any:
    if importlib.util.find_spec("vmas") is None:
        raise ImportError(_INSTALL)
    import vmas

    return vmas


class _ClassProperty:
    """A read-only attribute computed from the class (``VmasEnv.available_envs``)."""

    def __init__(self, fget: Any) -> None:
        self.fget = fget

    def __get__(self, obj: Any, owner: type) -> Any:
        return self.fget(owner)


def _space_kind(space: Any) -> str:
    # VMAS builds its spaces with the legacy ``gym`` package: read them by class name
    # so neither gym nor gymnasium has to be imported here.
    return type(space).__name__


def _space_signature(space: Any) -> Any:
    kind = _space_kind(space)
    if kind == "Box":
        return (kind, tuple(space.shape), str(space.dtype))
    if kind == "Discrete":
        return (kind, int(space.n))
    if kind == "MultiDiscrete":
        return (kind, tuple(int(n) for n in space.nvec))
    if kind == "Dict":
        return (kind, tuple((k, _space_signature(s)) for k, s in space.spaces.items()))
    raise TypeError(f"VmasWrapper: unsupported VMAS space {space!r}.")


def _box_bounds(spaces: Sequence[Any], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    low = torch.stack([torch.as_tensor(s.low, dtype=torch.float32) for s in spaces]).to(device)
    high = torch.stack([torch.as_tensor(s.high, dtype=torch.float32) for s in spaces]).to(device)
    return low, high


def _obs_spec(spaces: Sequence[Any], lead: tuple[int, ...], device: torch.device) -> Any:
    """The spec of ``len(spaces)`` stacked agents' observations, batch dims ``lead``."""
    kind = _space_kind(spaces[0])
    if kind == "Dict":
        return Composite(
            {k: _obs_spec([s.spaces[k] for s in spaces], lead, device) for k in spaces[0].spaces},
            shape=lead,
            device=device,
        )
    if kind != "Box":
        raise TypeError(f"VmasWrapper: unsupported VMAS observation space {spaces[0]!r}.")
    shape = (*lead, *(tuple(spaces[0].shape) or (1,)))
    low, high = _box_bounds(spaces, device)
    if torch.isfinite(low).all() and torch.isfinite(high).all():
        return Bounded(low.expand(shape), high.expand(shape), shape=shape, device=device)
    return Unbounded(shape=shape, dtype=torch.float32, device=device)


def _action_spec(
    spaces: Sequence[Any], lead: tuple[int, ...], categorical: bool, device: torch.device
) -> Any:
    """The spec of ``len(spaces)`` stacked agents' actions, batch dims ``lead``."""
    space = spaces[0]
    kind = _space_kind(space)
    if kind == "Box":
        shape = (*lead, *(tuple(space.shape) or (1,)))
        low, high = _box_bounds(spaces, device)
        return Bounded(low.expand(shape), high.expand(shape), shape=shape, device=device)
    if kind == "Discrete":
        n = int(space.n)
        if categorical:
            return Categorical(n, shape=lead, dtype=torch.int64, device=device)
        return OneHot(n, shape=(*lead, n), dtype=torch.int64, device=device)
    if kind == "MultiDiscrete":
        nvec = [int(n) for n in space.nvec]
        if categorical:
            return MultiCategorical(
                nvec, shape=(*lead, len(nvec)), dtype=torch.int64, device=device
            )
        return MultiOneHot(nvec, shape=(*lead, sum(nvec)), dtype=torch.int64, device=device)
    raise TypeError(f"VmasWrapper: unsupported VMAS action space {space!r}.")


def _per_env(value: torch.Tensor, num_envs: int) -> torch.Tensor:
    """``[B]`` -> ``[B, 1]``; ``[B, *k]`` kept (TorchRL's selective unsqueeze)."""
    return value.unsqueeze(-1) if value.ndim == 1 else value.reshape(num_envs, *value.shape[1:])


# ----------------------------------------------------------------------------- exact state
_SKIP_ATTRS = frozenset(
    {"viewer", "headless", "visible_display", "text_lines", "action_space", "observation_space"}
)
_Path = tuple[Any, ...]


def _is_vmas_object(value: Any) -> bool:
    module = type(value).__module__ or ""
    # scenarios loaded from a file by VMAS have an empty module name
    return module.startswith("vmas") or module == "" or type(value).__name__ == "Scenario"


class _KeyAt(int):
    """A path step into a dict whose key is not a plain name (e.g. an entity): its position."""


def _children(obj: Any) -> list[tuple[Any, Any]]:
    if isinstance(obj, dict):
        return [
            (k if isinstance(k, (str, int)) and not isinstance(k, bool) else _KeyAt(i), v)
            for i, (k, v) in enumerate(obj.items())
        ]
    if isinstance(obj, (list, tuple)):
        return list(enumerate(obj))
    return [(k, v) for k, v in vars(obj).items() if k not in _SKIP_ATTRS]


def _capture(obj: Any, path: _Path, out: dict[_Path, Any], seen: set[int]) -> None:
    """Records the tensors and plain numbers reachable from ``obj`` through VMAS objects."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    for name, value in _children(obj):
        sub = (*path, name)
        if isinstance(value, torch.Tensor):
            out[sub] = value.detach().clone()
        elif isinstance(value, (bool, int, float)) or value is None:
            out[sub] = value
        elif isinstance(value, (list, tuple, dict)) or _is_vmas_object(value):
            _capture(value, sub, out, seen)


def _key(node: Any, name: Any) -> Any:
    return list(node)[int(name)] if isinstance(name, _KeyAt) and isinstance(node, dict) else name


def _get(node: Any, name: Any) -> Any:
    if isinstance(node, (dict, list, tuple)):
        return node[_key(node, name)]
    return getattr(node, name)


def _resolve(root: Any, path: _Path) -> Any:
    node = root
    for name in path:
        node = _get(node, name)
    return node


def _assign(parent: Any, name: Any, value: Any) -> None:
    if isinstance(parent, dict):
        parent[_key(parent, name)] = value
    elif isinstance(parent, list):
        parent[name] = value
    elif isinstance(parent, tuple):
        raise TypeError("a tuple entry cannot be assigned")
    else:
        setattr(parent, name, value)


def _restore(root: Any, state: dict[_Path, Any]) -> None:
    for path, saved in state.items():
        try:
            parent = _resolve(root, path[:-1])
        except (AttributeError, IndexError, KeyError):
            continue  # a per-step cache the fresh env has not built yet (VMAS rebuilds it)
        name = path[-1]
        try:
            current = _get(parent, name)
        except (AttributeError, IndexError, KeyError):
            current = None  # set lazily by the scenario (e.g. after a first step)
        if isinstance(saved, torch.Tensor):
            if (
                isinstance(current, torch.Tensor)
                and current.shape == saved.shape
                and current.dtype == saved.dtype
            ):
                current.copy_(saved)
                continue
            saved = saved.clone()
        if isinstance(parent, tuple):
            continue  # tuples hold constants here (e.g. shapes); tensors were copied in place
        if isinstance(name, _KeyAt) and (not isinstance(parent, dict) or name >= len(parent)):
            continue  # an entity-keyed per-step cache that is empty here (VMAS rebuilds it)
        _assign(parent, name, saved)


class VmasWrapper(EnvBase):
    """Wraps a built VMAS environment (``vmas.make_env(...)``).

    Args:
        env: the ``vmas.simulator.environment.Environment`` to wrap.
        categorical_actions: discrete actions as indices (``Categorical``, default) or
            one-hot (``OneHot``).
        group_map: how agents are grouped (``None``: ``"<name>_<int>"`` agents grouped by
            ``<name>``, ``"agent"`` renamed ``"agents"``; a :class:`MarlGroupMapType`; or
            ``{group: [agent names]}``). Agents of one group must have the same spaces.
        device: must be VMAS's device (``None``: taken from ``env``).
        batch_size: must be ``[env.num_envs]`` (``None``: taken from ``env``).
        validate_actions: see :class:`~rl_envs.EnvBase`.

    Attributes:
        group_map, agent_names, agent_names_to_indices_map, n_agents, num_envs, scenario.

    Raises:
        TypeError: ``env`` is not a VMAS env, or ``device`` / ``batch_size`` disagree with it.
        ValueError: a ``group_map`` naming unknown agents, leaving one out, or grouping
            agents whose spaces differ.

    Example:
        >>> import vmas
        >>> env = VmasWrapper(vmas.make_env("navigation", num_envs=4, n_agents=3, seed=0))
        >>> env.rollout(5)["next", "agents", "reward"].shape
        torch.Size([4, 5, 3, 1])
    """

    git_url = "https://github.com/proroklab/VectorizedMultiAgentSimulator"
    libname = "vmas"

    def __init__(
        self,
        env: Any = None,
        categorical_actions: bool = True,
        group_map: MarlGroupMapType | Mapping[str, Sequence[str]] | None = None,
        *,
        device: torch.device | str | None = None,
        batch_size: Sequence[int] | torch.Size | None = None,
        validate_actions: bool = False,
    ) -> None:
        vmas = _import_vmas()
        if not isinstance(env, vmas.simulator.environment.Environment):
            raise TypeError(
                "VmasWrapper needs a VMAS env (vmas.simulator.environment.Environment, from "
                f"vmas.make_env(...)), got {type(env).__name__}. To build one from a "
                "scenario name use VmasEnv(scenario, num_envs=...)."
            )
        vmas_device = torch.device(env.device)
        if device is not None and torch.device(device) != vmas_device:
            raise TypeError(
                f"VmasWrapper: device={device!r} differs from the VMAS env's device "
                f"{vmas_device}. Build the VMAS env on that device (vmas.make_env(..., "
                "device=...)) or leave device out."
            )
        num_envs = int(env.num_envs)
        if batch_size is not None and tuple(batch_size) != (num_envs,):
            raise TypeError(
                f"VmasWrapper: batch_size={tuple(batch_size)} does not match the VMAS env's "
                f"num_envs={num_envs}: the batch size of a VMAS env is [num_envs]."
            )
        super().__init__(
            device=vmas_device, batch_size=(num_envs,), validate_actions=validate_actions
        )
        self._env = env
        self.categorical_actions = categorical_actions
        self.continuous_actions = bool(env.continuous_actions)
        self.num_envs = num_envs
        self.agents = list(env.agents)
        self.n_agents = len(self.agents)
        self.agent_names = [a.name for a in self.agents]
        self.agent_names_to_indices_map = {n: i for i, n in enumerate(self.agent_names)}
        self.group_map = resolve_group_map(group_map, self.agent_names)
        self._indices = {
            g: [self.agent_names_to_indices_map[n] for n in members]
            for g, members in self.group_map.items()
        }
        self.het_specs = False
        self.het_specs_map = dict.fromkeys(self.group_map, False)
        self._make_specs()

    # ------------------------------------------------------------ attributes
    @property
    def env(self) -> Any:
        """The wrapped VMAS env."""
        return self._env

    @property
    def scenario(self) -> Any:
        """The VMAS scenario object."""
        return self._env.scenario

    @property
    def lib(self) -> Any:
        """The ``vmas`` module."""
        return _import_vmas()

    @_ClassProperty
    def available_envs(cls) -> list[str]:
        """The scenario names VMAS can build (``[]`` when VMAS is not installed)."""
        if importlib.util.find_spec("vmas") is None:
            return []
        import vmas

        return [*vmas.scenarios, *vmas.mpe_scenarios, *vmas.debug_scenarios]

    # ------------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        env, d, b = self._env, self.device, self.num_envs
        _, _, _, infos = self._scenario_data()  # one read, for the info entries' shapes
        obs_spec = Composite(shape=(b,), device=d)
        act_spec = Composite(shape=(b,), device=d)
        rew_spec = Composite(shape=(b,), device=d)
        self._info_keys: dict[str, list[str]] = {}
        for group, idx in self._indices.items():
            n = len(idx)
            lead = (b, n)
            act_spaces = [env.action_space[i] for i in idx]
            obs_spaces = [env.observation_space[i] for i in idx]
            self._check_same(group, act_spaces, "action")
            self._check_same(group, obs_spaces, "observation")
            info_names = list(infos[idx[0]]) if infos else []
            for i in idx[1:]:
                if sorted(infos[i]) != sorted(info_names):
                    raise ValueError(
                        f"VmasWrapper: agents of group {group!r} report different info keys "
                        f"({sorted(info_names)} vs {sorted(infos[i])}); group them apart."
                    )
            group_obs = Composite(observation=_obs_spec(obs_spaces, lead, d), shape=lead, device=d)
            if info_names:
                group_obs["info"] = Composite(
                    {
                        k: Unbounded(
                            shape=(*lead, *_per_env(infos[idx[0]][k], b).shape[1:]),
                            dtype=torch.float32,
                            device=d,
                        )
                        for k in info_names
                    },
                    shape=lead,
                    device=d,
                )
            self._info_keys[group] = info_names
            obs_spec[group] = group_obs
            act_spec[group] = Composite(
                action=_action_spec(act_spaces, lead, self.categorical_actions, d),
                shape=lead,
                device=d,
            )
            rew_spec[group] = Composite(
                reward=Unbounded(shape=(*lead, 1), dtype=torch.float32, device=d),
                shape=lead,
                device=d,
            )
        self.observation_spec = obs_spec
        self.action_spec = act_spec
        self.reward_spec = rew_spec
        flag = Categorical(2, shape=(b, 1), dtype=torch.bool, device=d)
        self.done_spec = Composite(
            done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(), shape=(b,), device=d
        )

    def _check_same(self, group: str, spaces: list[Any], what: str) -> None:
        first = _space_signature(spaces[0])
        for name, space in zip(self.group_map[group][1:], spaces[1:], strict=True):
            if _space_signature(space) != first:
                raise ValueError(
                    f"VmasWrapper: group {group!r} mixes agents with different {what} spaces "
                    f"({self.group_map[group][0]}: {spaces[0]}, {name}: {space}). Agents of a "
                    "group are stacked along one dim: put them in different groups, e.g. "
                    "group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT."
                )

    # --------------------------------------------------------------- reading
    def _scenario_data(self, rewards: bool = False) -> tuple[Any, Any, Any, Any]:
        """``(obs, rewards, (terminated, truncated), infos)`` read from the scenario."""
        out = self._env.get_from_scenario(
            get_observations=True, get_rewards=rewards, get_infos=True, get_dones=True
        )
        return self._split(out, rewards)

    def _split(self, out: list[Any], rewards: bool) -> tuple[Any, Any, Any, Any]:
        obs = out[0]
        rews = out[1] if rewards else None
        rest = out[2:] if rewards else out[1:]
        if self._env.terminated_truncated:
            flags = (rest[0], rest[1])
            infos = rest[2]
        else:
            flags = (rest[0], None)
            infos = rest[1]
        return obs, rews, flags, infos

    def _stack_obs(self, values: list[Any]) -> Any:
        if isinstance(values[0], Mapping):
            return {k: self._stack_obs([v[k] for v in values]) for k in values[0]}
        return torch.stack([_per_env(v, self.num_envs) for v in values], dim=1)

    def _build(
        self, obs: list[Any], rews: list[torch.Tensor] | None, flags: Any, infos: list[Any]
    ) -> TensorDictBase:
        b = self.num_envs
        source: dict[str, Any] = {}
        for group, idx in self._indices.items():
            entries: dict[str, Any] = {"observation": self._stack_obs([obs[i] for i in idx])}
            if rews is not None:
                entries["reward"] = torch.stack([rews[i] for i in idx], dim=1).unsqueeze(-1)
            names = self._info_keys[group]
            if names:
                entries["info"] = {
                    k: torch.stack([_per_env(infos[i][k], b).to(torch.float32) for i in idx], dim=1)
                    for k in names
                }
            # fresh tensors stacked to [B, n, ...] above: the unvalidated constructor skips
            # tensordict's per-key checks on the hot path
            source[group] = TensorDict._new_unsafe(
                entries, batch_size=(b, len(idx)), device=self.device
            )
        term, trunc = flags
        term = term.reshape(b, 1).bool()
        trunc = torch.zeros_like(term) if trunc is None else trunc.reshape(b, 1).bool()
        source["terminated"] = term
        source["truncated"] = trunc
        source["done"] = term | trunc
        return TensorDict._new_unsafe(source, batch_size=(b,), device=self.device)

    def _actions(self, tensordict: TensorDictBase) -> list[torch.Tensor]:
        actions: list[Any] = [None] * self.n_agents
        for group, idx in self._indices.items():
            action = tensordict.get((group, "action"))
            if not self.continuous_actions and not self.categorical_actions:
                action = self._full_action_spec[group, "action"].to_categorical(action)
            for j, i in enumerate(idx):
                actions[i] = action[:, j]
        return actions

    # ------------------------------------------------------------------ hooks
    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            self._env.reset(return_observations=False)
        else:
            m = mask.reshape(self.num_envs, -1).any(-1)
            if bool(m.all()):
                self._env.reset(return_observations=False)
            else:
                for i in m.nonzero().flatten().tolist():
                    self._env.reset_at(i, return_observations=False)
        obs, _, flags, infos = self._scenario_data()
        return self._build(obs, None, flags, infos)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        actions = self._actions(tensordict)
        try:
            out = self._env.step(actions)
        except AssertionError as exc:  # VMAS checks its input with bare asserts
            raise self._explain_step_failure(actions, exc) from exc
        obs, rews, flags, infos = self._split(out, rewards=True)
        return self._build(obs, rews, flags, infos)

    def _explain_step_failure(self, actions: list[Any], exc: AssertionError) -> Exception:
        """A teaching error for a VMAS assertion on the actions (NaN / inf, shape)."""
        for name, action in zip(self.agent_names, actions, strict=True):
            group = next(g for g, idx in self._indices.items() if name in self.group_map[g])
            if action.is_floating_point() and not bool(torch.isfinite(action).all()):
                rows = (~torch.isfinite(action)).reshape(self.num_envs, -1).any(-1)
                return ValueError(
                    f"{type(self).__name__}: the action of agent {name!r} (entry "
                    f"{(group, 'action')!r}) holds NaN or inf in env rows "
                    f"{rows.nonzero().flatten().tolist()}; expected finite values in the "
                    "action spec. VMAS refused it (a bare AssertionError) and the env was not "
                    "stepped. Check the policy's output (e.g. a diverged network)."
                )
        return RuntimeError(
            f"{type(self).__name__}: VMAS rejected the actions with an assertion "
            f"({exc!r}); expected actions of the shapes and bounds of env.full_action_spec, "
            f"got shapes {[tuple(a.shape) for a in actions]} for agents {self.agent_names}."
        )

    def _set_seed(self, seed: int | None) -> None:
        self._env.seed(seed)

    # ----------------------------------------------------------------- state
    def _scenario_id(self) -> str:
        name = getattr(self, "scenario_name", None)
        return name if isinstance(name, str) else type(self._env.scenario).__qualname__

    def get_state(self) -> dict[str, Any]:
        """The exact state of the VMAS env (picklable; see the module docstring).

        Example:
            >>> env = VmasEnv("navigation", num_envs=2, n_agents=2, seed=0)
            >>> state = env.get_state()
            >>> first = env.rand_step()["next", "agents", "observation"]
            >>> env.set_state(state)  # back to the moment of get_state()
        """
        values: dict[_Path, Any] = {}
        _capture(self._env, (), values, set())
        rng = type(self._env).vmas_random_state
        return {
            "env_class": type(self).__name__,
            "num_envs": self.num_envs,
            "agent_names": list(self.agent_names),
            "scenario": self._scenario_id(),
            "values": values,
            "vmas_random_state": [rng[0].clone(), copy.deepcopy(rng[1]), copy.deepcopy(rng[2])],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` result into this env (built the same way).

        Raises:
            ValueError: the state comes from an env with other agents, ``num_envs`` or
                scenario class.
        """
        if state.get("num_envs") != self.num_envs or state.get("agent_names") != self.agent_names:
            raise ValueError(
                f"{type(self).__name__}.set_state(): the state comes from an env with "
                f"num_envs={state.get('num_envs')} and agents {state.get('agent_names')}, this "
                f"one has num_envs={self.num_envs} and agents {self.agent_names}. Restore into "
                "an env built the same way."
            )
        scenario = self._scenario_id()
        if state.get("scenario") != scenario:
            raise ValueError(
                f"{type(self).__name__}.set_state(): the state comes from scenario "
                f"{state.get('scenario')!r}, this env runs {scenario!r}. Restore into an env "
                "built the same way."
            )
        _restore(self._env, state["values"])
        rng = type(self._env).vmas_random_state
        saved = state["vmas_random_state"]
        rng[0], rng[1], rng[2] = saved[0].clone(), copy.deepcopy(saved[1]), copy.deepcopy(saved[2])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_envs={self.num_envs}, n_agents={self.n_agents}, "
            f"batch_size={tuple(self.batch_size)}, device={self.device})"
        )


class VmasEnv(VmasWrapper):
    """Builds a VMAS scenario and wraps it (TorchRL's ``VmasEnv``).

    Args:
        scenario: a scenario name (one of :attr:`available_envs`) or a
            ``vmas.simulator.scenario.BaseScenario``.
        num_envs: number of vectorised copies; the env's ``batch_size`` is ``[num_envs]``.
        continuous_actions: continuous (default) or discrete actions.
        max_steps: horizon (``None``: the scenario's own end only); reaching it sets
            ``terminated``, as in TorchRL.
        categorical_actions: discrete actions as indices (default) or one-hot.
        seed: VMAS seed.
        group_map: see :class:`VmasWrapper`.
        scenario_kwargs: arguments of the scenario (e.g. ``{"n_agents": 3}``).
        device: simulation device (default CPU).
        validate_actions: see :class:`~rl_envs.EnvBase`.
        **kwargs: more scenario arguments; they win over ``scenario_kwargs``. VMAS's
            own options (``dict_spaces`` excepted), e.g. ``multidiscrete_actions`` or
            ``terminated_truncated``, go here too.

    Example:
        >>> env = VmasEnv("navigation", num_envs=4, n_agents=3, seed=0, max_steps=10)
        >>> td = env.rollout(3)
        >>> td["agents", "observation"].shape, td["next", "done"].shape
        (torch.Size([4, 3, 3, 18]), torch.Size([4, 3, 1]))
    """

    def __init__(
        self,
        scenario: Any,
        *,
        num_envs: int,
        continuous_actions: bool = True,
        max_steps: int | None = None,
        categorical_actions: bool = True,
        seed: int | None = None,
        group_map: MarlGroupMapType | Mapping[str, Sequence[str]] | None = None,
        scenario_kwargs: Mapping[str, Any] | None = None,
        device: torch.device | str | None = None,
        validate_actions: bool = False,
        **kwargs: Any,
    ) -> None:
        vmas = _import_vmas()
        if isinstance(scenario, str) and scenario not in type(self).available_envs:
            raise ValueError(
                f"VmasEnv: unknown scenario {scenario!r}. Pick one of VmasEnv.available_envs: "
                f"{type(self).available_envs}."
            )
        if int(num_envs) < 1:
            raise ValueError(f"VmasEnv: num_envs must be >= 1, got {num_envs}.")
        if kwargs.get("dict_spaces"):
            raise ValueError(
                "VmasEnv: dict_spaces=True is not supported; agents are grouped by group_map."
            )
        self.scenario_name = scenario
        options = {**(scenario_kwargs or {}), **kwargs}
        env = vmas.make_env(
            scenario=scenario,
            num_envs=int(num_envs),
            device=torch.device(device) if device is not None else torch.device("cpu"),
            continuous_actions=continuous_actions,
            max_steps=max_steps,
            seed=seed,
            wrapper=None,
            **options,
        )
        super().__init__(
            env,
            categorical_actions=categorical_actions,
            group_map=group_map,
            validate_actions=validate_actions,
        )

    def __repr__(self) -> str:
        return f"{super().__repr__()} (scenario={self.scenario_name})"
