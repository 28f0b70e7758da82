"""pytest plugin for the conformance run: shim install, per-test time limit, streamed results.

Loaded by ``run.py`` with ``-p conformance_plugin``. Every test phase is written, as it ends,
as one JSON line to ``$CONFORMANCE_RESULTS`` (so a file killed by its wall budget keeps what it
had); each failure carries the missing TorchRL names it hit (``MissingNameError``). Each setup /
call / teardown phase gets ``$CONFORMANCE_TEST_TIMEOUT`` seconds (SIGALRM), after which it fails
with ``TestTimeout``.
"""

from __future__ import annotations

import json
import os
import re
import signal

import pytest
import torchrl_shim

torchrl_shim.install()

RESULTS = os.environ.get("CONFORMANCE_RESULTS")
TIMEOUT = float(os.environ.get("CONFORMANCE_TEST_TIMEOUT", "60"))
_IMPORT_ERROR = re.compile(r"cannot import name '([^']+)' from '([^']+)'|No module named '([^']+)'")


class TestTimeout(Exception):
    """The test phase ran past its time limit."""

    __test__ = False


def _write(record: dict) -> None:
    if RESULTS:
        with open(RESULTS, "a") as f:
            f.write(json.dumps(record) + "\n")


def _missing_in(exc: BaseException | None) -> list[str]:
    names, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        name = getattr(exc, "missing_name", None)
        if name:
            names.append(name)
        exc = exc.__cause__ or exc.__context__
    return names


def _on_alarm(signum, frame):
    raise TestTimeout(f"test phase ran past {TIMEOUT:.0f}s (CONFORMANCE_TEST_TIMEOUT)")


def _timed(phase):
    @pytest.hookimpl(hookwrapper=True)
    def hook(item):
        if TIMEOUT > 0 and hasattr(signal, "SIGALRM"):
            previous = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
            try:
                yield
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
        else:
            yield

    hook.__name__ = f"pytest_runtest_{phase}"
    return hook


pytest_runtest_setup = _timed("setup")
pytest_runtest_call = _timed("call")
pytest_runtest_teardown = _timed("teardown")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.missing_names = _missing_in(call.excinfo.value) if call.excinfo else []


def pytest_collection_finish(session):
    _write({"kind": "collected", "nodeids": [item.nodeid for item in session.items]})


def pytest_collectreport(report):
    if report.failed:
        text = str(report.longrepr)
        missing = sorted({m.group(2) + "." + m.group(1) if m.group(1) else m.group(3)
                          for m in _IMPORT_ERROR.finditer(text)})  # fmt: skip
        missing += sorted(set(re.findall(r"missing name (\S+)", text)))
        _write({"kind": "collect_error", "nodeid": report.nodeid, "missing": missing,
                "message": text[-3000:]})  # fmt: skip


def pytest_runtest_logreport(report):
    record = {
        "kind": "phase",
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "duration": round(report.duration, 3),
        "missing": getattr(report, "missing_names", []),
        "xfail": hasattr(report, "wasxfail"),
    }
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        record["message"] = (crash.message if crash else str(report.longrepr))[:500]
    _write(record)


def pytest_collection_modifyitems(config, items):
    """Deselect the tests ``scope.OUT_OF_SCOPE_TESTS`` names (TorchRL internals)."""
    from scope import OUT_OF_SCOPE_TESTS

    keep, dropped = [], []
    for item in items:
        (dropped if any(key in item.nodeid for key in OUT_OF_SCOPE_TESTS) else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
        _write({"kind": "deselected", "nodeids": [item.nodeid for item in dropped]})


def pytest_sessionfinish(session):
    _write({"kind": "missing_seen", "names": dict(torchrl_shim.MISSING)})
