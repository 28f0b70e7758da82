"""The child side of :class:`rl_llm.sandbox.PythonSandbox` (standard library only).

Run as ``python -I -B _child.py <config.json>`` by the host, in a new session,
with stdout and stderr redirected to capped files. Before the untrusted code runs,
this bootstrap, in order:

1. sets the resource limits (CPU seconds, address space, file size, open files,
   processes, no core dumps);
2. moves into a new network namespace (``unshare(CLONE_NEWNET)``) when the kernel
   allows it: the process then sees no network interface at all;
3. installs an audit hook (PEP 578) that refuses sockets, new processes,
   ``ctypes`` and any file or directory access outside the working directory and
   the Python installation.

Then it executes ``main.py`` from the working directory as ``__main__``. The
host reports which of the layers were active in :class:`SandboxResult.isolation`.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import sysconfig
import traceback

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_DENY_EVENTS = {
    "socket.__new__": "network access is disabled in the sandbox",
    "socket.connect": "network access is disabled in the sandbox",
    "socket.bind": "network access is disabled in the sandbox",
    "socket.getaddrinfo": "network access is disabled in the sandbox",
    "socket.gethostbyname": "network access is disabled in the sandbox",
    "os.fork": "creating processes is disabled in the sandbox",
    "os.forkpty": "creating processes is disabled in the sandbox",
    "os.system": "creating processes is disabled in the sandbox",
    "os.exec": "creating processes is disabled in the sandbox",
    "os.posix_spawn": "creating processes is disabled in the sandbox",
    "os.spawn": "creating processes is disabled in the sandbox",
    "os.startfile": "creating processes is disabled in the sandbox",
    "subprocess.Popen": "creating processes is disabled in the sandbox",
    "ctypes.dlopen": "ctypes is disabled in the sandbox",
    "ctypes.dlsym": "ctypes is disabled in the sandbox",
    "ctypes.cdata": "ctypes is disabled in the sandbox",
    # Reaching the hook's own function object (to rewrite its closure) goes through gc or tracing.
    "gc.get_objects": "inspecting the interpreter is disabled in the sandbox",
    "gc.get_referrers": "inspecting the interpreter is disabled in the sandbox",
    "gc.get_referents": "inspecting the interpreter is disabled in the sandbox",
    "sys.settrace": "inspecting the interpreter is disabled in the sandbox",
    "sys.setprofile": "inspecting the interpreter is disabled in the sandbox",
    "os.kill": "sending signals is disabled in the sandbox",
    "os.killpg": "sending signals is disabled in the sandbox",
}
_PROCESS_EVENTS = {"os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn"}
_PATH_EVENTS = {
    "open",
    "os.listdir",
    "os.scandir",
    "os.chdir",
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.symlink",
    "os.link",
    "os.truncate",
    "os.chmod",
    "os.chown",
    "os.utime",
    "shutil.copyfile",
    "shutil.rmtree",
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _set_limits(config: dict) -> None:
    def limit(which: int, value: int) -> None:
        resource.setrlimit(which, (value, value))

    cpu = max(1, int(-(-config["cpu_time"] // 1)))
    # The hard limit one second later: SIGXCPU at the soft limit, SIGKILL at the hard one.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    limit(resource.RLIMIT_AS, config["memory"])
    limit(resource.RLIMIT_FSIZE, config["max_file_size"])
    limit(resource.RLIMIT_NOFILE, config["max_open_files"])
    limit(resource.RLIMIT_CORE, 0)
    limit(resource.RLIMIT_NPROC, config["max_processes"])


def _unshare_network() -> bool:
    """A new, empty network namespace: directly (root), else inside a new user namespace."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(_CLONE_NEWNET) == 0 or libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0
    except (OSError, AttributeError):
        return False


def _disable_fork_exec() -> None:
    """``_posixsubprocess.fork_exec`` (used by ``subprocess`` and ``multiprocessing``) raises no
    audit event of its own; replace it so that importing it gives a function that refuses."""
    import _posixsubprocess

    def fork_exec(*args: object, **kwargs: object) -> int:
        raise PermissionError("creating processes is disabled in the sandbox (fork_exec)")

    _posixsubprocess.fork_exec = fork_exec


def _install_audit_hook(workdir: str, read_roots: list[str], allow_processes: bool) -> None:
    workdir = os.path.realpath(workdir)
    read_roots = [os.path.realpath(r) for r in read_roots]

    def inside(path: str, roots: list[str]) -> bool:
        return any(path == r or path.startswith(r + os.sep) for r in roots)

    def hook(event: str, args: tuple) -> None:
        reason = _DENY_EVENTS.get(event)
        if reason is not None and not (allow_processes and event in _PROCESS_EVENTS):
            raise PermissionError(f"{reason} ({event})")
        if event not in _PATH_EVENTS or not args:
            return
        path = args[0]
        if isinstance(path, int) or path is None:
            return  # an already open file descriptor, or the current directory
        try:
            resolved = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return
        if inside(resolved, [workdir]):
            return
        writing = event != "open" or (
            len(args) > 2 and isinstance(args[2], int) and args[2] & _WRITE_FLAGS
        )
        if event == "open" and len(args) > 1 and isinstance(args[1], str):
            writing = writing or any(c in args[1] for c in "wax+")
        if event in {"os.listdir", "os.scandir", "os.chdir"}:
            writing = False
        if not writing and inside(resolved, read_roots):
            return
        raise PermissionError(
            f"access to {resolved!r} is outside the sandbox working directory ({event})"
        )

    sys.addaudithook(hook)


def main() -> None:
    with open(sys.argv[1]) as f:
        config = json.load(f)
    workdir = config["workdir"]
    os.chdir(workdir)
    with open("main.py") as f:
        code = compile(f.read(), "<sandbox>", "exec")
    _set_limits(config)
    network_namespace = config["unshare_network"] and _unshare_network()
    with open(config["status_file"], "w") as f:
        json.dump({"network_namespace": network_namespace, "uid": os.getuid()}, f)
    if not config["allow_processes"]:
        _disable_fork_exec()
    python_roots = {
        sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")
    }
    read_roots = [r for r in (*python_roots, *config["read_roots"]) if r]
    _install_audit_hook(workdir, read_roots, config["allow_processes"])
    sys.argv = ["<sandbox>"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(code, namespace)
    except SystemExit:
        raise
    except BaseException as error:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is sys.stderr:
                    traceback.print_exception(type(error), error, error.__traceback__.tb_next)
                stream.flush()
            except OSError:
                pass  # the output cap was reached: what was written is kept
        os._exit(1)


if __name__ == "__main__":
    main()
