"""``PythonSandbox``: run untrusted Python code in a contained subprocess."""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_MIB = 1 << 20


@dataclass(frozen=True)
class SandboxResult:
    """What one run of :class:`PythonSandbox` gave.

    Attributes:
        success: the code ran to its end (exit status 0) within every limit.
        stdout: the head of the standard output, at most ``max_output`` characters.
        stderr: the tail of the standard error (where the traceback is), at most
            ``max_output`` characters.
        returncode: the exit status; negative for a signal (``-9`` when the sandbox
            killed it).
        reason: why it failed, in words meant for the model (``None`` on success).
        isolation: which layers of :data:`LAYERS` were in force for this run (``True``)
            and which were not (``False``).
    """

    success: bool
    stdout: str
    stderr: str
    returncode: int
    reason: str | None = None
    isolation: dict[str, bool] = field(default_factory=dict)

    def to_message(self) -> str:
        """The text returned to the conversation: output on success, reason and error otherwise."""
        if self.success:
            return self.stdout
        parts = [f"Error: {self.reason}"]
        if self.stdout:
            parts.append(f"stdout:\n{self.stdout}")
        if self.stderr:
            parts.append(f"stderr:\n{self.stderr}")
        return "\n".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """TorchRL's executor result format: ``success``, ``stdout``, ``stderr``, ``returncode``."""
        stderr = self.stderr if self.success else self.to_message()
        return {
            "success": self.success,
            "stdout": self.stdout,
            "stderr": stderr,
            "returncode": self.returncode,
        }


LAYERS = (
    "namespaces",
    "filesystem",
    "non_root",
    "rlimits",
    "capabilities_dropped",
    "no_new_privs",
    "seccomp",
    "audit_hook",
)
"""The isolation layers, as named in :attr:`SandboxResult.isolation` and ``require=``."""
KERNEL_LAYERS = LAYERS[:-1]
_LAUNCHER = Path(__file__).with_name("_launcher.py")


class SandboxUnavailableError(RuntimeError):
    """The machine cannot provide the isolation layers that were required."""


