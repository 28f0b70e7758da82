"""Every check a developer or CI runs.

``uv run nox`` runs the default set: one isolated test session per package
(current Python, latest tensordict), the cross-package integration tests and
lint. ``uv run nox -t ci`` runs the slower checks CI adds after it: the fault
suite (``tests/faults``), the whole test set once more on tensordict 0.14, the
recipe smoke runs, the learning gate (PPO and DQN must still solve CartPole-v1)
and the wheel build. ``uv run nox -t matrix`` runs the package tests on every
installed Python (3.10-3.13) against tensordict 0.14 and the latest.
``uv run nox -s bench`` runs the benchmarks next to TorchRL 0.14.
``uv run nox -s conformance`` runs TorchRL 0.14's own test files against the packages
(not in the default set: it takes about an hour) and rewrites docs/conformance.md.

Isolation: a ``tests-rl-X`` venv is synced with ``uv sync --package rl-X``,
which is exact, so sibling packages are absent and importing one fails; the
session checks that before running the tests.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from datetime import date
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PACKAGES = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
CURRENT_PYTHON = (ROOT / ".python-version").read_text().strip()
TENSORDICT_014 = "tensordict>=0.14,<0.15"
TORCHRL_BENCH = "torchrl==0.14.1"
# `uv run nox` tells us which uv runs it; use the same binary even if it is not on PATH.
UV = os.environ.get("UV", "uv")

nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
# `uv run nox` (the README's test command): every package alone, the packages together, lint.
nox.options.sessions = [*(f"tests-{p}" for p in PACKAGES), "integration", "lint"]
# `uv run nox -t ci` (CI runs it after the default set): the slower checks.
CI_TAG = "ci"
FAULTS = ROOT / "tests" / "faults"


def _module(package: str) -> str:
    return package.replace("-", "_")


def _sync(session: nox.Session, *args: str) -> None:
    """Exact ``uv sync`` of the locked workspace into this session's venv."""
    session.run_install(
        UV,
        "sync",
        "--locked",
        "--python",
        session.virtualenv.location,
        *args,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )


def _sync_package(session: nox.Session, package: str) -> None:
    _sync(session, "--package", package, "--all-extras", "--no-default-groups", "--group", "test")


def _sync_all(session: nox.Session) -> None:
    _sync(session, "--all-packages", "--all-extras", "--group", "dev")


def _use_tensordict(session: nox.Session, version: str) -> None:
    if version != "latest":
        session.run_install(UV, "pip", "install", "--python", session.virtualenv.location,
                            version, external=True)  # fmt: skip
    session.run("python", "-c", "import tensordict; print('tensordict', tensordict.__version__)")


def _assert_siblings_absent(session: nox.Session, package: str) -> None:
    siblings = [_module(p) for p in PACKAGES if p != package]
    session.run(
        "python",
        "-c",
        "import importlib.util, sys\n"
        f"present = [m for m in {siblings!r} if importlib.util.find_spec(m) is not None]\n"
        f"assert importlib.util.find_spec({_module(package)!r}), 'package under test missing'\n"
        "if present:\n"
        "    sys.exit(f'dependency rule broken: siblings importable: {present}')\n"
        f"print('isolated: {package} alone, siblings absent')",
    )


def _pytest(session: nox.Session, *test_dirs: Path, ignore: tuple[Path, ...] = ()) -> None:
    """Run pytest on the dirs that hold tests; say so plainly for those that hold none yet."""
    with_tests = [d for d in test_dirs if any(d.rglob("test_*.py"))]
    for empty in sorted(set(test_dirs) - set(with_tests)):
        session.log(f"no tests yet in {empty.relative_to(ROOT)}: nothing to run there")
    if with_tests:
        ignored = [f"--ignore={path}" for path in ignore]
        session.run("python", "-m", "pytest", *map(str, with_tests), *ignored, *session.posargs)


def _package_tests(session: nox.Session, package: str, tensordict: str) -> None:
    _sync_package(session, package)
    _use_tensordict(session, tensordict)
    _assert_siblings_absent(session, package)
    _pytest(session, ROOT / "packages" / package / "tests")


for _package in PACKAGES:

    @nox.session(name=f"tests-{_package}", python=CURRENT_PYTHON)
    def _tests(session: nox.Session, package: str = _package) -> None:
        """One package alone in a fresh venv, latest tensordict."""
        _package_tests(session, package, "latest")

    @nox.session(name=f"matrix-{_package}", python=PYTHONS, tags=["matrix"])
    @nox.parametrize("tensordict", [TENSORDICT_014, "latest"], ids=["td014", "td-latest"])
    def _matrix(session: nox.Session, tensordict: str, package: str = _package) -> None:
        """One package alone across Python versions and tensordict releases."""
        _package_tests(session, package, tensordict)


@nox.session(name="tests-tensordict-0.14", python=CURRENT_PYTHON, tags=[CI_TAG])
def tests_tensordict_014(session: nox.Session) -> None:
    """The whole test set (every package and the integration tests) on tensordict 0.14."""
    _sync_all(session)
    _use_tensordict(session, TENSORDICT_014)
    packages = (ROOT / "packages" / p / "tests" for p in PACKAGES)
    _pytest(session, *packages, ROOT / "tests", ignore=(FAULTS,))


