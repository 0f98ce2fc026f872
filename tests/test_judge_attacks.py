"""Attacks on judged scoring (dllm_viz/tasks/judge.py, judge_process.py) that tests/test_judge.py and
tests/test_sandbox_escape.py do not already make: each runs a hostile candidate through run_judged or
a real scorer and asserts the safe outcome (a wrong completion does not pass, nothing leaks, the
evaluator gets a clean SandboxResult).

Three groups passed a wrong completion against the judge's first version (session 35's review; each
test's docstring says how): the candidate raising StopIteration (the tests' own `map`/`filter` loops
ended early), exceptions the judge raised on its own (an argument it could not send) reaching the tests
as if the candidate raised them, and startup hooks (.pth) planted by an unsafe-mode run that every
later judge, sandboxed or not, executed. The rest were contained from the start.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_judge import MODES, judged, needs_bwrap

from dllm_viz.tasks.base import Problem
from dllm_viz.tasks.humaneval import HumanEvalTask
from dllm_viz.tasks.sandbox import unavailable_reason

# The candidate's own ends of its channel, found from its command line (`--serve <request> <reply> ...`),
# and a way to write raw frames there, bypassing the serve loop's own encoding.
RAW = """\
import os, struct, sys
_ARGS = sys.orig_argv[sys.orig_argv.index("--serve"):]
REQUEST, REPLY = int(_ARGS[1]), int(_ARGS[2])

def raw(payload: bytes, length=None) -> None:
    os.write(REPLY, struct.pack(">Q", len(payload) if length is None else length) + payload)
