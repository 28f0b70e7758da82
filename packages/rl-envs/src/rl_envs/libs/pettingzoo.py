"""``PettingZooWrapper`` / ``PettingZooEnv``: PettingZoo parallel and AEC envs as ``EnvBase``.

PettingZoo (https://pettingzoo.farama.org, Terry et al. 2021) envs are single,
unbatched games: ``batch_size == []``. Agents are stacked per group (see
``rl_envs.libs.marl``) along an agent dim, TorchRL 0.14's layout:

* ``(group, "observation")`` ``[n, *obs]`` (a nested Composite for dict observations;
  ``Discrete`` observations one-hot, as in TorchRL);
  ``(group, "info", name)`` for the numeric entries of the agents' ``info`` dicts seen
  at the first reset; ``"state"`` with ``return_state=True``;
* ``(group, "action")``: ``Categorical`` ``[n]`` (``categorical_actions=True``, default)
  or ``OneHot`` ``[n, k]`` for ``Discrete`` spaces, ``MultiCategorical`` / ``MultiOneHot``,
  ``Binary``, ``Bounded`` for ``Box``;
* ``(group, "reward")`` ``[n, 1]``; ``(group, "done" | "terminated" | "truncated")``
  ``[n, 1]`` per agent, and the team flags ``"done"`` / ``"terminated"`` /
  ``"truncated"`` ``[1]`` at the root;
* ``(group, "action_mask")`` ``[n, k]`` bool when the env gives one (in the observation
  dict, as the classic games do, or in ``info``); ``env.rand_action(td)`` and
  ``env.rollout()`` without a policy draw only allowed actions. The action spec itself
  stays unmasked (TorchRL also writes the mask into it; here specs do not change
  from step to step, so ``check_env_specs`` and the out-of-spec probes stay exact);
* ``(group, "mask")`` ``[n]`` bool with ``use_mask=True``: ``True`` for the agents that
  act (parallel: alive; AEC: the agent whose turn it is). Entries of agents that left
  the episode are zeros, with their done flags ``True``.

Parallel envs: every live agent acts at each step; the team is done when ANY agent is
done (``done_on_any=True``, default) or when all are. AEC envs: one agent acts per step
(its group's action is read at its index, the others are ignored); ``use_mask=True`` is
required, and the team is done when ALL agents are (default). With ``done_on_any=False``
the root flags are ``done = all(agent done)``, ``truncated = done & any(agent truncated)``
and ``terminated = done & ~truncated``, so ``done == terminated | truncated`` always holds
(TorchRL aggregates each flag with ``all`` separately; the two agree unless agents end
with different flags).
"""

from __future__ import annotations

import importlib
import importlib.util
import pickle
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.env_base import EnvBase
from rl_envs.libs.marl import MarlGroupMapType, check_marl_grouping, resolve_group_map
from rl_envs.specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
)

__all__ = ["PettingZooEnv", "PettingZooWrapper"]

_INSTALL = (
    "PettingZoo is not installed: install the extra with `pip install 'rl-envs[pettingzoo]'` "
    "(MPE tasks live in the `mpe2` package it brings)."
)


def _import_pettingzoo() -> Any:
    if importlib.util.find_spec("pettingzoo") is None:
        raise ImportError(_INSTALL)
    import pettingzoo
    import pettingzoo.utils.env

    return pettingzoo


class _ClassProperty:
    """A read-only attribute computed from the class (``PettingZooEnv.available_envs``)."""

    def __init__(self, fget: Any) -> None:
        self.fget = fget

    def __get__(self, obj: Any, owner: type) -> Any:
        return self.fget(owner)


# ------------------------------------------------------------------ spaces -> specs
def _kind(space: Any) -> str:
    return type(space).__name__


def _signature(space: Any) -> Any:
    kind = _kind(space)
    if kind == "Box":
        return (kind, tuple(space.shape), str(space.dtype))
    if kind == "Discrete":
        return (kind, int(space.n), int(space.start))
    if kind == "MultiDiscrete":
        return (kind, tuple(int(n) for n in np.asarray(space.nvec).reshape(-1)))
    if kind == "MultiBinary":
        return (kind, tuple(np.atleast_1d(space.n).tolist()))
    if kind == "Dict":
        return (kind, tuple((k, _signature(s)) for k, s in space.spaces.items()))
    raise TypeError(
        f"PettingZooWrapper: unsupported space {space!r} (supported: Box, Discrete, "
        "MultiDiscrete, MultiBinary and Dict of those)."
    )


