"""Trainer hooks with TorchRL's names: each does one job at one stage of the loop.

A hook is a callable with ``state_dict`` / ``load_state_dict`` (its part of a
checkpoint) and ``register(trainer, name)``, which puts it at its default stage
and in the trainer's checkpoint. ``trainer.register_op(stage, hook)`` places it
elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, pad

if TYPE_CHECKING:
    from rl_trainers.trainer import Trainer

__all__ = [
    "REWARD_KEY",
    "BatchSubSampler",
    "ClearCudaCache",
    "CountFramesLog",
    "LogReward",
    "LogScalar",
    "OptimizerHook",
    "ReplayBufferTrainer",
    "SelectKeys",
    "TrainerHookBase",
    "UpdateWeights",
    "mask_batch",
]

REWARD_KEY = ("next", "reward")
_MASK_KEY = ("collector", "mask")


class TrainerHookBase:
    """Base of the hooks: stateless by default, registered at one stage under one name."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        del state_dict

    def register(self, trainer: Trainer, name: str) -> None:
        raise NotImplementedError


def mask_batch(batch: TensorDictBase) -> TensorDictBase:
    """Keep only the valid steps of a padded batch (``("collector", "mask")``), flattened."""
    mask = batch.get(_MASK_KEY, None)
    return batch if mask is None else batch[mask]


class SelectKeys(TrainerHookBase):
    """``batch_process`` hook keeping only ``keys`` of each batch.

    Examples:
        >>> td = TensorDict(a=torch.zeros(2), b=torch.zeros(2), batch_size=[2])
        >>> list(SelectKeys(["a"])(td).keys())
        ['a']
    """

    def __init__(self, keys: Sequence[NestedKey]) -> None:
        if isinstance(keys, str):
            raise TypeError(
                f"SelectKeys expects a sequence of keys, got the string {keys!r}; use [{keys!r}]"
            )
        self.keys = list(keys)

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        return batch.select(*self.keys)

    def register(self, trainer: Trainer, name: str = "select_keys") -> None:
        trainer.register_op("batch_process", self)
        trainer.register_module(name, self)