"""


# ---------------------------------------------------------------- exceptions the interpreter acts on


STOP = "def f(x):\n    raise StopIteration\n"
MAP_TESTS = {
    "all_map": "assert all(map(f, [2, 3, 5]))\n",
    "not_any_map": "assert not any(map(f, [4, 6, 8]))\n",
    "for_zip_map": "for got, want in zip(map(f, [1, 2]), [2, 3]):\n    assert got == want\n",
    "filter_is_empty": "assert list(filter(f, [4, 6, 8])) == []\n",
}


@pytest.mark.parametrize("unsafe", MODES)
@pytest.mark.parametrize("tests", sorted(MAP_TESTS))
def test_stop_iteration_from_the_candidate_does_not_end_the_tests_loops(tests: str, unsafe: bool) -> None:
    """Passed before the fix (StopIteration now reaches the tests as CandidateError). `_raised` turned
    the candidate's error into the builtin of that name when it was an Exception subclass;
    StopIteration is one, and raised from inside `map`/`filter` it reads as
    "the iterator is exhausted": `all(map(f, xs))` is True, `any(...)` False, a for loop over
    `zip(map(f, xs), want)` runs zero times, and every assert holds without f answering once."""
    result = judged(STOP, MAP_TESTS[tests], unsafe=unsafe)
    assert not result.passed, "a candidate that only raises StopIteration passed the tests"


@needs_bwrap
def test_a_generator_expression_already_turns_stop_iteration_into_a_failure() -> None:
    """Contained (PEP 479): inside a generator the same StopIteration becomes a RuntimeError."""
    result = judged(STOP, "assert all(f(x) for x in [2, 3])\n")
    assert not result.passed and not result.timed_out, result


IS_PRIME = Problem("humaneval", "HumanEval/is_prime_map", 'def is_prime(n: int) -> bool:\n    """n is prime."""\n',
                   "    return n > 1 and all(n % d for d in range(2, n))\n",
                   "def check(candidate):\n    assert all(map(candidate, [2, 3, 5, 7, 11]))\n"
                   "    assert not any(map(candidate, [1, 4, 6, 8, 9]))\n", "is_prime")


@needs_bwrap
def test_humaneval_tests_that_map_the_candidate_cannot_be_passed_by_stop_iteration() -> None:
    """Passed before the fix, through the real HumanEval scorer: a HumanEval-format problem whose `check`
    maps the candidate over its inputs (not in openai_humaneval's 164, common in hand-written
    suites) was passed by a completion whose whole body is `raise StopIteration`."""
    task = HumanEvalTask()
    assert task.score(IS_PRIME, IS_PRIME.target)  # the problem itself is sound
    assert not task.score(IS_PRIME, "    return False\n")
    assert not task.score(IS_PRIME, "    raise StopIteration\n")


# ---------------------------------------------------------------- the judge's own errors, taken for the candidate's


JUDGE_SIDE = {
    # the judge cannot send bytes: it raises TypeError itself, and the test expected one from f
    "unsendable_argument_is_a_type_error": "try:\n    f(b'abc')\nexcept TypeError:\n    pass\n"
                                           "else:\n    raise AssertionError('f took bytes')\n",
    # json cannot write a >4300-digit int: the judge's send raises ValueError before f is asked
    "huge_int_argument_is_a_value_error": "try:\n    f(10 ** 5000)\nexcept ValueError:\n    pass\n"
                                          "else:\n    raise AssertionError('f took a huge int')\n",
}


@pytest.mark.parametrize("unsafe", MODES)
@pytest.mark.parametrize("tests", sorted(JUDGE_SIDE))
def test_errors_the_judge_raises_itself_do_not_count_as_the_candidates(tests: str, unsafe: bool) -> None:
    """Passed before the fix (the judge's own refusal is now a JudgeError, a BaseException, and fails the
    run even when caught; ints of any size now cross). A test that expects f to refuse a bad input
    (`except TypeError` / `except ValueError`) was satisfied by the judge's own failure to send that
    input: the candidate, which returns 0 for everything and was never called, passed."""
    result = judged("def f(x):\n    return 0\n", JUDGE_SIDE[tests], unsafe=unsafe)
    assert not result.passed, "the judge's own error passed for the candidate's"


# ---------------------------------------------------------------- forged frames on the reply channel


FORGED = {
    "nested_past_the_recursion_limit": "raw(b'{\"result\": ' + b'[' * 100000 + b']' * 100000 + b'}')",
    "lists_json_reads_but_decode_cannot": "raw(b'{\"result\": ' + b'[' * 600 + b']' * 600 + b'}')",
    "tagged_nesting_past_the_recursion_limit": "raw(b'{\"result\": ' + b'{\"tuple\": [' * 700 + b']}' * 700 + b'}')",
    "int_over_the_digit_limit": "sys.set_int_max_str_digits(0)\n    raw(b'{\"result\": 1' + b'0' * 5000 + b'}')",
    "nan": "raw(b'{\"result\": NaN}')",
    "unknown_tag": "raw(b'{\"result\": {\"bytes\": [50]}}')",
    "dict_pairs_that_are_not_pairs": "raw(b'{\"result\": {\"dict\": [[1, 2, 3]]}}')",
    "unhashable_set_member": "raw(b'{\"result\": {\"set\": [[2]]}}')",
    "reply_that_is_not_an_object": "raw(b'[2]')",
    "reply_without_a_result": "raw(b'{\"value\": 2}')",
    "error_and_result_both": "raw(b'{\"result\": 2, \"error\": null}')",
    "error_naming_system_exit": "raw(b'{\"error\": [\"SystemExit\", \"0\"]}')",
    "error_naming_keyboard_interrupt": "raw(b'{\"error\": [\"KeyboardInterrupt\", \"\"]}')",
    "error_naming_an_exception_group": "raw(b'{\"error\": [\"ExceptionGroup\", \"x\"]}')",
    "not_utf8": "raw(b'\\xff\\xfe\\xfd')",
    "header_over_the_limit": "raw(b'', length=1 << 62)",
    "frame_cut_short": "raw(b'{\"result\": 2}', length=100)",
}


@needs_bwrap
@pytest.mark.parametrize("forged", sorted(FORGED))
def test_forged_replies_fail_cleanly(forged: str) -> None:
    """The candidate writes a raw frame of its own choosing as its reply, then ends: the judge
    refuses it as a failed test, never a pass, a hang or an evaluator traceback."""
    candidate = RAW + f"def f(x):\n    {FORGED[forged]}\n    os._exit(0)\n"
    start = time.monotonic()
    result = judged(candidate, "assert f(1) == 2\n")
    assert not result.passed and not result.timed_out, result
    assert time.monotonic() - start < 4
    assert 'File "<tests>", line 1' in result.error, result.error  # the test itself failed, not the judge


@needs_bwrap
def test_replies_written_ahead_or_before_ready_gain_nothing() -> None:
    """Frames written before the judge asks are read in order as the next replies: the candidate
    commits to answers before seeing the arguments, which can only be worse than answering them."""
    ahead = RAW + textwrap.dedent("""\
        import json, time
        raw(json.dumps("ready").encode())
        for value in (0, 0):
            raw(json.dumps({"result": value}).encode())
        time.sleep(30)
        def f(x):
            return x + 1
        """)
    assert not judged(ahead, "assert f(1) == 2\nassert f(2) == 3\n").passed
    before_ready = RAW + "raw(b'{\"result\": 2}')\ndef f(x):\n    return 0\n"
    result = judged(before_ready, "assert f(1) == 2\n")
    assert not result.passed and "did not load" in result.error


# ---------------------------------------------------------------- what the judge reads after the candidate starts


# Runs if the judge ever imports it: takes the secret from the judge's frame and reports a pass.
STEAL = """\
import os, sys
frame = sys._getframe()
while frame is not None:
    if "done_fd" in frame.f_locals:
        for value in frame.f_locals.values():
            if type(value) is bytes and len(value) == 64:
                os.write(frame.f_locals["done_fd"], value)
        os._exit(0)
    frame = frame.f_back
