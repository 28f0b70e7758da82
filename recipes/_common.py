"""Plumbing shared by every recipe: config parsing, logging, checkpoints, plots, summaries.

A recipe is one readable file: a config dataclass (each field carries a one-line
docstring), then one linear training loop. Everything that is not the algorithm
lives here, once.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Config:
    ...     env: str = "CartPole-v1"
    ...     '''Gymnasium id of the environment.'''
    ...     total_frames: int = 1000
    ...     '''Frames to collect in total.'''
    >>> parse_config(Config, ["--total-frames", "50"]).total_frames
    50
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import errno
import hashlib
import inspect
import itertools
import json
import math
import os
import random
import struct
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch
from torch import nn

C = TypeVar("C")

COMMON_FIELDS_DOC = {
    "smoke": "Run a tiny budget (seconds) to check the recipe end to end.",
    "resume": "Checkpoint file to continue from, exactly where it stopped.",
    "output_dir": "Folder for logs, checkpoints, the learning curve and the summary.",
}


def field_docs(cls: type) -> dict[str, str]:
    """Map each dataclass field to the docstring written on the line after it.

    Base dataclasses are read too (along the MRO), so fields a recipe inherits from
    :class:`RunConfig` keep their docs; a subclass that re-documents a field wins.
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if "__dataclass_fields__" in vars(klass):
            docs.update(_own_field_docs(klass))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _number(text: str | float, kind: type, expected: str) -> Any:
    """``text`` (a flag's string, or a value from a preset or a default) as ``kind``."""
    try:
        if isinstance(text, bool):
            raise ValueError
        value = kind(text)
        if kind is int and isinstance(text, float) and text != value:
            raise ValueError
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    return value


def _checked(kind: type, expected: str, ok: Callable[[Any], bool]) -> Callable[[Any], Any]:
    def check(text: str | float) -> Any:
        value = _number(text, kind, expected)
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    check.__name__ = expected  # argparse names the type in its own messages
    return check


positive_int = _checked(int, "an integer > 0", lambda x: x > 0)
"""Sizes, counts and intervals (``--batch-size``, ``--checkpoint-every``): an integer > 0."""
nonnegative_int = _checked(int, "an integer >= 0", lambda x: x >= 0)
"""Seeds and warm-up budgets: an integer >= 0."""
positive_float = _checked(float, "a finite number > 0", lambda x: math.isfinite(x) and x > 0)
"""Learning rates, clip norms, scales: finite and > 0."""
nonnegative_float = _checked(float, "a finite number >= 0", lambda x: math.isfinite(x) and x >= 0)
"""Coefficients and noise scales: finite and >= 0."""
unit_interval = _checked(float, "a number in [0, 1]", lambda x: 0.0 <= x <= 1.0)
"""Discounts, lambdas, probabilities: in [0, 1] (NaN fails every comparison)."""
fraction = _checked(float, "a number in (0, 1]", lambda x: 0.0 < x <= 1.0)
"""Polyak ``tau`` (0 would never move the target network): in (0, 1]."""
open_unit_interval = _checked(float, "a number in (0, 1)", lambda x: 0.0 < x < 1.0)
"""IQL's expectile, a confidence level: strictly between 0 and 1."""
finite_float = _checked(float, "a finite number", math.isfinite)
"""Any finite number (an initial log-std, a threshold)."""
positive_or_inf = _checked(float, "a number > 0 (inf: none)", lambda x: x > 0)
"""A clip bound where ``inf`` means no clipping (``--obs-clip``, V-trace's thresholds)."""
not_nan = _checked(float, "a number (inf allowed, not NaN)", lambda x: not math.isnan(x))
"""A target return (``inf``: never stop early)."""
any_float = _checked(float, "a number", lambda x: True)
"""A float whose NaN has a meaning (e.g. "none")."""

