"""Serve ``torchrl.*`` import paths from the ``rl_*`` packages: import paths only, no behaviour.

``install()`` puts a meta-path finder first on ``sys.meta_path``. For a module path under a
prefix of ``scope.IMPORT_MAP`` (``torchrl.envs``, ``torchrl.data``...) it creates an alias
module whose attributes are looked up, in order, in the mapped ``rl_*`` modules: the same
sub-path inside the package when it exists (``torchrl.objectives.value.functional`` ->
``rl_objectives.value.functional``), then the package root. Two test-support paths are real
modules: ``torchrl.testing`` (TorchRL's own test helpers, copied under
``torchrl_tests/_torchrl_testing``) and ``torchrl._utils`` (``torchrl_support_utils.py``: the
few private helpers those test helpers import).

A name the packages do not provide is recorded as missing. In strict mode
(``CONFORMANCE_STRICT=1``) it raises ``ImportError`` at import, as in any Python program, so the
whole test file fails to collect. By default (lenient mode) the import binds a stand-in that
raises ``MissingNameError`` (an ``ImportError``) the moment a test *uses* it (call, subclass
instantiation, ``isinstance``, truth test, iteration; reading an attribute gives another stand-in), so one missing name fails the tests that need it
and not the whole file. Private ``_has_<lib>`` flags are answered by whether ``<lib>`` is
installed (a fact about this machine, not a behaviour of the packages).
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from scope import IMPORT_MAP, mapped_prefix  # noqa: E402

TESTING_DIR = HERE / "torchrl_tests" / "_torchrl_testing"
ALL_PACKAGES = ("rl_envs", "rl_modules", "rl_collectors", "rl_buffers", "rl_objectives", "rl_llm")
# Names TorchRL exposes under torchrl.envs(.utils) that live in rl_modules here (DESIGN.md).
EXPLORATION_NAMES = frozenset(
    {
        "ExplorationType",
        "set_exploration_type",
        "exploration_type",
        "InteractionType",
        "set_interaction_type",
        "interaction_type",
    }
)
HAS_FLAG_LIBS = {
    "gym": ("gymnasium", "gym"),
    "gymnasium": ("gymnasium",),
    "dm_control": ("dm_control",),
    "mujoco": ("mujoco",),
    "tv": ("torchvision",),
    "torchvision": ("torchvision",),
    "transformers": ("transformers",),
    "ray": ("ray",),
    "tensorboard": ("tensorboard",),
    "triton": ("triton",),
    "h5py": ("h5py",),
    "pygame": ("pygame",),
    "scipy": ("scipy",),
    "dmc": ("dm_control",),
    "ale": ("ale_py",),
    "atari_py": ("atari_py",),
    "mo": ("mo_gymnasium",),
    "minigrid": ("minigrid",),
    "envpool": ("envpool",),
    "functorch": ("torch.func",),
    "gym_robotics": ("gymnasium_robotics",),
    "chess": ("chess",),
    "procgen": ("procgen",),
    "zstandard": ("zstandard",),
    "matplotlib": ("matplotlib",),
    "vllm": ("vllm",),
    "sglang": ("sglang",),
    "datasets": ("datasets",),
    "trl": ("trl",),
    "mcp": ("mcp",),
    "vc": ("vc_models",),
    "r3m": ("r3m",),
}

STRICT = os.environ.get("CONFORMANCE_STRICT", "0") == "1"
MISSING: dict[str, str] = {}  # "torchrl.x.Name" -> where it was looked for
FOUND_ELSEWHERE: dict[str, str] = {}  # "torchrl.x.Name" -> "rl_pkg" outside the mapped ones


class MissingNameError(ImportError):
    """A TorchRL public name that the ``rl_*`` packages do not provide."""

    def __init__(self, qualname: str, action: str) -> None:
        super().__init__(
            f"missing name {qualname} (looked in {MISSING.get(qualname, '?')}); "
            f"the test tried to {action} it"
        )
        self.missing_name = qualname


class _MissingMeta(type):
    """Metaclass of the stand-ins: every use raises ``MissingNameError``."""

    def __call__(cls, *args, **kwargs):
        if cls.__dict__.get("_deferred") and len(args) == 1 and callable(args[0]) and not kwargs:
            return _raise_when_run(cls._missing_name, args[0])
        if _called_at_import(sys._getframe(1)):
            # `@missing_decorator(arg)` above a test: fail the decorated tests, not the file.
            return _MissingMeta(cls.__name__, (), {"_missing_name": cls._missing_name,
                                                   "_deferred": True, "__module__": "torchrl_shim"})  # fmt: skip
        raise MissingNameError(cls._missing_name, "call / instantiate")

    def __getattr__(cls, attr):
        if attr.startswith("__") or attr == "_missing_name":
            raise AttributeError(attr)
        # Reading an attribute (a default argument at class definition, an enum member) is not
        # yet a use: hand back a stand-in for the same missing name.
        return _stand_in(cls._missing_name, f"{cls.__name__}.{attr}")

    def __instancecheck__(cls, obj):
        raise MissingNameError(cls._missing_name, "isinstance-check against")

    def __subclasscheck__(cls, sub):
        raise MissingNameError(cls._missing_name, "issubclass-check against")

    def __getitem__(cls, item):
        raise MissingNameError(cls._missing_name, "index")

    def __iter__(cls):
        raise MissingNameError(cls._missing_name, "iterate")

    def __bool__(cls):
        raise MissingNameError(cls._missing_name, "test the truth of")

    def __repr__(cls):
        return f"<missing {cls._missing_name}>"


def _called_at_import(frame) -> bool:
    """Whether the call runs in a module body or a class body (decorators, defaults)."""
    return frame.f_code.co_name == "<module>" or (
        "__module__" in frame.f_locals and "__qualname__" in frame.f_locals
    )


def _raise_when_run(qualname: str, obj):
    """What a missing decorator gives back: the test fails when run, with the name."""
    if isinstance(obj, type):
        for attr, value in list(vars(obj).items()):
            if attr.startswith("test") and callable(value):
                setattr(obj, attr, _raise_when_run(qualname, value))
        return obj

    @functools.wraps(obj)
    def wrapper(*args, **kwargs):
        raise MissingNameError(qualname, "decorate a test with")

    return wrapper


def _stand_in(qualname: str, short: str | None = None) -> type:
    short = short or qualname.rsplit(".", 1)[-1]
    return _MissingMeta(short, (), {"_missing_name": qualname, "__module__": "torchrl_shim"})


def _importable(name: str) -> types.ModuleType | None:
    try:
        if importlib.util.find_spec(name) is None:
            return None
    except (ImportError, ValueError):
        return None
    return importlib.import_module(name)


def _has_flag(attr: str) -> bool | None:
    if not attr.startswith("_has_"):
        return None
    libs = HAS_FLAG_LIBS.get(attr[len("_has_") :])
    if libs is None:
        return None
    return any(importlib.util.find_spec(lib) is not None for lib in libs)


class _AliasModule(types.ModuleType):
    """``torchrl.<path>``: attributes come from the mapped ``rl_*`` modules, in order."""

    def __init__(self, name: str, targets: list[tuple[str, frozenset[str] | None]]) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__file__ = None
        self._shim_targets = targets

    def __getattr__(self, attr: str):
        if attr.startswith("__") or attr == "_shim_targets":
            raise AttributeError(attr)
        qualname = f"{self.__name__}.{attr}"
        if qualname in _TORCHRL_MODULES:  # a sub-module: `from torchrl.envs import transforms`
            return importlib.import_module(qualname)
        for module_name, only in self._shim_targets:
            if only is not None and attr not in only:
                continue
            module = _importable(module_name)
            if module is not None and hasattr(module, attr):
                return getattr(module, attr)
        flag = _has_flag(attr)
        if flag is not None:
            return flag
        if not attr.startswith("_"):
            for package in ALL_PACKAGES:
                module = _importable(package)
                if module is not None and attr in getattr(module, "__all__", ()):
                    FOUND_ELSEWHERE[qualname] = package
                    return getattr(module, attr)
        MISSING[qualname] = ", ".join(m for m, _ in self._shim_targets) or "no rl_* package"
        if STRICT:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        stand_in = _stand_in(qualname)
        setattr(self, attr, stand_in)
        return stand_in


def _targets(fullname: str) -> list[tuple[str, frozenset[str] | None]]:
    prefix = mapped_prefix(fullname)
    if prefix is None:
        return []
    if prefix == "torchrl":  # torchrl and torchrl._utils: the package roots only
        return [(base, None) for base in IMPORT_MAP[prefix]]
    rest = fullname[len(prefix) :].lstrip(".").split(".") if fullname != prefix else []
    targets: list[tuple[str, frozenset[str] | None]] = []
    for entry in IMPORT_MAP[prefix]:
        base, _, only_kind = entry.partition(":")
        only = EXPLORATION_NAMES if only_kind == "exploration" else None
        for depth in range(len(rest), 0, -1):  # deepest matching sub-path first
            candidate = ".".join([base, *rest[:depth]])
            if not any(part.startswith("_") for part in rest[:depth]) and _spec_exists(candidate):
                targets.append((candidate, only))
        targets.append((base, only))
    return targets


def _spec_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _load_torchrl_modules() -> frozenset[str]:
    listing = HERE / "torchrl_modules.txt"
    return frozenset(listing.read_text().split()) if listing.exists() else frozenset()


_TORCHRL_MODULES = _load_torchrl_modules()


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return _AliasModule(spec.name, _targets(spec.name))

    def exec_module(self, module):
        if module.__name__ == "torchrl._utils":
            path = HERE / "torchrl_support_utils.py"
            code = compile(path.read_text(), str(path), "exec")
            exec(code, module.__dict__)


class TorchRLFinder(importlib.abc.MetaPathFinder):
    """Finds ``torchrl`` and ``torchrl.*``; leaves everything else to the normal finders."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torchrl" and not fullname.startswith("torchrl."):
            return None
        if fullname == "torchrl.testing":
            return importlib.util.spec_from_file_location(
                fullname,
                TESTING_DIR / "__init__.py",
                submodule_search_locations=[str(TESTING_DIR)],
            )
        if fullname.startswith("torchrl.testing."):
            return None  # the normal path finder finds them through torchrl.testing.__path__
        mapped = fullname == "torchrl" or _targets(fullname) or fullname == "torchrl._utils"
        known = fullname in _TORCHRL_MODULES
        if not mapped and not (known and not STRICT):
            return None  # not a TorchRL module we serve: ModuleNotFoundError as usual
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (idempotent); refuse a real torchrl."""
    if any(isinstance(f, TorchRLFinder) for f in sys.meta_path):
        return
    real = [p for p in sys.path if p and (Path(p) / "torchrl" / "__init__.py").exists()]
    if real:
        raise RuntimeError(f"a real torchrl is installed at {real}: the shim must run without it")
    sys.meta_path.insert(0, TorchRLFinder())