"""


@needs_bwrap
def test_modules_planted_by_the_candidate_are_never_imported_by_the_judge() -> None:
    """The judge imports lazily after the candidate starts (the setup's and the tests' imports,
    traceback on failure): the candidate plants a secret-stealing module under every name it
    imports, plus a sitecustomize and a .pth, in every directory it can write (only /sandbox), and
    returns wrong answers. The judge (`python -I`, no cwd on sys.path, read-only prefix) must run
    its tests on the real modules and fail."""
    names = ["random", "math", "copy", "string", "hashlib", "typing", "collections", "re", "traceback",
             "linecache", "json", "sitecustomize", "usercustomize"]
    candidate = f"""\
        import os, sys
        for directory in {{"/sandbox", "/tmp", "/dev/shm", os.getcwd(), *sys.path}}:
            for name in {names!r}:
                for path in (f"{{directory}}/{{name}}.py", f"{{directory}}/{{name}}/__init__.py"):
                    try:
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        with open(path, "w") as handle:
                            handle.write({STEAL!r})
                    except OSError:
                        pass
            try:
                with open(f"{{directory}}/zz_attack.pth", "w") as handle:
                    handle.write("import sitecustomize\\n")
            except OSError:
                pass

        def f(x):
            return 0
        """
    tests = """\
        import os, random, copy, string, hashlib, collections, re
        assert os.path.isfile("/sandbox/random.py") and os.path.isfile("/sandbox/traceback.py")  # planted
        assert f(1) == 2
        """
    result = judged(candidate, tests, setup="from typing import List\nimport math\n")
    assert not result.passed
    assert 'File "<tests>", line 3' in result.error and "AssertionError" in result.error, result.error


@needs_bwrap
def test_the_judges_proc_files_hold_neither_the_secret_nor_the_tests() -> None:
    """The candidate reads every /proc file of the judge (and of the namespace's init) that it can
    open, and hands all of it to the tests, which look for their own secret (taken from the judge's
    frame: trusted test code may) and for a marker only the hidden tests hold."""
    candidate = """\
        import os

        def f():
            seen, opened = [], []
            for top in (f"/proc/{os.getppid()}", "/proc/1"):
                for root, dirs, files in os.walk(top):
                    dirs[:] = [d for d in dirs if d != "net"]
                    for name in files:
                        try:
                            fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NONBLOCK)
                        except OSError:
                            continue
                        try:
                            seen.append(os.read(fd, 1 << 16))
                            opened.append(os.path.join(root, name))
                        except OSError:
                            pass
                        finally:
                            os.close(fd)
            return [b"".join(seen).decode("latin-1"), opened]
        """
    tests = """\
        import re, sys
        frame, secret = sys._getframe(), None
        while frame is not None and secret is None:
            hexes = [v for v in frame.f_locals.values() if type(v) is bytes and re.fullmatch(rb"[0-9a-f]{64}", v)]
            secret = hexes[0] if hexes else None
            frame = frame.f_back
        assert secret is not None, "no secret found in the judge's frames"
        data, opened = f()
        assert len(opened) > 20, opened  # the walk did read the judge's readable files
        assert secret.decode() not in data, "the secret leaked through /proc"
        assert "hidden-" + "marker-3f1c" not in data, "the tests leaked through /proc"
        # hidden-marker-3f1c
        """
    result = judged(candidate, tests)
    assert result.passed, result.error


# ---------------------------------------------------------------- signals, hangs, shared objects, types


@needs_bwrap
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGPIPE", "SIGCHLD", "SIGURG", "SIGWINCH", "SIGCONT"])
def test_signals_the_judge_survives_or_not_never_make_a_pass(signal_name: str) -> None:
    """SIGINT becomes a KeyboardInterrupt in the judge (a failure); the signals it ignores change
    nothing, so the wrong answer still fails at its assert."""
    candidate = f"import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.{signal_name})\n    return 0\n"
    result = judged(candidate, "assert f(1) == 2\nimport time\ntime.sleep(0.2)\n")
    assert not result.passed and not result.timed_out, result


@needs_bwrap
@pytest.mark.parametrize(("candidate", "tests"), [
    ("import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGSTOP)\n    return 2\n", "assert f(1) == 2\n"),
    (RAW + "import json, time\nraw(json.dumps('ready').encode())\ntime.sleep(60)\ndef f(x):\n    return 2\n",
     "assert f('x' * (8 << 20)) == 2\n"),
], ids=["judge_stopped", "candidate_never_reads_a_large_request"])
def test_a_stalled_judge_ends_at_the_timeout(candidate: str, tests: str) -> None:
    start = time.monotonic()
    result = judged(candidate, tests, timeout_s=1.0)
    assert result.timed_out and not result.passed
    assert time.monotonic() - start < 4


@needs_bwrap
def test_exhausting_processes_and_fds_leaves_the_judge_able_to_fail() -> None:
    """The judge starts its one child before the candidate runs and needs no new process or fd
    after: a candidate that takes every process and fd it can still fails on its wrong answer."""
    candidate = """\
        import os, time
        def f(x):
            try:
                while True:
                    if os.fork() == 0:
                        time.sleep(30)
                        os._exit(0)
            except OSError:
                pass
            try:
                while True:
                    os.pipe()
            except OSError:
                pass
            return 0
        """
    result = judged(candidate, "assert f(1) == 2\n")
    assert not result.passed and not result.timed_out and "AssertionError" in result.error, result


@needs_bwrap
def test_lowering_the_judges_rlimits_only_makes_it_fail() -> None:
    """Same user, so prlimit(2) on the judge is allowed (ptrace is not): the candidate cuts the
    judge's open files and address space under what its next import needs. The judge fails."""
    candidate = """\
        import os, resource
        def f(x):
            judge = os.getppid()
            resource.prlimit(judge, resource.RLIMIT_NOFILE, (3, 3))
            resource.prlimit(judge, resource.RLIMIT_AS, (32 << 20, 32 << 20))
            return 2
        """
    result = judged(candidate, "assert f(1) == 2\nimport fractions, decimal, statistics\nassert f(2) == 3\n")
    assert not result.passed and not result.timed_out, result


