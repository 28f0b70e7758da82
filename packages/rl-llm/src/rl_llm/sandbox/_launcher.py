"""The trusted side of :class:`rl_llm.sandbox.PythonSandbox`: builds the boundary, then runs the code.

Run by the host as ``python -I -B _launcher.py`` with the configuration (and the code) as
a ``marshal``-ed dict on standard input, and a status pipe (``status_fd``) on which it
reports, one length-prefixed ``marshal``-ed dict a message: ``{"pid": ...}`` (the host PID of the process that runs the code),
``{"isolation": ..., "why": ...}`` (the layers in force) and ``{"exit": ...}`` (its wait
status), or ``{"error": ...}``. Three processes, none of which runs untrusted code before
every layer is in place:

1. **setup** (the host's user): a new mount namespace (inside a first user namespace
   when the host is not root). It builds a new root on a tmpfs: read-only ``nosuid``
   binds of the Python installation and the system libraries, ``/dev/null`` and friends,
   and ``/sandbox``, a private tmpfs with a size and inode quota holding ``main.py``; then
   ``pivot_root`` into it and detaches the host's tree. The new root is read-only.
2. **jailer** (forked): drops to ``nobody`` when the host is root (so the code is never
   root outside), then moves into new user, mount, PID, network, IPC, UTS and cgroup
   namespaces; the setup process writes its uid/gid maps (``1000`` inside). The copied
   mounts are now locked: nobody inside can unmount or remount them.
3. **runner** (forked; PID 1 of the new PID namespace): dies with the jailer, sets the
   resource limits, closes every inherited descriptor, drops every capability, sets
   ``no_new_privs``, loads the seccomp allow-list, installs the audit hook, and runs the
   code as ``__main__``. When it exits or is killed, the kernel kills every process in
   its PID namespace.
"""

from __future__ import annotations

import marshal
import os
import resource
import signal
import sys
import types
from collections.abc import Callable
from ctypes import CDLL

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _audit
import _linux
import _seccomp

SANDBOX_UID = 1000
WORKDIR = "/sandbox"
_NOBODY = 65534
_SYSTEM_LIBS = (
    "/lib",
    "/lib32",
    "/lib64",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/local/lib",
)
_DEVICES = ("null", "zero", "full", "random", "urandom")
_JAIL_FLAGS = (
    _linux.CLONE_NEWUSER
    | _linux.CLONE_NEWNS
    | _linux.CLONE_NEWPID
    | _linux.CLONE_NEWNET
    | _linux.CLONE_NEWIPC
    | _linux.CLONE_NEWUTS
    | _linux.CLONE_NEWCGROUP
)


class _Status:
    """Reports to the host: each message a dict, ``marshal``-ed, after its 4-byte length."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, **message: object) -> None:
        data = marshal.dumps(message)
        os.write(self.fd, len(data).to_bytes(4, "little") + data)


def _python_paths(extra: list[str]) -> list[str]:
    """The host directories the code may read: the interpreter's (its ``sys.path`` and
    its executable's directory) and ``extra``."""
    paths = {*sys.path, os.path.dirname(sys.executable), *extra}
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    found = {os.path.realpath(p) for p in paths if p} | {p for p in paths if p}
    return sorted(p for p in found if os.path.isdir(p))


