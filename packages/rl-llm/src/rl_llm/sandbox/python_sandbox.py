"""``PythonSandbox``: run untrusted Python code in a contained subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CHILD = Path(__file__).with_name("_child.py")
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
        isolation: which containment layers were active: ``network_namespace`` (the
            process had no network interface), ``dropped_root`` (it ran as ``nobody``),
            ``non_root`` (it did not run as root, so ``RLIMIT_NPROC`` binds), ``audit_hook``
            (sockets, processes, ``ctypes`` and outside files refused).
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


class PythonSandbox:
    """Runs Python code in a subprocess with CPU, wall-time, memory, output and process limits.

    Each call of :meth:`run` makes a throw-away directory, writes the code there as
    ``main.py`` and runs it with ``python -I`` (isolated mode) in a new session. The
    child, before running the code, sets ``RLIMIT_CPU``, ``RLIMIT_AS``, ``RLIMIT_FSIZE``,
    ``RLIMIT_NOFILE``, ``RLIMIT_NPROC`` and no core dumps; enters a new network namespace
    where the kernel allows it (then there is no network interface at all) and installs an audit hook (PEP 578) that refuses
    sockets, creating processes, ``ctypes``, and files or directories outside its
    working directory (reads of the Python installation excepted). A root host runs the
    child as ``nobody`` when that user can read the interpreter (``RLIMIT_NPROC`` does not
    bind root). The host kills the
    whole process group at the wall-time limit and after every run, and reads back at
    most ``max_output`` characters of each stream. The directory is deleted afterwards.

    The audit hook is a guard inside the interpreter, not a kernel boundary; the kernel
    layers (limits, network namespace, ``nobody``) hold even if it were bypassed.
    :attr:`SandboxResult.isolation` says which layers were active.

    Args:
        timeout: wall-time limit in seconds.
        cpu_time: CPU-time limit in seconds (``RLIMIT_CPU``, rounded up to whole
            seconds). Defaults to ``timeout``.
        memory: address-space limit in bytes (``RLIMIT_AS``).
        max_output: characters of stdout (head) and stderr (tail) read back.
        max_file_size: largest file the code may write, its output files included
            (``RLIMIT_FSIZE``).
        max_processes: ``RLIMIT_NPROC`` (processes and threads of the sandbox user).
        max_open_files: ``RLIMIT_NOFILE``.
        allow_processes: let the code create processes (still bounded by
            ``max_processes``). Defaults to ``False``.
        unshare_network: try to run in a new, empty network namespace.
        drop_root: when the host runs as root, run the code as ``nobody`` if that user can
            read the interpreter's installation.
        read_roots: extra directories the code may read.
        python: the interpreter to run. Defaults to ``sys.executable``.

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
        max_processes: int = 16,
        max_open_files: int = 64,
        allow_processes: bool = False,
        unshare_network: bool = True,
        drop_root: bool = True,
        read_roots: tuple[str, ...] = (),
        python: str | None = None,
    ) -> None:
        for name, value in (
            ("timeout", timeout),
            ("memory", memory),
            ("max_output", max_output),
            ("max_file_size", max_file_size),
            ("max_processes", max_processes),
            ("max_open_files", max_open_files),
        ):
            if value <= 0:
                raise ValueError(f"PythonSandbox: {name} must be > 0; got {value}.")
        if cpu_time is not None and cpu_time <= 0:
            raise ValueError(f"PythonSandbox: cpu_time must be > 0 or None; got {cpu_time}.")
        if sys.platform != "linux":
            raise RuntimeError(
                f"PythonSandbox needs Linux (resource limits, namespaces); this is {sys.platform}."
            )
        self.timeout = float(timeout)
        self.cpu_time = float(cpu_time if cpu_time is not None else timeout)
        self.memory = int(memory)
        self.max_output = int(max_output)
        self.max_file_size = int(max_file_size)
        self.max_processes = int(max_processes)
        self.max_open_files = int(max_open_files)
        self.allow_processes = allow_processes
        self.unshare_network = unshare_network
        self.drop_root = drop_root
        self.read_roots = tuple(str(r) for r in read_roots)
        self.python = python or sys.executable
        self._user = _sandbox_user(self.python) if drop_root and os.geteuid() == 0 else None
        if allow_processes and os.geteuid() == 0 and self._user is None:
            raise ValueError(
                "PythonSandbox(allow_processes=True) relies on RLIMIT_NPROC, which does not bind "
                "root, and this interpreter cannot run as 'nobody' (its installation is not "
                "readable by that user). Run the host as a non-root user, use an interpreter "
                "that 'nobody' can read (python=...), or keep allow_processes=False."
            )

    def run(self, code: str) -> SandboxResult:
        """Runs ``code`` and returns what happened; never raises for what the code does.

        Args:
            code: Python source.

        Returns:
            A :class:`SandboxResult`.

        Raises:
            TypeError: ``code`` is not a string.
        """
        if not isinstance(code, str):
            raise TypeError(
                f"PythonSandbox.run expects the code as a str; got {type(code).__name__}."
            )
        root = Path(tempfile.mkdtemp(prefix="rl_llm_sandbox_"))
        try:
            return self._run_in(root, code)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def execute(self, code: str) -> dict[str, Any]:
        """:meth:`run` in TorchRL's result format (``success``, ``stdout``, ``stderr``, ``returncode``)."""
        return self.run(code).as_dict()

    def _run_in(self, root: Path, code: str) -> SandboxResult:
        root.chmod(0o711)  # the sandbox user may cross it to its working directory, not list it
        workdir = root / "work"
        workdir.mkdir()
        (workdir / "main.py").write_text(code)
        config = {
            "workdir": str(workdir),
            "status_file": str(root / "status.json"),
            "cpu_time": self.cpu_time,
            "memory": self.memory,
            "max_file_size": self.max_file_size,
            "max_open_files": self.max_open_files,
            "max_processes": self.max_processes,
            "allow_processes": self.allow_processes,
            "unshare_network": self.unshare_network,
            "read_roots": list(self.read_roots),
        }
        (root / "config.json").write_text(json.dumps(config))
        # A copy beside the config: the sandbox user may not read the installed package
        # (a checkout under a private directory), only what is in this throw-away root.
        child = root / "child.py"
        shutil.copyfile(_CHILD, child)
        out_path, err_path = root / "stdout.txt", root / "stderr.txt"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            process = subprocess.Popen(
                [self.python, "-I", "-B", str(child), str(root / "config.json")],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=workdir,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                start_new_session=True,
                close_fds=True,
                **self._user_kwargs(workdir),
            )
            timed_out = False
            try:
                process.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                # Kill what is left of the session: the process itself on a timeout, and
                # anything it started in every case.
                _kill_group(process.pid)
                process.wait()
                _wait_group_gone(process.pid)
        stdout, out_size = _read_head(out_path, self.max_output)
        stderr, err_size = _read_tail(err_path, self.max_output)
        isolation = _read_status(root / "status.json")
        reason = self._reason(process.returncode, timed_out, stderr, max(out_size, err_size))
        if out_size > len(stdout.encode()):
            stdout += f"\n[output truncated: {out_size} bytes in all, first {self.max_output} characters shown]"
        return SandboxResult(
            success=reason is None,
            stdout=stdout,
            stderr=stderr,
            returncode=process.returncode,
            reason=reason,
            isolation=isolation,
        )

    def _user_kwargs(self, workdir: Path) -> dict[str, Any]:
        if self._user is None:
            return {}
        for path in (workdir, workdir / "main.py", workdir.parent / "status.json"):
            path.touch(exist_ok=True)
            os.chown(path, self._user, self._user)
        return {"user": self._user, "group": self._user, "extra_groups": []}

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
        if returncode < 0:
            return f"killed by signal {signal.Signals(-returncode).name}."
        return f"the code raised an exception (exit status {returncode})."


