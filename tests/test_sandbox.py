"""The sandbox contains code: every escape class of issue 20 is tried and each must fail.

Each attack runs as a real program in the real sandbox (bubblewrap), and the test checks the host
side: a listener that nothing reaches, files that stay unwritten, secrets that stay unread, no
process of the program's left alive, the evaluator and a canary process still running. The
--unsafe-exec fallback gets the tests that apply to it (it cannot contain network or files).
"""

from __future__ import annotations

import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import alive_with

from dllm_viz.tasks import bwrap, sandbox
from dllm_viz.tasks.base import Problem
from dllm_viz.tasks.code import CodeTask
from dllm_viz.tasks.sandbox import SandboxUnavailableError, run_sandboxed, unsafe_exec

PROJECT = Path(__file__).resolve().parent.parent
# A sleeper whose argv carries a marker, so the host can find it in /proc afterwards.
SLEEPER = "[sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}]"

needs_bwrap = pytest.mark.skipif(sandbox.unavailable_reason() is not None,
                                 reason=f"bubblewrap unusable here: {sandbox.unavailable_reason()}")


def run(code: str, *, timeout_s: float = 5.0, unsafe: bool = False) -> sandbox.SandboxResult:
    return run_sandboxed(textwrap.dedent(code), timeout_s=timeout_s, unsafe=unsafe)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on the host's 127.0.0.1 that the sandboxed code tries to reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


def gone_within(marker: str, seconds: float) -> bool:
    """For the unsafe fallback: SIGKILLed processes take a moment to become zombies."""
    deadline = time.monotonic() + seconds
    while alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive_with(marker) == []


def reached(server: socket.socket) -> bool:
    return bool(select.select([server], [], [], 0.3)[0])


def sandbox_temp_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("dllm_viz_sandbox_*")}


# ---------------------------------------------------------------- correctness


@pytest.mark.parametrize("unsafe", [False, True], ids=["bwrap", "unsafe"])
def test_correct_program_passes_and_wrong_one_fails(unsafe: bool) -> None:
    if not unsafe and sandbox.unavailable_reason() is not None:
        pytest.skip("bubblewrap unusable here")
    assert run("assert sum(range(4)) == 6", unsafe=unsafe).passed
    result = run("assert 1 + 1 == 3, 'bad sum'", unsafe=unsafe)
    assert not result.passed and not result.timed_out and "bad sum" in result.error


@needs_bwrap
def test_code_task_scores_inside_the_sandbox() -> None:
    problem = Problem("code", "code|t", "def f(x):", "    return x + 1", "assert f(1) == 2", "f")
    assert CodeTask().score(problem, "    return x + 1")
    assert not CodeTask().score(problem, "    return x")


def test_bad_timeout_is_rejected() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        run_sandboxed("pass", timeout_s=0)


# ---------------------------------------------------------------- killing the evaluator


@needs_bwrap
def test_program_cannot_kill_the_evaluator_or_host_processes() -> None:
    canary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        result = run("""
            import os, signal
            os.kill(os.getppid(), signal.SIGKILL)
            os.system("kill -9 -1")
            os.kill(-1, signal.SIGKILL)
        """)
        assert canary.poll() is None, "a host process was killed from inside the sandbox"
        assert not result.timed_out
    finally:
        canary.kill()
        canary.wait()


# ---------------------------------------------------------------- processes outliving the call


BACKGROUND = {
    "new_session_popen": f"subprocess.Popen({SLEEPER}, start_new_session=True)",
    "double_fork": f"""
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, {SLEEPER})
            os._exit(0)""",
    "fork_tree": f"""
        for _ in range(3):
            if os.fork() == 0:
                for _ in range(3):
                    if os.fork() == 0:
                        os.execv(sys.executable, {SLEEPER})
                os._exit(0)""",
}


@needs_bwrap
@pytest.mark.parametrize("ending", ["exits", "hangs"])
@pytest.mark.parametrize("spawn", sorted(BACKGROUND))
def test_nothing_outlives_the_call(spawn: str, ending: str, marker: str) -> None:
    hangs = ending == "hangs"
    code = "import os, subprocess, sys, time\n" + textwrap.dedent(BACKGROUND[spawn]).format(marker=marker)
    start = time.monotonic()
    # The program that exits gets room to start its tree on a loaded machine; the one that hangs does not.
    result = run(f"{code}\ntime.sleep(0.3)\n{'time.sleep(60)' if hangs else 'pass'}\n", timeout_s=1.5 if hangs else 5)
    assert time.monotonic() - start < 7, "the call did not return promptly"
    assert result.timed_out == hangs, result
    assert alive_with(marker) == [], "a process of the program outlived the call"


