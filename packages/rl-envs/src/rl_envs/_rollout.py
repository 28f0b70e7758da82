"""The generic rollout loop of :class:`~rl_envs.EnvBase` (private): the reference.

``run_rollout`` resets (or starts from the given root), draws the random actions of
every step at once (one ``spec.rand((max_steps,))`` per action key), then asks
:func:`rl_envs.rollout_backend.choose_backend` whether one of the env class's
``rollout_backends`` runs this call (e.g. ``GymEnv`` writes into preallocated numpy
storage, ``PendulumEnv`` steps plain tensors, ``SerialEnv`` / ``ParallelEnv`` copy into
one output). Otherwise the generic loop below runs: the first step's input is fully
checked (``env._check_step_input``), later steps go through ``_step_unchecked`` /
``_step_and_maybe_reset_unchecked``, and the steps are stacked once at the end (into
``out`` when given). The env's post-step-mdp hooks (``env.post_step_mdp_hooks``) run
on every step, the last one included (with no next root), so a rollout stores what
``step_and_maybe_reset`` stores.

Either way, with ``env.validate_actions`` on, the actions of every step are checked
against the action spec in one vectorised pass over the whole rollout before it is
returned (:func:`check_rollout_actions`): an out-of-spec action raises, naming its step.
With it off (the default), the same pass runs only until the env instance has warned
once about an out-of-spec action (``_checks.warn_once_if_out_of_spec``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from rl_envs._checks import check_action_in_spec, not_reset_error, warn_once_if_out_of_spec
from rl_envs.done import any_done, batch_done, terminated_or_truncated
from rl_envs.rollout_backend import choose_backend
from rl_envs.utils import step_mdp

if TYPE_CHECKING:
    from rl_envs.env_base import EnvBase


class PlainPolicy:
    """A plain ``TensorDictModule`` reduced to its plumbing: read ``in_keys``, call
    ``module``, write ``out_keys`` (see :func:`fast_policy`). Rollout loops that keep
    their data outside TensorDicts call ``module`` on tensors directly."""

    __slots__ = ("in_keys", "module", "out_keys")

    def __init__(self, module: torch.nn.Module, in_keys: list[Any], out_keys: list[Any]) -> None:
        self.module = module
        self.in_keys = in_keys
        self.out_keys = out_keys

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        outs = self.module(*[td.get(k) for k in self.in_keys])
        if not isinstance(outs, tuple):
            outs = (outs,)
        for key, value in zip(self.out_keys, outs, strict=True):
            td.set(key, value)
        return td


def fast_policy(policy: Any) -> Any:
    """A plain ``TensorDictModule`` called without its per-call dispatch overhead.

    For an exact ``TensorDictModule`` (list ``in_keys``, in-place, no hooks, a plain
    ``nn.Module`` inside), calling it means: read ``in_keys``, call the module, write
    ``out_keys``. That is what the returned :class:`PlainPolicy` does, skipping
    tensordict's generic dispatch (which costs ~100 us per call on tensordict 0.14).
    Anything else is returned unchanged.
    """
    try:
        from tensordict.nn import TensorDictModule, TensorDictModuleBase
    except ImportError:  # pragma: no cover - tensordict always ships nn
        return policy
    if type(policy) is not TensorDictModule:
        return policy
    module = policy.module
    plain = (
        getattr(policy, "_kwargs", None) is None
        and policy.inplace is True
        and list(policy.out_keys) == list(getattr(policy, "out_keys_source", policy.out_keys))
        and "_" not in policy.out_keys
        and not policy._forward_hooks
        and not policy._forward_pre_hooks
        and isinstance(module, torch.nn.Module)
        and not isinstance(module, TensorDictModuleBase)
        and not module._forward_hooks
        and not module._forward_pre_hooks
    )
    if not plain:
        return policy
    return PlainPolicy(module, list(policy.in_keys), list(policy.out_keys))


def resolve_break(
    break_when_any_done: bool | None, break_when_all_done: bool | None
) -> tuple[bool, bool]:
    """TorchRL's defaults: break on any done unless ``break_when_all_done`` is set."""
    if break_when_any_done is None:
        break_when_any_done = not bool(break_when_all_done)
    break_when_all_done = bool(break_when_all_done)
    if break_when_any_done and break_when_all_done:
        raise TypeError(
            "rollout(): break_when_any_done and break_when_all_done cannot both be True; "
            "pick one (break_when_all_done=True implies break_when_any_done=False)."
        )
    return break_when_any_done, break_when_all_done


def _start(env: EnvBase, auto_reset: bool, tensordict: TensorDictBase | None) -> TensorDictBase:
    if auto_reset:
        return env.reset(tensordict)
    if tensordict is None:
        raise RuntimeError(
            "rollout(auto_reset=False) needs the start: pass tensordict=<the current root>, "
            "e.g. the last step of a previous rollout passed through step_mdp."
        )
    if env._awaiting_reset:  # a backend may not go through env._check_step_input
        raise not_reset_error(env, "rollout(auto_reset=False)")
    if any_done(tensordict, env.full_done_spec):
        # TorchRL's maybe_reset: finished entries are reset before the first step.
        tensordict = tensordict.clone(False)
        terminated_or_truncated(tensordict, env.full_done_spec)
        return env.reset(tensordict)
    return tensordict


