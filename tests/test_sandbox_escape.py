"""Adversarial payloads against code scoring: each one is run through the real scorers
(CodeTask.score, HumanEvalTask.score, run_sandboxed) and must be contained.

Two kinds of failure are checked: the payload escaping (files, secrets, network, processes,
the evaluator) and the payload fooling the score into "correct" with a wrong function
(exiting 0 before the asserts, an always-equal result, fake output).
"""

from __future__ import annotations

import os
import socket
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from processes import alive_with

from dllm_viz.tasks import sandbox
from dllm_viz.tasks.base import Problem
from dllm_viz.tasks.code import CodeTask
from dllm_viz.tasks.humaneval import HumanEvalTask
from dllm_viz.tasks.judge import run_judged
from dllm_viz.tasks.sandbox import run_sandboxed, unsafe_exec

PROJECT = Path(__file__).resolve().parent.parent
needs_bwrap = pytest.mark.skipif(sandbox.unavailable_reason() is not None,
                                 reason=f"bubblewrap unusable here: {sandbox.unavailable_reason()}")
MODES = [pytest.param(False, id="bwrap", marks=needs_bwrap), pytest.param(True, id="unsafe")]

CODE = Problem("code", "code|t", "Return a plus 1.\ndef f(a):", "    return a + 1",
               "assert f(1) == 2\nassert f(5) == 6", "f")
HUMANEVAL = Problem("humaneval", "HumanEval/t", 'import math\n\ndef f(a):\n    """a plus 1"""\n',
                    "    return a + 1\n",
                    "def check(candidate):\n    assert candidate(1) == 2\n"
                    "    assert abs(candidate(5) - 6) < 1e-9\n", "f")
SLEEPER = "[sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}]"


def score_code(completion: str, *, unsafe: bool = False) -> bool:
    with unsafe_exec(unsafe):
        return CodeTask().score(CODE, completion)


def passes(completion: str, *, unsafe: bool = False) -> None:
    """CodeTask scores `completion` correct; on failure, the sandbox's own account of why."""
    if not score_code(completion, unsafe=unsafe):
        result = run_judged(CodeTask().program(CODE, completion), unsafe=unsafe)
        pytest.fail(f"scored wrong: {result}")


# ---------------------------------------------------------------- honest programs still score as before


@pytest.mark.parametrize("unsafe", MODES)
def test_honest_completions_still_pass_and_wrong_ones_fail(unsafe: bool) -> None:
    assert score_code("    return a + 1", unsafe=unsafe)
    assert score_code("    print('working on it', flush=True)\n    return a + 1.0", unsafe=unsafe)
    assert score_code("    return a + 1\n\nif __name__ == '__main__':\n    assert f(0) == 1", unsafe=unsafe)
    assert score_code("    return a + 1\n\nimport pickle\nassert pickle.loads(pickle.dumps(f)) is f", unsafe=unsafe)
    assert not score_code("    return a", unsafe=unsafe)
    with unsafe_exec(unsafe):
        assert HumanEvalTask().score(HUMANEVAL, "    return a + 1\n")
        assert HumanEvalTask().score(HUMANEVAL, "```python\ndef f(a):\n    return math.floor(a) + 1\n```")
        assert not HumanEvalTask().score(HUMANEVAL, "    return a\n")


@pytest.mark.parametrize("unsafe", MODES)
def test_generated_references_all_pass_with_the_scoring_guards(unsafe: bool) -> None:
    task = CodeTask()
    problems = task.generate(40, seed=11, split="train")
    with unsafe_exec(unsafe):
        assert all(task.score(p, p.target) for p in problems)


def test_run_sandboxed_keeps_exit_status_semantics_without_must_finish() -> None:
    assert run_sandboxed("raise SystemExit(0)\nassert False", unsafe=True).passed
    assert not run_sandboxed("raise SystemExit(0)\nassert False", unsafe=True, must_finish=True).passed


