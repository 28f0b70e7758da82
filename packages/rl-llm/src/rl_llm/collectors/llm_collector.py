"""``LLMCollector``: dialog turns from a chat env, in batches or as completed trajectories."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import torch
from tensordict import TensorDictBase, lazy_stack

from rl_llm.collectors.weight_update import TransformersUpdater
from rl_llm.transforms.policy_version import PolicyVersion

TRAJ_IDS_KEY = ("collector", "traj_ids")


class LLMCollector:
    """Runs a policy in a chat env and hands out the dialog turns.

    Two ways to batch, as TorchRL's ``LLMCollector``:

    - ``yield_completed_trajectories=False`` (default): each batch holds
      ``T = dialog_turns_per_batch // B`` turns of every conversation, a TensorDict of
      shape ``[B, T]`` (``[B * T]`` with ``flatten_data``); conversations carry over
      from batch to batch.
    - ``yield_completed_trajectories=True``: only finished conversations are handed
      out, each one contiguous, concatenated until at least
      ``dialog_turns_per_batch`` turns are gathered (one at a time when it is
      ``None``); ``yield_only_last_steps=True`` keeps only the last turn of each (the
      whole exchange, for single-turn GRPO).

    Each turn carries ``("collector", "traj_ids")`` (int64, new id for each
    conversation). With ``track_policy_version`` a :class:`PolicyVersion` transform
    stamps every turn with ``"policy_version"``, bumped by
    :meth:`update_policy_weights_`, which also pushes new weights into the generating
    model through ``weight_updater`` (a :class:`TransformersUpdater` is built for
    policies with a ``.model``).

    Args:
        env: a :class:`~rl_llm.ChatEnv` (or any env with ``reset``,
            ``step_and_maybe_reset`` and a 1-dim ``batch_size``), or a callable building one.
        policy: TensorDict -> TensorDict writing the reply (e.g. ``TransformersWrapper``).
        policy_factory: builds the policy (exclusive with ``policy``).
        dialog_turns_per_batch: turns per batch (a multiple of ``B`` in the default mode).
        total_dialog_turns: turns to hand out in all (``-1``: endless).
        yield_only_last_steps: hand out only the last turn of each finished conversation.
        yield_completed_trajectories: hand out finished conversations (see above).
        postproc: applied to each batch before it is handed out.
        replay_buffer: anything with ``extend(td)``; batches go there and iteration yields ``None``.
        reset_at_each_iter: restart every conversation at each batch (default mode).
        flatten_data: ``[B * T]`` instead of ``[B, T]``; defaults to ``True`` with a replay buffer.
        weight_updater: pushes weights into the generating model (``push_weights(weights)``).
        track_policy_version: ``True`` or a :class:`PolicyVersion` to stamp turns with.
        verbose: print one line per batch.

    Examples:
        >>> from rl_llm import DatasetChatEnv, History
        >>> def policy(td):
        ...     prompt = td["history"].prompt
        ...     n = prompt.batch_size[0]
        ...     td["history"].full = prompt.append(History(role=["assistant"] * n, content=["4"] * n, batch_size=[n]), inplace=False)
        ...     return td
        >>> env = DatasetChatEnv(dataset=[{"query": "2+2=", "answer": "4"}], num_envs=2, max_turns=1)
        >>> collector = LLMCollector(env, policy=policy, dialog_turns_per_batch=4, total_dialog_turns=8)
        >>> [batch.batch_size for batch in collector]
        [torch.Size([2, 2]), torch.Size([2, 2])]
    """

    def __init__(
        self,
        env: Any,
        *,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        policy_factory: Callable[[], Callable[[TensorDictBase], TensorDictBase]] | None = None,
        dialog_turns_per_batch: int | None = None,
        total_dialog_turns: int = -1,
        yield_only_last_steps: bool | None = None,
        yield_completed_trajectories: bool | None = None,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        replay_buffer: Any | None = None,
        reset_at_each_iter: bool = False,
        flatten_data: bool | None = None,
        weight_updater: Any | None = None,
        track_policy_version: bool | PolicyVersion = False,
        verbose: bool = False,
    ) -> None:
        if (policy is None) == (policy_factory is None):
            raise ValueError("LLMCollector: pass exactly one of policy= and policy_factory=.")
        self.env = env if hasattr(env, "reset") else env()
        for attr in ("reset", "step_and_maybe_reset", "batch_size"):
            if not hasattr(self.env, attr):
                raise TypeError(
                    f"LLMCollector: the env ({type(self.env).__name__}) has no {attr!r}; pass a ChatEnv or an "
                    "env honouring docs/contract.md."
                )
        if len(self.env.batch_size) != 1:
            raise ValueError(
                f"LLMCollector needs an env with batch_size (B,); got {tuple(self.env.batch_size)}."
            )
        self.policy = policy if policy is not None else policy_factory()
        yield_only_last_steps = bool(yield_only_last_steps)
        if yield_completed_trajectories is None:
            yield_completed_trajectories = yield_only_last_steps
        elif yield_only_last_steps and not yield_completed_trajectories:
            raise ValueError(
                "yield_only_last_steps=True needs yield_completed_trajectories=True (or None)."
            )
        self.n_envs = self.env.batch_size[0]
        if dialog_turns_per_batch is None and not yield_completed_trajectories:
            raise ValueError(
                "LLMCollector: dialog_turns_per_batch is required unless yield_completed_trajectories=True."
            )
        if dialog_turns_per_batch is not None:
            if dialog_turns_per_batch <= 0:
                raise ValueError(
                    f"dialog_turns_per_batch must be > 0; got {dialog_turns_per_batch}."
                )
            if not yield_completed_trajectories and dialog_turns_per_batch % self.n_envs:
                raise ValueError(
                    f"dialog_turns_per_batch ({dialog_turns_per_batch}) must be a multiple of the env's batch "
                    f"size ({self.n_envs}): each batch holds the same number of turns of every conversation."
                )
        if total_dialog_turns == 0 or total_dialog_turns < -1:
            raise ValueError(
                f"total_dialog_turns must be -1 (endless) or > 0; got {total_dialog_turns}."
            )
        if yield_completed_trajectories and (reset_at_each_iter or flatten_data):
            raise ValueError(
                "yield_completed_trajectories=True hands out whole conversations: reset_at_each_iter and "
                "flatten_data do not apply."
            )
        self.dialog_turns_per_batch = dialog_turns_per_batch
        self.total_dialog_turns = total_dialog_turns
        self.yield_only_last_steps = yield_only_last_steps
        self.yield_completed_trajectories = yield_completed_trajectories
        self.postproc = postproc
        self.replay_buffer = replay_buffer
        self.reset_at_each_iter = reset_at_each_iter
        self.flatten_data = flatten_data if flatten_data is not None else replay_buffer is not None
        if weight_updater is None and isinstance(
            getattr(self.policy, "model", None), torch.nn.Module
        ):
            weight_updater = TransformersUpdater(self.policy)
        self.weight_updater = weight_updater
        self.policy_version_tracker: PolicyVersion | None = None
        if track_policy_version:
            tracker = (
                track_policy_version
                if isinstance(track_policy_version, PolicyVersion)
                else PolicyVersion()
            )
            self.env.append_transform(tracker)
            self.policy_version_tracker = tracker
        self.verbose = verbose
        self._root: TensorDictBase | None = None
        self._traj_ids = torch.zeros(self.n_envs, dtype=torch.int64)
        self._traj_counter = 0
        self._pending: list[list[TensorDictBase]] = [[] for _ in range(self.n_envs)]
        self._finished: deque[TensorDictBase] = deque()
        self._turns = 0
        self._closed = False

    # -- weights ----------------------------------------------------------------------------
    @property
    def policy_version(self) -> int | str | None:
        """The version the next turns are generated with (``None`` when not tracked)."""
        tracker = self.policy_version_tracker
        return None if tracker is None else tracker.version

    def increment_version(self) -> None:
        """Bumps the policy version (done by :meth:`update_policy_weights_`)."""
        if self.policy_version_tracker is not None:
            self.policy_version_tracker.increment_version()

    def update_policy_weights_(self, policy_weights: Any | None = None) -> None:
        """Pushes ``policy_weights`` into the generating model and bumps the policy version.

        Args:
            policy_weights: an ``nn.Module``, a ``state_dict`` or a TensorDict of parameters;
                ``None`` only bumps the version (the policy was updated in place).
        """
        if policy_weights is not None:
            if self.weight_updater is None:
                raise RuntimeError(
                    "LLMCollector.update_policy_weights_: no weight_updater (the policy has no .model); "
                    "pass weight_updater=TransformersUpdater(model)."
                )
            push = getattr(self.weight_updater, "push_weights", self.weight_updater)
            push(policy_weights)
        self.increment_version()

    # -- collection -------------------------------------------------------------------------
    def _new_traj_ids(self, mask: torch.Tensor) -> None:
        count = int(mask.sum())
        if count:
            self._traj_ids[mask] = torch.arange(self._traj_counter, self._traj_counter + count)
            self._traj_counter += count

    def _step(self) -> TensorDictBase:
        """One turn of every conversation: the transition ``[B]`` (with traj ids)."""
        if self._root is None:
            self._root = self.env.reset()
            self._new_traj_ids(torch.ones(self.n_envs, dtype=torch.bool))
        out = self.policy(self._root)
        root = self._root if out is None else out
        if self.policy_version_tracker is not None:
            # The turn is stamped with the weights that generated it (the root was stamped
            # when the previous turn ended, possibly before an update).
            self.policy_version_tracker._stamp(root)
        transition, self._root = self.env.step_and_maybe_reset(root)
        transition.set(TRAJ_IDS_KEY, self._traj_ids.clone())
        done = transition.get(("next", "done")).reshape(-1).cpu()
        self._new_traj_ids(done)
        return transition

    def _batch_of_turns(self) -> TensorDictBase:
        if self.reset_at_each_iter:
            self._root = None
        steps = [self._step() for _ in range(self.dialog_turns_per_batch // self.n_envs)]
        batch = lazy_stack(steps, dim=1)
        return batch.view(-1) if self.flatten_data else batch

    def _completed(self) -> TensorDictBase:
        target = self.dialog_turns_per_batch or 1
        while sum(t.batch_size[0] for t in self._finished) < target:
            transition = self._step()
            done = transition.get(("next", "done")).reshape(-1).tolist()
            for i, row in enumerate(transition.unbind(0)):
                self._pending[i].append(row)
                if done[i]:
                    turns = (
                        self._pending[i][-1:] if self.yield_only_last_steps else self._pending[i]
                    )
                    self._finished.append(lazy_stack(turns))
                    self._pending[i] = []
        out, count = [], 0
        while count < target:
            traj = self._finished.popleft()
            out.append(traj)
            count += traj.batch_size[0]
        return lazy_stack([step for traj in out for step in traj.unbind(0)])

    def __iter__(self) -> Iterator[TensorDictBase | None]:
        while self.total_dialog_turns < 0 or self._turns < self.total_dialog_turns:
            batch = (
                self._completed() if self.yield_completed_trajectories else self._batch_of_turns()
            )
            self._turns += batch.numel()
            if self.verbose:
                print(f"LLMCollector: {self._turns} turns, batch {tuple(batch.batch_size)}")
            if self.postproc is not None:
                batch = self.postproc(batch)
            if self.replay_buffer is not None:
                self.replay_buffer.extend(batch)
                yield None
            else:
                yield batch

    def shutdown(self) -> None:
        """Closes the env (its transforms' sandboxes). Safe to call twice."""
        if not self._closed:
            self._closed = True
            close = getattr(self.env, "close", None)
            if callable(close):
                close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={type(self.env).__name__}, n_envs={self.n_envs}, "
            f"dialog_turns_per_batch={self.dialog_turns_per_batch}, turns={self._turns})"
        )
