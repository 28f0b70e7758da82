"""The escape suite: each case is code that prints ``ESCAPED`` if an attack worked.

Every case runs twice: with the audit hook, and without it (``audit_hook=False``), so
that the OS boundary alone (namespaces, read-only view, seccomp, limits) is what holds.
After each run the host is checked: nothing written outside, no process left behind.
"""

from __future__ import annotations

import os
import platform
import socket
import textwrap
import threading
import time
from pathlib import Path

import pytest

from rl_llm.sandbox import KERNEL_LAYERS, PythonSandbox, SandboxUnavailableError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the sandbox needs POSIX")


def _sandbox_or_skip(**kwargs: object) -> PythonSandbox:
    options = {"timeout": 20.0, "cpu_time": 2.0, "memory": 256 << 20, "disk": 16 << 20}
    options.update(kwargs)
    try:
        return PythonSandbox(**options)
    except SandboxUnavailableError as error:
        if "namespaces" in str(error):
            pytest.skip(f"this kernel does not give unprivileged user namespaces: {error}")
        raise


X86_64 = platform.machine() == "x86_64"
# x86_64 system-call numbers for the raw-syscall cases (skipped on other architectures).
SYSCALLS = {
    "ptrace": 101, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "unshare": 272, "setns": 308, "keyctl": 250, "add_key": 248, "bpf": 321,
    "io_uring_setup": 425, "userfaultfd": 323, "perf_event_open": 298,
    "process_vm_readv": 310, "init_module": 175, "kexec_load": 246,
    "open_by_handle_at": 304, "clone": 56, "setuid": 105, "mknod": 133,
}  # fmt: skip


def _attempt(body: str) -> str:
    """Code that runs ``body`` and prints ``ESCAPED`` if it finished without an exception."""
    return (
        "try:\n"
        + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
        + "\nexcept BaseException as error:\n"
        "    print('blocked:', type(error).__name__, error)\n"
        "else:\n"
        "    print('ESCAPED')\n"
    )


def _syscall(name: str, *args: int) -> str:
    """A raw system call through libc that raises unless it returned >= 0."""
    call = ", ".join(str(a) for a in (SYSCALLS[name], *args))
    return (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        f"result = libc.syscall({call})\n"
        "assert result >= 0, f'errno {ctypes.get_errno()}'\n"
    )