@nox.session(python=CURRENT_PYTHON)
def integration(session: nox.Session) -> None:
    """Cross-package tests: every package installed together (the fault suite runs apart)."""
    _sync_all(session)
    _pytest(session, ROOT / "tests", ignore=(FAULTS,))


@nox.session(python=CURRENT_PYTHON, tags=[CI_TAG])
def faults(session: nox.Session) -> None:
    """The fault suite: crashed, stuck and stopped workers, full disks, corrupted files,
    hostile hyperparameters, NaN/inf inputs (docs/reliability.md)."""
    _sync_all(session)
    _pytest(session, FAULTS)


@nox.session(python=CURRENT_PYTHON, tags=[CI_TAG])
def recipes(session: nox.Session) -> None:
    """Every recipe end to end with a tiny budget (``--smoke``)."""
    _sync_all(session)
    scripts = sorted(p for p in (ROOT / "recipes").glob("*.py") if not p.name.startswith("_"))
    if not scripts:
        session.log("no recipes yet under recipes/: nothing to run")
    with tempfile.TemporaryDirectory() as out:
        for script in scripts:
            session.run("python", str(script), "--smoke", "--output-dir", f"{out}/{script.stem}")


@nox.session(python=CURRENT_PYTHON, tags=[CI_TAG])
def learning(session: nox.Session) -> None:
    """The learning gate: PPO and DQN on CartPole-v1, fixed seeds, must still solve it (~3 min)."""
    _sync_all(session)
    session.run("python", "scripts/learning_gate.py", *session.posargs)


@nox.session(python=CURRENT_PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, and the one dependency rule."""
    _sync(session, "--only-group", "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", "scripts/check_dependency_rule.py")


@nox.session(python=CURRENT_PYTHON, tags=[CI_TAG])
def build(session: nox.Session) -> None:
    """Build every wheel and sdist; install each wheel alone in a fresh venv and import it."""
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.run(UV, "build", "--all-packages", "--no-sources", "-o", str(dist), external=True)
    for package in PACKAGES:
        version = _declared_version(package)
        wheel = _one(dist.glob(f"{_module(package)}-{version}-*.whl"), f"{package} wheel")
        _one(dist.glob(f"{_module(package)}-{version}.tar.gz"), f"{package} sdist")
        with tempfile.TemporaryDirectory() as venv:
            session.run(UV, "venv", "-q", "--python", session.virtualenv.location + "/bin/python",
                        venv, external=True)  # fmt: skip
            session.run(UV, "pip", "install", "-q", "--python", venv, str(wheel), external=True)
            siblings = [_module(p) for p in PACKAGES if p != package]
            session.run(
                f"{venv}/bin/python",
                "-c",
                f"import importlib.util, {_module(package)} as m\n"
                f"assert m.__version__ == {version!r}, m.__version__\n"
                f"present = [s for s in {siblings!r} if importlib.util.find_spec(s)]\n"
                "assert not present, f'siblings installed alongside: {present}'\n"
                f"print('{wheel.name}: imports alone, version', m.__version__)",
                external=True,
            )


@nox.session(python=CURRENT_PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks side by side with TorchRL 0.14 (pass file names to run a subset)."""
    _sync_all(session)
    session.run_install(UV, "pip", "install", "--python", session.virtualenv.location,
                        TORCHRL_BENCH, TENSORDICT_014, external=True)  # fmt: skip
    scripts = [Path(a) for a in session.posargs] or sorted((ROOT / "benchmarks").glob("bench_*.py"))
    if not scripts:
        session.log("no benchmarks yet under benchmarks/")
    for script in scripts:
        session.run("python", str(script))


@nox.session(python=CURRENT_PYTHON, default=False)
def conformance(session: nox.Session) -> None:
    """TorchRL 0.14's own tests through an import shim; writes docs/conformance.md (slow)."""
    _sync_all(session)
    args = session.posargs or ["--save", "latest", "--report", "--compare", "before"]
    session.run("python", "conformance/run.py", *args)


@nox.session(python=False, default=False)
def release(session: nox.Session) -> None:
    """Bump one package: ``uv run nox -s release -- rl-envs 0.2.0``; then tag ``rl-envs-v0.2.0``."""
    if len(session.posargs) != 2 or session.posargs[0] not in PACKAGES:
        session.error(f"usage: nox -s release -- <package> <version>; packages: {PACKAGES}")
    package, new = session.posargs
    if not re.fullmatch(r"\d+\.\d+\.\d+([ab]|rc)?\d*", new):
        session.error(f"version {new!r} is not of the form X.Y.Z")
    pyproject = ROOT / "packages" / package / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(
        text.replace(f'version = "{_declared_version(package)}"', f'version = "{new}"', 1)
    )
    changelog = ROOT / "packages" / package / "CHANGELOG.md"
    changelog.write_text(
        changelog.read_text().replace(
            "## Unreleased", f"## Unreleased\n\n## {new} ({date.today()})", 1
        )
    )
    session.run(UV, "lock")
    session.log(f"bumped {package} to {new}; commit, then: git tag {package}-v{new}")


def _declared_version(package: str) -> str:
    text = (ROOT / "packages" / package / "pyproject.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


def _one(paths, what: str) -> Path:
    found = list(paths)
    if len(found) != 1:
        raise RuntimeError(f"expected exactly one {what}, found {found}")
    return found[0]
