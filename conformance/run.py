"""Run TorchRL 0.14's test files against the rl_* packages and write docs/conformance.md.

Quick look at one file (prints its table, writes nothing)::

    uv run --no-sync python conformance/run.py conformance/torchrl_tests/test_specs.py

The full run (what ``uv run nox -s conformance`` does)::

    uv run --no-sync python conformance/run.py --save latest --report --compare before

Each file runs in its own ``pytest`` process (``nice``, ``-p no:cacheprovider``, no ``-x``)
with the import shim (``torchrl_shim.py``) and the result plugin (``conformance_plugin.py``);
``--budget`` caps a file's wall time, ``--test-timeout`` each test phase. ``--save LABEL``
merges the per-file summaries into ``conformance/results/LABEL.json``; ``--report`` writes
``docs/conformance.md`` from the saved labels (``--compare`` adds earlier labels as columns).
``--src DIR`` measures another checkout's packages (``DIR/packages/*/src`` first on the path).
"""

from __future__ import annotations

import argparse
import ast
import collections
import concurrent.futures
import datetime
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TESTS = HERE / "torchrl_tests"
RESULTS = HERE / "results"
REPORT = ROOT / "docs" / "conformance.md"
sys.path.insert(0, str(HERE))
from scope import AREAS, BRANCH, OUT_OF_SCOPE_TESTS, mapped_prefix  # noqa: E402

FILE_AREA = {f: area for area, files in AREAS.items() for f in files}
# Failure messages that name a missing keyword argument or attribute of an existing name.
API_GAPS = [
    re.compile(r"(\w+(?:\.\w+)?)\(\) got an unexpected keyword argument '(\w+)'"),
    re.compile(r"'(\w+)' object has no attribute '(\w+)'"),
    re.compile(r"type object '(\w+)' has no attribute '(\w+)'"),
]


def _static_test_count(path: Path) -> int:
    """Test functions in a file (parametrizations not expanded): used when it fails to collect."""
    tree = ast.parse(path.read_text())
    count = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            count += 1
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            count += sum(
                isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
                for n in node.body
            )
    return count


def _env(src: Path | None, results: Path, test_timeout: float) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(HERE)]
    if src is not None:
        paths += [str(p) for p in sorted((src / "packages").glob("*/src"))]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(
        CONFORMANCE_SHIM="1",
        CONFORMANCE_RESULTS=str(results),
        CONFORMANCE_TEST_TIMEOUT=str(test_timeout),
        OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),
        PYTHONWARNINGS=env.get("PYTHONWARNINGS", "ignore::DeprecationWarning"),
    )
    return env


def run_file(rel: str, budget: float, test_timeout: float, src: Path | None) -> dict:
    """Run one TorchRL test file; return its summary."""
    path = TESTS / rel
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.jsonl"
        cmd = ["nice", "-n", "10", sys.executable, "-m", "pytest", str(path),
               "-c", str(HERE / "pytest.ini"), "--rootdir", str(TESTS),
               "--confcutdir", str(TESTS), "-p", "no:cacheprovider", "-p", "conformance_plugin",
               "-q", "--tb=no", "--no-header", "-o", f"faulthandler_timeout={int(test_timeout * 2)}"]  # fmt: skip
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=TESTS, env=_env(src, results, test_timeout),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)  # fmt: skip
        try:
            tail, killed = proc.communicate(timeout=budget)[0][-2000:], False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # pytest and the workers it started
            tail, killed = (proc.communicate()[0] or "")[-2000:], True
        wall = time.monotonic() - start
        records = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []  # fmt: skip
    return summarize(rel, records, wall, killed, tail)