# The attacks of issue 35 first, then the rest of the suite.
ESCAPES = {
    "clear_audit_tables_then_read_shadow": """
        import sys
        m = sys.modules['__main__']
        for name in ('_DENY_EVENTS', '_PATH_EVENTS'):
            getattr(m, name, set()).clear()
        import _audit
        dict(_audit.DENIED).clear()
        text = open('/etc/shadow').read()
        assert 'root:' in text
        """,
    "fork_exec_shell": """
        import os
        pid = os.fork()
        if pid == 0:
            os.execv('/bin/sh', ['sh', '-c', 'echo ESCAPED'])
        os.waitpid(pid, 0)
        raise RuntimeError('no shell ran')
        """,
    "rename_out_of_workdir": """
        open('payload', 'w').write('x')
        import os
        os.rename('payload', '{target}/renamed')
        """,
    "hard_link_out": """
        open('payload', 'w').write('x')
        import os
        os.link('payload', '{target}/linked')
        """,
    "symlink_out": """
        import os
        os.symlink('/etc/passwd', '{target}/symlinked')
        """,
    "mkfifo_out": """
        import os
        os.mkfifo('{target}/fifo')
        """,
    "ctypes_memmove_then_read_shadow": """
        import ctypes
        buffer = ctypes.create_string_buffer(8)
        ctypes.memmove(buffer, b'rewrite!', 8)
        print(open('/etc/shadow').read())
        """,
    "stat_outside": """
        import os
        os.stat('{target}')
        """,
    "readlink_outside": """
        import os
        os.readlink('/proc/self/exe')
        """,
    "read_host_file": """
        assert 'host secret' in open('{target}/../secret.txt').read()
        """,
    "write_host_file": """
        open('{target}/written.txt', 'w').write('x')
        """,
    "proc_self_environ": """
        open('/proc/self/environ').read()
        """,
    "proc_pid1_root": """
        import os
        os.listdir('/proc/1/root/')
        """,
    "proc_self_mem_write": """
        f = open('/proc/self/mem', 'wb')
        """,
    "sys_kernel": """
        open('/sys/kernel/notes', 'rb').read()
        """,
    "dev_shm_write": """
        open('/dev/shm/escape', 'w').write('x')
        """,
    "raw_block_device": """
        open('/dev/vda', 'rb').read(512)
        """,
    "dev_mem": """
        open('/dev/mem', 'rb').read(16)
        """,
    "signal_parent": """
        import os, signal
        parent = os.getppid()
        assert parent > 1, f'parent is invisible (getppid() = {{parent}})'
        os.kill(parent, signal.SIGKILL)
        """,
    "kill_all_signalable": """
        import os, signal
        os.kill(-1, signal.SIGKILL)
        raise RuntimeError('kill(-1) returned: nothing outside the namespace was visible')
        """,
    "python_write_site_packages": """
        import os
        open(os.path.join(os.path.dirname(os.__file__), 'escape.py'), 'w').write('x')
        """,
    "chmod_interpreter_file": """
        import os
        os.chmod(os.__file__, 0o777)
        """,
    "setuid_root": """
        import os
        os.setuid(0)
        assert os.getuid() == 0
        """,
    "sethostname": """
        import socket
        socket.sethostname('escaped')
        """,
    "chroot": """
        import os
        os.chroot('.')
        """,
    "mknod_device": """
        import os, stat
        os.mknod('disk', stat.S_IFBLK | 0o600, os.makedev(253, 0))
        """,
    "inet_socket": """
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(('127.0.0.1', {port}))
        """,
    "raw_socket": """
        import socket
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        """,
    "netlink_socket": """
        import socket
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
        """,
    "abstract_unix_socket_of_host": """
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect('\\0{abstract}')
        """,
    "unix_socket_file_of_host": """
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect('{target}/../host.sock')
        """,
    "execve_other_binary": """
        import os
        os.execv('/usr/bin/id', ['id'])
        """,
    "ld_preload_spawn": """
        import os, subprocess
        open('evil.so', 'wb').write(b'\\x7fELF')
        env = dict(os.environ, LD_PRELOAD='/sandbox/evil.so')
        subprocess.run(['/usr/bin/true'], env=env, check=True)
        """,
    "huge_argv_exec": """
        import os, sys
        os.execv(sys.executable, [sys.executable, '-c', 'print(1)', 'x' * (1 << 20)])
        """,
    "inherited_descriptors": """
        import os
        inherited = []
        for fd in range(3, 1024):
            try:
                os.fstat(fd)
            except OSError:
                continue
            inherited.append(fd)
        assert inherited, 'no descriptor beyond 0-2 is open'
        """,
    "symlink_to_host_passwd": """
        import os
        os.symlink('/etc/passwd', 'passwd')
        assert 'root:' in open('passwd').read()
        """,
    "tmp_is_host_tmp": """
        import os
        assert os.path.exists('{target}')
        """,
    "host_environment_secret": """
        import os
        assert os.environ.get('RL_LLM_HOST_SECRET'), 'the host environment is not visible'
        """,
    "disk_quota": """
        for i in range(64):
            with open(f'block{{i}}', 'wb') as f:
                f.write(b'x' * (2 << 20))
        """,
    "inode_flood": """
        for i in range(100000):
            open(f'f{{i}}', 'w').close()
        """,
    "mmap_beyond_memory": """
        import mmap
        m = mmap.mmap(-1, 4 << 30)
        m[-1] = 1
        """,
    "no_new_privs_off": """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.prctl(38, 0, 0, 0, 0) == 0 and libc.prctl(39, 0, 0, 0, 0) == 0
        """,
    "clear_parent_death_signal": """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.prctl(1, 0, 0, 0, 0) == 0, 'refused'
        """,
    "tiocsti_inject": """
        import fcntl, termios
        fcntl.ioctl(0, termios.TIOCSTI, b'x')
        """,
    "escape_via_new_user_namespace": """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.unshare(0x10000000) == 0, f'errno {{ctypes.get_errno()}}'
        """,
    "capabilities_left": """
        import ctypes
        class Header(ctypes.Structure):
            _fields_ = [('version', ctypes.c_uint32), ('pid', ctypes.c_int)]
        class Data(ctypes.Structure):
            _fields_ = [('eff', ctypes.c_uint32), ('perm', ctypes.c_uint32), ('inh', ctypes.c_uint32)]
        libc = ctypes.CDLL(None, use_errno=True)
        data = (Data * 2)()
        libc.capget(ctypes.byref(Header(0x20080522, 0)), data)
        assert data[0].eff or data[1].eff or data[0].perm, 'no capability left'
        """,
}
RAW_SYSCALLS = {
    "ptrace_attach": ("ptrace", 16, 1, 0, 0),
    "mount_tmpfs": ("mount", 0, 0, 0, 0, 0),
    "umount_view": ("umount2", 0, 2),
    "pivot_root": ("pivot_root", 0, 0),
    "unshare_user": ("unshare", 0x10000000),
    "setns": ("setns", 0, 0),
    "keyctl": ("keyctl", 0, 0),
    "add_key": ("add_key", 0, 0, 0, 0, 0),
    "bpf": ("bpf", 0, 0, 0),
    "io_uring_setup": ("io_uring_setup", 1, 0),
    "userfaultfd": ("userfaultfd", 0),
    "perf_event_open": ("perf_event_open", 0, 0, -1, -1, 0),
    "process_vm_readv": ("process_vm_readv", 1, 0, 0, 0, 0, 0),
    "init_module": ("init_module", 0, 0, 0),
    "kexec_load": ("kexec_load", 0, 0, 0, 0),
    "open_by_handle_at": ("open_by_handle_at", 0, 0, 0),
    "clone_new_namespaces": ("clone", 0x10000000 | 0x20000000 | 17, 0, 0, 0, 0),
    "raw_setuid_0": ("setuid", 0),
    "raw_mknod_char_device": ("mknod", 0, 0o20600, 0x0101),
}


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A host directory the code must not reach, a listener it must not connect to; after
    the test: nothing written there and no process of the run left."""
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "secret.txt").write_text("host secret")
    monkeypatch.setenv("RL_LLM_HOST_SECRET", "hunter2")
    abstract = f"rl_llm_escape_{os.getpid()}"
    with (
        socket.socket() as tcp,
        socket.socket(socket.AF_UNIX) as unix_file,
        socket.socket(socket.AF_UNIX) as unix_abstract,
    ):
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        unix_file.bind(str(tmp_path / "host.sock"))
        unix_file.listen()
        unix_abstract.bind("\0" + abstract)
        unix_abstract.listen()
        yield {"target": str(target), "port": tcp.getsockname()[1], "abstract": abstract}
    assert list(target.iterdir()) == []
    assert _sandbox_processes() == []


def _sandbox_processes() -> list[str]:
    """Processes still running the sandbox launcher (or anything it became)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if "_launcher.py" in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found