FIELD_CHECKS: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(
        ["total_frames", "frames_per_batch", "batch_size", "minibatch_size", "num_envs",
         "epochs", "num_updates", "buffer_size", "hidden", "critic_hidden", "disc_hidden",
         "hidden_dim", "rnn_hidden_dim", "state_dim", "checkpoint_every", "eval_every",
         "eval_episodes", "log_every", "num_steps", "collect_envs", "dataset_frames",
         "medium_frames", "expert_frames", "target_update_interval", "policy_delay",
         "annealing_frames", "torch_threads", "num_workers", "n_agents", "num_qvalue_nets",
         "n_head", "n_layer", "n_embd", "context", "group_size", "action_repeat",
         "batch_length", "batches_per_update", "eval_envs", "eval_problems",
         "imagination_horizon", "max_new_tokens", "max_operand", "max_steps",
         "mixing_embed_dim", "num_categoricals", "num_classes", "num_minibatches",
         "prompts_per_step", "reps", "seeds", "jobs", "sft_batch", "sft_problems",
         "dataset_episodes", "updates", "updates_per_batch", "sub_sample_len", "frame_skip",
         "num_random"],
        positive_int,
    ),
    **dict.fromkeys(
        ["seed", "first_seed", "init_random_frames", "bn_warmup_steps", "obs_norm_frames",
         "bc_steps", "sft_steps", "warmup_updates"],
        nonnegative_int,
    ),
    **dict.fromkeys(
        ["gamma", "gae_lambda", "lmbda", "reward_gamma", "eps_init", "eps_end", "beta",
         "bn_momentum"],
        unit_interval,
    ),
    "tau": fraction,
    "expectile": open_unit_interval,
    "confidence": open_unit_interval,
    **dict.fromkeys(["dropout", "adam_beta1"], _checked(float, "a number in [0, 1)",
                                                          lambda x: 0.0 <= x < 1.0)),
    **dict.fromkeys(
        ["lr", "actor_lr", "critic_lr", "disc_lr", "sft_lr", "value_lr", "world_model_lr",
         "max_grad_norm", "grad_clip", "alpha_init", "utd_ratio", "reward_scale",
         "return_scale", "temperature", "clip_epsilon"],
        positive_float,
    ),
    **dict.fromkeys(
        ["entropy_coeff", "critic_coeff", "min_q_weight", "weight_decay", "free_nats",
         "gp_lambda", "exploration_noise", "policy_noise", "noise_clip", "alpha"],
        nonnegative_float,
    ),
    **dict.fromkeys(["obs_clip", "c_thresh", "rho_thresh"], positive_or_inf),
    **dict.fromkeys(["log_std_init", "lagrange_thresh"], finite_float),
    "target_return": not_nan,
    "threshold": any_float,
}  # fmt: skip
"""The check of each numeric recipe flag, by field name; a recipe adds or overrides entries
with its ``Config.CHECKS``. Any other float refuses NaN. ``tests/test_recipes_common.py``
fails when a recipe adds a numeric field that has no entry here."""


def field_checks(cls: type) -> dict[str, Callable[[Any], Any]]:
    """The check of every numeric field of the config class ``cls`` (see :data:`FIELD_CHECKS`)."""
    own = getattr(cls, "CHECKS", {})
    checks: dict[str, Callable[[Any], Any]] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        kind = type(field.default)
        if field.name in own or field.name in FIELD_CHECKS:
            checks[field.name] = own.get(field.name, FIELD_CHECKS.get(field.name))
        elif kind is float:
            checks[field.name] = not_nan
    return checks


def check_fields(cls: type, values: dict[str, Any]) -> None:
    """Raise a ``ValueError`` naming the flag of the first value outside its range."""
    for name, check in field_checks(cls).items():
        if name not in values:
            continue
        try:
            check(values[name])
        except argparse.ArgumentTypeError as err:
            flag = "--" + name.replace("_", "-")
            raise ValueError(
                f"{flag} {values[name]!r}: {err}. Pass {flag} with a value in that range."
            ) from None


