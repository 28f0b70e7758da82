"""The ``Trainer``: a collection loop with an optimisation sub-loop and named hook stages.

Behaviour and names follow TorchRL's ``torchrl.trainers.Trainer``. The trainer
constructs nothing: the collector, loss module, optimiser, replay buffer and
evaluation env are any objects that honour their duck-typed interface.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import pickle
import random
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_trainers.hooks import OptimizerHook

__all__ = ["HOOK_STAGES", "Trainer"]

#: Every stage ``register_op`` accepts, in TorchRL's names. The loop runs them as follows
#: (``[...]`` repeated): setup, [batch_process, pre_steps_log, pre_optim_steps,
#: [pre_epoch_log, pre_epoch, [process_optim_batch, <loss>, post_loss, process_loss,
#: optimizer, post_optim, post_optim_log], post_epoch_log, post_epoch],
#: post_optim_complete_log, post_steps, post_steps_log], shutdown.
HOOK_STAGES = (
    "batch_process",
    "pre_optim_steps",
    "process_optim_batch",
    "post_loss",
    "process_loss",
    "optimizer",
    "post_steps",
    "post_optim",
    "pre_steps_log",
    "post_steps_log",
    "post_optim_log",
    "pre_epoch_log",
    "post_epoch_log",
    "post_optim_complete_log",
    "pre_epoch",
    "post_epoch",
    "setup",
    "shutdown",
)

_STATE_KEYS = ("collected_frames", "_last_log", "_last_save", "_optim_count")


def _rng_state() -> dict[str, Any]:
    """Every global generator a hook may draw from, in a form ``torch.load(weights_only=True)`` reads."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    npst = state["numpy"]
    np.random.set_state(
        (
            npst["kind"],
            npst["keys"].numpy().astype(np.uint32),
            npst["pos"],
            npst["has_gauss"],
            npst["cached_gaussian"],
        )
    )
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class Trainer:
    """Collects batches, runs ``optim_steps_per_batch`` optimisation steps on each, calls hooks.

    The loop: for every batch of the ``collector`` (an iterable of TensorDicts),
    run the ``batch_process`` hooks, count the frames (``("collector", "mask")``
    if present, else ``batch.numel()``, times ``frame_skip``), log, then, once
    past the collector's ``init_random_frames``, run ``num_epochs`` x
    ``optim_steps_per_batch`` steps: ``process_optim_batch`` hooks pick a
    sub-batch (e.g. a replay-buffer sample), the loss module returns a
    TensorDict of ``loss_*`` scalars, and the ``optimizer`` hooks back-propagate
    their sum and step. Training stops once ``total_frames`` were collected.

    Args:
        collector: iterable of TensorDict batches; optionally ``shutdown()``,
            ``set_seed(seed)``, ``state_dict()`` / ``load_state_dict()``,
            ``update_policy_weights_()`` and ``init_random_frames``.
        total_frames: frames to collect before stopping.
        frame_skip: frames per env step, to count frames as the env sees them.
        optim_steps_per_batch: optimisation steps per batch and epoch; ``None``
            runs until a ``process_optim_batch`` hook raises ``StopIteration`` or returns ``None``.
        loss_module: callable ``TensorDict -> TensorDict`` of ``loss_*`` entries.
        optimizer: a ``torch.optim.Optimizer``; registers an ``OptimizerHook`` for
            all ``loss_*`` entries. ``None`` leaves that to hooks you register.
        logger: a ``rl_trainers.Logger`` (anything with ``log_scalar(name, value, step)``).
        clip_grad_norm: clip the total gradient norm (``True``) or each partial
            derivative (``False``) at ``clip_norm``.
        clip_norm: clipping threshold; ``None`` disables clipping (the norm is still logged).
        progress_bar: show a tqdm bar (needs ``tqdm``).
        seed: seeds the collector (``set_seed``), torch, numpy and ``random``; ``None`` leaves them.
        save_trainer_interval: frames between two checkpoints to ``save_trainer_file``.
        log_interval: frames between two logger writes of one key.
        save_trainer_file: checkpoint path; ``None`` saves nothing.
        num_epochs: passes of ``optim_steps_per_batch`` steps over each batch.
        auto_log_optim_steps: log ``optim_steps`` and the step-averaged losses after each batch.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_trainers import FakeCollector, Trainer
        >>> collector = FakeCollector({"x": ((3,), torch.float32)}, frames_per_batch=8, seed=0)
        >>> net = torch.nn.Linear(3, 1)
        >>> loss = lambda td: TensorDict(loss_l2=net(td["x"]).pow(2).mean())
        >>> trainer = Trainer(collector=collector, total_frames=32, frame_skip=1,
        ...     optim_steps_per_batch=2, loss_module=loss,
        ...     optimizer=torch.optim.SGD(net.parameters(), lr=0.1), progress_bar=False)
        >>> trainer.train()
        >>> trainer.collected_frames, trainer._optim_count
        (32, 8)
    """

    def __init__(
        self,
        *,
        collector: Iterable[TensorDictBase],
        total_frames: int,
        frame_skip: int,
        optim_steps_per_batch: int | None,
        loss_module: Callable[[TensorDictBase], TensorDictBase],
        optimizer: torch.optim.Optimizer | None = None,
        logger: Any | None = None,
        clip_grad_norm: bool = True,
        clip_norm: float | None = None,
        progress_bar: bool = True,
        seed: int | None = None,
        save_trainer_interval: int = 10000,
        log_interval: int = 10000,
        save_trainer_file: str | pathlib.Path | None = None,
        num_epochs: int = 1,
        auto_log_optim_steps: bool = True,
    ) -> None:
        if not hasattr(collector, "__iter__"):
            raise TypeError(
                f"collector must be an iterable of TensorDict batches, got {type(collector).__name__}"
            )
        if not callable(loss_module):
            raise TypeError(
                f"loss_module must be callable (TensorDict -> TensorDict of loss_* entries), "
                f"got {type(loss_module).__name__}"
            )
        _check_int("total_frames", total_frames, minimum=1)
        _check_int("frame_skip", frame_skip, minimum=1)
        _check_int("num_epochs", num_epochs, minimum=1)
        if optim_steps_per_batch is not None:
            _check_int("optim_steps_per_batch", optim_steps_per_batch, minimum=0)
        self.collector = collector
        self.total_frames = total_frames
        self.frame_skip = frame_skip
        self.optim_steps_per_batch = optim_steps_per_batch
        self.loss_module = loss_module
        self.optimizer = optimizer
        self.logger = logger
        self.clip_grad_norm = clip_grad_norm
        self.clip_norm = clip_norm
        self.seed = seed
        self.save_trainer_interval = save_trainer_interval
        self._log_interval = log_interval
        self.save_trainer_file = save_trainer_file
        self.num_epochs = num_epochs
        self.auto_log_optim_steps = auto_log_optim_steps
        self.progress_bar = progress_bar and _tqdm_available()

        self.collected_frames = 0
        self._optim_count = 0
        self._last_log: dict[str, int] = {}
        self._last_save = 0
        self._log_dict: defaultdict[str, list] = defaultdict(list)
        self._pbar_str: dict[str, float] = {}
        self._pbar = None
        self._stop_training = False
        self._stop_reason: str | None = None
        self._ops: dict[str, list[tuple[Callable, dict]]] = {stage: [] for stage in HOOK_STAGES}
        self._modules: dict[str, Any] = {}

        if seed is not None:
            self.set_seed()
        if optimizer is not None:
            OptimizerHook(optimizer).register(self)

    # ------------------------------------------------------------------ hooks

    def register_op(self, dest: str, op: Callable, **kwargs: Any) -> None:
        """Call ``op(..., **kwargs)`` at stage ``dest`` (one of ``HOOK_STAGES``).

        What ``op`` receives and returns depends on the stage: ``batch_process``,
        ``process_optim_batch``, ``pre_epoch`` take and may return a TensorDict
        (which replaces the batch); ``post_loss`` takes the sub-batch;
        ``process_loss`` takes ``(sub_batch, losses)`` and may return new losses;
        ``optimizer`` takes ``(losses, clip_grad_norm, clip_norm, index)``;
        ``*_log`` stages take the batch and return ``None`` or a dict of values to log;
        ``post_optim_complete_log`` takes ``(optim_steps, average_losses)``;
        the others take no argument.

        Raises:
            RuntimeError: for an unknown stage (TorchRL's error type).
            TypeError: if ``op`` is not callable.
        """
        if dest not in self._ops:
            raise RuntimeError(
                f"The hook collection {dest!r} is not recognised. Choose from: {', '.join(HOOK_STAGES)}"
            )
        if not callable(op):
            raise TypeError(
                f"register_op({dest!r}, op): op must be callable, got {type(op).__name__}"
            )
        self._ops[dest].append((op, kwargs))

    def register_module(self, module_name: str, module: Any) -> None:
        """Checkpoint ``module`` (anything with ``state_dict`` / ``load_state_dict``) as ``module_name``."""
        if module_name in self._modules or module_name in ("collector", "loss_module", "state"):
            raise RuntimeError(f"{module_name} is already registered, choose a different name.")
        self._modules[module_name] = module

    def _chain(self, stage: str, batch: Any) -> Any:
        for op, kwargs in self._ops[stage]:
            out = op(batch, **kwargs)
            if isinstance(out, TensorDictBase):
                batch = out
        return batch

    def _call(self, stage: str) -> None:
        for op, kwargs in self._ops[stage]:
            op(**kwargs)

    def _call_log(self, stage: str, *args: Any) -> None:
        for op, kwargs in self._ops[stage]:
            result = op(*args, **kwargs)
            if result is not None:
                self._log(**result)

    # ------------------------------------------------------------------ loop

    def train(self) -> None:
        """Run until ``total_frames`` frames were collected (or ``request_stop``), then shut down."""
        if self.progress_bar:
            from tqdm import tqdm

            self._pbar = tqdm(total=self.total_frames, initial=self.collected_frames)
        self._call("setup")
        init_random_frames = getattr(self.collector, "init_random_frames", 0) or 0
        # A resumed trainer that already reached its budget must not draw another batch.
        if self.collected_frames < self.total_frames:
            for batch in self.collector:
                batch = self._chain("batch_process", batch)
                frames = self._count_frames(batch)
                self.collected_frames += frames
                self._call_log("pre_steps_log", batch)
                if self.collected_frames >= init_random_frames:
                    self.optim_steps(batch)
                self._call("post_steps")
                self._call_log("post_steps_log", batch)
                if self._pbar is not None:
                    self._pbar.update(frames)
                    self._pbar_description()
                if self._stop_training or self.collected_frames >= self.total_frames:
                    self.save_trainer(force_save=True)
                    break
                self.save_trainer()
        self._call("shutdown")
        if self._pbar is not None:
            self._pbar.close()
            self._pbar = None
        self.shutdown()

    def _count_frames(self, batch: TensorDictBase) -> int:
        mask = batch.get(("collector", "mask"), None)
        n = int(mask.sum()) if mask is not None else batch.numel()
        return n * self.frame_skip

    def optim_steps(self, batch: TensorDictBase) -> None:
        """The optimisation sub-loop on one collected batch."""
        self._call("pre_optim_steps")
        sums: dict[str, torch.Tensor] = {}
        n_steps = 0
        for _ in range(self.num_epochs):
            self._call_log("pre_epoch_log", batch)
            epoch_batch = self._chain("pre_epoch", batch)
            steps = (
                itertools.count()
                if self.optim_steps_per_batch is None
                else range(self.optim_steps_per_batch)
            )
            for _ in steps:
                try:
                    sub_batch = self._chain("process_optim_batch", epoch_batch)
                except StopIteration:
                    break
                if sub_batch is None:
                    break
                self._optim_count += 1
                losses = self.loss_module(sub_batch)
                for op, kwargs in self._ops["post_loss"]:
                    op(sub_batch, **kwargs)
                for op, kwargs in self._ops["process_loss"]:
                    out = op(sub_batch, losses, **kwargs)
                    if isinstance(out, TensorDictBase):
                        losses = out
                for index, (op, kwargs) in enumerate(self._ops["optimizer"]):
                    out = op(losses, self.clip_grad_norm, self.clip_norm, index, **kwargs)
                    if isinstance(out, TensorDictBase):
                        losses = out
                self._call("post_optim")
                self._call_log("post_optim_log", sub_batch)
                for key, value in losses.items():
                    if isinstance(value, torch.Tensor):
                        value = value.detach()
                        sums[key] = sums[key] + value if key in sums else value
                n_steps += 1
            self._call_log("post_epoch_log", batch)
            self._call("post_epoch")
        if n_steps:
            average = {key: value / n_steps for key, value in sums.items()}
            self._call_log("post_optim_complete_log", self._optim_count, average)
            if self.auto_log_optim_steps:
                self._log(optim_steps=self._optim_count, **average)

    def request_stop(self, reason: str | None = None) -> None:
        """Stop (and checkpoint) at the end of the current batch."""
        self._stop_training = True
        self._stop_reason = reason

    def shutdown(self) -> None:
        """Shut the collector down (if it has a ``shutdown`` method)."""
        shutdown = getattr(self.collector, "shutdown", None)
        if callable(shutdown):
            shutdown()

    # ------------------------------------------------------------------ logging

    def _log(self, log_pbar: bool = False, **kwargs: Any) -> None:
        frames = self.collected_frames
        for key, value in kwargs.items():
            self._log_dict[key].append(value)
            if frames - self._last_log.get(key, 0) > self._log_interval:
                self._last_log[key] = frames
                if self.logger is not None and not (
                    isinstance(value, torch.Tensor) and value.numel() != 1
                ):
                    self.logger.log_scalar(key, value, step=frames)
            if log_pbar and self._pbar is not None:
                self._pbar_str[key] = float(value)

    def _pbar_description(self) -> None:
        if self._pbar_str:
            self._pbar.set_description(
                ", ".join(f"{k}: {v:4.4f}" for k, v in sorted(self._pbar_str.items()))
            )

    # ------------------------------------------------------------------ seeding

    def set_seed(self) -> None:
        """Seed the collector (``collector.set_seed``), torch, numpy and ``random`` with ``self.seed``."""
        seed = self.seed
        set_seed = getattr(self.collector, "set_seed", None)
        if callable(set_seed):
            out = set_seed(seed)
            if isinstance(out, int):
                seed = out
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
        random.seed(seed)

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """The whole run: collector, loss module, optimiser, registered modules, counters, RNGs.

        The generators of torch, numpy and ``random`` are part of it (TorchRL omits
        them), so that hooks drawing random numbers resume exactly.
        """
        state: dict[str, Any] = {
            "collector": _state_of(self.collector, "collector"),
            "loss_module": _state_of(self.loss_module, "loss_module"),
            "state": {
                "collected_frames": self.collected_frames,
                "_last_log": dict(self._last_log),
                "_last_save": self._last_save,
                "_optim_count": self._optim_count,
            },
            "rng": _rng_state(),
        }
        for name, module in self._modules.items():
            state[name] = module.state_dict()
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore what ``state_dict`` saved; every registered module must be in it."""
        missing = [
            k for k in ("collector", "loss_module", "state", *self._modules) if k not in state_dict
        ]
        if missing:
            raise KeyError(
                f"the trainer checkpoint lacks {missing} (it holds {sorted(state_dict)}); "
                "register the same modules, under the same names, as the run that saved it"
            )
        _load_into(self.loss_module, state_dict["loss_module"], "loss_module")
        _load_into(self.collector, state_dict["collector"], "collector")
        for name, module in self._modules.items():
            module.load_state_dict(state_dict[name])
        counters = state_dict["state"]
        self.collected_frames = counters["collected_frames"]
        self._last_log = dict(counters["_last_log"])
        self._last_save = counters["_last_save"]
        self._optim_count = counters["_optim_count"]
        if "rng" in state_dict:
            _set_rng_state(state_dict["rng"])

    def save_trainer(self, force_save: bool = False) -> None:
        """Write ``state_dict()`` to ``save_trainer_file`` every ``save_trainer_interval`` frames (or now)."""
        if self.save_trainer_file is None:
            return
        due = self.collected_frames - self._last_save > self.save_trainer_interval
        if due:
            self._last_save = self.collected_frames
        if due or force_save:
            path = pathlib.Path(self.save_trainer_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            torch.save(self.state_dict(), tmp)
            os.replace(tmp, path)  # a crash mid-write leaves the previous checkpoint whole

    def load_from_file(self, file: str | pathlib.Path, **kwargs: Any) -> Trainer:
        """Load a checkpoint written by ``save_trainer``; keyword arguments go to ``torch.load``.

        ``weights_only=True`` is the default: pass ``weights_only=False`` for a file you
        trust whose collector or modules store arbitrary Python objects.
        """
        kwargs.setdefault("weights_only", True)
        try:
            state = torch.load(file, **kwargs)
        except pickle.UnpicklingError as err:
            raise pickle.UnpicklingError(
                f"{file}: the checkpoint holds objects torch.load(weights_only=True) refuses "
                f"({err}); if you trust the file, call load_from_file(file, weights_only=False)"
            ) from err
        self.load_state_dict(state)
        return self

    def __repr__(self) -> str:
        return (
            f"Trainer(collector={type(self.collector).__name__}, "
            f"loss_module={type(self.loss_module).__name__}, optimizer={type(self.optimizer).__name__}, "
            f"logger={self.logger!r}, total_frames={self.total_frames}, "
            f"optim_steps_per_batch={self.optim_steps_per_batch})"
        )


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _tqdm_available() -> bool:
    try:
        import tqdm  # noqa: F401
    except ImportError:
        warnings.warn(
            "progress_bar=True but tqdm is not installed (pip install 'rl-trainers[progress]'); "
            "training runs without a progress bar",
            stacklevel=3,
        )
        return False
    return True


def _state_of(obj: Any, name: str) -> Any:
    state_dict = getattr(obj, "state_dict", None)
    if state_dict is None:
        if name == "loss_module":
            raise TypeError(
                f"the {name} ({type(obj).__name__}) has no state_dict(): checkpoints need one; "
                "wrap a plain function in an nn.Module that owns its parameters"
            )
        return {}
    return state_dict()


def _load_into(obj: Any, state: Any, name: str) -> None:
    load = getattr(obj, "load_state_dict", None)
    if load is not None:
        load(state)
    elif state:
        raise TypeError(
            f"the checkpoint holds a {name} state but {type(obj).__name__} has no load_state_dict()"
        )