class PythonSandbox:
    """Runs untrusted Python code behind an OS boundary, with CPU, wall-time, memory, disk,
    output and process limits.

    Each call of :meth:`run` starts a fresh interpreter (``python -I``) that, before the
    code runs, puts it in new user, mount, PID, network, IPC, UTS and cgroup namespaces,
    as an unprivileged user (``nobody`` outside when the host is root), on a read-only
    view of the Python installation and the system libraries with a private tmpfs work
    directory (``/sandbox``, with a size and inode quota) as the only writable place;
    drops every capability; sets ``no_new_privs``; sets ``RLIMIT_CPU``, ``RLIMIT_AS``,
    ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, ``RLIMIT_NPROC`` and no core dumps; and loads a
    seccomp allow-list (no ``ptrace``, ``mount``, ``keyctl``, ``bpf``, new namespaces,
    sockets other than UNIX ones, and no ``fork`` or ``execve`` unless
    ``allow_processes``). An audit hook (PEP 578) adds clear messages on top; it is not
    the boundary. The code runs as PID 1 of its PID namespace: when it ends, or when the
    host kills it at the wall-time limit, the kernel kills every process it started.
    Nothing it writes outlives the run.

    The layers the machine provides are checked once, at construction, and ``require``
    names those without which the sandbox refuses to run (default: every kernel layer).
    :attr:`SandboxResult.isolation` says which were in force for each run.

    Args:
        timeout: wall-time limit in seconds.
        cpu_time: CPU-time limit in seconds (``RLIMIT_CPU``, rounded up to whole
            seconds). Defaults to ``timeout``.
        memory: address-space limit in bytes (``RLIMIT_AS``).
        max_output: characters of stdout (head) and stderr (tail) read back.
        max_file_size: largest file the code may write, its output included
            (``RLIMIT_FSIZE``).
        disk: size of the private work directory in bytes (a tmpfs quota).
        max_files: inodes of the work directory (files and directories).
        max_processes: ``RLIMIT_NPROC`` (processes and threads of the sandbox user).
        max_open_files: ``RLIMIT_NOFILE``.
        allow_processes: let the code ``fork`` and ``execve`` (inside the same
            namespaces and limits). Defaults to ``False``.
        audit_hook: install the audit-hook layer. Defaults to ``True``.
        require: the layers (names from :data:`LAYERS`) without which :meth:`run` must
            refuse to run. Defaults to every kernel layer. ``()`` runs with whatever the
            machine provides; :attr:`SandboxResult.isolation` then says what that was.
        read_roots: extra host directories the code may read.
        python: the interpreter to run. Defaults to ``sys.executable``.

    Raises:
        SandboxUnavailableError: a required layer is not available here (the message
            says which, why, and how to enable it).

    Examples:
        >>> sandbox = PythonSandbox(timeout=5.0, cpu_time=1.0)
        >>> sandbox.run("print(6 * 7)").stdout
        '42\\n'
        >>> result = sandbox.run("while True: pass")
        >>> result.success, "limit" in result.reason
        (False, True)
    """

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        cpu_time: float | None = None,
        memory: int = 512 * _MIB,
        max_output: int = 4096,
        max_file_size: int = 4 * _MIB,
        disk: int = 64 * _MIB,
        max_files: int = 4096,
        max_processes: int = 16,
        max_open_files: int = 64,
        allow_processes: bool = False,
        audit_hook: bool = True,
        require: tuple[str, ...] | list[str] = KERNEL_LAYERS,
        read_roots: tuple[str, ...] = (),
        python: str | None = None,
    ) -> None:
        for name, value in (
            ("timeout", timeout),
            ("memory", memory),
            ("max_output", max_output),
            ("max_file_size", max_file_size),
            ("disk", disk),
            ("max_files", max_files),
            ("max_processes", max_processes),
            ("max_open_files", max_open_files),
        ):
            if not value > 0:
                raise ValueError(f"PythonSandbox: {name} must be > 0; got {value}.")
        if cpu_time is not None and not cpu_time > 0:
            raise ValueError(f"PythonSandbox: cpu_time must be > 0 or None; got {cpu_time}.")
        unknown = sorted(set(require) - set(LAYERS))
        if unknown:
            raise ValueError(
                f"PythonSandbox: unknown layers in require={tuple(require)!r}: {unknown}; "
                f"the layers are {LAYERS}."
            )
        if sys.platform != "linux":
            raise SandboxUnavailableError(
                f"PythonSandbox needs Linux (namespaces, seccomp, resource limits); this is "
                f"{sys.platform}. Run the tool calls in a Linux container or VM."
            )
        self.timeout = float(timeout)
        self.cpu_time = float(cpu_time if cpu_time is not None else timeout)
        self.memory = int(memory)
        self.max_output = int(max_output)
        self.max_file_size = int(max_file_size)
        self.disk = int(disk)
        self.max_files = int(max_files)
        self.max_processes = int(max_processes)
        self.max_open_files = int(max_open_files)
        self.allow_processes = allow_processes
        self.audit_hook = audit_hook
        self.require = tuple(require)
        self.read_roots = tuple(os.path.realpath(r) for r in read_roots)
        self.python = python or sys.executable
        self._try_namespaces = True  # False only to test the path of machines without them
        self.available = self._probe()

    def run(self, code: str) -> SandboxResult:
        """Runs ``code`` and returns what happened; never raises for what the code does.

        Args:
            code: Python source.

        Returns:
            A :class:`SandboxResult`.

        Raises:
            TypeError: ``code`` is not a string.
            SandboxUnavailableError: a required layer could not be set up for this run.
        """
        if not isinstance(code, str):
            raise TypeError(
                f"PythonSandbox.run expects the code as a str; got {type(code).__name__}."
            )
        root = Path(tempfile.mkdtemp(prefix=f"{_TEMP_PREFIX}{os.getpid()}_"))
        try:
            return self._run_in(root, code)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def execute(self, code: str) -> dict[str, Any]:
        """:meth:`run` in TorchRL's result format (``success``, ``stdout``, ``stderr``, ``returncode``)."""
        return self.run(code).as_dict()

    def _probe(self) -> dict[str, bool]:
        """The layers this machine gives this interpreter, checked once per configuration."""
        key = (self.python, self.allow_processes, self.read_roots, self._try_namespaces)
        if key not in _PROBES:
            _remove_orphaned_run_dirs()
            root = Path(tempfile.mkdtemp(prefix=f"{_TEMP_PREFIX}{os.getpid()}_probe_"))
            try:
                _PROBES[key] = self._launch(root, "pass", require=())
            finally:
                shutil.rmtree(root, ignore_errors=True)
        outcome = _PROBES[key]
        if outcome.error is not None and not outcome.isolation:
            raise SandboxUnavailableError(f"PythonSandbox could not start: {outcome.error}")
        missing = [name for name in self.require if not outcome.isolation.get(name)]
        if missing:
            raise SandboxUnavailableError(_unavailable_message(missing, outcome.why))
        return dict(outcome.isolation)

    def _run_in(self, root: Path, code: str) -> SandboxResult:
        launched = self._launch(root, code, require=self.require)
        if launched.error is not None:
            raise SandboxUnavailableError(f"PythonSandbox could not start: {launched.error}")
        stdout, out_size = _read_head(root / "stdout.txt", self.max_output)
        stderr, err_size = _read_tail(root / "stderr.txt", self.max_output)
        returncode = launched.returncode
        reason = self._reason(returncode, launched.timed_out, stderr, max(out_size, err_size))
        if out_size > len(stdout.encode()):
            stdout += f"\n[output truncated: {out_size} bytes in all, first {self.max_output} characters shown]"
        return SandboxResult(
            success=reason is None,
            stdout=stdout,
            stderr=stderr,
            returncode=returncode,
            reason=reason,
            isolation=launched.isolation,
        )

    def _launch(self, root: Path, code: str, require: tuple[str, ...]) -> _Launched:
        (root / "newroot").mkdir()
        (root / "work").mkdir()
        status_read, status_write = os.pipe()
        config = {
            "code": code,
            "host_pid": os.getpid(),
            "status_fd": status_write,
            "new_root": str(root / "newroot"),
            "workdir": str(root / "work"),
            "cpu_time": self.cpu_time,
            "memory": self.memory,
            "max_file_size": self.max_file_size,
            "max_open_files": self.max_open_files,
            "max_processes": self.max_processes,
            "allow_processes": self.allow_processes,
            "disk": self.disk,
            "max_files": self.max_files,
            "read_roots": list(self.read_roots),
            "audit_hook": self.audit_hook,
            "require": list(require),
            "try_namespaces": self._try_namespaces,
        }
        deadline = time.monotonic() + self.timeout + _SETUP_ALLOWANCE
        with (
            open(root / "stdout.txt", "wb") as out,
            open(root / "stderr.txt", "wb") as err,
            os.fdopen(status_read, "rb", buffering=0) as status,
        ):
            try:
                process = subprocess.Popen(
                    [self.python, "-I", "-B", str(_LAUNCHER)],
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=err,
                    cwd=root,
                    env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(status_write,),
                )
            finally:
                os.close(status_write)
            launched = _Launched()
            try:
                process.stdin.write(marshal.dumps(config))
                process.stdin.close()
                launched.read(status, deadline, self.timeout)
            except OSError as error:  # the launcher died before reading its configuration
                launched.error = f"the launcher failed to start: {error}"
            finally:
                launched.kill_runner()
                _kill_group(process.pid)
                try:
                    process.wait(timeout=_REAP_GRACE)
                except subprocess.TimeoutExpired:
                    launched.error = launched.error or "the launcher did not exit after SIGKILL"
        if launched.error is None and launched.returncode is None:
            tail = (root / "stderr.txt").read_bytes()[-2000:].decode(errors="replace")
            launched.error = f"the launcher exited without a result: {tail.strip()}"
        return launched

    def _reason(self, returncode: int, timed_out: bool, stderr: str, largest: int) -> str | None:
        if timed_out:
            return f"wall-time limit of {self.timeout:g} s exceeded; the process was killed."
        if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            return f"CPU-time limit of {self.cpu_time:g} s exceeded; the process was killed."
        if returncode == 0:
            return None
        if largest >= self.max_file_size or "File too large" in stderr:
            return f"output limit of {self.max_file_size} bytes exceeded."
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        if "MemoryError" in last:
            return f"memory limit of {self.memory // _MIB} MiB exceeded (MemoryError)."
        if last.startswith("PermissionError"):
            return f"forbidden operation: {last.removeprefix('PermissionError: ')}"
        if "No space left on device" in last:
            return f"disk quota of {self.disk // _MIB} MiB exceeded (no space left on device)."
        if returncode < 0:
            return f"killed by signal {signal.Signals(-returncode).name}."
        return f"the code raised an exception (exit status {returncode})."