@needs_bwrap
def test_the_sandbox_dies_with_a_killed_evaluator(marker: str) -> None:
    program = (f"import subprocess, sys, time\nsubprocess.Popen({SLEEPER.format(marker=marker)}, "
               "start_new_session=True)\ntime.sleep(60)\n")
    evaluate = "import sys\nfrom dllm_viz.tasks.sandbox import run_sandboxed\nrun_sandboxed(sys.argv[1], timeout_s=60)"
    evaluator = subprocess.Popen([sys.executable, "-c", evaluate, program], cwd=PROJECT)
    deadline = time.monotonic() + 30
    while not alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive_with(marker), "the sandboxed program never started"
    evaluator.kill()
    evaluator.wait()
    assert gone_within(marker, 3.0)


@needs_bwrap
def test_background_child_holding_stdout_does_not_fail_a_correct_program(marker: str) -> None:
    start = time.monotonic()
    result = run(f"""
        import subprocess, sys
        subprocess.Popen({SLEEPER.format(marker=marker)})  # inherits stdout and stderr
        assert 2 * 3 == 6
    """, timeout_s=5)
    assert result.passed and time.monotonic() - start < 3
    assert alive_with(marker) == []


# ---------------------------------------------------------------- network


NETWORK = {
    "raw_socket_module": """
        import _socket
        s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(("127.0.0.1", PORT))""",
    "reloaded_socket": """
        import importlib, socket
        socket = importlib.reload(socket)
        socket.create_connection(("127.0.0.1", PORT), timeout=1)""",
    "subprocess": """
        import shutil, subprocess, sys
        code = "import socket; socket.create_connection(('127.0.0.1', PORT), timeout=1)"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=3)
        if shutil.which("curl"):
            subprocess.run(["curl", "-sS", "-m", "1", "http://127.0.0.1:PORT/"], check=True, timeout=3)""",
    "ctypes_libc": """
        import ctypes, socket, struct
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
        assert fd >= 0
        address = struct.pack("=HH4s8x", socket.AF_INET, socket.htons(PORT), socket.inet_aton("127.0.0.1"))
        if libc.connect(fd, address, len(address)) != 0:
            raise OSError(ctypes.get_errno(), "connect failed")""",
}


@needs_bwrap
@pytest.mark.parametrize("way", sorted(NETWORK))
def test_network_is_unreachable(way: str, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    attempt = textwrap.indent(textwrap.dedent(NETWORK[way]).replace("PORT", str(port)), "    ")
    result = run(f"try:\n{attempt}\nexcept Exception as exc:\n    print('refused:', exc)\n"
                 "else:\n    raise SystemExit('CONNECTED')\n", timeout_s=5)
    assert not reached(listener)
    assert result.passed, result.error


def test_unsafe_mode_says_it_cannot_block_the_network(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    result = run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}))\nraise SystemExit(1)",
                 unsafe=True)
    assert not result.isolated and sandbox.UNSAFE_NOTE in result.error
    assert reached(listener)  # the fallback is what it says it is


# ---------------------------------------------------------------- the file system


@needs_bwrap
def test_program_cannot_write_outside_its_work_dir(tmp_path: Path) -> None:
    targets = [tmp_path / "written", PROJECT / "written_by_sandbox.txt", PROJECT / "dllm_viz" / "x.py",
               Path(sys.prefix) / "written_by_sandbox.txt", Path("/written_by_sandbox"), Path("/dev/shm/x")]
    result = run(f"""
        import os
        escaped = []
        for path in {[str(t) for t in targets]!r}:
            try:
                with open(path, "w") as handle:
                    handle.write("escaped")
                escaped.append(path)
            except OSError:
                pass
        with open("scratch.txt", "w") as handle:  # the private work dir is writable
            handle.write("fine")
        assert not escaped, escaped
    """)
    assert result.passed, result.error
    assert not any(t.exists() for t in targets)