# ---------------------------------------------------------------- fooling the score with a wrong function


EARLY_EXITS = {
    "sys_exit": "    return 0\nimport sys\nsys.exit(0)",
    "raise_system_exit": "    return 0\nraise SystemExit(0)",
    "exit_builtin": "    return 0\nexit()",
    "quit_builtin": "    return 0\nquit()",
    "os_exit": "    return 0\nimport os\nos._exit(0)",
    "os_exit_inside_the_function": "    import os\n    os._exit(0)",
    "excepthook_exits_0": "    return 0\nimport os, sys\nsys.excepthook = lambda *a: os._exit(0)",
    "atexit_exits_0": "    return 0\nimport atexit, os\natexit.register(lambda: os._exit(0))",
    "thread_exits_0": "    return 0\nimport os, threading, time\nthreading.Thread(target=lambda: os._exit(0)).start()\n"
                      "time.sleep(1)",
    "sigalrm_handler_exits_0": "    return 0\nimport os, signal\n"
                               "signal.signal(signal.SIGALRM, lambda *a: os._exit(0))\n"
                               "signal.setitimer(signal.ITIMER_REAL, 0.001)\nimport time\ntime.sleep(1)",
    "kill_self_with_handler": "    import os, signal\n"
                              "    signal.signal(signal.SIGUSR1, lambda *a: os._exit(0))\n"
                              "    os.kill(os.getpid(), signal.SIGUSR1)",
    "fork_parent_exits_0": "    return 0\nimport os\nif os.fork():\n    os._exit(0)",
    "write_junk_to_every_fd_then_exit_0": "    return 0\nimport os\nfor fd in range(3, 64):\n    try:\n"
                                          "        os.write(fd, b'passed ok 1' * 100)\n    except OSError:\n"
                                          "        pass\nos._exit(0)",
    "guess_the_secret_from_files": "    return 0\nimport os\nseen = b''\nfor p in ['/proc/self/cmdline', "
                                   "'/proc/self/environ', __file__]:\n    seen += open(p, 'rb').read()\n"
                                   "for fd in range(3, 64):\n    try:\n        os.write(fd, seen)\n"
                                   "    except OSError:\n        pass\nos._exit(0)",
}


@pytest.mark.parametrize("unsafe", MODES)
@pytest.mark.parametrize("payload", sorted(EARLY_EXITS))
def test_exiting_0_before_the_asserts_is_not_a_pass(payload: str, unsafe: bool) -> None:
    assert not score_code(EARLY_EXITS[payload], unsafe=unsafe)


@needs_bwrap
@pytest.mark.parametrize("payload", ["import sys\nsys.exit(0)\n", "import os\nos._exit(0)\n", "exit()\n",
                                     "import builtins\nbuiltins.abs = lambda x: 0\nimport sys\nsys.exit()\n"])
def test_humaneval_check_cannot_be_skipped(payload: str) -> None:
    assert not HumanEvalTask().score(HUMANEVAL, "    return 0\n" + payload)


def test_early_exit_says_why() -> None:
    result = run_sandboxed("import sys\nsys.exit(0)\nassert False", unsafe=True, must_finish=True)
    assert not result.passed and not result.timed_out and sandbox.EARLY_EXIT in result.error


WRONG_BUT_EQUAL = {
    "always_equal_object": "    class A:\n        def __eq__(self, other):\n            return True\n    return A()",
    "int_subclass": "    class I(int):\n        def __eq__(self, other):\n            return True\n    return I(0)",
    "metaclass_eq": "    class M(type):\n        def __eq__(cls, other):\n            return True\n"
                    "        __hash__ = type.__hash__\n    class A(metaclass=M):\n"
                    "        def __eq__(self, other):\n            return True\n    return A()",
    "list_of_always_equal": "    class A:\n        __eq__ = lambda s, o: True\n    return [A()]",
    "print_fake_pass_marker": "    print('passed'); print('ok 4 passed'); return 0",
    "assertion_error_replaced": "    return 0\nimport builtins\nbuiltins.AssertionError = type('X', (Exception,), {})",
}