def _torch_dtype(np_dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.zeros((), dtype=np_dtype)).dtype


def _spec(spaces: Sequence[Any], categorical: bool, device: torch.device) -> Any:
    """The spec of ``len(spaces)`` agents' values stacked on a leading agent dim."""
    lead = (len(spaces),)
    space = spaces[0]
    kind = _kind(space)
    if kind == "Dict":
        return Composite(
            {k: _spec([s.spaces[k] for s in spaces], categorical, device) for k in space.spaces},
            shape=lead,
            device=device,
        )
    if kind == "Box":
        shape = (*lead, *space.shape)
        dtype = _torch_dtype(space.dtype)
        low = np.stack([np.broadcast_to(s.low, s.shape) for s in spaces])
        high = np.stack([np.broadcast_to(s.high, s.shape) for s in spaces])
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            return Unbounded(shape=shape, dtype=dtype, device=device)
        return Bounded(
            torch.as_tensor(low, dtype=dtype),
            torch.as_tensor(high, dtype=dtype),
            shape=shape,
            dtype=dtype,
            device=device,
        )
    if kind == "Discrete":
        n = int(space.n)
        if categorical:
            return Categorical(n, shape=lead, dtype=torch.int64, device=device)
        return OneHot(n, shape=(*lead, n), dtype=torch.int64, device=device)
    if kind == "MultiDiscrete":
        nvec = [int(n) for n in np.asarray(space.nvec).reshape(-1)]
        if categorical:
            return MultiCategorical(
                nvec, shape=(*lead, len(nvec)), dtype=torch.int64, device=device
            )
        return MultiOneHot(nvec, shape=(*lead, sum(nvec)), dtype=torch.int64, device=device)
    if kind == "MultiBinary":
        n = int(np.prod(space.n))
        return Binary(n, shape=(*lead, n), dtype=torch.int8, device=device)
    raise TypeError(f"PettingZooWrapper: unsupported space {space!r}.")


def _encode(space: Any, value: Any, categorical: bool) -> Any:
    """One agent's value from PettingZoo as a tensor (or dict of tensors) of its spec."""
    kind = _kind(space)
    if kind == "Dict":
        return {k: _encode(s, value[k], categorical) for k, s in space.spaces.items()}
    if kind == "Box":
        return torch.as_tensor(np.asarray(value, dtype=space.dtype))
    if kind == "Discrete":
        idx = torch.as_tensor(int(value) - int(space.start))
        return idx if categorical else torch.nn.functional.one_hot(idx, int(space.n))
    if kind == "MultiDiscrete":
        idx = torch.as_tensor(np.asarray(value, dtype=np.int64).reshape(-1))
        if categorical:
            return idx
        nvec = np.asarray(space.nvec).reshape(-1)
        return torch.cat(
            [torch.nn.functional.one_hot(i, int(n)) for i, n in zip(idx, nvec, strict=True)]
        )
    if kind == "MultiBinary":
        return torch.as_tensor(np.asarray(value, dtype=np.int8).reshape(-1))
    raise TypeError(f"PettingZooWrapper: unsupported space {space!r}.")


def _decode(space: Any, value: Any, categorical: bool) -> Any:
    """One agent's action tensor (or TensorDict) as PettingZoo expects it."""
    kind = _kind(space)
    if kind == "Dict":
        return {k: _decode(s, value.get(k), categorical) for k, s in space.spaces.items()}
    if kind == "Box":
        return value.detach().cpu().numpy().astype(space.dtype).reshape(space.shape)
    if kind == "Discrete":
        idx = value if categorical else value.argmax(-1)
        return int(idx) + int(space.start)
    if kind == "MultiDiscrete":
        if categorical:
            return value.detach().cpu().numpy().astype(np.int64).reshape(space.shape)
        nvec = [int(n) for n in np.asarray(space.nvec).reshape(-1)]
        parts = value.split(nvec, dim=-1)
        return np.array([int(p.argmax()) for p in parts], dtype=np.int64).reshape(space.shape)
    if kind == "MultiBinary":
        return value.detach().cpu().numpy().astype(np.int8).reshape(space.shape)
    raise TypeError(f"PettingZooWrapper: unsupported space {space!r}.")


