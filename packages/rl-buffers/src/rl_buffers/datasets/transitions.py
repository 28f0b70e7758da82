"""Offline data as TED transitions: arrays of steps in, a ``[N]`` TensorDict out, checked field by field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

REQUIRED_FIELDS = ("observations", "actions", "rewards", "terminals")


class DatasetFormatError(ValueError):
    """An offline dataset is missing a field or its fields disagree (the message names the field)."""


def _tensor(name: str, value: Any) -> torch.Tensor:
    try:
        out = torch.as_tensor(np.asarray(value))
    except (TypeError, ValueError) as err:
        raise DatasetFormatError(f"field {name!r} is not an array of numbers: {err}") from err
    if out.ndim == 0:
        raise DatasetFormatError(f"field {name!r} is a scalar; expected one entry per step.")
    return out


def _flag(name: str, value: Any, steps: int) -> torch.Tensor:
    flag = _tensor(name, value).reshape(steps, -1)
    if flag.shape[1] != 1:
        raise DatasetFormatError(
            f"field {name!r} must hold one flag per step; got shape {tuple(flag.shape)}."
        )
    return flag.bool()


def transitions_from_arrays(
    fields: Mapping[str, Any], *, use_truncated_as_done: bool = True
) -> TensorDict:
    """Builds TED transitions from D4RL-named arrays of ``N`` steps.

    ``fields`` holds ``observations``, ``actions``, ``rewards`` and ``terminals``
    (required), ``timeouts`` and ``next_observations`` (optional). Steps are in
    order; an episode ends at a step whose ``terminals`` or ``timeouts`` is set.

    Without ``next_observations`` the next observation of a step is the following
    step's; a terminal step's is zeros (never bootstrapped from), and the last step
    of an episode cut by a timeout is dropped (its next observation is unknown).
    With them, every step is kept as is.

    The result has ``observation``, ``action``, ``episode`` (the episode's number,
    what :class:`~rl_buffers.SliceSampler` reads) and root ``done`` / ``terminated`` /
    ``truncated`` (all False: each row starts a transition), and under ``"next"``:
    ``observation``, ``reward`` ``[N, 1]``, ``done`` / ``terminated`` / ``truncated`` ``[N, 1]``
    (``done = terminated | truncated``, or ``terminated`` alone with
    ``use_truncated_as_done=False``).

    Raises:
        DatasetFormatError: a required field is missing, or fields have different lengths.

    Examples:
        >>> import numpy as np
        >>> data = transitions_from_arrays({
        ...     "observations": np.arange(4.0)[:, None], "actions": np.zeros((4, 1)),
        ...     "rewards": np.ones(4), "terminals": [0, 1, 0, 0], "timeouts": [0, 0, 0, 1]})
        >>> data["next", "observation"].squeeze(-1).tolist(), data["episode"].tolist()
        ([1.0, 0.0, 3.0], [0, 0, 1])
    """
    missing = [name for name in REQUIRED_FIELDS if name not in fields]
    if missing:
        raise DatasetFormatError(
            f"the dataset has no field {missing[0]!r}; an offline dataset needs "
            f"{', '.join(REQUIRED_FIELDS)} (and optionally timeouts, next_observations). "
            f"It has: {sorted(fields)}."
        )
    obs = _tensor("observations", fields["observations"])
    steps = obs.shape[0]
    for name in (*REQUIRED_FIELDS[1:], "timeouts", "next_observations"):
        if name in fields and len(fields[name]) != steps:
            raise DatasetFormatError(
                f"field {name!r} has {len(fields[name])} entries but 'observations' has {steps}: "
                "every field needs one entry per step."
            )
    action = _tensor("actions", fields["actions"])
    reward = _tensor("rewards", fields["rewards"]).reshape(steps, -1).float()
    terminated = _flag("terminals", fields["terminals"], steps)
    zeros = torch.zeros(steps, 1, dtype=torch.bool)
    truncated = _flag("timeouts", fields["timeouts"], steps) if "timeouts" in fields else zeros
    truncated = truncated & ~terminated
    end = terminated | truncated
    episode = torch.cat([torch.zeros(1, dtype=torch.long), end[:-1, 0].long().cumsum(0)])
    keep = torch.ones(steps, dtype=torch.bool)
    if "next_observations" in fields:
        next_obs = _tensor("next_observations", fields["next_observations"])
        if next_obs.shape[1:] != obs.shape[1:]:
            raise DatasetFormatError(
                f"field 'next_observations' has per-step shape {tuple(next_obs.shape[1:])}, "
                f"'observations' {tuple(obs.shape[1:])}: they must match."
            )
    else:
        next_obs = torch.cat([obs[1:], torch.zeros_like(obs[:1])])
        next_obs[terminated[:, 0]] = 0
        keep = ~truncated[:, 0]
        keep[-1] = bool(terminated[-1, 0])  # the last step's next observation is unknown
    done = end if use_truncated_as_done else terminated
    data = TensorDict(
        {
            "observation": obs,
            "action": action,
            "episode": episode,
            "done": zeros.clone(),
            "terminated": zeros.clone(),
            "truncated": zeros.clone(),
            "next": {
                "observation": next_obs,
                "reward": reward,
                "done": done,
                "terminated": terminated,
                "truncated": truncated,
            },
        },
        batch_size=[steps],
    )
    return data[keep] if not bool(keep.all()) else data


def check_matches_env(data: TensorDict, env: Any) -> None:
    """Raises if the dataset's observation or action shape is not the env's (duck-typed specs).

    Examples:
        >>> from types import SimpleNamespace
        >>> data = TensorDict(observation=torch.zeros(5, 3), action=torch.zeros(5, 1), batch_size=[5])
        >>> env = SimpleNamespace(observation_spec={"observation": SimpleNamespace(shape=(3,))},
        ...                       action_spec=SimpleNamespace(shape=(1,)), batch_size=())
        >>> check_matches_env(data, env)
    """
    batch = len(getattr(env, "batch_size", ()))
    wanted = {
        "observation": tuple(env.observation_spec["observation"].shape[batch:]),
        "action": tuple(env.action_spec.shape[batch:]),
    }
    for key, shape in wanted.items():
        got = tuple(data.get(key).shape[1:])
        if got != shape:
            raise DatasetFormatError(
                f"the dataset's {key!r} has per-step shape {got}, the env's {key} spec {shape}: "
                "this dataset was recorded on another task (or with other observation transforms)."
            )