@needs_bwrap
def test_program_cannot_read_host_files_or_the_evaluators_environment(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    (tmp_path / "secret.txt").write_text(secret)
    monkeypatch.setenv("DLLM_VIZ_TEST_SECRET", secret)
    leak_probe = f"""
        import glob, os
        found = []
        if {secret!r} in str(os.environ):
            found.append("environ")
        for path in [{str(tmp_path / 'secret.txt')!r}, "/proc/{os.getpid()}/environ",
                     *glob.glob("/proc/*/environ"), "/etc/shadow", {str(PROJECT / 'README.md')!r}]:
            try:
                with open(path, "rb") as handle:
                    text = handle.read().decode("utf-8", "replace")
            except OSError:
                continue
            if {secret!r} in text or "dllm-viz" in text:
                found.append(path)
        assert not found, found
    """
    result = run(leak_probe)
    assert result.passed, result.error
    # The same probe in the unsafe fallback reads the secret file: the probe can fail.
    assert not run(leak_probe, unsafe=True).passed


@needs_bwrap
def test_program_cannot_make_namespaces_of_its_own() -> None:
    """A nested user namespace would give it capabilities there (e.g. an unbounded tmpfs)."""
    result = run("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        for flag in (0x10000000, 0x00020000, 0x40000000):  # CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET
            assert libc.unshare(flag) != 0, hex(flag)
        assert os.getuid() != 0 and "CapEff:\t0000000000000000" in open("/proc/self/status").read()
    """)
    assert result.passed, result.error


# ---------------------------------------------------------------- output and disk floods


@pytest.mark.parametrize("unsafe", [False, True], ids=["bwrap", "unsafe"])
def test_print_flood_is_bounded_and_returns_at_the_timeout(unsafe: bool) -> None:
    if not unsafe and sandbox.unavailable_reason() is not None:
        pytest.skip("bubblewrap unusable here")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    result = run("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", timeout_s=1.0, unsafe=unsafe)
    assert time.monotonic() - start < 3
    assert result.timed_out and result.truncated and "output truncated" in result.error
    assert len(result.error) < 4 * sandbox.MAX_ERROR_CHARS
    growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert growth_kib < 64 << 10, f"evaluator memory grew by {growth_kib} KiB"


@needs_bwrap
def test_finite_flood_then_correct_exit_passes_with_the_end_kept() -> None:
    result = run("import sys\nsys.stdout.write('x' * (50 << 20))\nprint('THE END')\n1 / 0")
    assert not result.passed and result.truncated
    assert "ZeroDivisionError" in result.error and "THE END" in result.error
    assert run("import sys\nsys.stdout.write('x' * (50 << 20))").passed


@pytest.mark.parametrize("unsafe", [False, True], ids=["bwrap", "unsafe"])
def test_filling_the_work_dir_fails_the_program_not_the_scorer(unsafe: bool) -> None:
    if not unsafe and sandbox.unavailable_reason() is not None:
        pytest.skip("bubblewrap unusable here")
    before = sandbox_temp_dirs()
    fill = """
        import os, itertools
        for i in itertools.count():
            with open(f"fill_{i}", "wb") as handle:
                handle.write(b"x" * (512 << 10))
    """
    big_file = "open('big', 'wb').write(b'x' * (4 << 20))"
    problem = Problem("code", "code|fill", "def f():", "    return 1", "assert f() == 1", "f")
    with unsafe_exec(unsafe):
        if not unsafe:  # the unsafe fallback has no disk quota, only the per-file limit
            result = run(fill, timeout_s=5)
            assert not result.passed and not result.timed_out and "No space left" in result.error
        result = run(big_file, unsafe=unsafe)
        assert not result.passed and "File too large" in result.error
        assert not CodeTask().score(problem, "    " + big_file)
    assert sandbox_temp_dirs() == before


@needs_bwrap
def test_fork_bomb_is_bounded_and_cleaned_up(marker: str) -> None:
    counted = run("""
        import os, time
        children = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(60)
                children += 1
        except OSError:
            print("children", children)
            raise SystemExit(0 if children < 64 else 1)
    """, timeout_s=5)
    assert counted.passed, counted.error
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    start = time.monotonic()
    result = run(f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', {bomb!r}, {marker!r}])",
                 timeout_s=1.5)
    assert result.timed_out and time.monotonic() - start < 5
    assert alive_with(marker) == []


# ---------------------------------------------------------------- the unsafe fallback


def test_unsafe_timeout_kills_the_whole_process_group(marker: str) -> None:
    start = time.monotonic()
    result = run(f"""
        import os, subprocess, sys, time
        subprocess.Popen({SLEEPER.format(marker=marker)})
        if os.fork() == 0:
            os.execv(sys.executable, {SLEEPER.format(marker=marker)})
        time.sleep(60)
    """, timeout_s=1.0, unsafe=True)
    assert result.timed_out and not result.isolated and time.monotonic() - start < 3
    assert gone_within(marker, 1.0)


def test_unsafe_background_child_holding_stdout_does_not_fail_a_correct_program(marker: str) -> None:
    start = time.monotonic()
    result = run(f"""
        import subprocess, sys
        subprocess.Popen({SLEEPER.format(marker=marker)}, start_new_session=True)
        assert 2 * 3 == 6
    """, timeout_s=5, unsafe=True)
    assert result.passed and not result.isolated and time.monotonic() - start < 3


def test_unsafe_exec_block_is_the_default_for_calls_inside_it() -> None:
    with unsafe_exec():
        assert not run_sandboxed("pass").isolated
    assert run_sandboxed("pass", unsafe=True).isolated is False


# ---------------------------------------------------------------- refusal without bwrap


def _without_bwrap(monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    monkeypatch.setattr(bwrap, "BWRAP", program)
    sandbox.unavailable_reason.cache_clear()


@pytest.fixture
def restore_probe() -> Iterator[None]:
    yield
    sandbox.unavailable_reason.cache_clear()


def test_missing_bwrap_refuses_with_the_fix(monkeypatch: pytest.MonkeyPatch, restore_probe: None) -> None:
    _without_bwrap(monkeypatch, "dllm-viz-no-such-bwrap")
    problem = Problem("code", "code|t", "def f(x):", "    return x", "assert f(1) == 1", "f")
    with pytest.raises(SandboxUnavailableError, match=r"apt-get install bubblewrap.*--unsafe-exec"):
        CodeTask().score(problem, "    return x")
    with unsafe_exec():
        assert CodeTask().score(problem, "    return x")


def test_bwrap_that_cannot_start_refuses_naming_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     restore_probe: None) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    _without_bwrap(monkeypatch, str(fake))
    with pytest.raises(SandboxUnavailableError, match="No permissions to creating new namespace"):
        run_sandboxed("pass")


def test_evaluate_refuses_code_before_decoding(monkeypatch: pytest.MonkeyPatch, restore_probe: None) -> None:
    from dllm_viz.evaluation import evaluate, heldout_problems

    _without_bwrap(monkeypatch, "dllm-viz-no-such-bwrap")
    problems = heldout_problems("code", 1)
    # No adapter and no pipeline: the refusal must come before either is touched.
    with pytest.raises(SandboxUnavailableError, match="unsafe_exec=True"):
        evaluate(None, problems, None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("argv", [["eval", "--task", "code", "--n", "1"],
                                  ["bench", "--tasks", "arith,code", "--n", "1"]])
def test_cli_refuses_code_scoring_without_bwrap_before_loading(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str],
                                                               restore_probe: None) -> None:
    from dllm_viz.cli import main

    _without_bwrap(monkeypatch, "dllm-viz-no-such-bwrap")
    assert main([*argv, "--model", "/no/such/model"]) == 2  # the model would fail next: it is never loaded
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apt-get install bubblewrap" in err and "--unsafe-exec" in err


def test_cli_unsafe_exec_scores_and_says_it_ran_unsandboxed(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str],
                                                            restore_probe: None) -> None:
    from dllm_viz.cli import main

    _without_bwrap(monkeypatch, "dllm-viz-no-such-bwrap")
    assert main(["eval", "--task", "code", "--n", "1", "--gen-length", "32", "--quiet", "--unsafe-exec"]) == 0
    captured = capsys.readouterr()
    assert sandbox.UNSAFE_NOTE in captured.err and "accuracy=" in captured.out
