"""Grouping agents of multi-agent envs: ``MarlGroupMapType`` and ``check_marl_grouping``.

A multi-agent env (``VmasEnv``, ``PettingZooEnv``) stacks the tensors of the agents of
one group along an agent dim and writes them under the group's key, e.g.
``("agents", "observation")`` of shape ``[*B, n_agents, *obs]``. A ``group_map``
(``{group_name: [agent_name, ...]}``) says which agents go together; the two premade
ones are ``MarlGroupMapType.ALL_IN_ONE_GROUP`` (one group named ``"agents"``) and
``MarlGroupMapType.ONE_GROUP_PER_AGENT`` (a group per agent, named after it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum

__all__ = ["MarlGroupMapType", "check_marl_grouping", "default_group_map", "resolve_group_map"]


class MarlGroupMapType(Enum):
    """Premade ways of grouping the agents of a multi-agent env (TorchRL's names).

    * ``ALL_IN_ONE_GROUP``: ``{"agents": [every agent]}``.
    * ``ONE_GROUP_PER_AGENT``: ``{name: [name] for every agent}``.

    Example:
        >>> MarlGroupMapType.ALL_IN_ONE_GROUP.get_group_map(["a_0", "a_1"])
        {'agents': ['a_0', 'a_1']}
        >>> MarlGroupMapType.ONE_GROUP_PER_AGENT.get_group_map(["a_0", "a_1"])
        {'a_0': ['a_0'], 'a_1': ['a_1']}
    """

    ALL_IN_ONE_GROUP = 1
    ONE_GROUP_PER_AGENT = 2

    def get_group_map(self, agent_names: Sequence[str]) -> dict[str, list[str]]:
        """The group map of this type for ``agent_names`` (in the env's order)."""
        if self is MarlGroupMapType.ALL_IN_ONE_GROUP:
            return {"agents": list(agent_names)}
        return {name: [name] for name in agent_names}


def check_marl_grouping(group_map: Mapping[str, Sequence[str]], agent_names: Sequence[str]) -> None:
    """Checks that ``group_map`` puts every agent of ``agent_names`` in exactly one group.

    Args:
        group_map: ``{group_name: [agent_name, ...]}``.
        agent_names: the env's agents.

    Raises:
        ValueError: no agents, duplicated agent names, an empty group, a group that is
            not a list of names, an agent the env does not have, an agent in two groups
            or in none. The message lists the env's agents and how to fix the map.

    Example:
        >>> check_marl_grouping({"agents": ["a_0", "a_1"]}, ["a_0", "a_1"])
    """
    names = list(agent_names)
    hint = (
        f"The env's agents are {names}. Pass a group_map whose groups list each of them "
        "exactly once, or MarlGroupMapType.ALL_IN_ONE_GROUP / ONE_GROUP_PER_AGENT."
    )
    if not names:
        raise ValueError("check_marl_grouping: the env has no agents.")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"check_marl_grouping: agent names {dup} appear more than once.")
    if not isinstance(group_map, Mapping) or not group_map:
        raise ValueError(f"group_map must be a non-empty dict, got {group_map!r}. {hint}")
    seen: dict[str, str] = {}
    for group, members in group_map.items():
        if not isinstance(group, str) or not group:
            raise ValueError(f"group_map: group names must be non-empty strings, got {group!r}.")
        if isinstance(members, str) or not isinstance(members, Sequence):
            raise ValueError(
                f"group_map[{group!r}] must be a list of agent names, got {members!r}. {hint}"
            )
        if not members:
            raise ValueError(f"group_map: group {group!r} is empty. {hint}")
        unknown = [m for m in members if m not in names]
        if unknown:
            raise ValueError(f"group_map: group {group!r} names unknown agents {unknown}. {hint}")
        for member in members:
            if member in seen:
                raise ValueError(
                    f"group_map: agent {member!r} is in group {seen[member]!r} and in group "
                    f"{group!r}. {hint}"
                )
            seen[member] = group
    missing = [n for n in names if n not in seen]
    if missing:
        raise ValueError(f"group_map: agents {missing} are in no group. {hint}")


def default_group_map(agent_names: Sequence[str]) -> dict[str, list[str]]:
    """Groups ``"<name>_<int>"`` agents by ``<name>`` (TorchRL's default for VMAS/PettingZoo).

    If any agent does not follow the convention, every agent goes into one group
    ``"agents"``. A single group called ``"agent"`` is renamed ``"agents"``.

    Example:
        >>> default_group_map(["adversary_0", "agent_0", "agent_1"])
        {'adversary': ['adversary_0'], 'agent': ['agent_0', 'agent_1']}
        >>> default_group_map(["agent_0", "agent_1"])
        {'agents': ['agent_0', 'agent_1']}
    """
    groups: dict[str, list[str]] = {}
    for name in agent_names:
        prefix, sep, index = name.rpartition("_")
        if not sep or not prefix or not index.isdigit():
            return MarlGroupMapType.ALL_IN_ONE_GROUP.get_group_map(agent_names)
        groups.setdefault(prefix, []).append(name)
    if list(groups) == ["agent"]:
        return {"agents": groups["agent"]}
    return groups


def resolve_group_map(
    group_map: MarlGroupMapType | Mapping[str, Sequence[str]] | None,
    agent_names: Sequence[str],
) -> dict[str, list[str]]:
    """The checked group map: ``None`` gives :func:`default_group_map`, a
    :class:`MarlGroupMapType` its map, a dict is checked and copied.

    Example:
        >>> resolve_group_map(MarlGroupMapType.ONE_GROUP_PER_AGENT, ["x", "y"])
        {'x': ['x'], 'y': ['y']}
    """
    if group_map is None:
        out = default_group_map(agent_names)
    elif isinstance(group_map, MarlGroupMapType):
        out = group_map.get_group_map(agent_names)
    elif isinstance(group_map, Mapping):
        out = {g: list(m) if not isinstance(m, str) else m for g, m in group_map.items()}
    else:
        raise TypeError(
            "group_map must be None, a MarlGroupMapType or a dict {group: [agent names]}, "
            f"got {type(group_map).__name__}."
        )
    check_marl_grouping(out, agent_names)
    return out