def _freeze_after_first_done(
    result: TensorDictBase, batch_ndim: int, done_keys: list[Any]
) -> TensorDictBase:
    """For ``break_when_all_done``: entries repeat their first done step afterwards."""
    done = batch_done(result.get("next"), done_keys, batch_ndim + 1)
    t = done.shape[batch_ndim]
    n = result.batch_size[:batch_ndim].numel()
    flat_done = done.reshape(n, t, -1).any(-1)
    steps = torch.arange(t, device=done.device).expand(n, t)
    first = torch.where(flat_done, steps, torch.full_like(steps, t - 1)).min(-1).values
    idx = torch.minimum(steps, first.unsqueeze(-1))
    if bool((idx == steps).all()):
        return result
    rows = torch.arange(n, device=done.device).unsqueeze(-1)
    batch_shape = result.batch_size
    flat = result.reshape(n, t)
    return flat.apply(lambda x: x[rows, idx], batch_size=[n, t]).reshape(batch_shape)


def _stack(
    steps: list[TensorDictBase],
    dim: int,
    return_contiguous: bool,
    out: TensorDictBase | None,
) -> TensorDictBase:
    if not return_contiguous:
        return LazyStackedTensorDict.lazy_stack(steps, dim)
    _check_same_keys(steps)
    if out is None:
        return torch.stack(steps, dim)
    view = out[(slice(None),) * dim + (slice(0, len(steps)),)]
    view.update_(torch.stack(steps, dim))
    return view


def _check_same_keys(steps: list[TensorDictBase]) -> None:
    """Steps must share their keys to stack; name the ones that came or went, and the fix."""
    first = set(steps[0].keys(True, True))
    for t, step in enumerate(steps[1:], start=1):
        keys = set(step.keys(True, True))
        if keys != first:
            came = sorted(map(str, keys - first))
            went = sorted(map(str, first - keys))
            raise RuntimeError(
                f"rollout: step {t} holds keys that step 0 did not (new: {came}, gone: {went}). "
                "An entry that appears after the first step is usually a state written by the "
                "policy (e.g. a recurrent state) that the env does not declare: add a "
                "TensorDictPrimer for it (env.append_transform(module.make_tensordict_primer())), "
                "or pass return_contiguous=False to get a lazy stack."
            )


def _check_out(out: TensorDictBase, batch_size: torch.Size, max_steps: int) -> None:
    nb = len(batch_size)
    shape = out.batch_size
    if tuple(shape[:nb]) != tuple(batch_size) or len(shape) != nb + 1 or shape[nb] < max_steps:
        raise ValueError(
            f"rollout(out=...): expected a TensorDict of batch_size "
            f"{(*batch_size, max_steps)} (the env's batch_size then max_steps), got "
            f"{tuple(shape)}. Preallocate it from a first rollout, e.g. "
            "`out = env.rollout(max_steps, break_when_any_done=False).clone()`."
        )


def _actions_time_first(env: EnvBase, result: TensorDictBase) -> TensorDictBase:
    """The actions of a ``[*B, T]`` rollout as a ``[T]`` TensorDict of ``[*B, ...]`` entries."""
    nb = len(env.batch_size)
    time_first = result.select(*env.action_keys)
    if nb:
        time_first = time_first.apply(lambda x: x.movedim(nb, 0), batch_size=[result.shape[nb]])
    # a stack of actions (MultiAction) is checked by its first action, as each step is
    for key, offset in getattr(env, "_stacked_actions", {}).items():
        value = time_first.get(key, None)
        dim = time_first.batch_dims + nb + offset if nb else time_first.batch_dims + offset
        if isinstance(value, torch.Tensor) and value.ndim > dim and value.shape[dim] > 0:
            time_first.set(key, value.narrow(dim, 0, 1))
    return time_first


def warn_if_rollout_out_of_spec(env: EnvBase, result: TensorDictBase) -> None:
    """The one-time warning of an env whose validation is off (one pass per rollout)."""
    time_first = _actions_time_first(env, result)
    warn_once_if_out_of_spec(env, time_first, env.action_keys, env.full_action_spec)


def check_rollout_actions(env: EnvBase, result: TensorDictBase) -> None:
    """Every step's actions inside the action spec (one pass over ``[*B, T, ...]``).

    Raises:
        ValueError: from the first step holding an out-of-spec action, naming that step.
    """
    keys, spec = env.action_keys, env.full_action_spec
    time_first = _actions_time_first(env, result)
    if all(spec[key].is_in(time_first.get(key)) for key in keys):
        return
    for step in range(time_first.batch_size[0]):
        try:
            check_action_in_spec(time_first[step], keys, spec)
        except ValueError as err:
            raise ValueError(f"rollout step {step}: {err}") from None