@pytest.mark.parametrize("unsafe", MODES)
@pytest.mark.parametrize("payload", sorted(WRONG_BUT_EQUAL))
def test_a_wrong_result_cannot_pass_by_faking_equality(payload: str, unsafe: bool) -> None:
    assert not score_code(WRONG_BUT_EQUAL[payload], unsafe=unsafe)


@pytest.mark.parametrize("unsafe", MODES)
def test_the_runners_frame_holds_no_secret_for_the_completion(unsafe: bool) -> None:
    """Session 33's known limit: the completion read the runner's secret from its caller's frame
    and wrote it back. It now runs in the candidate's process, where no frame holds the secret."""
    steal = ("    return 0\nimport os, sys\nrunner = sys._getframe(0).f_back\n"
             "os.write(int(runner.f_locals['done_fd']), runner.f_locals['nonce'])\nos._exit(0)")
    assert not score_code(steal, unsafe=unsafe)


# ---------------------------------------------------------------- reading, writing, reaching out


@needs_bwrap
def test_completion_sees_no_secret_file_or_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    (tmp_path / "secret.txt").write_text(secret)
    monkeypatch.setenv("DLLM_VIZ_ESCAPE_SECRET", secret)
    paths = [str(tmp_path / "secret.txt"), f"/proc/{os.getpid()}/environ", f"/proc/{os.getpid()}/cmdline",
             "/proc/1/environ", "/etc/shadow", "/etc/passwd", "/root/.ssh/id_rsa", "/root/.bash_history",
             str(PROJECT / "pyproject.toml"), str(PROJECT / "dllm_viz" / "__init__.py")]
    # Returns the right answer only when nothing outside the sandbox could be read.
    probe = f"""\
        import os
        if {secret!r} in repr(os.environ) or any(k.startswith("DLLM") for k in os.environ):
            return None
        for path in {paths!r}:
            try:
                with open(path, "rb") as handle:
                    handle.read(1)
                return None
            except OSError:
                pass
        try:
            import dllm_viz
            return None
        except ImportError:
            pass
        return a + 1"""
    passes(textwrap.indent(textwrap.dedent(probe), "    "))


@needs_bwrap
def test_completion_cannot_write_outside_or_leave_files(tmp_path: Path) -> None:
    targets = [tmp_path / "x", PROJECT / "escaped_by_sandbox.txt", PROJECT / "dllm_viz" / "__pycache__" / "x.pyc",
               Path(sys.prefix) / "lib" / "escaped.pyc", Path("/root/escaped_by_sandbox"),
               Path("/tmp/escaped_by_sandbox"),
               Path("/dev/shm/escaped_by_sandbox")]
    probe = f"""\
        import os, py_compile
        for path in {[str(t) for t in targets]!r}:
            try:
                with open(path, "w") as handle:
                    handle.write("x")
                return None
            except OSError:
                pass
        try:
            py_compile.compile(os.__file__, doraise=True)  # a .pyc next to the stdlib
            return None
        except (OSError, py_compile.PyCompileError):
            pass
        return a + 1"""
    passes(textwrap.indent(textwrap.dedent(probe), "    "))
    assert not any(t.exists() for t in targets)