_SETUP_ALLOWANCE = 5.0  # seconds for the launcher to build the boundary, on top of timeout
_REAP_GRACE = 10.0
_PROBES: dict[tuple, _Launched] = {}


@dataclass
class _Launched:
    """What the launcher reported about one run."""

    returncode: int | None = None
    timed_out: bool = False
    error: str | None = None
    isolation: dict[str, bool] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    runner: int | None = None  # a pidfd of the runner (PID 1 of the sandbox's namespace)

    def read(self, status: Any, deadline: float, timeout: float) -> None:
        """Reads status messages until the runner's exit, an error, or the deadline."""
        buffer = b""
        started = None
        poller = select.poll()  # not select(): descriptors past 1024 are common in trainers
        poller.register(status, select.POLLIN)
        while True:
            now = time.monotonic()
            limit = deadline if started is None else min(deadline, started + timeout)
            if not poller.poll(max(0.0, limit - now) * 1e3):
                if started is None:
                    self.error = "the launcher did not start the code in time"
                else:
                    self.timed_out, self.returncode = True, -signal.SIGKILL
                return
            chunk = status.read(65536)
            if not chunk:  # every writer closed: the launcher is gone
                if started is not None:  # ... killed by the code (its jailer shares its uid)
                    self.returncode = -signal.SIGKILL
                return
            buffer += chunk
            while len(buffer) >= 4 and len(buffer) >= 4 + int.from_bytes(buffer[:4], "little"):
                size = int.from_bytes(buffer[:4], "little")
                message, buffer = marshal.loads(buffer[4 : 4 + size]), buffer[4 + size :]
                if "pid" in message:
                    self._watch(message["pid"])
                if "isolation" in message:
                    layers = message["isolation"]
                    self.isolation = {name: bool(layers.get(name)) for name in LAYERS}
                    self.why = message["why"]
                    started = time.monotonic()
                if "error" in message:
                    self.error = message["error"]
                    self.why = message.get("why", self.why)
                    return
                if "exit" in message:
                    self.returncode = os.waitstatus_to_exitcode(message["exit"])
                    return

    def _watch(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            self.runner = os.pidfd_open(pid)

    def kill_runner(self) -> None:
        """SIGKILL to the runner: as PID 1 of its namespace, its death takes every process
        of the run with it (a pidfd, so a reused PID is never hit)."""
        if self.runner is None:
            return
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self.runner, signal.SIGKILL)
        os.close(self.runner)
        self.runner = None