def summarize(rel: str, records: list[dict], wall: float, killed: bool, tail: str) -> dict:
    collected: list[str] = []
    phases: dict[str, list[dict]] = collections.defaultdict(list)
    collect_errors, missing_seen, out_of_scope = [], {}, 0
    groups: collections.Counter[str] = collections.Counter()
    for r in records:
        if r["kind"] == "collected":
            collected = r["nodeids"]
        elif r["kind"] == "phase":
            phases[r["nodeid"]].append(r)
        elif r["kind"] == "collect_error":
            collect_errors.append(r)
        elif r["kind"] == "missing_seen":
            missing_seen.update(r["names"])
        elif r["kind"] == "deselected":
            out_of_scope += len(r["nodeids"])
            for nodeid in r["nodeids"]:
                groups[next((k for k in OUT_OF_SCOPE_TESTS if k in nodeid), "?")] += 1
    counts = collections.Counter()
    blocked = collections.Counter()
    signatures = collections.Counter()
    failures: list[str] = []
    for nodeid in collected or list(phases):
        outcome, missing, message = _outcome(phases.get(nodeid, []))
        counts[outcome] += 1
        for name in dict.fromkeys(missing):
            blocked[name] += 1
        if outcome in ("failed", "error"):
            for pattern in API_GAPS:
                for match in pattern.finditer(message):
                    signatures[" ".join(g for g in match.groups() if g)] += 1
            if len(failures) < 400:
                failures.append(f"{nodeid}: {message}")
    if collect_errors and not collected:
        n = _static_test_count(TESTS / rel)
        counts["error"] += n
        for name in {m for e in collect_errors for m in e["missing"]}:
            blocked[name] += n
        for pattern in API_GAPS:
            for match in pattern.finditer(collect_errors[0]["message"]):
                signatures[" ".join(g for g in match.groups() if g)] += n
        failures.append("collection error: " + collect_errors[0]["message"][-1500:])
    return {
        "file": rel,
        "area": FILE_AREA.get(rel, "?"),
        "passed": counts["passed"],
        "failed": counts["failed"],
        "errors": counts["error"] + counts["not run"],
        "not_run": counts["not run"],
        "skipped": counts["skipped"] + counts["xfailed"],
        "out_of_scope": out_of_scope,
        "out_of_scope_groups": dict(groups),
        "collection_error": bool(collect_errors and not collected),
        "killed_by_budget": killed,
        "wall_s": round(wall, 1),
        "blocked_by": dict(blocked),
        "api_gaps": dict(signatures),
        "missing_seen": missing_seen,
        "failures": failures,
        "tail": tail if (killed or not records) else "",
    }


def _outcome(phases: list[dict]) -> tuple[str, list[str], str]:
    """Final outcome of one test from its setup / call / teardown reports."""
    if not phases:
        return "not run", [], "not run (file killed by its wall budget, or a crash)"
    missing = [m for p in phases for m in p.get("missing", [])]
    for p in phases:
        if p["outcome"] == "failed":
            kind = "failed" if p["when"] == "call" else "error"
            return kind, missing, p.get("message", "")
    for p in phases:
        if p["outcome"] == "skipped":
            return ("xfailed" if p.get("xfail") else "skipped"), missing, ""
    if any(p["when"] == "call" and p["outcome"] == "passed" for p in phases):
        return "passed", missing, ""
    return "not run", missing, "no call phase recorded"


def _rate(s: dict) -> float | None:
    total = s["passed"] + s["failed"] + s["errors"]
    return s["passed"] / total if total else None


def _fmt_rate(s: dict | None) -> str:
    if s is None:
        return "–"
    r = _rate(s)
    return "–" if r is None else f"{100 * r:.1f}%"


def _sum(summaries: list[dict]) -> dict:
    keys = ("passed", "failed", "errors", "skipped", "out_of_scope")
    return {k: sum(s[k] for s in summaries) for k in keys}


def _is_public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def _is_mapped(name: str) -> bool:
    return mapped_prefix(name.rpartition(".")[0]) is not None


def _per_file_mean(summaries: list[dict]) -> float | None:
    """The unweighted mean of the per-file rates (files with nothing in scope left out)."""
    rates = [r for r in map(_rate, summaries) if r is not None]
    return sum(rates) / len(rates) if rates else None