def _run(code: str, **options: object):
    return _sandbox_or_skip(**options).run(code)


@pytest.mark.parametrize("audit_hook", [True, False], ids=["hook", "no_hook"])
@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_escape_is_blocked(host, name, audit_hook):
    code = _attempt(ESCAPES[name].format(**host))
    result = _run(code, audit_hook=audit_hook)
    assert "ESCAPED" not in result.stdout, (name, result)
    assert "hunter2" not in result.stdout + result.stderr
    assert "host secret" not in result.stdout + result.stderr


@pytest.mark.skipif(not X86_64, reason="raw system-call numbers are those of x86_64")
@pytest.mark.parametrize("audit_hook", [True, False], ids=["hook", "no_hook"])
@pytest.mark.parametrize("name", sorted(RAW_SYSCALLS))
def test_raw_system_call_is_refused(host, name, audit_hook):
    syscall, *args = RAW_SYSCALLS[name]
    result = _run(_attempt(_syscall(syscall, *args)), audit_hook=audit_hook)
    assert "ESCAPED" not in result.stdout, (name, result)
    assert "blocked:" in result.stdout, result
    if not audit_hook:  # the kernel (seccomp) refused it, not a missing argument
        assert "errno 1" in result.stdout, result


@pytest.mark.parametrize("audit_hook", [True, False], ids=["hook", "no_hook"])
@pytest.mark.parametrize(
    "name", ["fork_exec_shell", "execve_other_binary", "ld_preload_spawn", "signal_parent"]
)
def test_escape_with_processes_allowed_is_blocked(host, name, audit_hook):
    code = _attempt(ESCAPES[name].format(**host))
    result = _run(code, audit_hook=audit_hook, allow_processes=True)
    assert "ESCAPED" not in result.stdout, (name, result)