@dataclasses.dataclass
class RunConfig:
    """The fields every recipe shares; a recipe's ``Config`` subclasses it and adds its own.

    A recipe overrides a default by restating the field (``output_dir: str = "runs/sac"``);
    its doc is inherited unless the recipe writes a new one under it.
    """

    seed: int = 0
    """Seed of every RNG and of the envs."""
    torch_threads: int = 1
    """CPU threads for torch (small MLPs run fastest on one)."""
    eval_every: int = 10_000
    """Frames between deterministic evaluations."""
    eval_episodes: int = 5
    """Episodes per evaluation."""
    target_return: float = float("inf")
    """Stop early once a deterministic evaluation reaches this return (inf: never)."""
    checkpoint_every: int = 50_000
    """Frames between checkpoints."""
    output_dir: str = "runs"
    """Folder for logs, checkpoints, the learning curve and the summary."""
    resume: str = ""
    """Checkpoint to continue from, exactly where it stopped."""
    smoke: bool = False
    """Run a tiny budget to check the recipe end to end."""
    preset: str = ""
    """A named setting of the recipe (its ``PRESETS``); explicit flags still override it."""

    SMOKE: ClassVar[dict[str, object]] = {}
    PRESETS: ClassVar[dict[str, dict[str, object]]] = {}
    CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {}
    """Checks of this recipe's numeric fields that differ from :data:`FIELD_CHECKS`."""
    RESUME_MAY_CHANGE: ClassVar[frozenset[str]] = frozenset(
        {"total_frames", "num_steps", "updates", "output_dir", "resume", "smoke", "preset",
         "torch_threads", "eval_every", "eval_episodes", "checkpoint_every", "target_return",
         "log_every", "compile", "kernels", "device"}
    )  # fmt: skip
    """Flags a resumed run may change: the budget and the run's plumbing, not the algorithm."""

    def __post_init__(self) -> None:
        check_fields(type(self), dataclasses.asdict(self))
        self.validate()

    def validate(self) -> None:
        """Checks across fields (a recipe overrides it); raise a ``ValueError`` naming the flags."""


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def parse_config(cls: type[C], argv: Sequence[str] | None = None) -> C:
    """Build ``cls`` from command-line flags (``--total-frames 1000``), one flag per field.

    Boolean fields take a value (``--anneal-lr false``) or stand alone for true (``--smoke``).
    ``--preset NAME`` applies ``cls.PRESETS[NAME]``, then ``--smoke`` applies ``cls.SMOKE``
    (dicts of overrides), then the explicit flags.
    """
    docs = field_docs(cls)
    checks = field_checks(cls)
    parser = argparse.ArgumentParser(
        description=(inspect.getdoc(cls) or "").split("\n")[0],
    )
    for field in _recipe_fields_first(cls):
        default = field.default
        kind = type(default) if default is not None else str
        # a bare boolean flag (``--smoke``) means true; ``--smoke false`` still reads a value
        flag_only = {"nargs": "?", "const": True} if kind is bool else {}
        parser.add_argument(
            "--" + field.name.replace("_", "-"),
            type=_parse_bool if kind is bool else checks.get(field.name, kind),
            default=None,
            help=f"{docs.get(field.name, COMMON_FIELDS_DOC.get(field.name, ''))} (default: {default})",
            **flag_only,
        )
    args = vars(parser.parse_args(argv))
    values = {f.name: f.default for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    presets = getattr(cls, "PRESETS", {})
    if args.get("preset"):
        if args["preset"] not in presets:
            known = ", ".join(sorted(presets)) or "none"
            parser.error(f"unknown --preset {args['preset']!r}; this recipe's presets: {known}")
        values.update(presets[args["preset"]])
    if args.get("smoke"):
        values.update(getattr(cls, "SMOKE", {}))
    values.update({k: v for k, v in args.items() if v is not None})
    try:  # presets, smoke budgets and defaults are checked too, before any work
        check_fields(cls, values)
        return cls(**values)
    except ValueError as err:
        parser.error(str(err))


def _recipe_fields_first(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields new in ``cls`` first (the algorithm's), then the inherited shared ones."""
    inherited = {
        f.name for base in cls.__mro__[1:] if dataclasses.is_dataclass(base)
        for f in dataclasses.fields(base)
    }  # fmt: skip
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    return [f for f in fields if f.name not in inherited] + [
        f for f in fields if f.name in inherited
    ]


def orthogonal_init(mlp: nn.Module, last_gain: float) -> None:
    """Orthogonal weights, zero biases; a small last layer keeps the first policy near-uniform."""
    linears = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
    for layer in linears:
        nn.init.orthogonal_(layer.weight, gain=last_gain if layer is linears[-1] else 2**0.5)
        nn.init.zeros_(layer.bias)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch; recipes also seed their envs."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """Every global RNG state, for bit-identical resumes."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"]:
        torch.cuda.set_rng_state_all(state["cuda"])


class CheckpointError(ValueError):
    """A checkpoint that cannot be trusted: corrupt, truncated, non-finite, or incompatible."""


_SEAL = b"rl-recipes-checkpoint sha256="
"""The ZIP archive comment that closes every checkpoint: this prefix, then 64 hex digits."""
_SEAL_LEN = len(_SEAL) + 64
_EOCD = b"PK\x05\x06"  # the ZIP end-of-central-directory record (22 bytes, then the comment)
DATA_ENTRIES = frozenset(
    {"buffer", "collector", "rng", "config", "frames", "wall", "eval_return", "next_eval",
     "next_ckpt"}
)  # fmt: skip
"""Checkpoint entries that hold data or counters, not learned state: not checked for
finiteness (an evaluation return is NaN before the first evaluation)."""


class _HashingFile:
    """A binary file that hashes what is written to it (torch.save writes through it)."""

    def __init__(self, f: Any) -> None:
        self.f, self.sha = f, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` (plus every RNG) atomically, sealed with its SHA-256.

    The file is a plain ``torch.save`` archive (``torch.load`` reads it) whose ZIP comment
    holds the SHA-256 of the archive as written: :func:`load_checkpoint` recomputes it, so a
    flipped byte or a truncated copy is refused. It is written to ``<path>.tmp``, fsynced and
    renamed: a crash mid-write leaves the previous checkpoint whole, and the partial file is
    removed. Learned state holding NaN or inf is refused (the previous checkpoint is kept).

    Raises:
        CheckpointError: a parameter or optimizer entry is NaN or infinite.
        OSError: the disk is full (``no space left on <folder>``), or another write failure.
    """
    path = Path(path)
    state = {**state, "rng": rng_state()}
    _check_finite_state(state, f"refusing to write checkpoint {path}:")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as f:
            hashing = _HashingFile(f)
            torch.save(state, hashing)  # type: ignore[arg-type]
            f.flush()
            size = f.tell()
            seal = _SEAL + hashing.sha.hexdigest().encode()
            f.seek(size - 2)  # the comment length of the last record, 0 as torch writes it
            f.write(struct.pack("<H", len(seal)) + seal)
            f.flush()
            os.fsync(f.fileno())
        _check_sealed_layout(tmp)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if _is_disk_full(err):
            raise OSError(
                errno.ENOSPC,
                f"no space left on {path.parent} while writing checkpoint {path} (the previous "
                "checkpoint, if any, is intact). Free some space or pass another --output-dir.",
            ) from err
        raise


def _is_disk_full(err: BaseException) -> bool:
    while err is not None:
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(err):  # torch's writer wraps it in a RuntimeError
            return True
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    return False


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_sealed_layout(path: Path) -> None:
    """The file ends with a ZIP end record whose comment is the seal (torch.save's layout)."""
    with path.open("rb") as f:
        f.seek(-(22 + _SEAL_LEN), os.SEEK_END)
        tail = f.read()
    if tail[:4] != _EOCD or not tail[22:].startswith(_SEAL):
        raise RuntimeError(
            f"torch.save wrote an archive layout save_checkpoint cannot seal: {path}"
        )


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read and verify a checkpoint written by :func:`save_checkpoint`; touch no RNG.

    Verifies the SHA-256 seal (a checkpoint from before seals existed loads with a warning),
    then that every learned tensor is finite (parameters, optimizer moments, ...; the replay
    buffer, collector and RNG entries are data and are not checked).

    Raises:
        FileNotFoundError: no such file.
        CheckpointError: truncated, corrupt (the seal does not match), unreadable, or a
            parameter or optimizer entry holds NaN or inf; the message names the file and entry.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--resume {path}: no such checkpoint file")
    _verify_seal(path)
    try:
        state = torch.load(path, weights_only=False)
    except Exception as err:
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(err).__name__}: {err}). Resume from "
            "another checkpoint, or start a fresh run without --resume."
        ) from err
    if not isinstance(state, dict) or "rng" not in state:
        raise CheckpointError(
            f"checkpoint {path} is not a recipe checkpoint (expected a dict with an 'rng' entry, "
            f"got {type(state).__name__}). Pass a checkpoint.pt written by a recipe."
        )
    _check_finite_state(state, f"checkpoint {path}:")
    return state


def _verify_seal(path: Path) -> None:
    size = path.stat().st_size
    with path.open("rb") as f:
        f.seek(max(size - (22 + _SEAL_LEN), 0))
        tail = f.read()
        sealed = (
            len(tail) == 22 + _SEAL_LEN
            and tail[:4] == _EOCD
            and tail[20:22] == struct.pack("<H", _SEAL_LEN)
            and tail[22:].startswith(_SEAL)
        )
        if not sealed:
            if tail[-22:-18] == _EOCD and tail[-2:] == b"\x00\x00":
                warnings.warn(
                    f"checkpoint {path} has no SHA-256 seal (written before seals existed): "
                    "its integrity cannot be verified. The next checkpoint will be sealed.",
                    UserWarning,
                    stacklevel=3,
                )
                return
            raise CheckpointError(
                f"checkpoint {path} is truncated or not a recipe checkpoint: it does not end "
                f"with the SHA-256 seal save_checkpoint writes ({size} bytes). Resume from an "
                "intact copy, or start a fresh run without --resume."
            )
        expected = tail[22 + len(_SEAL) :].decode("ascii", "replace")
        sha = hashlib.sha256()
        f.seek(0)
        remaining = size - _SEAL_LEN - 2
        while remaining > 0:
            chunk = f.read(min(1 << 20, remaining))
            if not chunk:
                break
            sha.update(chunk)
            remaining -= len(chunk)
        sha.update(b"\x00\x00")  # the comment length as torch wrote it, before sealing
    if sha.hexdigest() != expected:
        raise CheckpointError(
            f"checkpoint {path} is corrupt: its SHA-256 is {sha.hexdigest()[:16]}... but it "
            f"was written as {expected[:16]}... (bytes changed on disk or in a copy). Resume "
            "from an intact copy, or start a fresh run without --resume."
        )


def _check_finite_state(state: dict[str, Any], where: str) -> None:
    """Raise a :class:`CheckpointError` naming the first learned entry holding NaN or inf."""
    for key, value in state.items():
        if key in DATA_ENTRIES:
            continue
        bad = _first_non_finite(value, str(key))
        if bad is not None:
            name, count, total = bad
            raise CheckpointError(
                f"{where} the entry {name} holds {count} non-finite value(s) (NaN or inf) out "
                f"of {total}: the run that wrote it had diverged. Resume from an earlier "
                "checkpoint, and lower the learning rate or clip gradients harder."
            )


def _first_non_finite(value: Any, name: str) -> tuple[str, int, int] | None:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            finite = torch.isfinite(value)
            if not bool(finite.all()):
                return name, int((~finite).sum()), value.numel()
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (name, 1, 1)
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, entry in items:
        bad = _first_non_finite(entry, f"{name}.{key}")
        if bad is not None:
            return bad
    return None


def load_checkpoint(path: str | Path, cfg: RunConfig | None = None) -> dict[str, Any]:
    """Read and verify a checkpoint (:func:`read_checkpoint`), check that ``cfg`` may resume
    it (:func:`check_resume_config`), and restore the global RNGs."""
    state = read_checkpoint(path)
    if cfg is not None:
        check_resume_config(cfg, state.get("config", {}), path)
    set_rng_state(state["rng"])
    return state


def check_resume_config(cfg: RunConfig, saved: dict[str, Any], path: str | Path) -> None:
    """The resume rule: a resumed run keeps the hyperparameters it was started with.

    Only the flags in ``cfg.RESUME_MAY_CHANGE`` (the budget, evaluation and checkpoint
    intervals, output folder, threads...) may differ from the checkpoint's config; any other
    difference is refused, naming the flags, so the config saved by the resumed run is
    what actually ran. (The optimizer's state, learning rate included, comes from the
    checkpoint: a new ``--lr`` would otherwise be recorded but not used.)

    Raises:
        CheckpointError: naming each changed flag, its checkpoint value and the given one.
    """
    allowed = getattr(cfg, "RESUME_MAY_CHANGE", frozenset())
    changed = []
    for name, value in dataclasses.asdict(cfg).items():
        if name in allowed or name not in saved:
            continue
        old = saved[name]
        same = old == value or (
            isinstance(old, float) and isinstance(value, float) and math.isnan(old)
            and math.isnan(value)
        )  # fmt: skip
        if not same:
            changed.append(f"--{name.replace('_', '-')} {value!r} (checkpoint: {old!r})")
    if changed:
        raise CheckpointError(
            f"--resume {path}: a resumed run keeps the hyperparameters it was started with, "
            f"but these flags differ from the checkpoint's: {'; '.join(changed)}. Drop them "
            "(or pass the checkpoint's values), or start a fresh run without --resume. Flags "
            f"that may change on resume: {', '.join(sorted(allowed))}."
        )


@dataclasses.dataclass
class RunCounters:
    """Where a run stands: frames done, wall-clock, last evaluation, next evaluation and checkpoint.

    Iterating yields the fields in order, so the older tuple unpacking
    ``frames, wall, eval_return, next_eval, next_ckpt = run_counters(cfg, state)`` still works.
    """

    frames: int
    """Frames collected so far."""
    wall: float
    """Wall-clock seconds so far (carried over resumes)."""
    eval_return: float
    """The latest evaluation's mean return (nan before the first)."""
    next_eval: int
    """Frame count at which the next evaluation happens."""
    next_ckpt: int
    """Frame count at which the next checkpoint is written."""

    def __iter__(self) -> Iterator[Any]:
        return iter(dataclasses.astuple(self))


def run_counters(cfg: RunConfig, state: dict[str, Any] | None = None) -> RunCounters:
    """The run's counters: fresh, or where ``state`` stopped.

    ``state`` is a checkpoint read by :func:`load_checkpoint` (``None`` for a fresh run).

    Example:
        >>> run_counters(RunConfig(eval_every=10, checkpoint_every=20))
        RunCounters(frames=0, wall=0.0, eval_return=nan, next_eval=10, next_ckpt=20)
        >>> frames, wall, eval_return, next_eval, next_ckpt = run_counters(RunConfig())
    """
    if state is None:
        return RunCounters(0, 0.0, float("nan"), cfg.eval_every, cfg.checkpoint_every)
    return RunCounters(
        frames=state["frames"],
        wall=state["wall"],
        eval_return=state.get("eval_return", float("nan")),
        next_eval=state["next_eval"],
        next_ckpt=state["next_ckpt"],
    )


class AttrState:
    """``state_dict`` / ``load_state_dict`` for counters kept in plain attributes of an object.

    Lets a checkpoint treat e.g. a ``HardUpdate``'s ``counter`` like a module's state.

    Example:
        >>> from types import SimpleNamespace
        >>> counter = SimpleNamespace(updates=3)
        >>> AttrState(counter, "updates").state_dict()
        {'updates': 3}
        >>> AttrState(counter, "updates").load_state_dict({"updates": 7}); counter.updates
        7
    """

    def __init__(self, obj: Any, *names: str) -> None:
        missing = [n for n in names if not hasattr(obj, n)]
        if missing:
            raise AttributeError(
                f"{type(obj).__name__} has no attribute(s) {missing} to checkpoint"
            )
        self.obj, self.names = obj, names

    def state_dict(self) -> dict[str, Any]:
        return {name: getattr(self.obj, name) for name in self.names}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name in self.names:
            setattr(self.obj, name, state[name])


def counters_state(
    cfg: RunConfig, *, frames: int, wall: float, eval_return: float, next_eval: int, next_ckpt: int
) -> dict[str, Any]:
    """The run's config and counters, for a checkpoint; :func:`run_counters` reads them back."""
    return {
        "config": dataclasses.asdict(cfg),
        "frames": frames,
        "next_eval": next_eval,
        "next_ckpt": next_ckpt,
        "wall": wall,
        "eval_return": eval_return,
    }


def buffer_state_dict(buffer: Any) -> dict[str, Any]:
    """A replay buffer's contents, write cursor and sampler state (priorities), for a checkpoint."""
    return {
        "storage": buffer.storage.state_dict(),
        "writer": buffer.writer.state_dict(),
        "sampler": buffer.sampler.state_dict(),
    }


def load_buffer_state_dict(buffer: Any, state: dict[str, Any]) -> None:
    """Restore what :func:`buffer_state_dict` saved into a buffer built the same way."""
    buffer.storage.load_state_dict(state["storage"])
    buffer.writer.load_state_dict(state["writer"])
    buffer.sampler.load_state_dict(state["sampler"])


def action_half_range(action_spec: Any) -> float:
    """Half the width of a bounded action spec (the largest over its dimensions).

    Exploration and smoothing noise are given in units of it, as in TD3's paper and
    CleanRL: ``0.1`` means 10% of the action range whatever the task's bounds.

    Example:
        >>> from rl_envs import Bounded
        >>> action_half_range(Bounded(-3.0, 3.0, shape=(1,)))
        3.0
    """
    return float(((action_spec.space.high - action_spec.space.low) / 2).max())


def action_clip(action_spec: Any) -> Any:
    """A transform that clips actions to ``action_spec``'s bounds on their way into the env.

    For an unsquashed Gaussian policy, as SB3 and CleanRL use on MuJoCo: the policy's own
    sample stays in the batch (it is what the loss scores), the env gets it clipped. The
    env outside the transform accepts any real action, so its action spec is unbounded
    (samples beyond the bounds are in spec there, and no out-of-spec warning fires).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_envs import Bounded
        >>> clip = action_clip(Bounded(-1.0, 1.0, shape=(2,)))
        >>> clip.inv(TensorDict(action=torch.tensor([3.0, -0.5])))["action"]
        tensor([ 1.0000, -0.5000])
        >>> from rl_envs import Unbounded
        >>> isinstance(clip.transform_leaf_spec_inv(Bounded(-1.0, 1.0, shape=(2,))), Unbounded)
        True
    """
    from rl_envs import ClipTransform, Unbounded

    class ClipIntoBounds(ClipTransform):
        def transform_leaf_spec_inv(self, spec: Any) -> Any:
            return Unbounded(shape=spec.shape, device=spec.device, dtype=spec.dtype)

    low, high = action_spec.space.low, action_spec.space.high
    if bool((low != low.flatten()[0]).any()) or bool((high != high.flatten()[0]).any()):
        raise ValueError(
            "action_clip needs the same bounds in every action dimension, got "
            f"low={low.tolist()}, high={high.tolist()}; use the tanh-squashed policy instead."
        )
    return ClipIntoBounds(
        in_keys_inv=["action"], low=float(low.flatten()[0]), high=float(high.flatten()[0])
    )


def normalized_env(
    base: Any,
    vecnorm: Any | None,
    *,
    obs_clip: float = float("inf"),
    reward_gamma: float | None = None,
    clip_actions: bool = False,
) -> Any:
    """``base`` behind SB3 VecNormalize's chain, the on-policy recipes' one way to build it.

    Observations normalised by ``vecnorm`` (none when ``None``) and clipped to ``obs_clip``,
    then float32; step counts and episode returns (logged raw); training rewards scaled by
    the discounted return's std when ``reward_gamma`` is given; continuous actions clipped
    to their bounds on the way into the env when ``clip_actions`` (an unsquashed Gaussian).

    Example:
        >>> from rl_envs import VecNorm
        >>> env = normalized_env(make_base_env("Pendulum-v1"), VecNorm(in_keys=["observation"]),
        ...                      obs_clip=10.0, reward_gamma=0.99, clip_actions=True)
        >>> [type(t).__name__ for t in env.transform]  # doctest: +NORMALIZE_WHITESPACE
        ['VecNorm', 'ClipTransform', 'DoubleToFloat', 'StepCounter', 'RewardSum',
         'NormalizeReward', 'ClipIntoBounds']
    """
    from rl_envs import (
        ClipTransform,
        Compose,
        DoubleToFloat,
        NormalizeReward,
        RewardSum,
        StepCounter,
        TransformedEnv,
    )

    transforms: list[Any] = []
    if vecnorm is not None:
        transforms.append(vecnorm)
        if obs_clip != float("inf"):
            transforms.append(ClipTransform(["observation"], low=-obs_clip, high=obs_clip))
    transforms += [DoubleToFloat(), StepCounter(), RewardSum()]
    if reward_gamma is not None:  # after RewardSum: logged returns stay raw
        transforms.append(NormalizeReward(gamma=reward_gamma))
    if clip_actions and base.action_spec.dtype.is_floating_point:
        transforms.append(action_clip(base.action_spec))
    return TransformedEnv(base, Compose(*transforms))


def copy_frozen_stats(source: Any | None, target: Any | None) -> None:
    """Give ``target`` (an evaluation env's VecNorm) ``source``'s statistics, frozen.

    Example:
        >>> from rl_envs import VecNorm
        >>> train, held = VecNorm(in_keys=["observation"]), VecNorm(in_keys=["observation"])
        >>> copy_frozen_stats(train, held); held.frozen
        True
    """
    if source is not None and target is not None:
        target.load_state_dict(source.state_dict())
        target.frozen = True


def stochastic_actor(
    body: nn.Module, action_spec: Any, *, tanh_squash: bool = True, log_std_init: float = 0.0
) -> Any:
    """The on-policy recipes' policy head on ``body`` (observation -> one output per action).

    Discrete specs get a Categorical over ``body``'s logits; continuous ones a Gaussian with a
    state-independent log-std starting at ``log_std_init``, tanh-squashed into the bounds or
    left unsquashed (pair it with ``normalized_env(clip_actions=True)``: SB3, CleanRL).
    Samples carry their log-probability.

    Example:
        >>> from rl_envs import Bounded
        >>> actor = stochastic_actor(nn.Linear(3, 2), Bounded(-1.0, 1.0, shape=(2,)))
        >>> from tensordict import TensorDict
        >>> actor(TensorDict(observation=torch.zeros(3)))["action"].shape
        torch.Size([2])
    """
    from tensordict.nn import TensorDictModule
    from torch.distributions import Categorical

    from rl_modules import (
        AddStateIndependentNormalScale,
        IndependentNormal,
        ProbabilisticActor,
        TanhNormal,
    )

    if not action_spec.dtype.is_floating_point:
        params = TensorDictModule(body, in_keys=["observation"], out_keys=["logits"])
        return ProbabilisticActor(
            params,
            in_keys=["logits"],
            distribution_class=Categorical,
            spec=action_spec,
            return_log_prob=True,
        )
    scale = AddStateIndependentNormalScale(action_spec.shape[-1], init_value=log_std_init)
    params = TensorDictModule(
        nn.Sequential(body, scale), in_keys=["observation"], out_keys=["loc", "scale"]
    )
    return ProbabilisticActor(
        params,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal if tanh_squash else IndependentNormal,
        spec=action_spec,
        return_log_prob=True,
    )


def make_base_env(env: str, num_envs: int = 1, **gym_kwargs: Any) -> Any:
    """The recipes' base env from ``--env``: a Gymnasium id, or ``"module:Class"`` of a native env.

    ``"rl_envs:HalfCheetahEnv"`` (any ``module:Class`` whose class takes ``num_envs``)
    builds that batched env with ``batch_size=[num_envs]``, e.g. the native MuJoCo tasks
    of ``rl_envs.mujoco``. Anything else is a Gymnasium id (Gymnasium's own
    ``"module:EnvId"`` form included) given to ``GymEnv``, a vector env when
    ``num_envs > 1``, with ``gym_kwargs``.

    Example:
        >>> make_base_env("rl_envs:HalfCheetahEnv", num_envs=2).batch_size
        torch.Size([2])
        >>> make_base_env("Pendulum-v1").batch_size
        torch.Size([])
    """
    import importlib

    module_name, _, attr = env.partition(":")
    if attr:
        try:
            native = getattr(importlib.import_module(module_name), attr, None)
        except ImportError:
            native = None
        if isinstance(native, type):
            return native(num_envs=num_envs)
    from rl_envs import GymEnv

    if num_envs > 1:
        return GymEnv(env, num_envs=num_envs, **gym_kwargs)
    return GymEnv(env, **gym_kwargs)


def evaluate(env: Any, policy: Any, episodes: int, seed: int | None = None) -> float:
    """Mean return of ``episodes`` deterministic episodes (mode of the policy, no exploration noise).

    ``seed`` re-seeds ``env`` first, so an evaluation depends on the policy only: the same
    episodes whether the run was resumed or not.
    """
    from tensordict.nn import InteractionType, set_interaction_type

    if seed is not None:
        env.set_seed(seed)
    returns = []
    with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
        for _ in range(episodes):
            rollout = env.rollout(1_000_000, policy, break_when_any_done=True)
            returns.append(rollout["next", "reward"].sum().item())
    return sum(returns) / len(returns)


class RunLogger:
    """Scalars to a tidy CSV (frames, name, value) and TensorBoard, plus a tqdm progress bar.

    Args:
        output_dir: where ``metrics.csv`` and the TensorBoard events go.
        total_frames: length of the progress bar.
        start_frames: frames already done (when resuming).
    """

    def __init__(self, output_dir: Path, total_frames: int, start_frames: int = 0) -> None:
        from torch.utils.tensorboard import SummaryWriter
        from tqdm import tqdm

        output_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = output_dir / "metrics.csv"
        new_file = not self.csv_path.exists() or start_frames == 0
        if not new_file:  # a resume: rows past the checkpoint will be logged again
            truncate_metrics(self.csv_path, start_frames)
        self._csv_file = self.csv_path.open("w" if new_file else "a", newline="")
        self._csv = csv.writer(self._csv_file)
        if new_file:
            self._csv.writerow(["frames", "name", "value"])
        # TensorBoard hides the events a resumed run logs again (steps after the checkpoint)
        purge = {"purge_step": start_frames + 1} if start_frames > 0 else {}
        self._tb = SummaryWriter(str(output_dir / "tensorboard"), **purge)
        self._bar = tqdm(total=total_frames, initial=start_frames, unit="frames", smoothing=0.1)
        self.latest: dict[str, float] = {}

    def log(self, frames: int, **scalars: float) -> None:
        for name, value in scalars.items():
            value = float(value)
            self.latest[name] = value
            self._csv.writerow([frames, name, value])
            self._tb.add_scalar(name, value, frames)
        self._csv_file.flush()

    def log_episodes(self, frames: int, batch: Any) -> None:
        """Log ``train/return``: the mean ``episode_reward`` of the episodes ``batch`` finished."""
        finished = batch["next", "done"]
        if finished.any():
            self.log(
                frames, **{"train/return": batch["next", "episode_reward"][finished].mean().item()}
            )

    def advance(self, frames: int) -> None:
        self._bar.update(frames)
        shown = {k: f"{v:.1f}" for k, v in self.latest.items() if k.endswith("return")}
        self._bar.set_postfix(shown, refresh=False)

    def close(self) -> None:
        self._bar.close()
        self._tb.close()
        self._csv_file.close()


def truncate_metrics(csv_path: Path, frames: int) -> int:
    """Drop the rows of ``metrics.csv`` logged after ``frames`` (a resume logs them again).

    Rewritten atomically; returns how many rows were dropped.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "metrics.csv"
        >>> _ = path.write_text("frames,name,value\n10,loss,1.0\n20,loss,0.5\n")
        >>> truncate_metrics(path, 10), path.read_text().splitlines()
        (1, ['frames,name,value', '10,loss,1.0'])
    """
    with csv_path.open(newline="") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0] != ["frames", "name", "value"]:
        raise ValueError(
            f"{csv_path}: expected a metrics.csv with the header frames,name,value, got "
            f"{rows[0] if rows else 'an empty file'}. Move it away or resume into another "
            "--output-dir."
        )
    kept = [row for row in rows[1:] if row and int(row[0]) <= frames]
    dropped = len(rows) - 1 - len(kept)
    if dropped:
        tmp = csv_path.with_name(csv_path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            csv.writer(f).writerows([rows[0], *kept])
        os.replace(tmp, csv_path)
    return dropped


class ScalarMeans:
    """Means of a loss output's scalar entries over the minibatches of one batch, for the log.

    The losses already return their diagnostics (PPO's ``clip_fraction``, ``kl_approx``,
    ``explained_variance``, ``entropy``, ``ESS``); a recipe adds each minibatch's output and
    logs the means once per batch. Non-scalar entries are skipped.

    Example:
        >>> means = ScalarMeans()
        >>> means.add({"kl_approx": torch.tensor(0.1), "loss": torch.tensor(1.0)})
        >>> means.add({"kl_approx": torch.tensor(0.3), "loss": torch.tensor(3.0)})
        >>> {k: round(v, 3) for k, v in means.pop().items()}
        {'kl_approx': 0.2, 'loss': 2.0}
        >>> means.pop()
        {}
    """

    def __init__(self) -> None:
        self._sums: dict[str, torch.Tensor] = {}
        self._counts: dict[str, int] = {}

    def add(self, losses: Any) -> None:
        for name, value in losses.items():
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                value = value.detach().reshape(())
                self._sums[name] = self._sums[name] + value if name in self._sums else value
                self._counts[name] = self._counts.get(name, 0) + 1

    def pop(self) -> dict[str, float]:
        """The means since the last ``pop``, and a fresh start."""
        means = {name: float(total) / self._counts[name] for name, total in self._sums.items()}
        self._sums, self._counts = {}, {}
        return means


def plot_learning_curve(csv_path: Path, png_path: Path, title: str) -> None:
    """Plot every ``*return`` series of ``metrics.csv`` against frames."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, tuple[list[int], list[float]]] = {}
    with csv_path.open() as f:
        for row in csv.DictReader(f):
            if row["name"].endswith("return"):
                xs, ys = series.setdefault(row["name"], ([], []))
                xs.append(int(row["frames"]))
                ys.append(float(row["value"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, (xs, ys) in sorted(series.items()):
        ax.plot(xs, ys, label=name)
    ax.set(xlabel="frames", ylabel="return", title=title)
    ax.grid(alpha=0.3)
    if series:
        ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)


class Stopwatch:
    """Wall-clock that survives a resume: elapsed time carries over in checkpoints."""

    def __init__(self, already: float = 0.0) -> None:
        self._start = time.perf_counter() - already

    def elapsed(self) -> float:
        return time.perf_counter() - self._start


def write_summary(output_dir: Path, **summary: Any) -> str:
    """Write and return the one-line JSON summary printed at the end of a run."""
    line = json.dumps(summary, sort_keys=True)
    (output_dir / "summary.json").write_text(line + "\n")
    return line


def finish_run(
    collector: Any,
    logger: RunLogger,
    clock: Stopwatch,
    out: Path,
    *,
    algo: str,
    env: str,
    frames: int,
    eval_return: float,
) -> dict[str, object]:
    """End a run: stop the collector, close the logs, plot the curve, print and write the summary.

    Returns the summary (``algo``, ``env``, ``frames``, ``wall_clock_s``, ``final_eval_return``).
    """
    collector.shutdown()
    logger.close()
    plot_learning_curve(logger.csv_path, out / "learning_curve.png", f"{algo.upper()} {env}")
    summary: dict[str, object] = {
        "algo": algo,
        "env": env,
        "frames": frames,
        "wall_clock_s": round(clock.elapsed(), 1),
        "final_eval_return": eval_return,
    }
    print(write_summary(out, **summary))
    return summary
