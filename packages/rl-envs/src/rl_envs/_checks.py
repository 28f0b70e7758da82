"""Input checks of :class:`~rl_envs.EnvBase` (private).

Each function raises an error that names the key, what was expected, what came
and how to fix it. They are split in two tiers, see ``env_base``'s docstring:

* :func:`check_action_structure` (shape, device; lists missing actions) only compares
  attributes: it costs about a microsecond per action key;
* :func:`check_action_in_spec` checks the dtype and calls ``spec.is_in`` (a reduction and a host
  sync): it runs in ``step()`` when ``env.validate_actions`` is ``True``;
* :func:`warn_once_if_out_of_spec` is the same test as a one-time warning per env
  instance, for when validation is off (the default).
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_envs.specs import NonTensor


def _fmt(key: NestedKey) -> str:
    return repr(key)


def check_action_structure(
    td: TensorDictBase, action_keys: Sequence[NestedKey], action_spec: Any
) -> list[NestedKey]:
    """Checks that every action present has the spec's shape and device.

    The dtype is not checked here: as in TorchRL, an action of another dtype (e.g. a
    float ``1.0`` for an integer spec) goes to the env as it is, and the env casts it;
    so does an action whose shape broadcasts to the spec's (``()`` for ``(1,)``).
    :func:`check_action_in_spec` (``validate_actions=True``) checks both. Non-tensor
    actions (a ``NonTensor`` spec) are not checked.

    Args:
        td: the input of ``env.step``.
        action_keys: the leaf keys of ``env.full_action_spec``.
        action_spec: ``env.full_action_spec``.

    Returns:
        The action keys ``td`` lacks. An env may step without them (TorchRL's mock envs
        whose ``_step`` ignores the action do): ``env.step`` turns the ``KeyError`` of a
        ``_step`` that reads one into :func:`missing_action_error`.

    Raises:
        ValueError: wrong shape or device.
    """
    missing: list[NestedKey] = []
    for key in action_keys:
        spec = action_spec[key]
        if _ragged(spec):
            if key not in td.keys(True, True):
                missing.append(key)
            continue
        value = td.get(key, None)
        if value is None:
            missing.append(key)
            continue
        if isinstance(spec, NonTensor):
            continue
        if not isinstance(value, torch.Tensor):
            raise ValueError(
                f"Action entry {_fmt(key)}: expected a torch.Tensor of shape "
                f"{tuple(spec.shape)}, got an object of type {type(value).__name__}."
            )
        if value.shape != spec.shape and not _broadcasts(value.shape, spec.shape):
            raise ValueError(
                f"Action entry {_fmt(key)} has the wrong shape: expected {tuple(spec.shape)} "
                f"(the env's batch_size followed by the action shape), got {tuple(value.shape)}. "
                "Fix the policy's output size or reshape the action."
            )
        if value.device != spec.device and not _same_cpu(value.device, spec.device):
            raise ValueError(
                f"Action entry {_fmt(key)} is on the wrong device: expected {spec.device}, got "
                f"{value.device}. Move it with `.to({str(spec.device)!r})` or build the env "
                f"with device={str(value.device)!r}."
            )
    return missing


def _ragged(spec: Any) -> bool:
    """A lazy stack of actions that differ in shape (``-1`` dims): no one tensor to read, so
    the checks here skip it (the env reads each member's action from the lazy stack)."""
    return -1 in spec.shape


def _same_cpu(a: torch.device, b: Any) -> bool:
    """``cpu`` and ``cpu:0`` are one device (torch drops the index on CPU tensors)."""
    return a.type == "cpu" and getattr(b, "type", None) == "cpu"


def missing_action_error(
    td: TensorDictBase, key: NestedKey, action_spec: Any, cause: BaseException | None = None
) -> KeyError:
    """The error of an ``env.step`` whose ``_step`` failed without the action ``key``."""
    spec = action_spec[key]
    raised = f" (the env raised {type(cause).__name__}: {cause})" if cause is not None else ""
    return KeyError(
        f"env.step() needs the action entry {_fmt(key)} but the input TensorDict has "
        f"only {sorted(map(str, td.keys(True, True)))}{raised}. Expected a tensor of shape "
        f"{tuple(spec.shape)} and dtype {spec.dtype}: write it with a policy, "
        f"`td[{_fmt(key)}] = env.action_spec.rand()` or use env.rand_step(td)."
    )


def not_reset_error(env: Any, method: str) -> RuntimeError:
    """The error of stepping an env (``requires_reset``) before its first reset."""
    return RuntimeError(
        f"{type(env).__name__}.{method}() was called before reset(): expected `td = "
        f"env.reset()` (or env.set_state(state)) before the first step, and after a step "
        "that failed half-way; got a step on an env whose state is not the start of an "
        "episode. Call `td = env.reset()` and step from td."
    )


def check_bool_mask(mask: Any, key: NestedKey, method: str) -> None:
    """Raises unless ``mask`` (a ``"_reset"`` / ``"_step"`` entry) is ``None`` or bool.

    Raises:
        TypeError: a tensor of another dtype (an int or float mask would select rows by
            value, or be rejected deep inside the env).
    """
    if mask is None or getattr(mask, "dtype", None) is torch.bool:
        return
    what = f"a tensor of dtype {mask.dtype}" if hasattr(mask, "dtype") else type(mask).__name__
    raise TypeError(
        f"env.{method}(): the mask {_fmt(key)} must be a bool tensor (True where to "
        f"{method}), got {what}. Build it with a comparison (e.g. `td['done'].clone()`) "
        "or cast it: `mask.bool()`."
    )


def check_seed(seed: Any, env_name: str) -> int | None:
    """``seed`` as an int (or ``None``); raises a ``TypeError`` otherwise.

    NumPy and 0-d torch integers are accepted; bools, floats and strings are not (a float
    seed would be truncated, a string hashed differently by each RNG).
    """
    if seed is None:
        return None
    integer_tensor = (
        isinstance(seed, torch.Tensor)
        and seed.ndim == 0
        and not seed.is_floating_point()
        and seed.dtype != torch.bool
    )
    if integer_tensor or not isinstance(seed, (bool, torch.Tensor)):
        try:
            return operator.index(seed)
        except TypeError:
            pass
    raise TypeError(
        f"{env_name}.set_seed(): expected an int or None, got {seed!r} of type "
        f"{type(seed).__name__}. Pass an integer seed, e.g. env.set_seed(0)."
    )


def _broadcasts(shape: torch.Size, target: torch.Size) -> bool:
    """Whether an action of ``shape`` broadcasts to the spec's ``target`` (e.g. ``()`` to
    ``(1,)``): TorchRL passes such actions to the env, which reads them as it likes."""
    if len(shape) > len(target):
        return False
    return all(a in (1, b) for a, b in zip(reversed(shape), reversed(target), strict=False))


def check_action_in_spec(
    td: TensorDictBase, action_keys: Sequence[NestedKey], action_spec: Any
) -> None:
    """Checks that every action has its spec's shape and dtype and lies inside it.

    Raises:
        ValueError: an action has another shape or dtype, or is outside its spec.
    """
    for key in action_keys:
        spec = action_spec[key]
        if _ragged(spec):
            continue
        value = td.get(key)
        if value.shape != spec.shape:
            raise ValueError(
                f"Action entry {_fmt(key)} has the shape {tuple(value.shape)}, which broadcasts "
                f"to the spec's {tuple(spec.shape)} but is not it. Reshape the action, or build "
                "the env with validate_actions=False to pass it to the env as it is."
            )
        if value.dtype != spec.dtype:
            raise ValueError(
                f"Action entry {_fmt(key)} has the wrong dtype: expected {spec.dtype}, got "
                f"{value.dtype}. Cast it, e.g. `action.to({spec.dtype})`, use a policy "
                "built from env.action_spec, or build the env with validate_actions=False "
                "to pass it to the env as it is."
            )
        if not spec.is_in(value):
            bounds = ""
            space = getattr(spec, "space", None)
            low, high = getattr(space, "low", None), getattr(space, "high", None)
            if low is not None and high is not None:
                bounds = f" (low={low.flatten()[:6].tolist()}, high={high.flatten()[:6].tolist()})"
            shown = value.flatten()[:6].tolist()
            raise ValueError(
                f"Action entry {_fmt(key)} is outside its spec {type(spec).__name__}{bounds}: "
                f"got values starting with {shown}. Clip or project it "
                "(`env.action_spec.project(action)`), fix the policy, or build the env with "
                "validate_actions=False to skip this check."
            )


def warn_once_if_out_of_spec(
    env: Any, td: TensorDictBase, action_keys: Sequence[NestedKey], action_spec: Any
) -> None:
    """Warns (once per env instance) when an action of ``td`` is outside its spec.

    Used while ``env.validate_actions`` is off: the action still goes to the env,
    which clips it (or not) as it would in TorchRL. ``td`` may carry leading dims
    (a stacked rollout). Sets ``env._out_of_spec_warned`` once it warned.
    """
    if env._out_of_spec_warned:
        return
    for key in action_keys:
        spec = action_spec[key]
        if _ragged(spec):
            continue
        value = td.get(key, None)
        if value is None or not isinstance(value, torch.Tensor):
            continue
        if value.dtype != spec.dtype:  # a dtype the env casts (TorchRL's behaviour): probe
            value = value.to(spec.dtype)  # the values it will see, not the dtype
        if value.shape != spec.shape and _broadcasts(value.shape, spec.shape):
            value = value.expand(spec.shape)
        if spec.is_in(value):
            continue
        env._out_of_spec_warned = True
        shown = value.flatten()[:6].tolist()
        warnings.warn(
            f"{type(env).__name__}: action entry {_fmt(key)} is outside its spec "
            f"{type(spec).__name__} (values starting with {shown}); it is passed to the env as "
            "is, which may clip it (TorchRL's behaviour). Build the env with "
            "validate_actions=True to raise instead, or project the action "
            "(`env.action_spec.project(action)`). Shown once per env instance.",
            UserWarning,
            stacklevel=4,
        )
        return


def check_not_done(td: TensorDictBase, done_key: NestedKey = "done") -> None:
    """Raises if the root of ``td`` says the env is done (stepping without a reset).

    Raises:
        RuntimeError: some entry of ``td[done_key]`` is ``True``.
    """
    done = td.get(done_key, None)
    if done is not None and bool(done.any()):
        where = ""
        if done.ndim > 1:
            idx = done.reshape(done.shape[0], -1).any(-1).nonzero().flatten()[:8].tolist()
            where = f" (batch entries {idx})"
        raise RuntimeError(
            f"env.step() was called with {_fmt(done_key)}=True in its input{where}: the episode "
            "has ended and the env must be reset before it is stepped again. Call "
            "`td = env.reset()` (or `env.reset(td.set('_reset', td['done']))` for a partial "
            "reset of a batched env), or use `td, root = env.step_and_maybe_reset(td)`, which "
            "resets the finished entries for you."
        )


def check_batch_size(td: TensorDictBase, batch_size: torch.Size, where: str) -> None:
    """Checks the batch size of a TensorDict returned by ``_reset`` / ``_step``."""
    if td.batch_size != batch_size:
        raise RuntimeError(
            f"{where} returned a TensorDict of batch_size {tuple(td.batch_size)}, expected the "
            f"env's batch_size {tuple(batch_size)}. Build the output with "
            "`TensorDict(..., batch_size=self.batch_size)`."
        )