class OptimizerHook(TrainerHookBase):
    """Back-propagate the sum of some loss entries, clip, step and zero the gradients.

    Writes ``grad_norm_<index>`` (the total norm before clipping) into the losses.

    Args:
        optimizer: the optimiser of the parameters these losses train.
        loss_components: loss keys to sum; ``None`` sums every key starting with ``"loss"``.

    Examples:
        >>> net = torch.nn.Linear(2, 1)
        >>> hook = OptimizerHook(torch.optim.SGD(net.parameters(), lr=0.1))
        >>> losses = TensorDict(loss_a=net(torch.ones(2)).sum())
        >>> "grad_norm_0" in hook(losses, True, None, 0).keys()
        True
    """

    def __init__(
        self, optimizer: torch.optim.Optimizer, loss_components: Sequence[str] | None = None
    ) -> None:
        if loss_components is not None and len(loss_components) == 0:
            raise ValueError("loss_components is empty; pass None to use every 'loss*' entry")
        self.optimizer = optimizer
        self.loss_components = None if loss_components is None else set(loss_components)
        self._params = [p for group in optimizer.param_groups for p in group["params"]]

    def _loss(self, losses: TensorDictBase) -> torch.Tensor:
        if self.loss_components is None:
            terms = [v for k, v in losses.items() if isinstance(k, str) and k.startswith("loss")]
        else:
            missing = self.loss_components.difference(losses.keys())
            if missing:
                raise KeyError(
                    f"OptimizerHook: loss entries {sorted(missing)} are not among the loss "
                    f"module's outputs {sorted(losses.keys())}"
                )
            terms = [losses.get(k) for k in self.loss_components]
        if not terms:
            raise KeyError(
                f"OptimizerHook found no 'loss*' entry in the losses {sorted(losses.keys())}; "
                "the loss module must return loss_<name> scalars"
            )
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        return total

    def __call__(
        self, losses_td: TensorDictBase, clip_grad_norm: bool, clip_norm: float | None, index: int
    ) -> TensorDictBase:
        self._loss(losses_td).backward()
        grads = [p.grad for p in self._params if p.grad is not None]
        if clip_grad_norm and clip_norm is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(self._params, clip_norm)
        else:
            grad_norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros(())
            if clip_norm is not None:
                torch.nn.utils.clip_grad_value_(self._params, clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad()
        losses_td.set(f"grad_norm_{index}", grad_norm.detach())
        return losses_td

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict:
            self.optimizer.load_state_dict(state_dict)

    def register(self, trainer: Trainer, name: str = "optimizer") -> None:
        trainer.register_op("optimizer", self)
        trainer.register_module(name, self)


class ClearCudaCache(TrainerHookBase):
    """Empty the CUDA cache every ``interval`` calls (a no-op without CUDA)."""

    def __init__(self, interval: int) -> None:
        if interval < 1:
            raise ValueError(f"interval must be >= 1, got {interval}")
        self.interval = interval
        self.count = 0

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.count += 1
        if self.count % self.interval == 0 and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.count = state_dict["count"]

    def register(self, trainer: Trainer, name: str = "clear_cuda_cache") -> None:
        trainer.register_op("pre_optim_steps", self)
        trainer.register_module(name, self)


class LogScalar(TrainerHookBase):
    """``pre_steps_log`` hook reducing one entry of the batch to a logged number (plus its std).

    Args:
        key: the entry. Defaults to ``("next", "reward")``.
        logname: log name; defaults to ``str(key)``.
        log_pbar: show it on the progress bar.
        include_std: also log ``<logname>_std``.
        reduction: ``"mean"``, ``"sum"``, ``"min"`` or ``"max"``.

    Examples:
        >>> td = TensorDict({("next", "reward"): torch.tensor([[1.0], [3.0]])}, [2])
        >>> LogScalar(logname="r")(td)["r"]
        2.0
    """

    _REDUCTIONS: ClassVar[dict[str, Callable[[torch.Tensor], torch.Tensor]]] = {
        "mean": lambda t: t.float().mean(),
        "sum": torch.sum,
        "min": torch.min,
        "max": torch.max,
    }

    def __init__(
        self,
        key: NestedKey = REWARD_KEY,
        logname: str | None = None,
        log_pbar: bool = False,
        include_std: bool = True,
        reduction: str = "mean",
    ) -> None:
        if reduction not in self._REDUCTIONS:
            raise ValueError(
                f"reduction must be one of {list(self._REDUCTIONS)}, got {reduction!r}"
            )
        self.key = key
        self.logname = str(key) if logname is None else logname
        self.log_pbar = log_pbar
        self.include_std = include_std
        self.reduction = reduction

    def __call__(self, batch: TensorDictBase) -> dict[str, Any]:
        value = batch.get(self.key, None)
        if value is None:
            raise KeyError(
                f"LogScalar: the batch has no entry {self.key!r}; it holds "
                f"{sorted(map(str, batch.keys(True, True)))}"
            )
        mask = batch.get(_MASK_KEY, None)
        if mask is not None:
            value = value[mask]
        out: dict[str, Any] = {
            self.logname: self._REDUCTIONS[self.reduction](value).item(),
            "log_pbar": self.log_pbar,
        }
        if self.include_std and value.numel() > 1:
            out[f"{self.logname}_std"] = value.float().std().item()
        return out

    def register(self, trainer: Trainer, name: str | None = None) -> None:
        trainer.register_op("pre_steps_log", self)
        trainer.register_module(f"log_{self.logname}" if name is None else name, self)


class LogReward(LogScalar):
    """TorchRL's older reward logger: the mean of ``reward_key`` as ``logname`` (no std)."""

    def __init__(
        self,
        logname: str = "r_training",
        log_pbar: bool = False,
        reward_key: NestedKey | None = None,
    ) -> None:
        super().__init__(
            key=REWARD_KEY if reward_key is None else reward_key,
            logname=logname,
            log_pbar=log_pbar,
            include_std=False,
        )


class CountFramesLog(TrainerHookBase):
    """``pre_steps_log`` hook logging the running frame count as ``n_frames``."""

    def __init__(self, frame_skip: int, log_pbar: bool = False) -> None:
        self.frame_skip = frame_skip
        self.log_pbar = log_pbar
        self.frame_count = 0

    def __call__(self, batch: TensorDictBase) -> dict[str, Any]:
        mask = batch.get(_MASK_KEY, None)
        n = int(mask.sum()) if mask is not None else batch.numel()
        self.frame_count += n * self.frame_skip
        return {"n_frames": self.frame_count, "log_pbar": self.log_pbar}

    def state_dict(self) -> dict[str, Any]:
        return {"frame_count": self.frame_count}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.frame_count = state_dict["frame_count"]

    def register(self, trainer: Trainer, name: str = "count_frames_log") -> None:
        trainer.register_op("pre_steps_log", self)
        trainer.register_module(name, self)


class ReplayBufferTrainer(TrainerHookBase):
    """Write each batch to a replay buffer and sample the optimisation batches from it.

    ``register`` places ``extend`` at ``batch_process``, ``sample`` at
    ``process_optim_batch`` and ``update_priority`` at ``post_loss``.

    Args:
        replay_buffer: any object with ``extend``, ``sample`` and ``state_dict`` /
            ``load_state_dict``; ``update_tensordict_priority`` is used when present.
        batch_size: sample size; ``None`` uses the buffer's own.
        memmap: kept for TorchRL compatibility (the buffer's storage decides).
        device: where samples are moved.
        flatten_tensordicts: store valid steps only (by ``("collector", "mask")``), or
            flatten ``[*B, T]`` batches, marking the last step of each row truncated.
        max_dims: pad batches to these sizes (``-1``: no padding on that dim) when not flattening.
        iterate: draw samples by iterating over the buffer instead of ``sample``.
    """

    def __init__(
        self,
        replay_buffer: Any,
        batch_size: int | None = None,
        memmap: bool = False,
        device: torch.device | str | None = None,
        flatten_tensordicts: bool = False,
        max_dims: Sequence[int] | None = None,
        iterate: bool = False,
    ) -> None:
        self.replay_buffer = replay_buffer
        self.batch_size = batch_size
        self.memmap = memmap
        self.device = device
        self.flatten_tensordicts = flatten_tensordicts
        self.max_dims = max_dims
        self.iterate = iterate
        self._update_priority = getattr(replay_buffer, "update_tensordict_priority", None)
        self._iter = iter(replay_buffer) if iterate else None

    def extend(self, batch: TensorDictBase) -> TensorDictBase:
        if self.flatten_tensordicts:
            mask = batch.get(_MASK_KEY, None)
            batch = batch[mask] if mask is not None else _truncate_last_step(batch).reshape(-1)
        elif self.max_dims is not None:
            if len(self.max_dims) != batch.ndim:
                raise ValueError(
                    f"max_dims {list(self.max_dims)} needs one size per batch dim of {list(batch.shape)}"
                )
            pads: list[int] = []
            for size, limit in zip(batch.shape, self.max_dims, strict=True):
                pads += [0, 0 if limit == -1 else limit - size]
            batch = pad(batch, pads)
        batch = batch.cpu()
        self.replay_buffer.extend(batch)
        return batch

    def sample(self, batch: TensorDictBase) -> TensorDictBase:
        if self._iter is not None:
            try:
                sample = next(self._iter)
            except StopIteration:
                self._iter = iter(self.replay_buffer)
                raise
        elif self.batch_size is None:
            sample = self.replay_buffer.sample()
        else:
            sample = self.replay_buffer.sample(batch_size=self.batch_size)
        return sample if self.device is None else sample.to(self.device)

    def update_priority(self, batch: TensorDictBase) -> None:
        if self._update_priority is not None:
            self._update_priority(batch)

    def state_dict(self) -> dict[str, Any]:
        return {"replay_buffer": self.replay_buffer.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.replay_buffer.load_state_dict(state_dict["replay_buffer"])

    def register(self, trainer: Trainer, name: str = "replay_buffer") -> None:
        trainer.register_op("batch_process", self.extend)
        trainer.register_op("process_optim_batch", self.sample)
        trainer.register_op("post_loss", self.update_priority)
        trainer.register_module(name, self)


def _truncate_last_step(batch: TensorDictBase) -> TensorDictBase:
    """Mark each row's last time step truncated (and done) before rows are concatenated."""
    if batch.ndim < 2 or ("next", "truncated") not in batch.keys(True):
        return batch
    batch = batch.clone(False)
    last = (slice(None),) * (batch.ndim - 1) + (-1,)
    for flag in ("truncated", "done"):
        value = batch.get(("next", flag), None)
        if value is not None:
            value = value.clone()
            value[last] = True
            batch.set(("next", flag), value)
    return batch


class BatchSubSampler(TrainerHookBase):
    """``process_optim_batch`` hook drawing a random sub-batch of ``batch_size`` elements.

    A 1-d batch gives ``batch_size`` distinct random rows. A ``[*B, T]`` batch gives
    ``[batch_size // sub_traj_len, sub_traj_len]`` windows of consecutive steps from
    random trajectories (only valid steps when ``("collector", "mask")`` is present).

    Args:
        batch_size: elements per sub-batch.
        sub_traj_len: window length; ``0`` or less takes whole trajectories.
        min_sub_traj_len: lower bound of the window when masks shorten trajectories.

    Examples:
        >>> td = TensorDict(x=torch.arange(20).view(2, 10), batch_size=[2, 10])
        >>> BatchSubSampler(batch_size=6, sub_traj_len=3)(td).shape
        torch.Size([2, 3])
    """

    def __init__(self, batch_size: int, sub_traj_len: int = 0, min_sub_traj_len: int = 0) -> None:
        self.batch_size = batch_size
        self.sub_traj_len = sub_traj_len
        self.min_sub_traj_len = min_sub_traj_len

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        if batch.ndim == 1:
            return batch[torch.randperm(batch.shape[0], device=batch.device)[: self.batch_size]]
        batch = batch.reshape(-1, batch.shape[-1])
        n_traj, horizon = batch.shape
        window = self.sub_traj_len if self.sub_traj_len > 0 else horizon
        mask = batch.get(_MASK_KEY, None)
        if mask is not None:
            traj_len = mask.sum(-1)
            window = max(self.min_sub_traj_len, min(window, int(traj_len.min())))
        else:
            traj_len = torch.full((n_traj,), horizon, device=batch.device)
        if not 1 <= window <= horizon:
            raise ValueError(
                f"sub_traj_len={window} must be in [1, {horizon}] (the batch's time dim)"
            )
        n_windows = self.batch_size // window
        if n_windows == 0:
            raise RuntimeError(
                f"BatchSubSampler: batch_size={self.batch_size} is smaller than one window of "
                f"{window} steps; the sub-batch would be empty"
            )
        candidates = (traj_len >= window).nonzero().squeeze(-1)
        traj = candidates[torch.randint(candidates.numel(), (n_windows,), device=batch.device)]
        room = (traj_len[traj] - window).float()
        start = (torch.rand(n_windows, device=batch.device) * (room + 1)).floor().long()
        start = torch.minimum(start, room.long())
        steps = start.unsqueeze(-1) + torch.arange(window, device=batch.device)
        out = batch[traj.unsqueeze(-1).expand_as(steps), steps]
        if mask is not None and not bool(out.get(_MASK_KEY).all()):
            raise RuntimeError(
                "BatchSubSampler sampled padded (invalid) steps: masks must be left-aligned"
            )
        return out

    def register(self, trainer: Trainer, name: str = "batch_subsampler") -> None:
        trainer.register_op("process_optim_batch", self)
        trainer.register_module(name, self)


class UpdateWeights(TrainerHookBase):
    """Push the trained policy weights to the collector every ``update_weights_interval`` batches.

    Args:
        collector: calls ``collector.update_policy_weights_(...)``.
        update_weights_interval: batches (or optimiser steps) between two pushes.
        policy_weights_getter: returns the weights to push; ``None`` lets the collector fetch them.
        weight_update_map: ``{destination: "attr.path.on.trainer"}``; pushes
            ``update_policy_weights_(weights_dict={dest: TensorDict.from_module(module)})``.
        trainer: needed for ``weight_update_map`` and ``interval_unit="optim_steps"``.

    Keyword Args:
        sender: an object with ``update_weights()`` used instead of the collector.
        interval_unit: ``"batches"`` (stage ``post_steps``) or ``"optim_steps"`` (stage ``post_optim``).
    """

    def __init__(
        self,
        collector: Any | None = None,
        update_weights_interval: int = 1,
        policy_weights_getter: Callable[[], Any] | None = None,
        weight_update_map: dict[str, str] | None = None,
        trainer: Trainer | None = None,
        *,
        sender: Any | None = None,
        interval_unit: str = "batches",
    ) -> None:
        if update_weights_interval < 1:
            raise ValueError(f"update_weights_interval must be >= 1, got {update_weights_interval}")
        if interval_unit not in ("batches", "optim_steps"):
            raise ValueError(
                f"interval_unit must be 'batches' or 'optim_steps', got {interval_unit!r}"
            )
        if sender is None and collector is None:
            raise ValueError("UpdateWeights needs a collector or a sender")
        if sender is not None and (
            policy_weights_getter is not None or weight_update_map is not None
        ):
            raise ValueError("sender excludes policy_weights_getter and weight_update_map")
        self.collector = collector
        self.update_weights_interval = update_weights_interval
        self.policy_weights_getter = policy_weights_getter
        self.weight_update_map = weight_update_map
        self.trainer = trainer
        self.sender = sender
        self.interval_unit = interval_unit
        self.counter = 0
        self._last_update_count = 0

    def __call__(self) -> None:
        if self.interval_unit == "optim_steps":
            if self.trainer is None:
                raise RuntimeError(
                    "interval_unit='optim_steps' needs the trainer: call register(trainer)"
                )
            count = self.trainer._optim_count
            if count - self._last_update_count < self.update_weights_interval:
                return
            self._last_update_count = count
        else:
            self.counter += 1
            if self.counter % self.update_weights_interval:
                return
        if self.sender is not None:
            self.sender.update_weights()
        elif self.weight_update_map is not None:
            if self.trainer is None:
                raise RuntimeError("weight_update_map needs the trainer: call register(trainer)")
            weights = {
                dest: TensorDict.from_module(_resolve(self.trainer, path))
                for dest, path in self.weight_update_map.items()
            }
            self.collector.update_policy_weights_(weights_dict=weights)
        elif self.policy_weights_getter is not None:
            self.collector.update_policy_weights_(self.policy_weights_getter())
        else:
            self.collector.update_policy_weights_()

    def state_dict(self) -> dict[str, Any]:
        return {"counter": self.counter, "last_update_count": self._last_update_count}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.counter = state_dict.get("counter", 0)
        self._last_update_count = state_dict.get("last_update_count", 0)

    def register(self, trainer: Trainer, name: str = "update_weights") -> None:
        if self.trainer is None:
            self.trainer = trainer
        trainer.register_op(
            "post_optim" if self.interval_unit == "optim_steps" else "post_steps", self
        )
        trainer.register_module(name, self)


def _resolve(root: Any, path: str) -> Any:
    obj = root
    for part in path.split("."):
        if not hasattr(obj, part):
            raise AttributeError(
                f"weight_update_map: {path!r} has no attribute {part!r} on {type(obj).__name__}"
            )
        obj = getattr(obj, part)
    return obj