def _resolving_now(names: list[str]) -> set[str]:
    """The dotted ``torchrl.*`` names that the shim resolves at the current commit (one
    subprocess, so the check imports the packages as a test would)."""
    if not names:
        return set()
    code = (
        "import importlib, json, sys\n"
        "import torchrl_shim\n"
        "torchrl_shim.install()\n"
        "found = []\n"
        "for name in json.loads(sys.stdin.read()):\n"
        "    module, _, attr = name.rpartition('.')\n"
        "    try:\n"
        "        getattr(importlib.import_module(module), attr)\n"
        "    except Exception:\n"
        "        continue\n"
        "    if name not in torchrl_shim.MISSING:\n"
        "        found.append(name)\n"
        "print(json.dumps(found))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(names), cwd=HERE,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _backfill_collection_errors(data: dict[str, dict]) -> None:
    """A file that failed to collect under one label but collected under another: count its
    tests as the other label collected them (all errors), not by the static function count."""
    for label, saved in data.items():
        for rel, s in saved["files"].items():
            if not s["collection_error"]:
                continue
            collected = [
                o["files"][rel]
                for other, o in data.items()
                if other != label and rel in o["files"] and not o["files"][rel]["collection_error"]
            ]
            if collected:
                c = collected[-1]
                s["errors"] = c["passed"] + c["failed"] + c["errors"]
                s["skipped"], s["out_of_scope"] = c["skipped"], c["out_of_scope"]
                s["backfilled"] = True


def write_report(labels: list[str], command: str) -> None:
    data = {label: json.loads((RESULTS / f"{label}.json").read_text()) for label in labels}
    _backfill_collection_errors(data)
    latest = labels[-1]
    files = [f for area in AREAS.values() for f in area if f in data[latest]["files"]]
    lines = [
        "# Conformance: TorchRL 0.14's own tests against the rl_* packages",
        "",
        f"TorchRL's test files (pytorch/rl `{BRANCH}`, see `conformance/torchrl_tests/SOURCE`) run",
        "through an import-path shim (`conformance/torchrl_shim.py`); see `conformance/README.md`.",
        "Pass rate = passed / (passed + failed + errors); skipped (TorchRL's own skips and xfails)",
        "and out-of-scope tests (`conformance/scope.py`) are left out of it.",
        "",
    ]
    for label in labels:
        meta = data[label]["meta"]
        heads = sorted({s["head"] for s in data[label]["files"].values() if s.get("head")})
        at = f"`{meta['head']}`"
        if len(heads) > 1:  # files re-measured as fixes landed
            at = f"{len(heads)} commits (per file in `conformance/results/{label}.json`), the last {at}"
        lines.append(f"- **{label}**: measured at {at}, finished {meta['date']} "
                     f"(`{meta['command']}`), {meta['wall_min']:.0f} min of pytest wall time.")  # fmt: skip
    lines += ["", "## Totals by area", ""]
    head = "| area | " + " | ".join(f"{lb} passed / in scope | {lb} rate" for lb in labels) + " |"
    lines += [head, "|---|" + "---:|---:|" * len(labels)]
    area_rows = [*AREAS, "total"]
    for area in area_rows:
        cells = []
        for label in labels:
            summaries = [s for f, s in data[label]["files"].items()
                         if area == "total" or FILE_AREA.get(f) == area]  # fmt: skip
            tot = _sum(summaries)
            n = tot["passed"] + tot["failed"] + tot["errors"]
            cells += [f"{tot['passed']} / {n}", _fmt_rate(tot)]
        name = "**total**" if area == "total" else area
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    cells = []
    for label in labels:
        mean = _per_file_mean([data[label]["files"][f] for f in files if f in data[label]["files"]])
        cells += ["files weighted equally", "–" if mean is None else f"{100 * mean:.1f}%"]
    lines.append("| **unweighted per-file mean** | " + " | ".join(cells) + " |")
    rated = sorted((f for f in files if _rate(data[latest]["files"][f]) is not None),
                   key=lambda f: _rate(data[latest]["files"][f]))  # fmt: skip
    below = [f for f in rated if _rate(data[latest]["files"][f]) < 0.85]
    lines += [
        "",
        "The total weights each file by its number of tests (a file of 2,000 parametrised cases",
        "counts 100 times as much as one of 20); the per-file mean weights every file alike.",
        f"{len(below)} of {len(rated)} files are below 85% ({latest}); the ten weakest:",
        "",
        "| file | passed / in scope | rate |",
        "|---|---:|---:|",
    ]
    for f in rated[:10]:
        s = data[latest]["files"][f]
        lines.append(f"| `{f}` | {s['passed']} / {s['passed'] + s['failed'] + s['errors']} "
                     f"| {_fmt_rate(s)} |")  # fmt: skip
    lines += ["", "## Per file", ""]
    prev = labels[:-1]
    head = "| file | passed | failed | errors | skipped | out of scope | rate |"
    head += "".join(f" {lb} rate |" for lb in prev) + " note |"
    lines += [head, "|---|" + "---:|" * (6 + len(prev)) + "---|"]
    for f in files:
        s = data[latest]["files"][f]
        note = []
        for lb in labels:
            if data[lb]["files"].get(f, {}).get("collection_error"):
                how = (
                    "as another run collected them"
                    if data[lb]["files"][f].get("backfilled")
                    else "statically"
                )
                note.append(f"{lb}: collection error (tests counted {how})")
        if s["killed_by_budget"]:
            note.append(f"wall budget hit: {s['not_run']} not run")
        cells = [s["passed"], s["failed"], s["errors"], s["skipped"], s["out_of_scope"],
                 _fmt_rate(s)]  # fmt: skip
        cells += [_fmt_rate(data[lb]["files"].get(f)) for lb in prev]
        lines.append(f"| `{f}` | " + " | ".join(map(str, cells)) + f" | {'; '.join(note)} |")
    blocked = collections.Counter()
    seen: dict[str, str] = {}
    for s in data[latest]["files"].values():
        blocked.update(s["blocked_by"])
        seen.update(s["missing_seen"])
    names = set(blocked) | set(seen)
    resolved = _resolving_now(sorted(n for n in names if _is_public(n) and _is_mapped(n)))
    public = [n for n in names if _is_public(n) and n not in resolved]
    needed = sorted((n for n in public if blocked[n]), key=lambda n: (-blocked[n], n))
    unused = sorted(n for n in public if not blocked[n])
    lines += [
        "",
        f"## Missing public names that in-scope tests use ({len(needed)}) ({latest})",
        "",
        "Imported by the in-scope files (or TorchRL's test helpers) from any public `torchrl`",
        "namespace (the root and the namespaces the import map does not serve included; those",
        "are marked *unmapped*), not provided by the rl_* packages, and used by at least one in-scope test that",
        "runs here. *Blocked* counts the tests that failed on this name (its first use raised",
        "`MissingNameError`) or that sit in a file which failed to collect on it.",
        f"{len(resolved)} names recorded as missing when their files were measured resolve",
        "through the shim at the packages' current commit and are not listed.",
        "",
    ]
    if needed:
        lines += ["| name | tests blocked |", "|---|---:|"]
        lines += [f"| `{n}`{'' if _is_mapped(n) else ' (unmapped)'} | {blocked[n]} |"
                  for n in needed]  # fmt: skip
    else:
        lines.append("None.")
    lines += [
        "",
        f"## Missing public names no in-scope test uses ({len(unused)})",
        "",
        "Imported at the top of an in-scope file, but no measured test failed on them: the tests",
        "that use them are out of scope (`conformance/scope.py`, with the reason), skipped here",
        "(an optional library that is not installed) or never reach them.",
        "",
        ", ".join(f"`{n}`" for n in unused) or "none",
    ]
    other = sorted((n for n in names if not _is_public(n)),
                   key=lambda n: (-blocked[n], n))  # fmt: skip
    lines += [
        "",
        f"## Other missing names ({len(other)}): private names",
        "",
        "TorchRL internals (a `_` in the path). They are not targets, but they block the tests",
        "listed.",
        "",
        "| name | tests blocked |",
        "|---|---:|",
    ]
    lines += [f"| `{n}` | {blocked[n]} |" for n in other]
    lines += _excluded_section(data[latest]["files"], files)
    gaps = collections.Counter()
    for s in data[latest]["files"].values():
        gaps.update(s.get("api_gaps", {}))
    lines += [
        "",
        "## Missing keyword arguments and attributes of existing names (top 60)",
        "",
        "From the failure messages (`X() got an unexpected keyword argument 'k'`,",
        "`'X' object has no attribute 'a'`): `X k` and the number of tests that failed on it.",
        "",
        "| callable / type, keyword / attribute | tests |",
        "|---|---:|",
    ]
    lines += [f"| `{g}` | {n} |" for g, n in gaps.most_common(60)]
    lines += ["", f"Regenerate: `{command}`.", ""]
    REPORT.write_text("\n".join(lines))
    print(f"wrote {REPORT.relative_to(ROOT)}")


def _excluded_section(saved: dict[str, dict], files: list[str]) -> list[str]:
    """Each group of tests ``scope.OUT_OF_SCOPE_TESTS`` excludes, with its count and reason."""
    counts: collections.Counter[str] = collections.Counter()
    unrecorded = [
        f for f in files if saved[f]["out_of_scope"] and "out_of_scope_groups" not in saved[f]
    ]
    for f in files:
        counts.update(saved[f].get("out_of_scope_groups", {}))
    total = sum(saved[f]["out_of_scope"] for f in files)
    lines = [
        "",
        f"## Tests excluded from the rates ({total})",
        "",
        "Each entry of `OUT_OF_SCOPE_TESTS` (`conformance/scope.py`), the tests it deselected in",
        "the measured files, and why. These tests count neither as passed nor as failed.",
        "",
        "| test group (nodeid substring) | tests | reason |",
        "|---|---:|---|",
    ]
    for key, reason in sorted(OUT_OF_SCOPE_TESTS.items(), key=lambda kv: (-counts[kv[0]], kv[0])):
        if not any(key.startswith(f) for f in files):
            continue
        n = counts[key] if key in counts or not unrecorded else "?"
        lines.append(f"| `{key}` | {n} | {reason.replace('|', '/')} |")
    if unrecorded:
        lines += ["", f"Per-group counts not recorded for {len(unrecorded)} files measured before "
                  "they were kept (`?`): " + ", ".join(f"`{f}`" for f in unrecorded) + "."]  # fmt: skip
    return lines


def _head(src: Path | None) -> str:
    where = src or ROOT
    try:
        out = subprocess.run(["git", "-C", str(where), "log", "-1", "--format=%h %s"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (subprocess.CalledProcessError, FileNotFoundError):
        out = (
            (where / "HEAD_COMMIT").read_text().strip() if (where / "HEAD_COMMIT").exists() else "?"
        )
    return out[:80]


def _command(argv: list[str] | None) -> str:
    args = argv or sys.argv[1:]
    files = [a for a in args if a.endswith(".py")]
    shown = [a for a in args if not a.endswith(".py")] + (
        [f"<{len(files)} files>"] if files else []
    )
    return "python conformance/run.py " + " ".join(shown)


def _save(label: str, summary: dict, src: Path | None, argv: list[str] | None) -> None:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{label}.json"
    with open(RESULTS / f".{label}.lock", "w") as lock:  # runs in parallel save in turn
        fcntl.flock(lock, fcntl.LOCK_EX)
        _merge(path, summary, src, argv)


def _merge(path: Path, summary: dict, src: Path | None, argv: list[str] | None) -> None:
    saved = json.loads(path.read_text()) if path.exists() else {"files": {}}
    summary = {k: v for k, v in summary.items() if k != "tail"}
    summary["head"] = _head(src)[:7]
    summary["failures"] = summary["failures"][:50]
    saved["files"][summary["file"]] = summary
    saved["meta"] = {
        "head": _head(src),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": _command(argv),
        "wall_min": sum(f["wall_s"] for f in saved["files"].values()) / 60,
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)  # readers never see a half-written file


def _print_and_save(s: dict, summaries: dict, args: argparse.Namespace, argv) -> None:
    rel = s["file"]
    summaries[rel] = s
    print(f"{rel}: {s['passed']} passed, {s['failed']} failed, {s['errors']} errors, "
          f"{s['skipped']} skipped, {s['out_of_scope']} out of scope, rate {_fmt_rate(s)} "
          f"({s['wall_s']:.0f}s){' [collection error]' if s['collection_error'] else ''}"
          f"{' [budget hit]' if s['killed_by_budget'] else ''}", flush=True)  # fmt: skip
    if s["tail"]:
        print("  output tail:", s["tail"][-800:].replace("\n", "\n  "))
    if args.failures:
        for line in s["failures"]:
            print("  ", line[:300])
    measured = s["passed"] + s["failed"] + s["errors"] + s["skipped"] + s["out_of_scope"]
    if args.save and s["killed_by_budget"] and measured == 0:
        print(f"  not saved: the wall budget ({args.budget:.0f}s) ran out before any test of "
              f"{rel} reported; results/{args.save}.json keeps its previous entry. Re-run "
              "it with a larger --budget, on a less loaded machine.", flush=True)  # fmt: skip
    elif args.save:  # after every file, so an interrupted run keeps what it measured
        _save(args.save, s, args.src, argv)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="test files (default: every in-scope file)")
    parser.add_argument("--area", action="append", choices=list(AREAS), help="only these areas")
    parser.add_argument("--budget", type=float, default=1200, help="wall seconds per file")
    parser.add_argument("--test-timeout", type=float, default=60, help="seconds per test phase")
    parser.add_argument("--save", metavar="LABEL", help="merge summaries into results/LABEL.json")
    parser.add_argument("--report", action="store_true", help="write docs/conformance.md")
    parser.add_argument("--compare", action="append", default=[], metavar="LABEL",
                        help="earlier saved labels to show beside this one")  # fmt: skip
    parser.add_argument("--src", type=Path, help="checkout whose packages/*/src to measure")
    parser.add_argument("--jobs", type=int, default=1, help="files run at the same time")
    parser.add_argument("--failures", action="store_true", help="print each failure's message")
    parser.add_argument("--report-only", action="store_true",
                        help="write docs/conformance.md from the saved labels without running tests")  # fmt: skip
    args = parser.parse_args(argv)
    if args.report_only:
        command = "uv run --no-sync python conformance/run.py " + " ".join(argv or sys.argv[1:])
        write_report([*args.compare, args.save or "latest"], command)
        return

    if args.files:
        rels = [str(Path(f).resolve().relative_to(TESTS)) for f in args.files]
    else:
        rels = [f for area, fs in AREAS.items() if not args.area or area in args.area for f in fs]
    summaries = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_file, rel, args.budget, args.test_timeout, args.src)
                   for rel in rels]  # fmt: skip
        for future in concurrent.futures.as_completed(futures):
            _print_and_save(future.result(), summaries, args, argv)
    tot = _sum(list(summaries.values()))
    print(f"TOTAL: {tot['passed']} passed / {tot['passed'] + tot['failed'] + tot['errors']} "
          f"in scope, rate {_fmt_rate(tot)}")  # fmt: skip
    mean = _per_file_mean(list(summaries.values()))
    if mean is not None and len(summaries) > 1:
        worst = sorted((s for s in summaries.values() if _rate(s) is not None), key=_rate)[:5]
        print(f"UNWEIGHTED PER-FILE MEAN: {100 * mean:.1f}% over {len(summaries)} files; worst: "
              + ", ".join(f"{s['file']} {_fmt_rate(s)}" for s in worst))  # fmt: skip
    blocked = collections.Counter()
    for s in summaries.values():
        blocked.update(s["blocked_by"])
    if blocked:
        print("missing names, by tests blocked:")
        for name, n in blocked.most_common(30):
            print(f"  {n:6d}  {name}")
    gaps = collections.Counter()
    for s in summaries.values():
        gaps.update(s["api_gaps"])
    if gaps:
        print("missing keyword arguments / attributes, by failing tests:")
        for gap, n in gaps.most_common(30):
            print(f"  {n:6d}  {gap}")
    command = "uv run --no-sync python conformance/run.py " + " ".join(argv or sys.argv[1:])
    if args.report:
        write_report([*args.compare, args.save or "latest"], command)


if __name__ == "__main__":
    main()