_NOBODY = 65534
_USER_PROBES: dict[str, int | None] = {}


def _sandbox_user(python: str) -> int | None:
    """``nobody``'s uid if ``python`` can run its standard library as ``nobody``, else ``None``.

    Checked once per interpreter: a root-owned installation under ``/root`` is often
    unreadable by other users, and then the code has to run as root.
    """
    if python not in _USER_PROBES:
        try:
            probe = subprocess.run(
                [python, "-I", "-c", "import json, sysconfig, traceback, resource"],
                user=_NOBODY,
                group=_NOBODY,
                extra_groups=[],
                cwd="/",
                capture_output=True,
                timeout=30,
            )
            _USER_PROBES[python] = _NOBODY if probe.returncode == 0 else None
        except (OSError, subprocess.SubprocessError):
            _USER_PROBES[python] = None
    return _USER_PROBES[python]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _wait_group_gone(pid: int, grace: float = 5.0) -> None:
    """Waits (up to ``grace`` s) until the killed group is gone, so that no process of a
    finished run still uses the CPU when ``run`` returns."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


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


def _read_status(path: Path) -> dict[str, bool]:
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"network_namespace": False, "non_root": False, "audit_hook": False}
    return {
        "network_namespace": bool(status["network_namespace"]),
        "non_root": status["uid"] != 0,
        "audit_hook": True,
    }
