"""``Collector`` (alias ``SyncDataCollector``): one process, one env, batches of ``[*B, T]``."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type
from torch import nn

from rl_collectors._autowrap import auto_wrap_policy
from rl_collectors._background import BackgroundCollection
from rl_collectors._batching import (
    POLICY_VERSION_KEYS,
    TRAJ_IDS_KEY,
    BatchTimings,
    check_options,
    finish_batch,
    fit_frames,
    frames_for_next_batch,
    make_progress_bar,
)
from rl_collectors._buffer import StepBuffer
from rl_collectors._env_step import (
    DONE_KEY,
    TRUNCATED_KEY,
    done_keys_of,
    end_of_trajectory,
    env_rollout,
    env_step_and_maybe_reset,
    has_post_step_mdp_hooks,
    partial_reset,
    root_after,
)
from rl_collectors._fake import fake_transition
from rl_collectors._introspect import bound_method, call_args, progress_stats
from rl_collectors._policy import (
    fast_policy_call,
    load_weights_,
    policy_device_of,
    policy_state_dict,
    resolve_exploration_type,
)
from rl_collectors._policy_transforms import register_policy_transforms
from rl_collectors._trajs import TrajectoryBatching
from rl_collectors._truncate import truncate_step, truncated_keys_of
from rl_collectors.weight_sync import WeightSyncScheme, policy_scheme

DeviceLike = torch.device | str | int | None


def is_env_instance(obj: Any) -> bool:
    """An env object (as opposed to a class or a function that builds one)."""
    return not isinstance(obj, type) and hasattr(obj, "step") and hasattr(obj, "reset")


def _make_env(create_env_fn: Any, create_env_kwargs: dict[str, Any] | None) -> Any:
    """An env instance (returned as is) or the result of calling a constructor."""
    if is_env_instance(create_env_fn):
        if create_env_kwargs:
            raise ValueError(
                "create_env_kwargs was given with an env instance; pass a constructor "
                "(class or function) to have them used."
            )
        return create_env_fn
    if not callable(create_env_fn):
        raise TypeError(
            "create_env_fn must be an env (with reset/step) or a callable returning one; "
            f"got {type(create_env_fn).__name__}."
        )
    env = create_env_fn(**(create_env_kwargs or {}))
    for attr in ("reset", "step", "batch_size"):
        if not hasattr(env, attr):
            raise TypeError(
                f"create_env_fn returned a {type(env).__name__} without '{attr}'; a collector "
                "needs an env honouring docs/contract.md (reset, step, batch_size, action_spec)."
            )
    return env


def _refuse_a_second_step_counter(env: Any) -> None:
    """``max_frames_per_traj`` counts steps itself; an env that already counts them (a
    ``"step_count"`` entry in its ``output_spec``, e.g. a ``StepCounter``) would cut its
    trajectories twice over, so TorchRL refuses the pair, and so do we.

    Raises:
        ValueError: the env's output spec holds a ``"step_count"`` entry.
    """
    spec = getattr(env, "output_spec", None)
    keys = getattr(spec, "keys", None)
    if not callable(keys):
        return
    for key in keys(True, True):
        if "step_count" in ((key,) if isinstance(key, str) else key):
            raise ValueError(
                "max_frames_per_traj was given, but the env already counts steps (its output "
                f"spec holds {key!r}, e.g. from a StepCounter). Pass max_frames_per_traj=None "
                "or drop the step limit from the env's transforms."
            )


def _wrap_policy(
    policy: Callable[[TensorDictBase], TensorDictBase],
    compile_policy: bool | dict[str, Any] | None,
    cudagraph_policy: bool | dict[str, Any] | None,
) -> Callable[[TensorDictBase], TensorDictBase]:
    """The policy under ``torch.compile`` and / or ``CudaGraphModule`` (same parameters)."""
    if compile_policy:
        policy = torch.compile(
            policy, **(compile_policy if isinstance(compile_policy, dict) else {})
        )
    if cudagraph_policy:
        from tensordict.nn import CudaGraphModule

        options = cudagraph_policy if isinstance(cudagraph_policy, dict) else {}
        policy = CudaGraphModule(policy, **options)
    return policy


class Collector(TrajectoryBatching, BackgroundCollection):
    """Collect batches of transitions from one (possibly batched) env.

    Each iteration yields a TensorDict of shape ``[*env.batch_size, T]`` with
    ``T = frames_per_batch // env.batch_size.numel()`` (or ``[frames]`` with
    ``flatten=True``, or ``[N, T_max]`` with ``split_trajs=True``). Transitions
    are written into one preallocated buffer; the batch handed out is a copy of
    it unless ``return_same_td=True``.

    When the env has a TorchRL-style ``rollout`` (``rl_envs`` envs, TorchRL envs),
    a batch run wholly by the policy (or wholly at random without one) is one call
    ``env.rollout(T, policy, auto_reset=False, tensordict=root,
    break_when_any_done=False)``: the env library runs the loop its fastest way.
    Batches that need the collector at every step (``max_frames_per_traj``, the
    switch from random to policy actions, preemption in multiprocess workers, a
    policy on another device, an env with post-``step_mdp`` hooks such as
    ``NextObservationDelta``) are stepped here one step at a time. Both paths
    produce the same batch.

    Args:
        create_env_fn: an env honouring ``docs/contract.md`` or a callable returning one.
        policy: a callable ``TensorDict -> TensorDict`` writing ``"action"``; ``None`` draws
            random actions from ``env.action_spec.rand()``.
        frames_per_batch: frames per batch; rounded up (with a warning) to a multiple of
            the env's batch numel, as in TorchRL.
        total_frames: frames to collect in all (``-1``: endless), random frames included;
            rounded up like ``frames_per_batch``. The last batch is shorter if needed.
        device: default for the three devices below.
        storing_device: where batches are stored. Defaults to ``env_device``.
        policy_device: where the policy runs. Defaults to the policy's parameters' device.
        env_device: where the env lives. Defaults to ``env.device`` (or CPU).
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        max_frames_per_traj: cut (truncate and reset) trajectories at this many steps;
            ``None``, 0 or a negative number (TorchRL's ``-1``) means no limit.
        init_random_frames: the first frames use random actions from the action spec.
        reset_at_each_iter: reset every sub-env at the start of each batch.
        postproc: applied to each batch before it is handed out.
        split_trajs: hand out ``[N, T_max]`` zero-padded trajectories with ``("collector", "mask")``.
        exploration_type: tensordict interaction type the policy runs under.
        return_same_td: hand out the internal buffer itself (overwritten by the next batch).
        replay_buffer: anything with ``extend(td)``; batches go there and iteration yields ``None``.
        extend_buffer: ``True`` extends ``replay_buffer`` with each whole batch; ``False`` with
            one time step at a time (then ``postproc`` and ``split_trajs`` are refused), as TorchRL.
        reset_when_done: only ``True`` (done sub-envs are always reset); ``False`` raises, as
            in TorchRL where it is deprecated.
        use_buffers: TorchRL's choice between preallocated and stacked batches. Accepted for
            its signature: batches are always written into one preallocated buffer here,
            which gives the same batch for envs whose specs do not change shape.
        flatten: hand out ``[frames]`` instead of ``[*B, T]``.
        track_policy_version: write ``"policy_version"`` and ``("next", "policy_version")``
            (int64, bumped by :meth:`update_policy_weights_`), as TorchRL's ``PolicyVersion``.
        progress_bar: show a tqdm bar of collected frames.
        use_env_rollout: fill batches with ``env.rollout`` where possible (see above);
            ``False`` steps the env one step at a time, which also splits
            ``last_timings`` into env and policy time.
        track_traj_ids: ``False`` leaves ``("collector", "traj_ids")`` out of the batches.
        worker_idx: this collector's index among several (read back with ``get_distant_attr``).
        pre_collect_hook: called with no argument before each batch is collected.
        post_collect_hook: called with each batch as it is handed out (after ``postproc``);
            both hooks are plain attributes and may be set later.
        trajs_per_batch: yield batches of this many whole trajectories instead of
            ``frames_per_batch`` steps (the steps are still collected ``frames_per_batch`` at
            a time; a trajectory spanning batches is joined), as TorchRL.
        traj_format: with ``trajs_per_batch``: ``"padded"`` (default; ``[N, T_max]``, padded
            steps repeat the last one and ``("collector", "mask")`` flags the real ones) or
            ``"cat"`` (``[sum of lengths]``, trajectories one after the other). With a
            ``replay_buffer``, trajectories are written there as flat time steps.
        trajs_per_write: with ``trajs_per_batch`` and a ``replay_buffer``: trajectories per
            ``extend`` call (default: all those finished after each collected batch).
        auto_register_policy_transforms: ``True`` appends to the env the ``InitTracker`` and
            ``TensorDictPrimer`` the policy's recurrent modules (those exposing
            ``make_tensordict_primer()``) need and the env's specs lack; ``False`` never
            changes the env; ``None`` (TorchRL 0.14's default) changes nothing but warns
            (``FutureWarning``) when something is missing.
        trust_policy: ``True`` calls the policy as given; otherwise an ``nn.Module`` whose
            ``forward`` takes observation tensors by name (``forward(self, observation)``) is
            wrapped in a ``TensorDictModule`` writing ``"action"`` (and ``"output<i>"`` for
            further tuple outputs), as TorchRL does; the wrapper is ``_wrapped_policy``.
        compile_policy: ``True`` (or ``torch.compile`` keyword arguments) runs the policy
            through ``torch.compile``; the weights stay those of ``policy``.
        cudagraph_policy: ``True`` (or ``CudaGraphModule`` keyword arguments) runs the policy
            through ``tensordict.nn.CudaGraphModule`` (CUDA; it runs eagerly elsewhere).
        weight_sync_schemes: ``{"policy": scheme}`` as in TorchRL; one process runs the
            trainer's own module, so only the key is checked.
        policy_factory: a callable returning the policy (instead of ``policy``), as TorchRL.
            A policy with ``set_action_spec_from_env(env)`` (a spec-less ``RandomPolicy``)
            is given the env's action spec either way.
        set_truncated: ``True`` sets every ``"truncated"`` entry of the last step of each
            batch (and its sibling ``"done"``, not ``"terminated"``) to ``True``, as TorchRL:
            a batch then ends its trajectories for a trajectory sampler. The env is not
            reset there, so the next batch goes on from the same state. The env must
            declare a truncated key (``env.add_truncated_keys()``), else ``ValueError``.

    Examples:
        >>> collector = Collector(make_env, policy=None, frames_per_batch=100, total_frames=300)  # doctest: +SKIP
        >>> for batch in collector:  # doctest: +SKIP
        ...     print(batch.shape, collector.last_timings.fps)
    """

    def __init__(
        self,
        create_env_fn: Any,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        frames_per_batch: int,
        total_frames: int = -1,
        device: DeviceLike = None,
        storing_device: DeviceLike = None,
        policy_device: DeviceLike = None,
        env_device: DeviceLike = None,
        create_env_kwargs: dict[str, Any] | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool = False,
        exploration_type: InteractionType | str = InteractionType.RANDOM,
        return_same_td: bool = False,
        replay_buffer: Any | None = None,
        extend_buffer: bool = True,
        reset_when_done: bool = True,
        use_buffers: bool | None = None,
        flatten: bool = False,
        track_policy_version: bool = False,
        progress_bar: bool = False,
        use_env_rollout: bool = True,
        track_traj_ids: bool = True,
        worker_idx: int | None = None,
        pre_collect_hook: Callable[[], None] | None = None,
        post_collect_hook: Callable[[TensorDictBase | None], None] | None = None,
        trust_policy: bool | None = None,
        compile_policy: bool | dict[str, Any] | None = None,
        cudagraph_policy: bool | dict[str, Any] | None = None,
        weight_sync_schemes: dict[str, WeightSyncScheme] | None = None,
        policy_factory: Callable[[], Callable[[TensorDictBase], TensorDictBase]] | None = None,
        trajs_per_batch: int | None = None,
        traj_format: str | None = None,
        trajs_per_write: int | None = None,
        auto_register_policy_transforms: bool | None = None,
        set_truncated: bool = False,
    ) -> None:
        if policy_factory is not None:
            if policy is not None:
                raise ValueError(
                    "pass either policy or policy_factory to a Collector, not both (the "
                    "factory builds the policy this collector runs)."
                )
            policy = policy_factory()
        check_options(
            split_trajs,
            flatten,
            reset_when_done=reset_when_done,
            replay_buffer=replay_buffer,
            extend_buffer=extend_buffer,
            postproc=postproc,
        )
        if max_frames_per_traj is not None and max_frames_per_traj <= 0:
            max_frames_per_traj = None  # TorchRL's reading: 0 or negative means no limit
        self.env = _make_env(create_env_fn, create_env_kwargs)
        self.env = register_policy_transforms(
            self.env, policy, auto_register_policy_transforms, type(self).__name__
        )
        if max_frames_per_traj is not None:
            _refuse_a_second_step_counter(self.env)
        self.set_truncated = set_truncated
        self._truncated_keys = truncated_keys_of(self.env) if set_truncated else ()
        self.batch_size = torch.Size(self.env.batch_size)
        self._env_numel = self.batch_size.numel()
        frames_per_batch, total_frames = fit_frames(
            frames_per_batch,
            total_frames,
            self._env_numel,
            f"env batch size {tuple(self.batch_size)}",
        )
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.max_frames_per_traj = max_frames_per_traj
        self.init_random_frames = init_random_frames or 0
        self.reset_at_each_iter = reset_at_each_iter
        self.postproc = postproc
        self.split_trajs = split_trajs
        self.flatten = flatten
        self.exploration_type = resolve_exploration_type(exploration_type)
        self.return_same_td = return_same_td
        self.replay_buffer = replay_buffer
        self._set_trajs_per_batch(trajs_per_batch, traj_format, split_trajs, trajs_per_write)
        self.extend_buffer = extend_buffer
        self.use_buffers = use_buffers
        self._use_buffers = True  # batches are always written into preallocated buffers
        self.track_policy_version = track_policy_version
        self.track_traj_ids = track_traj_ids
        # TorchRL's switch: batches hold no key with a part starting with "_" (set False to keep them)
        self._exclude_private_keys = True
        self.worker_idx = worker_idx
        self.pre_collect_hook = pre_collect_hook
        self.post_collect_hook = post_collect_hook
        self.progress_bar = progress_bar

        self.env_device = torch.device(
            env_device or device or getattr(self.env, "device", None) or "cpu"
        )
        self.storing_device = torch.device(storing_device or device or self.env_device)
        fill_spec = getattr(policy, "set_action_spec_from_env", None)
        if callable(fill_spec):
            fill_spec(self.env)  # a RandomPolicy() built without a spec takes the env's
        self._source_policy = policy
        self.policy, self.policy_device = self._place_policy(policy, policy_device or device)
        self.policy_version = 0
        policy_scheme(weight_sync_schemes)
        self.trust_policy = trust_policy
        # What the collector calls; self.policy stays the module whose weights are updated.
        self._wrapped_policy = auto_wrap_policy(self.policy, self.env, trust_policy)
        self._policy_call = fast_policy_call(self._wrapped_policy) or self._wrapped_policy
        self._rollout_policy = self._wrapped_policy
        if self.policy is not None and (compile_policy or cudagraph_policy):
            self._policy_call = self._rollout_policy = _wrap_policy(
                self._wrapped_policy, compile_policy, cudagraph_policy
            )

        self._reward_keys = tuple(getattr(self.env, "reward_keys", None) or ("reward",))
        self._action_keys = tuple(getattr(self.env, "action_keys", None) or ("action",))
        self._use_env_smr = callable(getattr(self.env, "step_and_maybe_reset", None))
        self._env_rollout = env_rollout(self.env) if use_env_rollout else None
        self._steps_per_batch = frames_per_batch // self._env_numel
        self._buffer: StepBuffer | None = None
        self._buffer_generation = 0
        self._root: TensorDictBase | None = None
        self._zero_outputs: TensorDictBase | None = None
        self._traj_ids = torch.zeros(self._env_numel, dtype=torch.int64)
        self._traj_counter = 0
        self._traj_offset, self._traj_stride = 0, 1
        self._reset_ids_issued = False  # load_state_dict gave the restarted sub-envs their ids
        self._shared_buffer = False
        self._step_count = torch.zeros(self._env_numel, dtype=torch.int64)
        self._frames = 0
        self._iter = 0
        self._iterator: Iterator[TensorDictBase | None] | None = None
        self.last_timings: BatchTimings | None = None
        self._closed = False

    # -- policy -----------------------------------------------------------------------------
    def _place_policy(
        self, policy: Callable[[TensorDictBase], TensorDictBase] | None, policy_device: DeviceLike
    ) -> tuple[Callable[[TensorDictBase], TensorDictBase] | None, torch.device]:
        if policy is None:
            return None, self.env_device
        current = policy_device_of(policy)
        if policy_device is None:
            return policy, current or self.env_device
        target = torch.device(policy_device)
        if isinstance(policy, nn.Module) and current is not None and current != target:
            # The trainer keeps its module; we run a copy on the policy device and refresh it
            # in update_policy_weights_().
            return copy.deepcopy(policy).to(target), target
        return policy, target

    def update_policy_weights_(self, policy_or_weights: Any | None = None) -> None:
        """Refresh the weights the collector acts with, in place, and bump ``policy_version``.

        Args:
            policy_or_weights: a module, a TensorDict of parameters (``TensorDict.from_module``)
                or a ``state_dict``. ``None``: copy from the policy given at construction
                (a no-op copy when the collector runs that very module).

        Raises:
            ValueError: the weights do not match the policy's (missing or extra keys, a
                shape or dtype kind that differs, NaN / inf): nothing is written and
                ``policy_version`` stays.
        """
        source = self._source_policy if policy_or_weights is None else policy_or_weights
        if self.policy is not None and source is not None and source is not self.policy:
            owner = f"{type(self).__name__}.update_policy_weights_ (policy_version stays {self.policy_version})"
            load_weights_(self.policy, source, owner=owner)
        self.policy_version += 1

    # -- one batch --------------------------------------------------------------------------
    def _new_traj_ids(self, mask: torch.Tensor) -> None:
        count = int(mask.sum())
        if count:
            fresh = torch.arange(self._traj_counter, self._traj_counter + count, dtype=torch.int64)
            self._traj_ids[mask] = fresh * self._traj_stride + self._traj_offset
            self._traj_counter += count

    def _reset_all(self) -> TensorDictBase:
        root = self.env.reset()
        if root is None:
            raise RuntimeError("env.reset() returned None; the contract asks for a TensorDict.")
        # Every sub-env starts a new trajectory, with a new id (ids are never reused).
        if not self._reset_ids_issued:
            self._new_traj_ids(torch.ones(self._env_numel, dtype=torch.bool))
        self._reset_ids_issued = False
        self._step_count.zero_()
        return root

    def _random_action(self, root: TensorDictBase) -> TensorDictBase:
        spec = self.env.action_spec
        action = spec.rand()
        if tuple(action.shape[: len(self.batch_size)]) != tuple(self.batch_size):
            action = spec.rand(self.batch_size)
        root.set("action", action.to(self.env_device))
        return root

    def _policy_outputs_as_zeros(self, root: TensorDictBase) -> TensorDictBase | None:
        """Zeros of every entry the policy writes besides ``"action"`` (computed once).

        Random-action steps carry them, as in TorchRL, so that batches collected before
        and after ``init_random_frames`` have the same keys (a replay buffer needs that).
        The policy is called once, on a copy of the first random step's input.
        """
        if self._zero_outputs is None:
            probe = self._act(root.clone(), random=False)
            before = set(root.keys(True, True))
            written = [k for k in probe.keys(True, True) if k not in before and k != "action"]
            self._zero_outputs = probe.select(*written).apply(torch.zeros_like)
        return self._zero_outputs

    def _act(self, root: TensorDictBase, random: bool) -> TensorDictBase:
        if self.policy is None:
            return self._random_action(root)
        if random:
            root.update(self._policy_outputs_as_zeros(root))
            return self._random_action(root)
        if self.policy_device != self.env_device:
            out = self._policy_call(root.to(self.policy_device))
            return out.to(self.env_device)
        out = self._policy_call(root)
        return root if out is None else out

    def _cut_long_trajectories(
        self, transition: TensorDictBase, next_root: TensorDictBase
    ) -> TensorDictBase:
        """Write ``"step_count"`` (steps so far in the trajectory, at the root and in
        ``"next"``, as TorchRL's ``StepCounter``), then truncate the sub-envs that reached
        ``max_frames_per_traj`` and reset them."""
        done = transition.get(("next", DONE_KEY), None)
        if done is None:
            raise ValueError(
                "max_frames_per_traj needs a root 'done' entry in each step, which this env's "
                f"steps lack (its done keys: {list(done_keys_of(self.env))}). Add a "
                "StepCounter(max_steps) to the env instead."
            )
        done = done.reshape(-1).cpu()
        nxt = transition.get("next")
        shape = (*self.batch_size, 1)
        transition.set("step_count", self._step_count.reshape(shape).to(done.device, copy=True))
        self._step_count += 1
        nxt.set("step_count", self._step_count.reshape(shape).to(done.device, copy=True))
        self._step_count[done] = 0
        cut = self._step_count >= self.max_frames_per_traj
        truncated = nxt.get(TRUNCATED_KEY, None)
        if truncated is None:
            # An env without a truncated flag gets one (every step, so batches keep one
            # layout), as TorchRL's StepCounter adds it.
            truncated = torch.zeros_like(nxt.get(DONE_KEY))
            nxt.set(TRUNCATED_KEY, truncated)
        if not cut.any():
            return next_root
        shaped = cut.reshape(truncated.shape).to(truncated.device)
        nxt.set(TRUNCATED_KEY, truncated | shaped)
        nxt.set(DONE_KEY, nxt.get(DONE_KEY) | shaped)
        self._step_count[cut] = 0
        return partial_reset(self.env, next_root, shaped)

    def _collect(self, num_steps: int, should_stop: Callable[[], bool] | None = None) -> int:
        """Fill the first ``num_steps`` steps of the buffer; returns the number of steps written.

        ``should_stop`` (multiprocess preemption) is polled before each step but the first.
        """
        t_start = time.perf_counter()
        root = self._reset_all() if self.reset_at_each_iter or self._root is None else self._root
        if self._can_roll_out(should_stop):
            return self._collect_by_rollout(root, num_steps, t_start)
        env_s = policy_s = 0.0
        written = 0
        # ``_traj_ids`` is only ever updated in place, so one view serves every step.
        traj_ids = [self._traj_ids.view(self.batch_size)]
        with torch.no_grad(), set_interaction_type(self.exploration_type):
            for step in range(num_steps):
                # A stopped worker still writes one step, so its buffer always exists.
                if step and should_stop is not None and should_stop():
                    break
                t0 = time.perf_counter()
                random = self._frames + step * self._env_numel < self.init_random_frames
                root = self._act(root, random)
                if step == 0 and root.get("action", None) is None:
                    raise KeyError(
                        f"the policy {type(self.policy).__name__} wrote no 'action' entry (keys: "
                        f"{sorted(map(str, root.keys(include_nested=True)))}); a policy must write "
                        "'action' (e.g. TensorDictModule(net, in_keys=['observation'], out_keys=['action']))."
                    )
                t1 = time.perf_counter()
                transition, next_root = env_step_and_maybe_reset(
                    self.env, root, self._reward_keys, self._use_env_smr, self._action_keys
                )
                if self.max_frames_per_traj is not None:
                    next_root = self._cut_long_trajectories(transition, next_root)
                t2 = time.perf_counter()
                policy_s += t1 - t0
                env_s += t2 - t1
                if step == 0:
                    self._ensure_buffer(transition)
                    done_index = self._done_index()
                    keep_non_tensor = bool(self._buffer.non_tensor_keys)
                sources = self._buffer.gather(transition)
                self._buffer.write(step, sources, traj_ids)
                if keep_non_tensor:
                    self._buffer.write_non_tensor(step, transition)
                if done_index is None:
                    done = self._nested_done(transition.get("next"), self.batch_size)
                else:
                    done = sources[done_index].reshape(-1)
                if done.device.type != "cpu":
                    done = done.cpu()
                if done.any():
                    self._new_traj_ids(done)
                root = next_root
                written += 1
        self._root = root
        return self._finish_collect(written, t_start, env_s, policy_s)

    def _done_index(self) -> int | None:
        """Where ``("next", "done")`` sits among the buffer's leaves (``None``: the env has
        only nested done entries, e.g. per agent group)."""
        key = ("next", DONE_KEY)
        return self._buffer.index(key) if key in self._buffer.keys else None

    def _nested_done(self, nxt: TensorDictBase, batch: torch.Size) -> torch.Tensor:
        """Done flags of shape ``batch`` from the env's (nested) done entries in ``nxt``."""
        done = end_of_trajectory(nxt, done_keys_of(self.env), len(batch))
        return done.reshape(-1) if len(batch) == len(self.batch_size) else done

    def _can_roll_out(self, should_stop: Callable[[], bool] | None) -> bool:
        """Whether the next batch can be one ``env.rollout`` call (see the class docstring)."""
        if self._env_rollout is None or should_stop is not None:
            return False
        if self.max_frames_per_traj is not None or self.policy_device != self.env_device:
            return False
        if has_post_step_mdp_hooks(self.env):
            # The stored steps lack what the next root needs (e.g. NextObservationDelta
            # drops ("next", obs)): only step_and_maybe_reset builds that root.
            return False
        return self.policy is None or self._frames >= self.init_random_frames

    def _collect_by_rollout(self, root: TensorDictBase, num_steps: int, t_start: float) -> int:
        """Fill the buffer from one ``env.rollout`` call; trajectory ids follow the done flags."""
        with torch.no_grad(), set_interaction_type(self.exploration_type):
            batch = self._env_rollout(
                num_steps,
                self._rollout_policy,
                auto_reset=False,
                tensordict=root,
                break_when_any_done=False,
            )
            expected = (*self.batch_size, num_steps)
            if tuple(batch.batch_size) != expected:
                raise RuntimeError(
                    f"{type(self.env).__name__}.rollout({num_steps}, break_when_any_done=False) "
                    f"returned a batch of shape {tuple(batch.batch_size)}, expected {expected}. "
                    "An env's rollout must auto-reset and run every step (docs/contract.md); "
                    "fix the env or pass use_env_rollout=False to the collector."
                )
            self._root = root_after(
                self.env, batch[..., -1].clone(), self._reward_keys, self._action_keys
            )
        self._ensure_buffer(batch[..., 0])
        data = self._buffer.data
        (data if num_steps == data.shape[-1] else data[..., :num_steps]).update_(batch)
        if self._buffer.non_tensor_keys:
            self._buffer.write_non_tensor_block(batch)
        done = batch.get(("next", DONE_KEY), None)
        if done is None:
            done = self._nested_done(batch.get("next"), batch.batch_size)
        done = done.reshape(self._env_numel, num_steps).cpu()
        self._write_traj_ids(data.get(TRAJ_IDS_KEY), done)
        elapsed = time.perf_counter() - t_start
        return self._finish_collect(num_steps, t_start, elapsed, 0.0, fused=True)

    def _write_traj_ids(self, traj_ids: torch.Tensor, done: torch.Tensor) -> None:
        """Trajectory ids of a ``[n_envs, T]`` block of done flags, as the step loop gives them:
        a sub-env done at step ``t`` starts a new trajectory (a new id) at ``t + 1``."""
        ids = traj_ids.view(self._env_numel, -1)
        start = 0
        for step in done.any(0).nonzero().flatten().tolist():
            ids[:, start : step + 1] = self._traj_ids.unsqueeze(-1)
            self._new_traj_ids(done[:, step])
            start = step + 1
        if start < done.shape[1]:
            ids[:, start : done.shape[1]] = self._traj_ids.unsqueeze(-1)

    def _finish_collect(
        self, written: int, t_start: float, env_s: float, policy_s: float, fused: bool = False
    ) -> int:
        if self.track_policy_version and written:
            for key in POLICY_VERSION_KEYS:
                self._buffer.data.get(key)[..., :written].fill_(self.policy_version)
        if self._truncated_keys and written:
            truncate_step(
                self._buffer.data, self._truncated_keys, len(self.batch_size), written - 1
            )
        self._frames += written * self._env_numel
        self.last_timings = BatchTimings(
            frames=written * self._env_numel,
            env_s=env_s,
            policy_s=policy_s,
            total_s=time.perf_counter() - t_start,
            fused=fused,
        )
        return written

    def _extra_leaves(self) -> dict[Any, tuple[torch.dtype, tuple[int, ...]]]:
        """The leaves the collector adds to the env's and policy's: ids, policy version."""
        extra: dict[Any, tuple[torch.dtype, tuple[int, ...]]] = {TRAJ_IDS_KEY: (torch.int64, ())}
        if self.track_policy_version:
            extra.update({key: (torch.int64, ()) for key in POLICY_VERSION_KEYS})
        return extra

    def fake_tensordict(self) -> TensorDictBase:
        """A zero batch with the keys, shapes, dtypes and dim names of the batches this
        collector yields (before ``split_trajs`` / ``flatten`` / ``postproc``), as TorchRL's.

        Built from the env's ``full_*_spec`` and one policy call on zeros; the env is not
        stepped. Raises ``TypeError`` for an env without TorchRL-style specs.

        Examples:
            >>> collector.fake_tensordict().shape  # doctest: +SKIP
            torch.Size([100])
        """
        policy = self._wrapped_policy if self.policy is not None else None
        transition = fake_transition(self.env, policy).to(self.storing_device)
        buffer = StepBuffer(
            transition, self._steps_per_batch, self._extra_leaves(), self.storing_device
        )
        data = buffer.data.zero_()
        if self._truncated_keys:
            truncate_step(data, self._truncated_keys, len(self.batch_size), -1)
        return data if self.track_traj_ids else data.exclude(TRAJ_IDS_KEY)

    def _ensure_buffer(self, transition: TensorDictBase) -> None:
        if self._buffer is not None and self._buffer.matches(transition):
            return
        self._buffer = StepBuffer(
            transition,
            self._steps_per_batch,
            self._extra_leaves(),
            self.storing_device,
            shared=self._shared_buffer,
            stepwise=(TRAJ_IDS_KEY,),
        )
        self._buffer_generation += 1

    def _configure_worker(self, traj_offset: int, traj_stride: int, shared_buffer: bool) -> None:
        """Used by multiprocess / Ray workers: disjoint trajectory ids, shared-memory buffer."""
        self._traj_offset, self._traj_stride = traj_offset, traj_stride
        self._shared_buffer = shared_buffer

    # -- iteration --------------------------------------------------------------------------
    def _batches(self) -> Iterator[TensorDictBase | None]:
        bar = make_progress_bar(self.progress_bar, self.total_frames, self._frames)
        try:
            while True:
                frames = frames_for_next_batch(
                    self.frames_per_batch, self.total_frames, self._frames
                )
                if frames == 0:
                    return
                if self.pre_collect_hook is not None:
                    self.pre_collect_hook()
                written = self._collect(frames // self._env_numel)
                data = self._buffer.data
                if written < data.shape[-1]:
                    data = data[..., :written]
                if not self.return_same_td:
                    data = data.clone()
                if self._buffer.non_tensor_keys:
                    data.update(self._buffer.non_tensor(written))
                self._iter += 1
                if bar is not None:
                    bar.update(written * self._env_numel)
                result = finish_batch(
                    data,
                    split_trajs=self.split_trajs,
                    flatten=self.flatten,
                    postproc=self.postproc,
                    replay_buffer=self._batch_replay_buffer,
                    extend_buffer=self.extend_buffer,
                    keep_traj_ids=self.track_traj_ids,
                    exclude_private_keys=self._exclude_private_keys,
                )
                if self.post_collect_hook is not None:
                    self.post_collect_hook(result)
                yield result
        finally:
            if bar is not None:
                bar.close()

    def next(self) -> TensorDictBase | None:
        """The next batch (``None`` once ``total_frames`` are collected)."""
        if self._iterator is None:
            self._iterator = iter(self)
        try:
            return next(self._iterator)
        except StopIteration:
            return None

    def __len__(self) -> int:
        if self.total_frames < 0:
            raise TypeError("an endless collector (total_frames=-1) has no length.")
        return -(-self.total_frames // self.frames_per_batch)

    @property
    def frames(self) -> int:
        """Frames collected so far (random frames included)."""
        return self._frames

    def stats(self) -> dict[str, int | bool]:
        """A JSON-serialisable snapshot of the progress: ``frames``, ``batches``,
        ``total_frames`` and ``completed`` (unless endless), ``requested_frames_per_batch``
        and ``policy_version``."""
        return progress_stats(
            self._frames, self._iter, self.total_frames, self.frames_per_batch, self.policy_version
        )

    def get_distant_attr(self, attr: str) -> Any:
        """``getattr(self, attr)``: TorchRL's accessor, answered by every collector kind."""
        return getattr(self, attr)

    def map_fn(
        self,
        method_name: str,
        list_of_args: Sequence[tuple] | None = None,
        list_of_kwargs: Sequence[dict] | None = None,
    ) -> list[Any]:
        """Call ``self.<method_name>`` once per ``(args, kwargs)`` pair; return the results.

        Raises:
            ValueError: ``list_of_args`` and ``list_of_kwargs`` differ in length.
        """
        calls = call_args(list_of_args, list_of_kwargs)
        method = bound_method(self, method_name)
        return [method(*args, **kwargs) for args, kwargs in calls]

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed the env (``env.set_seed``) and start every sub-env afresh at the next batch.

        Returns:
            The seed to give the next env or collector (``seed + 1`` unless ``static_seed``
            or the env says otherwise), as TorchRL's ``set_seed`` does.

        Raises:
            TypeError: the env has no ``set_seed``.
        """
        set_seed = getattr(self.env, "set_seed", None)
        if not callable(set_seed):
            raise TypeError(
                f"{type(self.env).__name__} has no set_seed(seed, static_seed); seed it "
                "before handing it to the collector."
            )
        out = set_seed(seed, static_seed=static_seed)
        self.reset()  # seeding may have reset the env: the carried step is stale
        return seed if out is None else out

    def reset(self) -> None:
        """Start every sub-env from a fresh ``env.reset()`` at the next step (TorchRL's ``reset()``).

        Frame counts carry on; trajectory ids start again from 0, as TorchRL's ``reset()``
        renumbers them, so a collector re-seeded with the same seed (:meth:`set_seed` calls
        this) repeats its batches exactly, ids included. The trajectories in flight end
        without a ``done`` flag, as after :meth:`load_state_dict`.
        """
        self._root = None
        self._traj_counter = 0
        self._reset_ids_issued = False
        if self._traj_assembly is not None:
            self._traj_assembly.clear()

    # -- checkpointing ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What :meth:`load_state_dict` needs to resume: counters, policy and env state.

        With ``track_traj_ids`` it also holds TorchRL's ``"traj_pool"`` entry:
        ``{"traj_id": tensor}``, the next trajectory id this collector would give.

        When the env can save its exact state (``env.get_state()``, see
        ``docs/contract.md``), the state also holds it together with the step the
        collector carries over to the next batch, so a resumed collector continues
        the very trajectories in flight, bit for bit. Otherwise it restarts them
        from a reset after loading.
        """
        state: dict[str, Any] = {
            "frames": self._frames,
            "iter": self._iter,
            "traj_counter": self._traj_counter,
            "policy_version": self.policy_version,
        }
        if self.track_traj_ids:
            next_id = self._traj_counter * self._traj_stride + self._traj_offset
            state["traj_pool"] = {"traj_id": torch.tensor(next_id, dtype=torch.int64)}
        if self.policy is not None:
            weights = policy_state_dict(self.policy)
            if weights is not None:
                state["policy_state_dict"] = weights
        env_state = getattr(self.env, "state_dict", None)
        if callable(env_state):
            state["env_state_dict"] = env_state()
        live = self._live_state()
        if live is not None:
            state["live"] = live
        return state

    def _live_state(self) -> dict[str, Any] | None:
        """The env's exact state plus the carried-over step, or ``None`` if it cannot be saved."""
        get_state = getattr(self.env, "get_state", None)
        if self._root is None or not callable(get_state):
            return None
        try:
            env_state = get_state()
        except NotImplementedError:
            return None
        return {
            "env": env_state,
            "root": self._root.clone(),
            "traj_ids": self._traj_ids.clone(),
            "step_count": self._step_count.clone(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`: frame accounting and trajectory ids continue.

        With a saved live state (an env with ``get_state``/``set_state``) the
        trajectories in flight continue exactly; without one the env restarts from
        a reset at the next batch, and the trajectories it starts get their new ids
        now (so ``state_dict()["traj_pool"]`` moves on at once, as in TorchRL).
        """
        missing = {"frames", "iter", "traj_counter"} - set(state_dict)
        if missing:
            raise KeyError(
                f"load_state_dict: missing {sorted(missing)}; pass the output of state_dict()."
            )
        self._frames = int(state_dict["frames"])
        self._iter = int(state_dict["iter"])
        self._traj_counter = int(state_dict["traj_counter"])
        self.policy_version = int(state_dict.get("policy_version", 0))
        if "policy_state_dict" in state_dict and self.policy is not None:
            load_weights_(self.policy, state_dict["policy_state_dict"])
        if "env_state_dict" in state_dict and callable(getattr(self.env, "load_state_dict", None)):
            self.env.load_state_dict(state_dict["env_state_dict"])
        self._root = None
        live = state_dict.get("live")
        if live is not None:
            set_state = getattr(self.env, "set_state", None)
            if not callable(set_state):
                raise TypeError(
                    f"this state holds a live env state but {type(self.env).__name__} has no "
                    "set_state(); resume with the same kind of env that saved it."
                )
            set_state(live["env"])
            self._root = live["root"].clone()
            self._traj_ids.copy_(live["traj_ids"])
            self._step_count.copy_(live["step_count"])
        else:
            self._new_traj_ids(torch.ones(self._env_numel, dtype=torch.bool))
            self._reset_ids_issued = True
        self._iterator = None

    # -- lifecycle --------------------------------------------------------------------------
    def shutdown(self, timeout: float | None = None, close_env: bool = True) -> None:
        """Close the env (if it has ``close`` and ``close_env``). Safe to call twice.

        ``timeout`` is accepted for TorchRL's signature; a single-process collector has
        nothing to wait for.
        """
        if self._closed:
            return
        self._closed = True
        close = getattr(self.env, "close", None)
        if close_env and callable(close):
            close()

    def async_shutdown(self, timeout: float | None = None, close_env: bool = True) -> None:
        """Stop the collection :meth:`start` began (waiting up to ``timeout`` s), then
        :meth:`shutdown`. Re-raises an error the background thread met."""
        self._stop_background(timeout)
        self.shutdown(timeout=timeout, close_env=close_env)
        self._raise_background_error()

    def __enter__(self) -> Collector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={type(self.env).__name__}, batch_size={tuple(self.batch_size)}, "
            f"frames_per_batch={self.frames_per_batch}, total_frames={self.total_frames}, "
            f"frames={self._frames})"
        )


SyncDataCollector = Collector