def _action_problem(space: Any, value: Any, categorical: bool) -> tuple[str, str] | None:
    """``(expected, got)`` when one agent's action tensor does not fit ``space``, else None."""
    kind = _kind(space)
    if kind == "Dict":
        for k, sub in space.spaces.items():
            problem = _action_problem(sub, value.get(k), categorical)
            if problem is not None:
                return f"{k!r}: {problem[0]}", problem[1]
        return None
    if not isinstance(value, torch.Tensor):
        return "a tensor", type(value).__name__
    if kind == "Box":
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return "finite values", str(value.flatten()[:6].tolist())
        return None
    if kind in ("Discrete", "MultiDiscrete") and categorical:
        n = (
            torch.tensor([int(space.n)])
            if kind == "Discrete"
            else torch.as_tensor(np.asarray(space.nvec).reshape(-1))
        )
        v = value.reshape(-1).to(torch.float64)
        if v.numel() != n.numel():
            return f"{n.numel()} index(es)", f"shape {tuple(value.shape)}"
        if not bool(((v == v.round()) & (v >= 0) & (v < n)).all()):
            return f"integer indices in [0, {n.tolist()})", str(value.flatten().tolist())
        return None
    if kind in ("Discrete", "MultiDiscrete", "MultiBinary"):  # one-hot / binary vectors
        if not bool(((value == 0) | (value == 1)).all()):
            return "0/1 entries (one-hot)", str(value.flatten()[:12].tolist())
        if kind == "Discrete" and int(value.sum()) != 1:
            return "exactly one 1 (one-hot)", str(value.flatten()[:12].tolist())
    return None


def _without_mask(space: Any) -> Any:
    """``space`` without its ``"action_mask"`` entry (a Dict observation of a classic game)."""
    if _kind(space) == "Dict" and "action_mask" in space.spaces:
        rest = {k: s for k, s in space.spaces.items() if k != "action_mask"}
        return type(space)(rest)
    return space


def _numeric(value: Any) -> bool:
    try:
        arr = np.asarray(value)
    except Exception:
        return False
    return arr.dtype.kind in "biuf"