@needs_bwrap
def test_the_candidate_cannot_mutate_the_tests_objects() -> None:
    """In one interpreter, emptying the argument and returning [] passes `f(xs) == sorted(xs)`
    (the right side is evaluated after f ran). Across the pipe the tests' list is untouched."""
    candidate = "def f(xs):\n    xs.clear()\n    return []\n"
    assert not judged(candidate, "xs = [3, 1, 2]\nassert f(xs) == sorted(xs)\n").passed


@needs_bwrap
def test_bool_and_int_arrive_as_themselves() -> None:
    """`True == 1` is the tests' own choice (as in HumanEval's reference harness); the judge never
    coerces, so a test that asks `is True` (HumanEval/72) still refuses 1."""
    assert not judged("def f(x):\n    return 1\n", "assert f(1) is True\n").passed
    assert not judged("def f(x):\n    return True\n", "assert type(f(1)) is int\n").passed


# ---------------------------------------------------------------- the unsafe mode, and what it leaves behind


HOOK = """\
import os, sys
if len(sys.argv) == 4 and sys.argv[1].isdigit() and sys.argv[2].isdigit():  # the judge's `<job fd> <done fd> ...`
    os.write(int(sys.argv[2]), os.pread(int(sys.argv[1]), 64, 0))
    os._exit(0)
"""


def test_startup_hooks_planted_by_an_unsafe_run_are_not_run_by_later_judges(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Passed before the fix (the launcher and the judge now start with -S: no site module, no .pth).
    The evaluator runs from a virtual environment its user owns (what a non-root
    user has). One unsafe-mode completion writes a .pth file into that environment's site-packages;
    `python -I` still processes .pth files, so every later judge, in unsafe mode AND inside bwrap
    (whose read-only bind of the prefix shows the planted file), runs the hook before its first line,
    reads the secret from its job fd and exits 0 having written it: any wrong completion then passes."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site_packages = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert site_packages.is_dir()
    plant = f"""\
        with open({str(site_packages / "zz_judge_attack.py")!r}, "w") as handle:
            handle.write({HOOK!r})
        with open({str(site_packages / "zz_judge_attack.pth")!r}, "w") as handle:
            handle.write("import zz_judge_attack\\n")

        def f(x):
            return 0
        """
    wrong = "def f(x):\n    return -1\n"
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))
    assert not judged(plant, "assert f(1) == 2\n", unsafe=True).passed
    assert (site_packages / "zz_judge_attack.pth").is_file()  # unsafe mode writes the user's files: as documented
    outcomes = {"unsafe": judged(wrong, "assert f(5) == 6\n", unsafe=True).passed}
    if unavailable_reason() is None:
        monkeypatch.setattr(sys, "prefix", str(venv))  # the evaluator's environment, bound into the sandbox
        outcomes["bwrap"] = judged(wrong, "assert f(5) == 6\n").passed
    assert not any(outcomes.values()), f"a wrong completion passed after the plant: {outcomes}"
