"""The audit-hook layer (PEP 578): defence in depth inside the sandboxed interpreter.

It refuses sockets, new processes, ``ctypes``, signals, interpreter inspection and files
outside the working directory with a ``PermissionError`` whose text tells the model what
was refused. It is not the boundary (code can fight its own interpreter); the kernel
layers are. Its tables are frozen and captured by the hook's closure, so changing this
module's attributes after installation changes nothing.
"""

from __future__ import annotations

import os
import sys
from types import MappingProxyType

_NETWORK = "network access is disabled in the sandbox"
_PROCESSES = "creating processes is disabled in the sandbox"
_CTYPES = "ctypes is disabled in the sandbox"
_INSPECT = "inspecting the interpreter is disabled in the sandbox"
_SIGNALS = "sending signals is disabled in the sandbox"
# fmt: off
DENIED = MappingProxyType(
    {
        **dict.fromkeys(
            (
                "socket.__new__",
                "socket.connect",
                "socket.bind",
                "socket.getaddrinfo",
                "socket.gethostbyname",
            ),
            _NETWORK,
        ),
        **dict.fromkeys(
            (
                "os.fork",
                "os.forkpty",
                "os.system",
                "os.exec",
                "os.posix_spawn",
                "os.spawn",
                "os.startfile",
                "subprocess.Popen",
            ),
            _PROCESSES,
        ),
        **dict.fromkeys(("ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata"), _CTYPES),
        **dict.fromkeys(
            (
                "gc.get_objects",
                "gc.get_referrers",
                "gc.get_referents",
                "sys.settrace",
                "sys.setprofile",
                "sys._current_frames",
            ),
            _INSPECT,
        ),
        **dict.fromkeys(("os.kill", "os.killpg"), _SIGNALS),
    }
)
PROCESS_EVENTS = frozenset(
    ("os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
     "subprocess.Popen")
)
# Events whose every path argument is checked (rename / link / symlink: both ends).
PATH_EVENTS = frozenset(
    ("open", "os.listdir", "os.scandir", "os.chdir", "os.remove", "os.rename", "os.rmdir",
     "os.mkdir", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.chown", "os.utime",
     "os.mkfifo", "os.mknod", "shutil.copyfile", "shutil.rmtree", "os.readlink")
)
# fmt: on
_READ_ONLY_EVENTS = frozenset(("os.listdir", "os.scandir", "os.chdir", "os.readlink"))
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def install(workdir: str, read_roots: list[str], *, allow_processes: bool) -> None:
    """Installs the hook. Irrevocable: an audit hook cannot be removed."""
    work = os.path.realpath(workdir)
    readable = tuple(os.path.realpath(r) for r in read_roots)
    denied, process_events, path_events = DENIED, PROCESS_EVENTS, PATH_EVENTS
    read_only_events, write_flags = _READ_ONLY_EVENTS, _WRITE_FLAGS
    realpath, fsdecode, sep = os.path.realpath, os.fsdecode, os.sep

    def inside(path: str, roots: tuple[str, ...]) -> bool:
        return any(path == r or path.startswith(r + sep) for r in roots)

    def writing(event: str, args: tuple) -> bool:
        if event in read_only_events:
            return False
        if event != "open":
            return True
        mode, flags = (*args, None, None)[1:3]
        return bool(
            (isinstance(flags, int) and flags & write_flags)
            or (isinstance(mode, str) and any(c in mode for c in "wax+"))
        )

    def hook(event: str, args: tuple) -> None:
        reason = denied.get(event)
        if reason is not None and not (allow_processes and event in process_events):
            raise PermissionError(f"{reason} ({event})")
        if event not in path_events or not args:
            return
        paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
        if event not in ("os.rename", "os.link", "os.symlink"):
            paths = paths[:1]
        for path in paths:
            try:
                resolved = realpath(fsdecode(path))
            except (TypeError, ValueError):
                continue
            if inside(resolved, (work,)):
                continue
            if not writing(event, args) and inside(resolved, readable):
                continue
            raise PermissionError(
                f"access to {resolved!r} is outside the sandbox working directory ({event})"
            )

    sys.addaudithook(hook)