class PettingZooWrapper(EnvBase):
    """Wraps a ``pettingzoo.ParallelEnv`` or ``pettingzoo.AECEnv`` (TorchRL's arguments).

    Args:
        env: the PettingZoo env (parallel or AEC).
        return_state: add the global ``"state"`` (``env.state()``) to the observations.
        group_map: ``None`` (parallel: ``"<name>_<int>"`` agents grouped by ``<name>``, other
            agents alone; AEC: one group per agent), a :class:`MarlGroupMapType`, or
            ``{group: [agent names]}``. Agents of a group must share their spaces.
        use_mask: write ``(group, "mask")``; required for AEC envs and for parallel envs
            whose agents leave mid-episode.
        categorical_actions: discrete actions as indices (default) or one-hot.
        seed: seed of the first reset.
        done_on_any: team done when any agent is done (default for parallel envs) or
            when all are (default for AEC envs).
        device: device of the output tensors.
        validate_actions: see :class:`~rl_envs.EnvBase`.

    Raises:
        TypeError: ``env`` is not a PettingZoo env.
        ValueError: an AEC env without ``use_mask=True``; a bad ``group_map``; a group
            whose agents have different spaces; agents that left mid-episode without
            ``use_mask=True``.

    Example:
        >>> from mpe2 import simple_spread_v3
        >>> env = PettingZooWrapper(simple_spread_v3.parallel_env(N=3, max_cycles=5), seed=0)
        >>> env.group_map
        {'agent': ['agent_0', 'agent_1', 'agent_2']}
        >>> env.rollout(10)["next", "agent", "reward"].shape
        torch.Size([5, 3, 1])
    """

    git_url = "https://github.com/Farama-Foundation/PettingZoo"
    libname = "pettingzoo"
    requires_reset = True

    def __init__(
        self,
        env: Any = None,
        return_state: bool = False,
        group_map: MarlGroupMapType | Mapping[str, Sequence[str]] | None = None,
        use_mask: bool = False,
        categorical_actions: bool = True,
        seed: int | None = None,
        done_on_any: bool | None = None,
        *,
        device: torch.device | str | None = None,
        validate_actions: bool = False,
    ) -> None:
        pz = _import_pettingzoo()
        envs = pz.utils.env
        if not isinstance(env, (envs.ParallelEnv, envs.AECEnv)):
            raise TypeError(
                "PettingZooWrapper needs a pettingzoo.ParallelEnv or pettingzoo.AECEnv, got "
                f"{type(env).__name__}. Build one with e.g. simple_spread_v3.parallel_env() "
                "or tictactoe_v3.env(), or use PettingZooEnv(task, parallel=...)."
            )
        super().__init__(device=device, batch_size=(), validate_actions=validate_actions)
        self._env = env
        self.parallel = isinstance(env, envs.ParallelEnv)
        if not self.parallel and not use_mask:
            raise ValueError(
                "PettingZooWrapper: an AEC env needs use_mask=True (one agent acts per step; "
                "(group, 'mask') says which)."
            )
        self.return_state = return_state
        self.use_mask = use_mask
        self.categorical_actions = categorical_actions
        self.seed = seed
        self.done_on_any = self.parallel if done_on_any is None else bool(done_on_any)
        self.possible_agents = list(env.possible_agents)
        if group_map is None and not self.parallel:
            group_map = MarlGroupMapType.ONE_GROUP_PER_AGENT
        if group_map is None:
            group_map = _default_parallel_group_map(self.possible_agents)
        self.group_map = resolve_group_map(group_map, self.possible_agents)
        self.agent_names = self.possible_agents
        self._obs_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self._act_spaces = {a: env.action_space(a) for a in self.possible_agents}
        self._make_specs()

    # ------------------------------------------------------------ attributes
    @property
    def env(self) -> Any:
        """The wrapped PettingZoo env."""
        return self._env

    @property
    def lib(self) -> Any:
        """The ``pettingzoo`` module."""
        return _import_pettingzoo()

    @property
    def agents(self) -> list[str]:
        """The agents alive now (PettingZoo's ``env.agents``)."""
        return list(self._env.agents)

    @property
    def agent_selection(self) -> str:
        """AEC envs: the agent whose turn it is."""
        return self._env.agent_selection

    @_ClassProperty
    def available_envs(cls) -> list[str]:
        """Task names ``PettingZooEnv`` can build: PettingZoo's registry and ``mpe2``'s tasks."""
        return _available_tasks()

    # ------------------------------------------------------------------ specs
    def _check_group(self, group: str, spaces: dict[str, Any], what: str) -> None:
        members = self.group_map[group]
        first = _signature(spaces[members[0]])
        for name in members[1:]:
            if _signature(spaces[name]) != first:
                raise ValueError(
                    f"PettingZooWrapper: group {group!r} mixes agents with different {what} "
                    f"spaces ({members[0]}: {spaces[members[0]]}, {name}: {spaces[name]}). "
                    "Agents of a group are stacked along one dim: put them in different "
                    "groups, e.g. group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT."
                )

    def _make_specs(self) -> None:
        d, cat = self.device, self.categorical_actions
        obs_spec = Composite(device=d)
        act_spec = Composite(device=d)
        rew_spec = Composite(device=d)
        flag = Categorical(2, shape=(1,), dtype=torch.bool, device=d)
        done_spec = Composite(
            done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(), device=d
        )
        self._mask_in_obs: dict[str, bool] = {}
        for group, members in self.group_map.items():
            n = len(members)
            self._check_group(group, self._obs_spaces, "observation")
            self._check_group(group, self._act_spaces, "action")
            obs_spaces = [self._obs_spaces[a] for a in members]
            in_obs = _kind(obs_spaces[0]) == "Dict" and "action_mask" in obs_spaces[0].spaces
            self._mask_in_obs[group] = in_obs
            group_obs = Composite(
                observation=_spec([_without_mask(s) for s in obs_spaces], False, d),
                shape=(n,),
                device=d,
            )
            if self.use_mask:
                group_obs["mask"] = Categorical(2, shape=(n,), dtype=torch.bool, device=d)
            obs_spec[group] = group_obs
            act_spec[group] = Composite(
                action=_spec([self._act_spaces[a] for a in members], cat, d),
                shape=(n,),
                device=d,
            )
            rew_spec[group] = Composite(
                reward=Unbounded(shape=(n, 1), dtype=torch.float32, device=d),
                shape=(n,),
                device=d,
            )
            gflag = Categorical(2, shape=(n, 1), dtype=torch.bool, device=d)
            done_spec[group] = Composite(
                done=gflag.clone(),
                terminated=gflag.clone(),
                truncated=gflag.clone(),
                shape=(n,),
                device=d,
            )
        self.observation_spec = obs_spec
        self.action_spec = act_spec
        self.reward_spec = rew_spec
        self.done_spec = done_spec
        # info entries, masks given in info and the state are only known after a reset
        _, infos = self._reset_env(seed=self.seed)
        self._info_names: dict[str, list[str]] = {}
        self._mask_in_info: dict[str, bool] = {}
        for group, members in self.group_map.items():
            agent_info = infos.get(members[0], {}) or {}
            self._mask_in_info[group] = "action_mask" in agent_info
            names = [k for k, v in agent_info.items() if k != "action_mask" and _numeric(v)]
            self._info_names[group] = names
            if names:
                self.observation_spec[group, "info"] = Composite(
                    {
                        k: Unbounded(
                            shape=(len(members), *np.asarray(agent_info[k]).shape),
                            dtype=torch.float32,
                            device=d,
                        )
                        for k in names
                    },
                    shape=(len(members),),
                    device=d,
                )
            if self._has_action_mask(group):
                act = self.full_action_spec[group, "action"]
                k = act.n if isinstance(act, (Categorical, OneHot)) else None
                if k is None:
                    raise ValueError(
                        f"PettingZooWrapper: group {group!r} has an action mask but its action "
                        f"space is not Discrete ({self._act_spaces[members[0]]})."
                    )
                self.observation_spec[group, "action_mask"] = Categorical(
                    2, shape=(len(members), k), dtype=torch.bool, device=d
                )
        if self.return_state:
            state = np.asarray(self._env.state())
            space = getattr(self._env, "state_space", None)
            if space is not None and _kind(space) == "Box":
                self.observation_spec["state"] = _spec([space], True, d)[0]
            else:
                self.observation_spec["state"] = Unbounded(
                    shape=state.shape, dtype=_torch_dtype(state.dtype), device=d
                )

    def _has_action_mask(self, group: str) -> bool:
        return self._mask_in_obs[group] or self._mask_in_info[group]

    # --------------------------------------------------------------- reading
    def _reset_env(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        self._last_flags: dict[str, tuple[bool, bool]] = {}
        if self.parallel:
            obs, infos = self._env.reset(**kwargs)
            return dict(obs), dict(infos or {})
        self._env.reset(**kwargs)
        obs = {a: self._env.observe(a) for a in self._env.agents}
        return obs, dict(self._env.infos)

    def _acting(self) -> set[str]:
        if self.parallel:
            return set(self._env.agents)
        return {self._env.agent_selection} if self._env.agents else set()

    def _build(
        self,
        obs: dict[str, Any],
        infos: dict[str, Any],
        rewards: dict[str, Any] | None,
        terms: dict[str, Any] | None,
        truncs: dict[str, Any] | None,
    ) -> TensorDictBase:
        d, out = self.device, {}
        acting = self._acting()
        self._check_agents(obs, rewards, acting)
        for group, members in self.group_map.items():
            spec = self.full_observation_spec[group]
            td = spec.zero()
            obs_t = td.get("observation")
            rew = torch.zeros(len(members), 1)
            flags = {k: torch.zeros(len(members), 1, dtype=torch.bool) for k in ("t", "u")}
            act_mask = td.get("action_mask", None)
            if act_mask is not None:
                act_mask.fill_(True)
            for i, agent in enumerate(members):
                if agent in obs:
                    value = obs[agent]
                    space = self._obs_spaces[agent]
                    if self._mask_in_obs[group]:
                        if agent in acting:
                            act_mask[i] = torch.as_tensor(np.asarray(value["action_mask"]) != 0)
                        value = {k: v for k, v in value.items() if k != "action_mask"}
                        space = _without_mask(space)
                    enc = _encode(space, value, False)
                    if isinstance(enc, dict):
                        obs_t[i] = TensorDict(enc, batch_size=())
                    else:
                        obs_t[i] = enc
                    info = infos.get(agent, {}) or {}
                    if self._mask_in_info[group] and agent in acting and "action_mask" in info:
                        act_mask[i] = torch.as_tensor(np.asarray(info["action_mask"]) != 0)
                    for k in self._info_names[group]:
                        if k in info:
                            td.get("info").get(k)[i] = torch.as_tensor(
                                np.asarray(info[k], dtype=np.float32)
                            )
                    if rewards is not None:
                        rew[i] = float(rewards.get(agent, 0.0))
                        term = bool(terms.get(agent, False))
                        trunc = bool(truncs.get(agent, False))
                        flags["t"][i], flags["u"][i] = term, trunc
                        self._last_flags[agent] = (term, trunc)
                elif rewards is not None:
                    # the agent left the episode earlier: zeros, its last done flags
                    if not self.use_mask:
                        raise ValueError(
                            f"PettingZooWrapper: agent {agent!r} has left the episode (no "
                            "observation this step); set use_mask=True to let agents leave "
                            "mid-episode ((group, 'mask') then marks the live ones)."
                        )
                    term, trunc = self._last_flags.get(agent, (True, False))
                    if agent in terms or agent in truncs:
                        term = bool(terms.get(agent, False))
                        trunc = bool(truncs.get(agent, False))
                    if not (term or trunc):
                        term = True  # gone without a flag: it cannot act again this episode
                    flags["t"][i], flags["u"][i] = term, trunc
                    self._last_flags[agent] = (term, trunc)
            if self.use_mask:
                td.set("mask", torch.tensor([a in acting for a in members], dtype=torch.bool))
            if rewards is not None:
                td.set("reward", rew)
            td.set("terminated", flags["t"])
            td.set("truncated", flags["u"])
            td.set("done", flags["t"] | flags["u"])
            out[group] = td
        root = TensorDict(out, batch_size=(), device=d)
        self._aggregate(root)
        if self.return_state:
            root.set("state", torch.as_tensor(np.asarray(self._env.state())).to(d))
        return root

    def _check_agents(
        self, obs: dict[str, Any], rewards: dict[str, Any] | None, acting: set[str]
    ) -> None:
        """Raises on agents the specs do not know and on live agents without observation."""
        known = set(self.possible_agents)
        unknown = sorted(str(a) for a in {*obs, *(rewards or {}), *acting} if a not in known)
        if unknown:
            raise ValueError(
                f"{type(self).__name__}: the PettingZoo env reported agents {unknown} that "
                f"are not in possible_agents {self.possible_agents}; their data would be "
                "dropped. Expected only agents declared in env.possible_agents (the specs "
                "are built from them): declare every agent the env may spawn there."
            )
        blind = sorted(a for a in acting if a not in obs)
        if blind:
            raise ValueError(
                f"{type(self).__name__}: agents {blind} are live (in env.agents) but the "
                f"PettingZoo env returned no observation for them (observations for "
                f"{sorted(obs)}). Expected an observation for every live agent; fix the env's "
                "step()/reset(), or remove the agent from env.agents when it leaves."
            )

    def _aggregate(self, root: TensorDictBase) -> None:
        dones = torch.cat([root.get((g, "done")).reshape(-1) for g in self.group_map])
        terms = torch.cat([root.get((g, "terminated")).reshape(-1) for g in self.group_map])
        truncs = torch.cat([root.get((g, "truncated")).reshape(-1) for g in self.group_map])
        if self.done_on_any:
            done, term, trunc = dones.any(), terms.any(), truncs.any()
        else:
            done = dones.all()
            trunc = done & truncs.any()
            term = done & ~trunc
        root.set("done", done.reshape(1))
        root.set("terminated", term.reshape(1))
        root.set("truncated", trunc.reshape(1))

    # ---------------------------------------------------------- random actions
    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Writes random actions; where ``tensordict`` holds ``(group, "action_mask")``,
        only allowed actions are drawn (uniformly among them)."""
        tensordict = super().rand_action(tensordict)
        for group in self.group_map:
            mask = tensordict.get((group, "action_mask"), None)
            if mask is None:
                continue
            weights = mask.float()
            weights[~mask.any(-1)] = 1.0  # no allowed action: uniform, PettingZoo decides
            idx = torch.multinomial(weights, 1).squeeze(-1)
            if not self.categorical_actions:
                idx = torch.nn.functional.one_hot(idx, mask.shape[-1])
            tensordict.set((group, "action"), idx.to(self.device))
        return tensordict

    def rollout(
        self,
        max_steps: int,
        policy: Any = None,
        callback: Any = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """:meth:`EnvBase.rollout`; without a policy, random actions are drawn step by step
        from the current ``action_mask`` when the env has one (the generic loop draws all
        steps' random actions up front, which cannot follow a mask that changes)."""
        if policy is None and any(self._has_action_mask(g) for g in self.group_map):
            policy = self.rand_action
        return super().rollout(max_steps, policy, callback, **kwargs)

    # ------------------------------------------------------------------ hooks
    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        obs, infos = self._reset_env(**kwargs)
        return self._build(obs, infos, None, None, None)

    def _agent_action(self, tensordict: TensorDictBase, group: str, index: int, agent: str) -> Any:
        value = tensordict.get((group, "action"))[index]
        space = self._act_spaces[agent]
        problem = _action_problem(space, value, self.categorical_actions)
        if problem is not None:
            raise ValueError(
                f"{type(self).__name__}: the action of agent {agent!r} (entry "
                f"{(group, 'action')!r}, row {index}) does not fit its space {space}: "
                f"expected {problem[0]}, got {problem[1]}. Nothing was stepped. Draw "
                "actions from env.full_action_spec (or env.rand_action()) and respect the "
                "action mask."
            )
        return _decode(space, value, self.categorical_actions)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.parallel:
            live = set(self._env.agents)
            actions = {
                agent: self._agent_action(tensordict, group, i, agent)
                for group, members in self.group_map.items()
                for i, agent in enumerate(members)
                if agent in live
            }
            obs, rewards, terms, truncs, infos = self._env.step(actions)
            return self._build(dict(obs), dict(infos), dict(rewards), dict(terms), dict(truncs))
        env = self._env
        agent = env.agent_selection
        if env.terminations.get(agent, False) or env.truncations.get(agent, False):
            action = None  # PettingZoo's "dead step": a finished agent must pass None
        else:
            group = next(g for g, m in self.group_map.items() if agent in m)
            action = self._agent_action(
                tensordict, group, self.group_map[group].index(agent), agent
            )
        env.step(action)
        obs = {a: env.observe(a) for a in env.agents}
        return self._build(
            obs, dict(env.infos), dict(env.rewards), dict(env.terminations), dict(env.truncations)
        )

    def _set_seed(self, seed: int | None) -> None:
        self.seed = seed
        self._reset_env(seed=seed)

    # ----------------------------------------------------------------- state
    def get_state(self) -> dict[str, Any]:
        """The exact state: each PettingZoo layer's attributes, pickled (RNGs included), and
        the wrapper's per-episode flags of agents that left.

        Example:
            >>> env = PettingZooEnv("simple_spread_v3", parallel=True, N=2, seed=0)
            >>> state = env.get_state()
            >>> env.set_state(state)
        """
        return {
            "env_class": type(self).__name__,
            "possible_agents": list(self.possible_agents),
            "layers": {path: pickle.dumps(own) for path, own in _layer_states(self._env)},
            "last_flags": dict(self._last_flags),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` result (into an env built the same way).

        Raises:
            ValueError: the state comes from an env with other agents.
        """
        if state.get("possible_agents") != self.possible_agents:
            raise ValueError(
                f"{type(self).__name__}.set_state(): the state comes from an env with agents "
                f"{state.get('possible_agents')}, this one has {self.possible_agents}. "
                "Restore into an env built the same way."
            )
        layers = dict(_layer_states(self._env))
        if set(layers) != set(state["layers"]):
            raise ValueError(
                f"{type(self).__name__}.set_state(): the saved wrapper chain "
                f"{sorted(state['layers'])} differs from this env's {sorted(layers)}. Restore "
                "into an env built the same way."
            )
        for path, blob in state["layers"].items():
            vars(_layer_at(self._env, path)).update(pickle.loads(blob))
        self._last_flags = dict(state["last_flags"])
        self._awaiting_reset = False

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Closes the PettingZoo env (``raise_if_closed``: TorchRL's keyword; closing twice is
        silent)."""
        self.is_closed = True
        self._env.close()

    def __repr__(self) -> str:
        kind = "parallel" if self.parallel else "AEC"
        return (
            f"{type(self).__name__}({kind}, n_agents={len(self.possible_agents)}, "
            f"groups={list(self.group_map)}, device={self.device})"
        )


def _is_pz_env(value: Any) -> bool:
    envs = _import_pettingzoo().utils.env
    return isinstance(value, (envs.AECEnv, envs.ParallelEnv))


def _layer_states(env: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], dict]]:
    """Each layer of a PettingZoo wrapper chain with its own attributes (links excluded).

    PettingZoo's wrappers forward attribute reads to the env they wrap, which breaks
    unpickling a chain as a whole; each layer's own ``__dict__`` pickles on its own
    (attributes that cannot be pickled, i.e. rendering handles, are left out).
    """
    own = {k: v for k, v in vars(env).items() if not _is_pz_env(v) and _picklable(v)}
    out = [(path, own)]
    for name, value in vars(env).items():
        if _is_pz_env(value):
            out += _layer_states(value, (*path, name))
    return out


def _picklable(value: Any) -> bool:
    """Rendering handles (pygame surfaces, fonts) do not pickle; they hold no game state."""
    try:
        pickle.dumps(value)
    except (TypeError, AttributeError, pickle.PicklingError):
        return False
    return True


def _layer_at(env: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        env = vars(env)[name]
    return env


def _default_parallel_group_map(agent_names: Sequence[str]) -> dict[str, list[str]]:
    """``"<name>_<int>"`` agents grouped by ``<name>``; other agents in a group of their own."""
    groups: dict[str, list[str]] = {}
    for name in agent_names:
        prefix, sep, index = name.rpartition("_")
        key = prefix if sep and prefix and index.isdigit() else name
        groups.setdefault(key, []).append(name)
    check_marl_grouping(groups, agent_names)
    return groups


def _registry_id(task: str) -> str:
    """``"tictactoe_v3"`` / ``"classic/tictactoe_v3"`` -> PettingZoo's ``"tictactoe-v3"`` form."""
    family, sep, name = task.rpartition("/")
    base, vsep, version = name.rpartition("_v")
    if vsep and version.isdigit():
        name = f"{base}-v{version}"
    return f"{family}{sep}{name}"


def _mpe2_names() -> list[str]:
    if importlib.util.find_spec("mpe2") is None:
        return []
    import pkgutil

    import mpe2

    names = []
    for info in pkgutil.iter_modules(mpe2.__path__):
        _, sep, version = info.name.rpartition("_v")
        if sep and version.isdigit():
            names.append(info.name)
    return names


def _available_tasks() -> list[str]:
    pz = _import_pettingzoo() if importlib.util.find_spec("pettingzoo") else None
    names = set() if pz is None else {*pz.aec_registry, *pz.parallel_registry}
    names |= {f"mpe/{n}" for n in _mpe2_names()}
    return sorted(names)


def _make_task(task: str, parallel: bool, kwargs: dict[str, Any]) -> Any:
    """Builds ``task`` from PettingZoo's registry, or from ``mpe2`` for MPE tasks."""
    pz = _import_pettingzoo()
    family, _, name = task.rpartition("/")
    if family in ("", "mpe") and name in _mpe2_names():
        module = importlib.import_module(f"mpe2.{name}")
        return module.parallel_env(**kwargs) if parallel else module.env(**kwargs)
    wanted = _registry_id(task)
    registry = pz.parallel_registry if parallel else pz.aec_registry
    matches = [k for k in registry if k == wanted or k.rpartition("/")[2] == wanted]
    if not matches:
        other = pz.aec_registry if parallel else pz.parallel_registry
        if any(k == wanted or k.rpartition("/")[2] == wanted for k in other):
            api = "parallel" if parallel else "AEC"
            raise ValueError(
                f"PettingZooEnv: the task {task!r} has no {api} version; use "
                f"parallel={not parallel}."
            )
        raise ValueError(
            f"PettingZooEnv: unknown task {task!r}. Pick one of PettingZooEnv.available_envs, "
            "e.g. 'simple_spread_v3' (MPE) or 'tictactoe_v3'."
        )
    return pz.make("parallel" if parallel else "aec", matches[0], **kwargs)


class PettingZooEnv(PettingZooWrapper):
    """Builds a PettingZoo task by name and wraps it (TorchRL's ``PettingZooEnv``).

    Args:
        task: the task, e.g. ``"simple_spread_v3"`` (MPE, from ``mpe2``) or ``"tictactoe_v3"``;
            PettingZoo's registry ids (``"classic/tictactoe-v3"``) work too.
        parallel: build the parallel API (``module.parallel_env``) or the AEC one
            (``module.env``).
        return_state, group_map, use_mask, categorical_actions, seed, done_on_any,
            device, validate_actions: see :class:`PettingZooWrapper`.
        **kwargs: arguments of the task's constructor (e.g. ``N=3, max_cycles=25``).

    Example:
        >>> env = PettingZooEnv("tictactoe_v3", parallel=False, use_mask=True, seed=0)
        >>> env.group_map
        {'player_1': ['player_1'], 'player_2': ['player_2']}
        >>> env.reset()["player_1", "action_mask"].shape
        torch.Size([1, 9])
    """

    def __init__(
        self,
        task: str,
        parallel: bool,
        return_state: bool = False,
        group_map: MarlGroupMapType | Mapping[str, Sequence[str]] | None = None,
        use_mask: bool = False,
        categorical_actions: bool = True,
        seed: int | None = None,
        done_on_any: bool | None = None,
        *,
        device: torch.device | str | None = None,
        validate_actions: bool = False,
        **kwargs: Any,
    ) -> None:
        _import_pettingzoo()
        self.task_name = task
        env = _make_task(task, parallel, kwargs)
        super().__init__(
            env,
            return_state=return_state,
            group_map=group_map,
            use_mask=use_mask,
            categorical_actions=categorical_actions,
            seed=seed,
            done_on_any=done_on_any,
            device=device,
            validate_actions=validate_actions,
        )

    def __repr__(self) -> str:
        return f"{super().__repr__()} (task={self.task_name})"
