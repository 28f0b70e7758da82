"""Loading the compiled segment-tree extension (JIT, cached per torch version).

Why JIT and not build time: a C++ extension links against one exact libtorch.
A wheel compiled at build time breaks with ``undefined symbol`` errors as soon
as the user's torch differs from the build's, and would tie this pure-Python
package to one torch and one CUDA version. Compiling on first use against the
running torch (``torch.utils.cpp_extension.load`` with ninja) always matches;
the result is cached under a directory named after the torch version, the
Python version, torch's build (git revision, CUDA version, C++ ABI), the machine's
architecture and a hash of the sources, so each (torch build, source) pair is compiled
once per machine, shared by every virtual environment holding that torch, and a
different torch never loads a stale library. A library built once is loaded directly
(``torch.ops.load_library``), without running ninja again: the compile command names
torch's include directory, which differs between virtual environments, and ninja would
rebuild on every such difference. Compiling on a machine with a CUDA toolkit but no GPU
does not print torch's "No CUDA runtime is found" line for the CPU build.

The extension only registers ``torch.ops.rl_buffers_segtree.*`` operators
(no pybind11 module), which keeps the compile short. Every failure (no
compiler, a compile error, a load error) is caught and reported as a reason
string: importing :mod:`rl_buffers` never touches the extension.
"""

from __future__ import annotations

import hashlib
import logging
import platform
import shutil
import sys
import threading
from pathlib import Path

import torch

_CSRC = Path(__file__).parent / "csrc"
CPU_SOURCES = ("segment_tree_cpu.cpp",)
CUDA_SOURCES = ("segment_tree_cuda_binding.cpp", "segment_tree_cuda.cu")

_lock = threading.RLock()
# device kind ("cpu" / "cuda") -> None when loaded, else the reason it failed.
_results: dict[str, str | None] = {}


def _sources_hash(names: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for name in names:
        digest.update((_CSRC / name).read_bytes())
    return digest.hexdigest()[:12]


def build_directory(kind: str) -> Path:
    """The cache directory of the compiled extension for this torch and Python.

    Args:
        kind: ``"cpu"`` or ``"cuda"``.

    Returns:
        ``~/.cache/rl_buffers/torch-<version>-py<major><minor>-<build hash>/<kind>-<source hash>``,
        where the build hash names torch's build (its git revision, CUDA version and C++
        ABI) and the machine: every venv holding the same torch build shares one compile.

    Examples:
        >>> build_directory("cpu").parent.name.startswith("torch-")
        True
    """
    names = CPU_SOURCES if kind == "cpu" else CPU_SOURCES + CUDA_SOURCES
    build = "|".join(
        (
            torch.__version__,
            str(getattr(torch.version, "git_version", "")),
            str(torch.version.cuda),
            str(torch._C._GLIBCXX_USE_CXX11_ABI),
            platform.machine(),
            sys.implementation.cache_tag,
        )
    )
    build_hash = hashlib.sha256(build.encode()).hexdigest()[:8]
    version = torch.__version__.replace("+", "_")
    tag = f"torch-{version}-py{sys.version_info[0]}{sys.version_info[1]}-{build_hash}"
    return Path.home() / ".cache" / "rl_buffers" / tag / f"{kind}-{_sources_hash(names)}"


def _compile(kind: str) -> None:
    # torch logs "No CUDA runtime is found, using CUDA_HOME=..." when this module is first
    # imported on a machine with a CUDA toolkit but no GPU: noise for a CPU build.
    cpp_logger = logging.getLogger("torch.utils.cpp_extension")
    level = cpp_logger.level
    if kind == "cpu":
        cpp_logger.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        cpp_logger.setLevel(level)

    name = "rl_buffers_segtree_cpu" if kind == "cpu" else "rl_buffers_segtree_cuda"
    directory = build_directory(kind)
    library, built = directory / f"{name}.so", directory / "built.ok"
    if built.exists() and library.exists():
        # Built before, by this or another venv with the same torch build: load the
        # library as it is (running ninja again would rebuild it whenever the compile
        # command differs, e.g. in torch's include path from another venv).
        try:
            torch.ops.load_library(str(library))
            return
        except OSError:  # a damaged or foreign library: build it again below
            built.unlink(missing_ok=True)
    if shutil.which("ninja") is None and not cpp_extension.is_ninja_available():
        raise RuntimeError("ninja is not installed (pip install ninja)")
    if kind == "cpu":
        names, with_cuda = CPU_SOURCES, False
    else:
        if cpp_extension.CUDA_HOME is None:
            raise RuntimeError("no CUDA toolkit (nvcc) was found; set up CUDA_HOME")
        names, with_cuda = CUDA_SOURCES, True
    directory.mkdir(parents=True, exist_ok=True)
    cpp_extension.load(
        name=name,
        sources=[str(_CSRC / n) for n in names],
        build_directory=str(directory),
        extra_cflags=["-O3"],
        extra_cuda_cflags=["-O3"],
        with_cuda=with_cuda,
        is_python_module=False,
        verbose=False,
    )
    built.write_text(f"{torch.__version__}\n")


def load(kind: str) -> str | None:
    """Compiles (once, cached) and loads the extension for a device kind.

    Tried at most once per process and kind; later calls return the first answer.

    Args:
        kind: ``"cpu"`` (the C++ kernels) or ``"cuda"`` (adds the CUDA kernels).

    Returns:
        ``None`` when the operators are ready, else the reason they are not.

    Examples:
        >>> reason = load("cpu")
        >>> reason is None or isinstance(reason, str)
        True
    """
    with _lock:
        if kind in _results:
            return _results[kind]
        reason: str | None = None
        try:
            if kind == "cuda":
                cpu_reason = load("cpu")
                if cpu_reason is not None:
                    raise RuntimeError(cpu_reason)
                if not torch.cuda.is_available():
                    raise RuntimeError("CUDA is not available in this torch build or machine")
            _compile(kind)
        except Exception as err:  # a compiler, a linker or a loader error: all mean "fall back"
            text = " ".join(str(err).split())
            reason = f"{type(err).__name__}: {text[:400]}"
        _results[kind] = reason
        return reason
