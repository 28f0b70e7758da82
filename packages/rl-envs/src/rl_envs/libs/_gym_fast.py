"""The fast rollout loop of a single Gymnasium env (private).

Where the time goes in a TensorDict-per-step loop (measured on CartPole-v1,
whose raw ``env.step`` takes ~7 us): building a TensorDict costs 2-5 us,
``torch.tensor(scalar)`` ~4 us, writing one row of a torch tensor ~2.5 us. A
numpy row write costs ~0.1 us. So this loop:

* draws every random action up front (one ``spec.rand((T,))`` per action key, the
  same call the generic loop makes, hence the same actions for the same seed)
  and converts them to Gymnasium's format once;
* writes each step's observations, reward and flags into numpy arrays allocated
  once from the specs;
* builds the output TensorDict once at the end with ``torch.from_numpy`` (no copy).

With a policy, the policy still sees one TensorDict per step (it reads keys),
but that root is built from numpy views and the env side stays in numpy.
Entries the policy writes under ``"next"`` (e.g. a recurrent state) are kept in
the output and carried to the next root, as ``step`` + ``step_mdp`` do.
:func:`supports` says no (generic loop) when the root holds entries it does not
know (e.g. state entries of a policy), or for a policy on a non-CPU env. Everything
Gymnasium-specific goes through the env's :class:`~rl_envs.libs.gym_binding.GymBinding`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs._rollout import PlainPolicy

if TYPE_CHECKING:
    from rl_envs.env_base import EnvBase
    from rl_envs.libs.gym_binding import GymBinding


def _as_tuple(key: Any) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


def _known_keys(w: EnvBase, binding: GymBinding) -> set[tuple[str, ...]]:
    done_keys = {_as_tuple(k) for k in w.done_keys}
    action_keys = {_as_tuple(k) for k in w.action_keys}
    return {r.key for r in binding.readers} | done_keys | action_keys


def supports(w: EnvBase, binding: GymBinding, root: TensorDictBase, policy: Any) -> bool:
    """A root of known entries only (observations, flags, actions); a policy on CPU."""
    if w.device.type != "cpu" and policy is not None:
        return False
    return {_as_tuple(k) for k in root.keys(True, True)} <= _known_keys(w, binding)


def run(
    w: EnvBase,
    binding: GymBinding,
    root: TensorDictBase,
    max_steps: int,
    policy: Any,
    mode: str,
    actions: dict[Any, torch.Tensor] | None,
) -> TensorDictBase:
    """Rollout of a single Gymnasium env; same output as the generic loop."""
    done_keys = [_as_tuple(k) for k in w.done_keys]
    known = _known_keys(w, binding)
    rewards = {_as_tuple(k) for k in w.reward_keys}
    env = binding.env
    readers = binding.readers
    leaves = binding.action_leaves
    obs_spec = w.full_observation_spec
    T = max_steps

    next_bufs = [np.empty((T, *obs_spec[k].shape), dtype=dt) for k, _, dt, _ in readers]
    root_bufs = [np.empty((T, *obs_spec[k].shape), dtype=dt) for k, _, dt, _ in readers]
    for buf, (key, _, _, offset) in zip(root_bufs, readers, strict=True):
        buf[0] = root.get(key).cpu().numpy() + offset  # buffers hold raw gym values
    reward = np.zeros((T, 1), dtype=np.float32)
    term = np.zeros((T, 1), dtype=bool)
    trunc = np.zeros((T, 1), dtype=bool)
    resets: list[tuple[int, list[Any]]] = []
    step = binding.step if binding.frame_skip > 1 else env.step
    fns = [r[1] for r in readers]
    stop_on_done = mode == "any"

    if policy is None:
        assert actions is not None  # rollout drew them and checked the first step
        seq = binding.action_sequence(actions, T)
    else:
        action_store: list[list[torch.Tensor]] = [[] for _ in leaves]
        extra: dict[Any, list[torch.Tensor]] = {}
        carried: list[tuple[tuple[str, ...], list[torch.Tensor]]] = []

    n = T
    single = len(fns) == 1
    fn0, nb0, rb0 = fns[0], next_bufs[0], root_bufs[0]
    plan: Any = None  # (module, input buffers, output stores, converter) once known
    plan1: Any = None  # the same when there is one input and one output
    module: Any = None
    in_bufs: list[np.ndarray] = []
    stores: list[list[torch.Tensor]] = []
    convert: Any = None
    in0: Any = None
    store0: list[torch.Tensor] = []
    conv0: Any = None
    from_numpy = torch.from_numpy
    for t in range(T):
        if policy is None:
            action = seq[t]
        elif plan1 is not None:  # one input, one output (the action): the common case
            value = module(from_numpy(in0[t]))
            store0.append(value)
            action = conv0(value)
        elif plan is not None:  # a PlainPolicy on tensors: no TensorDict per step
            outs = module(*[from_numpy(buf[t]) for buf in in_bufs])
            if not isinstance(outs, tuple):
                outs = (outs,)
            for store, value in zip(stores, outs, strict=True):
                store.append(value)
            action = convert(outs)
        else:
            if t == 0:
                td = root
            else:
                if t == 1:
                    td = _policy_root(w)
                    for k, store in extra.items():  # step_mdp keeps the policy's root entries
                        if _as_tuple(k)[0] != "next":
                            td.set(k, store[0])
                for (key, _, _, offset), rb in zip(readers, root_bufs, strict=True):
                    value = torch.from_numpy(rb[t, ...])
                    td.set(key, value - offset if offset else value)
                for root_key, store in carried:  # step_mdp: ("next", k) -> k
                    td.set(root_key, store[-1])
            res = policy(td)
            if res is not None and res is not td:
                td.update(res)
            if t == 0:
                w._check_step_input(td)
                extra = {k: [] for k in td.keys(True, True) if _as_tuple(k) not in known}
                carried = [
                    (_as_tuple(k)[1:], store)
                    for k, store in extra.items()
                    if _as_tuple(k)[0] == "next" and _as_tuple(k)[1:] not in known | rewards
                ]
            for store, leaf in zip(action_store, leaves, strict=True):
                store.append(td.get(leaf.key))
            for k, store in extra.items():
                store.append(td.get(k))
            action = binding.to_gym(td)
            if t == 0 and not carried:
                plan = _tensor_plan(binding, policy, root_bufs, action_store, extra)
                if plan is not None:
                    module, in_bufs, stores, convert = plan
                    if len(in_bufs) == 1 and len(stores) == 1 and binding.single_plain_action:
                        plan1 = plan
                        in0, store0 = in_bufs[0], stores[0]
                        conv0 = binding.converter(leaves[0])
        obs, r, te, tr, info = step(action)
        if single:
            nb0[t] = fn0(obs, info)
        else:
            for buf, fn in zip(next_bufs, fns, strict=True):
                buf[t] = fn(obs, info)
        reward[t, 0] = r
        term[t, 0] = te
        trunc[t, 0] = tr
        if te or tr:
            if stop_on_done:
                n = t + 1
                break
            if t < T - 1:
                obs0, info0 = env.reset()
                values = [fn(obs0, info0) for fn in fns]
                if policy is None:
                    resets.append((t + 1, values))
                else:
                    for rb, value in zip(root_bufs, values, strict=True):
                        rb[t + 1] = value
        elif policy is not None and t < T - 1:
            if single:
                rb0[t + 1] = nb0[t]
            else:
                for rb, nb in zip(root_bufs, next_bufs, strict=True):
                    rb[t + 1] = nb[t]

    if policy is None:
        for rb, nb in zip(root_bufs, next_bufs, strict=True):
            rb[1:n] = nb[: n - 1]
        for i, values in resets:
            if i < n:
                for rb, value in zip(root_bufs, values, strict=True):
                    rb[i] = value
    for rb, nb, (_, _, _, offset) in zip(root_bufs, next_bufs, readers, strict=True):
        if offset:
            rb[:n] -= offset
            nb[:n] -= offset

    out: dict[Any, Any] = {}
    nxt: dict[Any, Any] = {}
    for (key, *_), rb, nb in zip(readers, root_bufs, next_bufs, strict=True):
        out[key] = torch.from_numpy(rb[:n])
        nxt[key] = torch.from_numpy(nb[:n])
    if actions is not None:
        for key, value in actions.items():
            out[_as_tuple(key)] = value[:n]
    else:
        for leaf, store in zip(leaves, action_store, strict=True):
            out[leaf.key] = torch.stack(store[:n])
        for key, store in extra.items():
            out[_as_tuple(key)] = torch.stack(store[:n])
    zeros = torch.zeros((n, 1), dtype=torch.bool)
    for key in done_keys:
        out[key] = zeros.clone()
    term_t, trunc_t = torch.from_numpy(term[:n]), torch.from_numpy(trunc[:n])
    nxt[("reward",)] = torch.from_numpy(reward[:n])
    nxt[("terminated",)] = term_t
    nxt[("truncated",)] = trunc_t
    nxt[("done",)] = term_t | trunc_t
    td = TensorDict(batch_size=[n], device=torch.device("cpu"))
    for key, value in out.items():
        td.set(key, value)
    for key, value in nxt.items():
        td.set(("next", *key), value)
    if w.device.type != "cpu":
        td = td.to(w.device)
    return td


def _tensor_plan(
    binding: GymBinding,
    policy: Any,
    root_bufs: list[np.ndarray],
    action_store: list[list[torch.Tensor]],
    extra: dict[Any, list[torch.Tensor]],
) -> tuple[Any, list[np.ndarray], list[list[torch.Tensor]], Callable[[tuple], Any]] | None:
    """How to run a :class:`PlainPolicy` on tensors, or ``None`` (TensorDict per step).

    It applies when the policy reads only observations (without offsets) and writes
    every action leaf plus extra root entries (not under ``"next"``): then a step is
    ``module(*torch.from_numpy(rows))``, outputs appended to their stores, and the
    actions converted for Gymnasium; the same values the TensorDict route produces.
    """
    if not isinstance(policy, PlainPolicy):
        return None
    position = {reader.key: i for i, reader in enumerate(binding.readers)}
    in_bufs = []
    for key in policy.in_keys:
        i = position.get(_as_tuple(key))
        if i is None or binding.readers[i].offset:
            return None
        in_bufs.append(root_bufs[i])
    leaves = binding.action_leaves
    leaf_index = {_as_tuple(leaf.key): j for j, leaf in enumerate(leaves)}
    extra_by_key = {_as_tuple(k): store for k, store in extra.items()}
    stores: list[list[torch.Tensor]] = []
    action_out: dict[int, int] = {}
    for o, key in enumerate(policy.out_keys):
        k = _as_tuple(key)
        if k in leaf_index and leaf_index[k] not in action_out:
            action_out[leaf_index[k]] = o
            stores.append(action_store[leaf_index[k]])
        elif k in extra_by_key and k[0] != "next":
            stores.append(extra_by_key.pop(k))
        else:
            return None
    if len(action_out) != len(leaves) or extra_by_key:
        return None
    convs = [binding.converter(leaf) for leaf in leaves]
    if binding.single_plain_action:
        o, conv = action_out[0], convs[0]
        return policy.module, in_bufs, stores, lambda outs: conv(outs[o])
    outs_of = [action_out[j] for j in range(len(leaves))]

    def convert(outs: tuple) -> Any:
        return binding.assemble([c(outs[o]) for c, o in zip(convs, outs_of, strict=True)])

    return policy.module, in_bufs, stores, convert


def _policy_root(w: EnvBase) -> TensorDictBase:
    """The root the policy sees from step 1 on: reused, its observations replaced each
    step by fresh views of the numpy storage (done flags are always False there)."""
    falses = torch.zeros((1,), dtype=torch.bool)
    return TensorDict(
        {"done": falses, "terminated": falses.clone(), "truncated": falses.clone()},
        batch_size=w.batch_size,
    )