_TEMP_PREFIX = "rl_llm_sandbox_"


def _remove_orphaned_run_dirs() -> None:
    """Removes the run directories of hosts that died mid-run (SIGKILL skips ``finally``):
    their name holds the host's PID, and that process is gone."""
    for path in Path(tempfile.gettempdir()).glob(f"{_TEMP_PREFIX}*_*"):
        pid = path.name[len(_TEMP_PREFIX) :].split("_", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            pass  # alive, another user's


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _unavailable_message(missing: list[str], why: dict[str, str]) -> str:
    details = "; ".join(f"{name} ({why.get(name, 'not available')})" for name in missing)
    return (
        f"PythonSandbox: required isolation layers are not available on this machine: "
        f"{details}. Namespaces need unprivileged user namespaces "
        "(sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0; on "
        "Ubuntu 24.04+ also kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor "
        "profile for this interpreter); seccomp needs libseccomp (apt-get install "
        "libseccomp2). To run with fewer layers anyway, pass require=() or the layers you "
        "accept; SandboxResult.isolation then says which were in force."
    )


def _read_head(path: Path, limit: int) -> tuple[str, int]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        data = f.read(limit * 4)
    return data.decode("utf-8", errors="replace")[:limit], size


def _read_tail(path: Path, limit: int) -> tuple[str, int]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - limit * 4))
        data = f.read()
    return data.decode("utf-8", errors="replace")[-limit:], size