@pytest.mark.parametrize("audit_hook", [True, False], ids=["hook", "no_hook"])
def test_detached_process_does_not_outlive_the_run(host, audit_hook):
    code = (
        "import os, time, ctypes\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "print('parent done')\n"
    )
    result = _run(code, audit_hook=audit_hook, allow_processes=True)
    assert result.success, result
    assert _sandbox_processes() == []


@pytest.mark.parametrize("audit_hook", [True, False], ids=["hook", "no_hook"])
def test_zombie_and_fork_flood_is_bounded_and_reaped(host, audit_hook):
    code = (
        "import os\n"
        "made = 0\n"
        "for _ in range(500):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os._exit(0)\n"
        "        made += 1\n"
        "    except OSError:\n"
        "        break\n"
        "print('forked', made)\n"
    )
    result = _run(code, audit_hook=audit_hook, allow_processes=True, max_processes=8)
    assert result.success, result
    assert int(result.stdout.split()[1]) < 500  # RLIMIT_NPROC stopped the flood
    assert _sandbox_processes() == []


def test_wall_time_kill_takes_every_process_of_the_run(host):
    code = (
        "import os, time\n"
        "for _ in range(3):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        time.sleep(60)\n"
        "time.sleep(60)\n"
    )
    result = _run(code, allow_processes=True, timeout=2.0)
    assert result.reason.startswith("wall-time limit"), result
    assert _sandbox_processes() == []


def test_code_never_runs_as_root_outside(host):
    """While the code runs, every process of the run but the trusted setup one is
    unprivileged on the host (``nobody`` for a root host)."""
    sandbox = _sandbox_or_skip()
    seen: list[tuple[int, int]] = []
    thread = threading.Thread(target=sandbox.run, args=("import time\ntime.sleep(3)",))
    thread.start()
    deadline = time.monotonic() + 10
    while thread.is_alive() and time.monotonic() < deadline and not seen:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if len(fields.get("NSpid", "").split()) == 2 and fields["NSpid"].split()[1] == "1":
                uids = {int(u) for u in fields["Uid"].split()}
                cmdline = (entry / "cmdline").read_bytes()
                if b"_launcher.py" in cmdline:
                    seen.append((int(entry.name), max(uids)))
        time.sleep(0.05)
    thread.join()
    assert seen, "the code's process was not seen"
    assert all(uid != 0 for _, uid in seen), seen
    if os.geteuid() == 0:
        assert all(uid == 65534 for _, uid in seen), seen


def test_disk_quota_reports_a_clear_reason(host):
    code = "for i in range(64):\n    open(f'b{i}', 'wb').write(b'x' * (1 << 20))\n"
    result = _run(code, disk=8 << 20)
    assert not result.success
    assert result.reason == "disk quota of 8 MiB exceeded (no space left on device).", result


def test_every_kernel_layer_is_in_force_by_default(host):
    result = _run("print('ok')")
    assert result.success
    for layer in KERNEL_LAYERS:
        assert result.isolation[layer], (layer, result.isolation)