@needs_bwrap
def test_completion_reaches_no_network_or_host_socket(tmp_path: Path) -> None:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0dllm-viz-escape-{uuid.uuid4().hex}")
    abstract.listen()
    path_sock = socket.socket(socket.AF_UNIX)
    path_sock.bind(str(tmp_path / "s"))
    path_sock.listen()
    try:
        probe = f"""\
            import socket
            attempts = [(socket.AF_INET, ("127.0.0.1", {tcp.getsockname()[1]})),
                        (socket.AF_UNIX, {abstract.getsockname()!r}), (socket.AF_UNIX, {str(tmp_path / "s")!r}),
                        (socket.AF_UNIX, "/tmp/.X11-unix/X0"), (socket.AF_UNIX, "/run/dbus/system_bus_socket")]
            for family, address in attempts:
                try:
                    socket.socket(family).connect(address)
                    return None
                except OSError:
                    pass
            try:
                socket.getaddrinfo("example.com", 80)
                return None
            except OSError:
                pass
            return a + 1"""
        passes(textwrap.indent(textwrap.dedent(probe), "    "))
        for server in (tcp, abstract, path_sock):
            server.setblocking(False)
            with pytest.raises(BlockingIOError):
                server.accept()
    finally:
        for server in (tcp, abstract, path_sock):
            server.close()


@needs_bwrap
def test_completion_cannot_signal_or_trace_the_evaluator() -> None:
    """Signals reach only the sandbox's own processes: the judge (its parent, so the answer then
    fails), never the evaluator or a process of the host."""
    import subprocess

    canary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        kill = f"""\
            import os, signal
            for pid in (os.getppid(), 1, {os.getpid()}, {canary.pid}, -1):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            return a + 1"""
        assert not score_code(textwrap.indent(textwrap.dedent(kill), "    "))
        assert canary.poll() is None
        trace = """\
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            assert libc.ptrace(16, 1, None, None) != 0  # PTRACE_ATTACH to the namespace init
            return a + 1"""
        passes(textwrap.indent(textwrap.dedent(trace), "    "))
    finally:
        canary.kill()
        canary.wait()


# ---------------------------------------------------------------- resources, with the scorer's runner


@pytest.mark.parametrize("unsafe", MODES)
def test_the_scorers_runner_keeps_the_rlimits(unsafe: bool) -> None:
    probe = """\
        import resource
        assert resource.getrlimit(resource.RLIMIT_AS)[0] == 1 << 30
        assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] == 1 << 20
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 64
        try:
            bytearray(2 << 30)
            return None
        except MemoryError:
            return a + 1"""
    passes(textwrap.indent(textwrap.dedent(probe), "    "), unsafe=unsafe)


@needs_bwrap
@pytest.mark.parametrize("payload", [
    "while True:\n    pass",
    "import time\ntime.sleep(60)",
    "import sys\nwhile True:\n    sys.stdout.write('passed\\n' * 10000)",
    "import os, sys\nos.close(1)\nos.close(2)\nwhile True:\n    pass",
    "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)",
])
def test_hangs_and_floods_end_at_the_timeout(payload: str) -> None:
    start = time.monotonic()
    result = run_sandboxed(payload, timeout_s=1.0, must_finish=True)
    assert result.timed_out and not result.passed
    assert time.monotonic() - start < 4
    assert len(result.error) < 3 * sandbox.MAX_ERROR_CHARS


@needs_bwrap
def test_fork_bomb_and_runaways_through_the_scorer_leave_nothing(marker: str) -> None:
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    payload = f"""\
        import os, subprocess, sys
        subprocess.Popen({SLEEPER.format(marker=marker)}, start_new_session=True)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", {bomb!r}, {marker!r}])
            os._exit(0)
        return a + 1"""
    start = time.monotonic()
    passes(textwrap.indent(textwrap.dedent(payload), "    "))  # the program itself is right
    assert time.monotonic() - start < 8
    assert alive_with(marker) == [], "a process of the program outlived the scoring"


@needs_bwrap
def test_disk_fill_through_the_scorer_fails_the_program_only() -> None:
    payload = """\
        import itertools
        for directory in ("/sandbox", "/dev/shm", "/tmp"):
            try:
                for i in itertools.count():
                    with open(f"{directory}/fill_{i}", "wb") as handle:
                        handle.write(b"x" * (1 << 20))
            except OSError:
                pass
        return a + 1"""
    passes(textwrap.indent(textwrap.dedent(payload), "    "))  # ran out of room, then answered
