"""The sandbox's seccomp allow-list, compiled and loaded by libseccomp (through ctypes).

libseccomp (``libseccomp.so.2``, the library behind systemd's, Docker's and Chromium's
filters) turns system-call names into the native architecture's numbers and emits the
BPF program, including the architecture check (x32 system calls on x86_64 are refused).
Every call not on the list fails with ``EPERM``; ``clone3`` fails with ``ENOSYS`` so that
the C library falls back to ``clone``, whose flags a filter can read.
"""

from __future__ import annotations

import ctypes
import errno

if __package__:
    from ._linux import CLONE_THREAD, NAMESPACE_FLAGS
else:  # loaded by the launcher from this directory, without importing rl_llm (and torch)
    from _linux import CLONE_THREAD, NAMESPACE_FLAGS  # type: ignore[no-redef]

_ACT_ALLOW = 0x7FFF0000
_CMP_NE = 1
_CMP_EQ = 4
_CMP_MASKED_EQ = 7
_AF_UNIX = 1
_TIOCSTI = 0x5412
_PR_ALLOWED = (15, 16, 3, 21, 23, 39, 0x53564D41)  # SET/GET_NAME, GET_DUMPABLE, GET_SECCOMP, ...


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


# What a Python interpreter running ordinary code needs: memory, files inside its own
# view, time, threads, signals among its own processes, pipes and UNIX sockets.
_ALLOWED_NAMES = (
    "read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 "
    "open openat openat2 close close_range creat stat fstat lstat newfstatat statx "
    "lseek _llseek mmap mmap2 mprotect munmap mremap msync madvise mincore brk "
    "rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigtimedwait rt_sigsuspend "
    "sigaltstack access faccessat faccessat2 pipe pipe2 select _newselect pselect6 poll ppoll "
    "epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait epoll_pwait2 eventfd eventfd2 "
    "sched_yield sched_getaffinity sched_getparam sched_getscheduler "
    "sched_get_priority_max sched_get_priority_min getcpu "
    "dup dup2 dup3 nanosleep clock_nanosleep clock_gettime clock_getres gettimeofday time "
    "getpid getppid gettid getuid geteuid getgid getegid getgroups getresuid getresgid "
    "getpgrp getpgid getsid setsid setpgid getpriority "
    "fcntl fcntl64 flock fsync fdatasync sync_file_range truncate ftruncate fallocate fadvise64 "
    "getdents getdents64 getcwd chdir fchdir rename renameat renameat2 mkdir mkdirat rmdir "
    "unlink unlinkat link linkat symlink symlinkat readlink readlinkat "
    "chmod fchmod fchmodat umask utime utimes utimensat futimesat statfs fstatfs "
    "sendfile copy_file_range splice tee "
    "getrlimit setrlimit prlimit64 getrusage sysinfo times uname "
    "futex futex_waitv set_robust_list get_robust_list set_tid_address rseq membarrier "
    "exit exit_group getrandom arch_prctl restart_syscall "
    "kill tkill tgkill wait4 waitid "
    "alarm getitimer setitimer timer_create timer_settime timer_gettime timer_getoverrun "
    "timer_delete timerfd_create timerfd_settime timerfd_gettime "
    "inotify_init inotify_init1 inotify_add_watch inotify_rm_watch get_mempolicy "
    "socketpair connect bind listen accept accept4 sendto recvfrom sendmsg recvmsg "
    "shutdown getsockopt setsockopt getsockname getpeername"
)
ALLOWED = tuple(_ALLOWED_NAMES.split())
# Creating processes: only with allow_processes=True (the namespaces and limits still hold).
PROCESS_CALLS = ("fork", "vfork", "execve", "execveat")


class SeccompError(OSError):
    """libseccomp is missing or refused the filter."""


def library() -> ctypes.CDLL:
    """libseccomp, loaded (call before the file system is taken away)."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        from ctypes import util  # slow (it may run ldconfig): only where the usual name fails

        name = util.find_library("seccomp")
        try:
            lib = ctypes.CDLL(name or "libseccomp.so.2", use_errno=True)
        except OSError as error:
            raise SeccompError(
                0,
                f"libseccomp is not installed ({error}); install it (Debian/Ubuntu: "
                "'apt-get install libseccomp2', Fedora: 'dnf install libseccomp')",
            ) from error
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_void_p,
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


def load_filter(lib: ctypes.CDLL, *, allow_processes: bool) -> None:
    """Compiles the allow-list and loads it on this thread (and its future children).

    Sets ``PR_SET_NO_NEW_PRIVS`` (libseccomp does so by default). Irrevocable.

    Args:
        lib: libseccomp, from :func:`library`.
        allow_processes: also allow ``fork`` and ``execve``.

    Raises:
        SeccompError: the kernel refused the filter.
    """
    ctx = lib.seccomp_init(_errno_action(errno.EPERM))
    if not ctx:
        raise SeccompError(0, "seccomp_init failed")
    try:

        def add(
            name: str, action: int = _ACT_ALLOW, *comparisons: tuple[int, int, int, int]
        ) -> None:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                return  # not a system call on this architecture (e.g. fork on aarch64)
            array = (_ArgCmp * max(1, len(comparisons)))(*[_ArgCmp(*c) for c in comparisons])
            result = lib.seccomp_rule_add_array(ctx, action, number, len(comparisons), array)
            if result < 0:
                raise SeccompError(-result, f"seccomp_rule_add({name}) failed")

        for name in ALLOWED:
            add(name)
        if allow_processes:
            for name in PROCESS_CALLS:
                add(name)
        # clone: threads always, processes only when allowed; never new namespaces.
        mask = NAMESPACE_FLAGS | (0 if allow_processes else CLONE_THREAD)
        wanted = 0 if allow_processes else CLONE_THREAD
        add("clone", _ACT_ALLOW, (0, _CMP_MASKED_EQ, mask, wanted))
        add("clone3", _errno_action(errno.ENOSYS))
        add("socket", _ACT_ALLOW, (0, _CMP_EQ, _AF_UNIX, 0))
        for option in _PR_ALLOWED:
            add("prctl", _ACT_ALLOW, (0, _CMP_EQ, option, 0))
        # ioctl: anything but pushing input into a terminal (no console is visible inside).
        add("ioctl", _ACT_ALLOW, (1, _CMP_NE, _TIOCSTI, 0))
        result = lib.seccomp_load(ctx)
        if result < 0:
            raise SeccompError(-result, f"seccomp_load failed: {errno.errorcode.get(-result)}")
    finally:
        lib.seccomp_release(ctx)