def random_actions(env: EnvBase, max_steps: int) -> dict[Any, torch.Tensor]:
    """The random actions of every step: ``{key: [max_steps, *B, ...]}``, drawn in
    ``full_action_spec`` order (the draw every backend and the generic loop share)."""
    spec = env.full_action_spec
    return {k: spec[k].rand((max_steps,)) for k in spec.keys(True, True)}


def _mode(break_any: bool, break_all: bool, batch_ndim: int) -> str:
    if break_any or (break_all and batch_ndim == 0):
        return "any"
    return "all" if break_all else "none"


def run_rollout(
    env: EnvBase,
    max_steps: int,
    policy: Callable[[TensorDictBase], Any] | None,
    callback: Callable[[EnvBase, TensorDictBase], Any] | None,
    *,
    auto_reset: bool,
    break_when_any_done: bool | None,
    break_when_all_done: bool | None,
    return_contiguous: bool,
    tensordict: TensorDictBase | None,
    out: TensorDictBase | None,
    backend: str = "auto",
) -> TensorDictBase:
    """Implements :meth:`EnvBase.rollout` (see its docstring)."""
    if max_steps < 1:
        raise ValueError(f"rollout(max_steps=...): expected max_steps >= 1, got {max_steps}.")
    break_any, break_all = resolve_break(break_when_any_done, break_when_all_done)
    batch_size = env.batch_size
    nb = len(batch_size)
    if out is not None:
        _check_out(out, batch_size, max_steps)
    root = _start(env, auto_reset, tensordict)
    if policy is not None:
        policy = fast_policy(policy)
    actions = random_actions(env, max_steps) if policy is None else None
    mode = _mode(break_any, break_all, nb)
    stepwise = callback is not None or not return_contiguous
    chosen = choose_backend(env, root, policy, mode, backend, stepwise=stepwise)
    if chosen is not None:
        if actions is not None:
            first = root.clone(False)
            for key, values in actions.items():
                first.set(key, values[0])
            env._check_step_input(first)
        result = chosen.run(env, root, max_steps, policy, mode, actions)
        if env.validate_actions:
            check_rollout_actions(env, result)
        elif not env._out_of_spec_warned:
            warn_if_rollout_out_of_spec(env, result)
        if mode == "all":
            result = _freeze_after_first_done(result, nb, env.done_keys)
        if out is not None:
            view = out[(slice(None),) * nb + (slice(0, result.shape[nb]),)]
            view.update_(result)
            return view
        return result
    # an unbatched env is "all done" at its first done: the same loop as break_any
    break_any = mode == "any"
    return _generic(
        env,
        root,
        max_steps,
        policy,
        callback,
        actions,
        break_any,
        break_all,
        return_contiguous,
        out,
    )


def _generic(
    env: EnvBase,
    root: TensorDictBase,
    max_steps: int,
    policy: Callable[[TensorDictBase], Any] | None,
    callback: Callable[[EnvBase, TensorDictBase], Any] | None,
    actions: dict[Any, torch.Tensor] | None,
    break_any: bool,
    break_all: bool,
    return_contiguous: bool,
    out: TensorDictBase | None,
) -> TensorDictBase:
    """The reference loop: one checked first step, then unchecked steps, one stack."""
    nb = len(env.batch_size)
    reward_keys, done_keys, action_keys = env.reward_keys, env.done_keys, env.action_keys
    hooks = env.post_step_mdp_hooks
    steps: list[TensorDictBase] = []
    ever_done: torch.Tensor | None = None
    for i in range(max_steps):
        if actions is not None:
            for key, values in actions.items():
                root.set(key, values[i])
        else:
            res = policy(root)
            if res is not None and res is not root:
                root.update(res)
        if i == 0:
            env._check_step_input(root)
        last = i == max_steps - 1
        if not break_any and not last:
            td, nxt = env._step_and_maybe_reset_unchecked(root)  # runs the hooks itself
        else:
            td, nxt = env._step_unchecked(root), None
            if break_any and not last and not any_done(td.get("next"), env.full_done_spec):
                nxt = step_mdp(
                    td, reward_keys=reward_keys, done_keys=done_keys, action_keys=action_keys
                )
            if hooks is not None:
                # every stored step goes through the hooks, so all steps share one layout
                td, nxt = hooks(td, nxt)
        steps.append(td)
        if callback is not None:
            callback(env, td)
        if last:
            break
        if break_any:
            if nxt is None:  # a done step: stop here
                break
        elif break_all:
            done = batch_done(td.get("next"), done_keys, nb)
            ever_done = done if ever_done is None else ever_done | done
            if bool(ever_done.all()):
                break
        root = nxt
    result = _stack(steps, nb, return_contiguous, out)
    if env.validate_actions and return_contiguous:
        check_rollout_actions(env, result)
    elif not env._out_of_spec_warned and return_contiguous:
        warn_if_rollout_out_of_spec(env, result)
    if break_all and nb > 0 and return_contiguous:
        frozen = _freeze_after_first_done(result, nb, done_keys)
        if frozen is not result:
            if out is not None:
                result.update_(frozen)
            else:
                result = frozen
    return result
