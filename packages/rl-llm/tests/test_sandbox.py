"""PythonSandbox: every containment case ends with a clear message, the host unaffected."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest

from rl_llm.sandbox import PythonSandbox

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the sandbox needs POSIX")


def _sandbox(**kwargs: object) -> PythonSandbox:
    options = {"timeout": 20.0, "cpu_time": 1.0, "memory": 256 << 20, "max_output": 300}
    options.update(kwargs)
    return PythonSandbox(**options)


def _processes_mentioning(paths: list[str]) -> list[str]:
    """Command lines of live processes that mention one of ``paths``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(path in cmdline for path in paths):
            found.append(cmdline)
    return found


@pytest.fixture
def host_check(monkeypatch):
    """After the test: none of its sandbox processes or directories left, host still fine."""
    made: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def recording_mkdtemp(*args, **kwargs):
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    yield
    assert _processes_mentioning(made) == []
    assert not any(Path(path).exists() for path in made)
    assert _sandbox().run("print('still fine')").stdout == "still fine\n"


def test_runs_code_and_returns_stdout(host_check):
    result = _sandbox().run("import math\nprint(math.factorial(5))")
    assert result.success and result.returncode == 0 and result.reason is None
    assert result.stdout == "120\n"
    assert result.to_message() == "120\n"
    assert result.isolation["audit_hook"]


def test_exception_reports_traceback(host_check):
    result = _sandbox().run("x = 1\nraise ValueError('bad value')")
    assert not result.success and result.returncode == 1
    assert "ValueError: bad value" in result.stderr
    assert "exception" in result.reason
    message = result.to_message()
    assert message.startswith("Error:") and "ValueError: bad value" in message


def test_infinite_loop_hits_cpu_limit(host_check):
    # a generous wall-time limit: on a loaded machine one CPU second takes several wall seconds
    result = _sandbox(timeout=60.0, cpu_time=1.0).run("while True:\n    pass")
    assert not result.success
    assert result.reason.startswith("CPU-time limit of 1 s exceeded")


def test_sleeping_code_hits_wall_time_limit(host_check):
    result = _sandbox(timeout=1.0, cpu_time=5.0).run("import time\ntime.sleep(60)")
    assert not result.success and result.returncode == -9
    assert result.reason.startswith("wall-time limit of 1 s exceeded")


def test_memory_bomb_hits_memory_limit(host_check):
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))"
    result = _sandbox(memory=128 << 20).run(code)
    assert not result.success
    assert result.reason == "memory limit of 128 MiB exceeded (MemoryError)."
    assert "MemoryError" in result.to_message()


def test_fork_bomb_is_refused(host_check):
    result = _sandbox().run("import os\nwhile True:\n    os.fork()")
    assert not result.success
    assert result.reason.startswith("forbidden operation: creating processes is disabled")


@pytest.mark.parametrize(
    "code",
    [
        "import subprocess\nsubprocess.run(['true'])",
        "import os\nos.system('true')",
        "import os\nos.posix_spawn('/bin/true', ['true'], {})",
        "import multiprocessing as mp\nmp.get_context('spawn').Process(target=print).start()",
    ],
)
def test_other_ways_to_start_processes_are_refused(host_check, code):
    result = _sandbox().run(code)
    assert not result.success
    # the audit hook's message, or the kernel's EPERM (seccomp) where no audit event fires
    assert result.reason.startswith("forbidden operation:"), result.reason


def test_fork_bomb_with_processes_allowed_is_bounded_by_nproc(host_check):
    code = (
        "import os, time\n"
        "count = 0\n"
        "while True:\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    count += 1\n"
        "print('forked', count, os.getuid())\n"
    )
    result = _sandbox(allow_processes=True, max_processes=8).run(code)
    assert result.success, result.to_message()
    _, count, uid = result.stdout.split()
    assert int(count) < 8
    assert int(uid) != 0 and result.isolation["non_root"]


def test_reading_outside_its_directory_is_refused(host_check, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    for code in (
        f"print(open({str(secret)!r}).read())",
        "print(open('/etc/hostname').read())",
        "print(open('../config.json').read())",
        "import os\nprint(os.listdir('/'))",
    ):
        result = _sandbox().run(code)
        assert not result.success, code
        # refused by the audit hook, or absent from the sandbox's file system
        assert ("outside the sandbox" in result.reason) or ("FileNotFoundError" in result.stderr)
        assert "do not read" not in result.to_message()


def test_files_inside_its_directory_are_fine_and_thrown_away(host_check):
    code = "open('notes.txt', 'w').write('kept?')\nimport os\nprint(os.listdir('.'), os.getcwd())"
    result = _sandbox().run(code)
    assert result.success, result.to_message()
    listed, cwd = result.stdout.rsplit(" ", 1)
    assert "notes.txt" in listed
    assert cwd.strip() == "/sandbox"  # a private tmpfs, gone with the run's mount namespace


def test_opening_a_socket_is_refused(host_check):
    with socket.socket() as server:  # a listener the code could reach if network were allowed
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('connected')"
        result = _sandbox().run(code)
    assert not result.success
    assert "connected" not in result.stdout
    assert result.reason.startswith("forbidden operation: network access is disabled")


def test_huge_output_is_truncated(host_check):
    result = _sandbox(max_output=100, max_file_size=1 << 16).run(
        "while True:\n    print('x' * 1000)"
    )
    assert not result.success
    assert result.reason == "output limit of 65536 bytes exceeded."
    head, note = result.stdout.rsplit("\n", 1)
    assert head == "x" * 100
    assert note == "[output truncated: 65536 bytes in all, first 100 characters shown]"


def test_large_but_allowed_output_is_truncated_on_success(host_check):
    result = _sandbox(max_output=10).run("print('y' * 50)")
    assert result.success
    assert result.stdout.startswith("y" * 10 + "\n[output truncated: 51 bytes")


def test_execute_uses_torchrl_result_format():
    out = _sandbox().execute("print(1)")
    assert out == {"success": True, "stdout": "1\n", "stderr": "", "returncode": 0}
    out = _sandbox().execute("1/0")
    assert out["success"] is False and "ZeroDivisionError" in out["stderr"]


@pytest.mark.parametrize(
    "name", ["timeout", "memory", "max_output", "max_file_size", "max_processes"]
)
def test_bad_limits_are_refused(name):
    with pytest.raises(ValueError, match=f"{name} must be > 0"):
        PythonSandbox(**{name: 0})


def test_code_must_be_a_string():
    with pytest.raises(TypeError, match="expects the code as a str; got bytes"):
        _sandbox().run(b"print(1)")


@pytest.mark.parametrize(
    "code",
    ["import gc\nprint(len(gc.get_objects()))", "import sys\nsys.settrace(lambda *a: None)"],
)
def test_reaching_the_audit_hook_is_refused(host_check, code):
    result = _sandbox().run(code)
    assert not result.success
    assert "inspecting the interpreter is disabled" in result.reason
