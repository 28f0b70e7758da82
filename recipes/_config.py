"""The recipes' flags: a config dataclass becomes a command line, every number range-checked.

Standard library only, so that a recipe parses its flags (and answers ``--help``) before it
imports torch, gymnasium, tensordict or the ``rl_*`` packages: each recipe defines its
``Config`` first, calls :func:`parse_config` when run as a script, and only then imports the
heavy libraries. ``_common`` re-exports every name here.

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
import dataclasses
import inspect
import itertools
import math
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

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

    A recipe overrides a default by restating the field (``eval_every: int = 2_000``); its
    doc is inherited unless the recipe writes a new one under it.
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
    output_dir: str = ""
    """Folder for logs, checkpoints, the learning curve and the summary (default: a new
    runs/<algo>/<start time>, with runs/<algo>/latest pointing at it; --smoke: a new
    runs/<algo>/smoke-<start time>; --resume: the checkpoint's folder)."""
    run_name: str = ""
    """Name of the run's folder under runs/<algo>/ instead of its start time."""
    overwrite: bool = False
    """Replace the run already in the output folder (its checkpoints, metrics, summary)."""
    resume: str = ""
    """Checkpoint to continue from, exactly where it stopped (in its folder, unless
    --output-dir says otherwise)."""
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
         "log_every", "compile", "kernels", "device", "run_name", "overwrite"}
    )  # fmt: skip
    """Flags a resumed run may change: the budget and the run's plumbing, not the algorithm."""

    def __post_init__(self) -> None:
        check_fields(type(self), dataclasses.asdict(self))
        if self.resume and self.overwrite:
            raise ValueError(
                "--resume continues the run in its folder, --overwrite replaces the run there: "
                "pass one of them."
            )
        if self.run_name and ("/" in self.run_name or self.run_name in (".", "..", "latest")):
            raise ValueError(
                f"--run-name {self.run_name!r}: expected a plain folder name (no '/', not "
                "'latest'). Pass --output-dir to choose any folder."
            )
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
    presets = getattr(cls, "PRESETS", {})
    for field in _recipe_fields_first(cls):
        default = field.default
        kind = type(default) if default is not None else str
        # a bare boolean flag (``--smoke``) means true; ``--smoke false`` still reads a value
        flag_only = {"nargs": "?", "const": True} if kind is bool else {}
        doc = docs.get(field.name, COMMON_FIELDS_DOC.get(field.name, ""))
        if field.name == "preset":
            doc += " " + describe_presets(presets)
        parser.add_argument(
            "--" + field.name.replace("_", "-"),
            type=_parse_bool if kind is bool else checks.get(field.name, kind),
            default=None,
            help=f"{doc} (default: {default!r})".replace("%", "%%"),
            **flag_only,
        )
    args = vars(parser.parse_args(argv))
    values = {f.name: f.default for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
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


def describe_presets(presets: dict[str, dict[str, object]]) -> str:
    """The ``--preset`` help: every preset's name and the flags it sets.

    Example:
        >>> describe_presets({"fast": {"total_frames": 1000, "anneal_lr": False}})
        'Presets: fast (--total-frames 1000 --anneal-lr False).'
        >>> describe_presets({})
        'This recipe has no presets.'
    """
    if not presets:
        return "This recipe has no presets."
    described = []
    for name, sets in sorted(presets.items()):
        flags = " ".join(f"--{key.replace('_', '-')} {value}" for key, value in sets.items())
        described.append(f"{name} ({flags})")
    return "Presets: " + "; ".join(described) + "."


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


# -- the offline recipes' shared fields (bc, cql, iql, td3_bc) ----------------------------

SMOKE_OFFLINE: dict[str, object] = {
    "env": "Pendulum-v1",
    "dataset": "",
    "num_steps": 40,
    "batch_size": 32,
    "log_every": 10,
    "eval_every": 40,
    "eval_episodes": 1,
    "checkpoint_every": 20,
}
"""What every offline recipe's ``SMOKE`` starts from: an empty ``dataset`` makes a tiny one."""


@dataclasses.dataclass
class OfflineConfig(RunConfig):
    """The fields every offline recipe shares (a recipe's ``Config`` subclasses it)."""

    env: str = "HalfCheetah-v5"
    """Gymnasium id of the task the dataset was recorded on (evaluation env)."""
    dataset: str = "runs/make_dataset/latest/d4rl/halfcheetah-medium-v0.hdf5"
    """A D4RL HDF5 file, or a Minari id (e.g. local/halfcheetah/medium-v0) with --minari-root."""
    minari_root: str = ""
    """Minari's datasets folder; set it to read --dataset as a Minari id."""
    references: str = ""
    """JSON of random/expert returns for normalised scores (default: make_dataset's, found
    next to the dataset)."""
    num_steps: int = 100_000
    """Gradient steps in total."""
    batch_size: int = 256
    """Transitions per gradient step."""
    reward_scale: float = 1.0
    """Factor applied to the dataset's rewards before each update."""
    log_every: int = 1_000
    """Gradient steps between two log lines of the losses (their means)."""
    eval_every: int = 10_000
    """Gradient steps between deterministic evaluations."""
    checkpoint_every: int = 50_000
    """Gradient steps between checkpoints."""


def smoke_overrides(**extra: object) -> dict[str, object]:
    """A recipe's ``SMOKE``: the shared offline smoke budget plus the recipe's own overrides."""
    return {**SMOKE_OFFLINE, **extra}