def test_the_view_is_read_only_and_nosuid(host):
    code = (
        "import os, sys\n"
        "flags = [os.statvfs(p).f_flag for p in ('/', '/usr/lib', os.path.dirname(os.__file__))]\n"
        "print(all(f & os.ST_RDONLY and f & os.ST_NOSUID for f in flags))\n"
        "print(os.statvfs('/sandbox').f_flag & os.ST_NOEXEC != 0)\n"
    )
    result = _run(code)
    assert result.stdout.split() == ["True", "True"], result


def test_unknown_required_layer_is_refused():
    with pytest.raises(ValueError, match="unknown layers"):
        PythonSandbox(require=("magic",))


HARMLESS_ON_THE_HOST = (
    "write_host_file",
    "read_host_file",
    "stat_outside",
    "symlink_out",
    "mkfifo_out",
    "hard_link_out",
    "rename_out_of_workdir",
    "tmp_is_host_tmp",
    "host_environment_secret",
    "fork_exec_shell",
    "readlink_outside",
    "proc_self_environ",
    "unix_socket_file_of_host",
    "abstract_unix_socket_of_host",
    "inet_socket",
)


@pytest.mark.parametrize("name", HARMLESS_ON_THE_HOST)
def test_the_probe_escapes_without_the_sandbox(tmp_path, name):
    """The suite's probes are live: run unsandboxed, the harmless ones print ESCAPED."""
    import subprocess
    import sys

    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "secret.txt").write_text("host secret")
    work = tmp_path / "work"
    work.mkdir()
    abstract = f"rl_llm_probe_{os.getpid()}"
    with (
        socket.socket() as tcp,
        socket.socket(socket.AF_UNIX) as unix_file,
        socket.socket(socket.AF_UNIX) as unix_abstract,
    ):
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        unix_file.bind(str(tmp_path / "host.sock"))
        unix_file.listen()
        unix_abstract.bind("\0" + abstract)
        unix_abstract.listen()
        values = {"target": str(target), "port": tcp.getsockname()[1], "abstract": abstract}
        code = _attempt(ESCAPES[name].format(**values))
        env = dict(os.environ, RL_LLM_HOST_SECRET="hunter2")
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=work, env=env, capture_output=True, timeout=60
        )
    assert b"ESCAPED" in out.stdout, out


def test_without_namespaces_the_sandbox_refuses_unless_told_and_says_what_held(host):
    """The path of a machine without user namespaces: default require refuses to run;
    require=() runs with the layers that remain, and isolation says which."""
    sandbox = PythonSandbox(timeout=20.0, require=())
    sandbox._try_namespaces = False
    result = sandbox.run("import os\nprint(os.geteuid() != 0)")
    assert result.success, result
    assert result.stdout == "True\n"  # a root host still drops to nobody
    assert not result.isolation["namespaces"] and not result.isolation["filesystem"]
    assert result.isolation["seccomp"] and result.isolation["rlimits"]
    sandbox.require = KERNEL_LAYERS
    with pytest.raises(SandboxUnavailableError, match="required isolation layers unavailable"):
        sandbox.run("print(1)")


def test_run_dirs_of_a_host_killed_mid_run_are_removed(tmp_path):
    """A host SIGKILLed during run() cannot clean up; the next sandbox removes its dir."""
    import subprocess
    import sys
    import tempfile

    code = (
        "import threading, time, os\n"
        "from rl_llm.sandbox import PythonSandbox\n"
        "s = PythonSandbox(timeout=60)\n"
        "threading.Thread(target=s.run, args=('import time; time.sleep(60)',)).start()\n"
        "time.sleep(1.5)\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(60)\n"
    )
    host = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(host.stdout.readline())
        left = list(Path(tempfile.gettempdir()).glob(f"rl_llm_sandbox_{pid}_*"))
        assert left, "the run's directory was not found while it ran"
        host.kill()
        host.wait()
    finally:
        host.kill()
        host.wait()
        host.stdout.close()
    deadline = time.monotonic() + 10
    while _sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.1)  # the runner dies with its jailer (PR_SET_PDEATHSIG)
    assert _sandbox_processes() == []
    PythonSandbox._probe.__globals__["_PROBES"].clear()  # probe again: it cleans up first
    _sandbox_or_skip()
    assert not any(path.exists() for path in left)
