"""Thin ctypes wrappers over the Linux calls the sandbox launcher needs (standard library only).

Namespaces (``unshare``), mounts (``mount``, ``umount2``, ``pivot_root``), ``prctl`` and
capabilities (``capset``). Each wrapper raises ``OSError`` with the failing call named.
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
CLONE_THREAD = 0x00010000
NAMESPACE_FLAGS = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
    | CLONE_NEWTIME
)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

# statvfs f_flag bits -> the mount flags a bind remount must keep (the kernel refuses to
# clear a flag that is locked on the source mount).
_KEPT_FLAGS = (
    (os.ST_NOSUID, MS_NOSUID),
    (os.ST_NODEV, MS_NODEV),
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}

_libc = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter already uses
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]
_libc.syscall.restype = ctypes.c_long


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _b(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def unshare(flags: int) -> None:
    """``unshare(2)``: moves the calling process into new namespaces."""
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    """``mount(2)``."""
    result = _libc.mount(_b(source), _b(target), _b(fstype), flags, data.encode() or None)
    _check(result, f"mount({source!r} -> {target!r}, {fstype!r}, {flags:#x}, {data!r})")


def bind_read_only(source: str, target: str, *, device: bool = False) -> None:
    """Bind ``source`` on ``target``, then remount the bind read-only and ``nosuid``.

    ``nodev`` too unless ``device`` (a device node such as ``/dev/null``, then ``noexec``).
    """
    mount(source, target, None, MS_BIND)
    remount_read_only(target, device=device)


def remount_read_only(target: str, *, device: bool = False) -> None:
    """Make the mount at ``target`` read-only and ``nosuid``, keeping its locked flags
    (``nodev``, or ``noexec`` for a ``device`` node)."""
    kept = os.statvfs(target).f_flag
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | (MS_NOEXEC if device else MS_NODEV)
    for st_flag, ms_flag in _KEPT_FLAGS:
        if kept & st_flag:
            flags |= ms_flag
    mount(None, target, None, flags)


def umount(target: str, flags: int = 0) -> None:
    """``umount2(2)``."""
    _check(_libc.umount2(_b(target), flags), f"umount2({target!r})")


def pivot_root(new_root: str, put_old: str) -> None:
    """``pivot_root(2)`` (glibc has no wrapper: a raw system call)."""
    machine = os.uname().machine
    number = _PIVOT_ROOT.get(machine)
    if number is None:
        raise OSError(0, f"pivot_root: unknown system call number on {machine}")
    _check(_libc.syscall(number, _b(new_root), _b(put_old)), f"pivot_root({new_root!r})")


def prctl(option: int, arg: int = 0) -> None:
    """``prctl(2)`` with one argument."""
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl({option}, {arg})")


def no_new_privs() -> bool:
    """Whether ``PR_SET_NO_NEW_PRIVS`` is set on this process."""
    return _libc.prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


_CAP_VERSION_3 = 0x20080522


def drop_all_capabilities() -> None:
    """Empties the bounding, ambient, effective, permitted and inheritable sets."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
            _check(-1, f"prctl(PR_CAPBSET_DROP, {cap})")  # EINVAL: past the last capability
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset(all zero)")


def effective_capabilities() -> int:
    """The effective capability set of this process, as a bit mask."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(header), data), "capget")
    return data[0].effective | (data[1].effective << 32)