def _covered(path: str, parents: list[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in parents)


def _mirror(new_root: str, path: str) -> str:
    target = new_root + path
    os.makedirs(target, exist_ok=True)
    return target


def _build_root(new_root: str, config: dict, code: str, outside_uid: int) -> None:
    """The sandbox's file system at ``new_root`` (a tmpfs), then ``pivot_root`` into it."""
    _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE)
    _linux.mount(
        "tmpfs", new_root, "tmpfs", _linux.MS_NOSUID | _linux.MS_NODEV, "size=1m,mode=0755"
    )
    bound: list[str] = []
    for path in _SYSTEM_LIBS:
        if os.path.islink(path):
            os.symlink(os.readlink(path), new_root + path)
        elif os.path.isdir(path):
            _linux.bind_read_only(path, _mirror(new_root, path))
            bound.append(path)
    for path in sorted(config["python_paths"], key=len):
        if not _covered(path, bound):
            _linux.bind_read_only(path, _mirror(new_root, path))
            bound.append(path)
    venv_config = os.path.join(sys.prefix, "pyvenv.cfg")
    if os.path.isfile(venv_config) and not _covered(venv_config, bound):
        _mirror(new_root, sys.prefix)
        open(new_root + venv_config, "w").close()
        _linux.bind_read_only(venv_config, new_root + venv_config)
    os.makedirs(new_root + "/dev")
    for name in _DEVICES:
        node = f"/dev/{name}"
        open(new_root + node, "w").close()
        _linux.bind_read_only(node, new_root + node, device=True)
    os.makedirs(new_root + "/etc")
    with open(new_root + "/etc/passwd", "w") as f:
        f.write(f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:{WORKDIR}:/nonexistent\n")
    with open(new_root + "/etc/group", "w") as f:
        f.write(f"sandbox:x:{SANDBOX_UID}:\n")
    work = new_root + WORKDIR
    if os.path.exists(work):
        raise OSError(17, f"{WORKDIR} is a directory of the host that the sandbox would expose")
    os.makedirs(work)
    options = f"size={config['disk']},nr_inodes={config['max_files']},mode=0700"
    if config["host_root"]:
        options += f",uid={outside_uid},gid={outside_uid}"
    flags = _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC
    _linux.mount("tmpfs", work, "tmpfs", flags, options)
    main = work + "/main.py"
    with open(main, "w") as f:
        f.write(code)
    if config["host_root"]:
        os.chown(main, outside_uid, outside_uid)
    if not os.path.exists(new_root + "/tmp"):  # (an interpreter under /tmp puts its dirs there)
        os.symlink(WORKDIR.lstrip("/"), new_root + "/tmp")
    _linux.remount_read_only(new_root)
    os.chdir(new_root)
    _linux.pivot_root(".", ".")
    _linux.umount(".", _linux.MNT_DETACH)
    os.chdir("/")


def _write_maps(proc: int, pid: int, outside_uid: int, outside_gid: int) -> None:
    for name, text in (
        ("setgroups", "deny"),
        ("gid_map", f"{SANDBOX_UID} {outside_gid} 1\n"),
        ("uid_map", f"{SANDBOX_UID} {outside_uid} 1\n"),
    ):
        fd = os.open(f"{pid}/{name}", os.O_WRONLY, dir_fd=proc)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _enter_setup_namespace() -> None:
    """A mount namespace of our own: directly as root, else inside a new user namespace."""
    if os.geteuid() == 0:
        _linux.unshare(_linux.CLONE_NEWNS)
        return
    uid, gid = os.geteuid(), os.getegid()
    _linux.unshare(_linux.CLONE_NEWUSER | _linux.CLONE_NEWNS)
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _die_with(parent: int) -> None:
    """SIGKILL this process when ``parent`` (the thread that started it) dies; exit now if it
    already has. Each process of the chain host -> setup -> jailer -> runner does this."""
    _linux.prctl(_linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _set_limits(config: dict) -> None:
    def limit(which: int, value: int) -> None:
        resource.setrlimit(which, (value, value))

    cpu = max(1, int(-(-config["cpu_time"] // 1)))
    # SIGXCPU at the soft limit, SIGKILL one second later at the hard one.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    limit(resource.RLIMIT_AS, config["memory"])
    limit(resource.RLIMIT_FSIZE, config["max_file_size"])
    limit(resource.RLIMIT_NOFILE, config["max_open_files"])
    limit(resource.RLIMIT_CORE, 0)
    limit(resource.RLIMIT_NPROC, config["max_processes"])
    limit(resource.RLIMIT_MEMLOCK, 0)
    limit(resource.RLIMIT_MSGQUEUE, 0)


def _attempt(layers: dict, why: dict, name: str, step: Callable[[], object]) -> bool:
    try:
        step()
    except OSError as error:
        layers[name] = False
        why[name] = str(error)
        return False
    layers[name] = True
    return True


def _run_code(
    code: str, status: _Status, config: dict, layers: dict, why: dict, library: CDLL | None
) -> None:
    """The runner: last layers, then the untrusted code. Never returns."""
    in_jail = layers.get("namespaces", False)
    if in_jail:
        _linux.prctl(_linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setsid()  # a session of its own: kill(0, ...) reaches no process of the launcher
    workdir = WORKDIR if layers.get("filesystem") else config["workdir"]
    os.chdir(workdir)
    _attempt(layers, why, "rlimits", lambda: _set_limits(config))
    os.closerange(3, status.fd)
    os.closerange(status.fd + 1, 1 << 16)
    _attempt(layers, why, "capabilities_dropped", _linux.drop_all_capabilities)

    def seccomp() -> None:
        if library is None:
            raise OSError(0, why["seccomp"])
        _seccomp.load_filter(library, allow_processes=config["allow_processes"])

    _attempt(layers, why, "seccomp", seccomp)
    layers["no_new_privs"] = _linux.no_new_privs()
    if config["audit_hook"]:
        _audit.install(workdir, config["python_paths"], allow_processes=config["allow_processes"])
    layers["audit_hook"] = bool(config["audit_hook"])
    missing = [name for name in config["require"] if not layers.get(name, False)]
    status.send(isolation=layers, why=why)
    if missing:
        details = "; ".join(f"{name}: {why.get(name, 'not available')}" for name in missing)
        status.send(error=f"required isolation layers unavailable: {details}")
        os._exit(125)
    os.close(status.fd)
    os.environ.clear()
    os.environ.update(
        {"PATH": "/nonexistent", "LANG": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir}
    )
    compiled = compile(code, "<sandbox>", "exec")
    module = types.ModuleType("__main__")
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = module
    sys.argv = ["<sandbox>"]
    try:
        exec(compiled, module.__dict__)
    except SystemExit:
        raise
    except BaseException as error:
        try:
            import traceback

            traceback.print_exception(type(error), error, error.__traceback__.tb_next)
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            pass  # the output cap was reached: what was written is kept
        os._exit(1)
    try:
        sys.stdout.flush()
    except OSError:
        os._exit(1)
    os._exit(0)


def _jail(
    status: _Status,
    config: dict,
    code: str,
    layers: dict,
    why: dict,
    sync: tuple,
    library: CDLL | None,
) -> None:
    """The jailer: unprivileged, new namespaces, then fork the runner and report on it."""
    to_setup, from_setup = sync
    setup_pid = os.getppid()
    layers["non_root"] = not config["host_root"]
    if config["host_root"]:
        try:
            os.setgroups([])
            os.setresgid(_NOBODY, _NOBODY, _NOBODY)
            os.setresuid(_NOBODY, _NOBODY, _NOBODY)
            layers["non_root"] = True
            _die_with(setup_pid)  # a change of credentials clears the parent-death signal
        except OSError as error:
            why["non_root"] = f"could not drop to nobody: {error}"
    if layers.get("filesystem") or config["try_namespaces"]:
        ok = _attempt(layers, why, "namespaces", lambda: _linux.unshare(_JAIL_FLAGS))
        os.write(to_setup, b"u" if ok else b"x")
        if ok and os.read(from_setup, 1) != b"k":
            layers["namespaces"] = False
            why["namespaces"] = "the setup process could not write the uid/gid maps"
            status.send(error="could not map the sandbox user into its namespace")
            os._exit(125)
    os.close(to_setup)
    os.close(from_setup)
    pid = os.fork()
    if pid == 0:
        try:
            _run_code(code, status, config, layers, why, library)
        except BaseException as error:  # a failure of the launcher itself, not of the code
            status.send(error=f"sandbox runner failed: {type(error).__name__}: {error}", why=why)
        os._exit(125)
    status.send(pid=pid)
    _, wait_status = os.waitpid(pid, 0)
    status.send(exit=wait_status)
    os._exit(0)


def main() -> None:
    config = marshal.loads(sys.stdin.buffer.read())
    _die_with(config["host_pid"])  # a SIGKILLed host must not leave the run going
    code = config.pop("code")
    status = _Status(config["status_fd"])
    layers: dict[str, bool] = {}
    why: dict[str, str] = {}
    config["host_root"] = host_root = os.geteuid() == 0
    config["python_paths"] = _python_paths(config["read_roots"])  # read once, used twice
    outside_uid = _NOBODY if host_root else os.geteuid()
    outside_gid = _NOBODY if host_root else os.getegid()
    proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
    try:
        library = _seccomp.library()
    except OSError as error:
        library, why["seccomp"] = None, str(error)
    if config["try_namespaces"]:

        def setup() -> None:
            _enter_setup_namespace()
            _build_root(config["new_root"], config, code, outside_uid)

        _attempt(layers, why, "filesystem", setup)
    if not layers.get("filesystem"):  # the work dir is then a host directory
        with open(os.path.join(config["workdir"], "main.py"), "w") as f:
            f.write(code)
        if host_root:  # the code will run as nobody: let it cross to and own its work dir
            os.chmod(os.path.dirname(config["workdir"]), 0o711)
            for path in (config["workdir"], os.path.join(config["workdir"], "main.py")):
                os.chown(path, _NOBODY, _NOBODY)
    setup_from_jail, jail_to_setup = os.pipe()
    jail_from_setup, setup_to_jail = os.pipe()
    setup_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        _die_with(setup_pid)
        os.close(proc)
        os.close(setup_from_jail)
        os.close(setup_to_jail)
        try:
            _jail(status, config, code, layers, why, (jail_to_setup, jail_from_setup), library)
        except BaseException as error:
            status.send(error=f"sandbox jailer failed: {type(error).__name__}: {error}")
        os._exit(125)
    os.close(jail_to_setup)
    os.close(jail_from_setup)
    if os.read(setup_from_jail, 1) == b"u":
        # The jailer's ids in the parent of its new user namespace: nobody (root host), the
        # setup namespace's root (mapped to our user), or our own ids.
        nested = not host_root and layers.get("filesystem")
        uid, gid = (0, 0) if nested else (outside_uid, outside_gid)
        try:
            _write_maps(proc, pid, uid, gid)
            os.write(setup_to_jail, b"k")
        except OSError as error:
            status.send(error=f"writing the sandbox's uid/gid maps failed: {error}")
            os.write(setup_to_jail, b"f")
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
