"""Judged runs (dllm_viz/tasks/judge.py): the tests in one process, the code they judge in another.

What must hold: only plain data crosses between them, by exact type; the candidate cannot reach
the judge (its memory, its fds, the hidden tests, the secret) nor make it pass by exiting, killing
it or writing to its channels; honest programs pass as before, with errors that show the failing
test line.
"""

from __future__ import annotations

import math
import os
import textwrap
import uuid

import pytest
from test_sandbox_escape import MODES, needs_bwrap

from dllm_viz.tasks import judge_process
from dllm_viz.tasks.base import Problem
from dllm_viz.tasks.code import CodeTask
from dllm_viz.tasks.humaneval import HumanEvalTask
from dllm_viz.tasks.judge import JudgedProgram, run_judged
from dllm_viz.tasks.judge_process import CandidateError, decode, encode, receive, send
from dllm_viz.tasks.sandbox import SandboxResult, unsafe_exec


def judged(candidate: str, tests: str, *, entry_point: str = "f", setup: str = "", unsafe: bool = False,
           timeout_s: float = 5.0) -> SandboxResult:
    """`tests` run against `candidate` (both dedented) by the real judge; also tests/test_judge_attacks.py's."""
    result = run_judged(JudgedProgram(textwrap.dedent(candidate), entry_point, textwrap.dedent(tests),
                                      textwrap.dedent(setup)), unsafe=unsafe, timeout_s=timeout_s)
    assert isinstance(result, SandboxResult)  # never an exception out of the evaluator
    return result


# ---------------------------------------------------------------- plain data, exactly


PLAIN = [None, True, False, 0, -7, 10**40, 2.5, -0.0, math.inf, "", "naïve\n\"quoted\"", [], (), {}, set(),
         frozenset({1, 2}), [1, (2, [3.5, None]), {"a": {1, 2}}], {(1, 2): [True], 3: "x"}, ((),), [[[]]]]


@pytest.mark.parametrize("value", PLAIN, ids=repr)
def test_plain_data_crosses_unchanged_and_of_the_same_types(value: object) -> None:
    back = decode(encode(value))
    assert back == value and repr(back) == repr(value)

    def types(v: object) -> object:
        if isinstance(v, list | tuple | set | frozenset):
            return (type(v), sorted(map(repr, map(types, v))))
        if isinstance(v, dict):
            return (dict, sorted(repr((types(k), types(x))) for k, x in v.items()))
        return type(v)

    assert types(back) == types(value)


def test_nan_crosses() -> None:
    assert math.isnan(decode(encode(float("nan"))))


class _AlwaysEqualInt(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


class _Str(str):
    pass


class _FakeInt:
    __class__ = property(lambda self: int)  # type: ignore[assignment]  # isinstance(x, int) believes it

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


def test_subclasses_and_numbers_cross_as_their_plain_values_with_nothing_overridden() -> None:
    """What an honest completion may return (a Counter where a dict is expected, numpy's scalars, a
    namedtuple) passes as in one interpreter; a subclass's overridden methods stay behind."""
    import collections
    import fractions

    pair = collections.namedtuple("pair", "a b")
    crossed = decode(encode([_AlwaysEqualInt(1), _Str("a"), collections.Counter("aab"), pair(1, 2),
                             collections.defaultdict(list, {1: [2]}), fractions.Fraction(1, 2)]))
    assert crossed == [1, "a", {"a": 2, "b": 1}, (1, 2), {1: [2]}, 0.5]
    assert [type(v) for v in crossed] == [int, str, dict, tuple, dict, float]
    assert crossed[0] != 2  # the always-equal int arrived as the 1 it holds


@pytest.mark.parametrize("value", [_FakeInt(), object(), b"bytes", 1j, {"k": range(3)}, (x for x in [1])],
                         ids=repr)
def test_anything_else_is_refused_by_name(value: object) -> None:
    with pytest.raises(TypeError, match="is not plain data"):
        encode(value)


@pytest.mark.parametrize("data", [{"object": []}, {"tuple": [], "set": []}, {"tuple": "ab"}, {"dict": [[1]]},
                                  {"dict": [1]}, {}], ids=repr)
def test_decode_refuses_what_encode_never_makes(data: object) -> None:
    with pytest.raises(ValueError, match="encoded"):
        decode(data)


def test_decode_refuses_unhashable_keys() -> None:
    with pytest.raises(TypeError):
        decode({"dict": [[[1], 2]]})


def test_messages_are_framed_bounded_and_end_cleanly(monkeypatch: pytest.MonkeyPatch) -> None:
    read, write = os.pipe()
    try:
        send(write, {"result": [1, 2]})
        send(write, "ready")
        assert receive(read) == {"result": [1, 2]} and receive(read) == "ready"
        os.write(write, (5).to_bytes(8, "big") + b"{nope")
        with pytest.raises(CandidateError, match="not JSON"):
            receive(read)
        monkeypatch.setattr(judge_process, "MAX_MESSAGE_BYTES", 16)
        os.write(write, (17).to_bytes(8, "big"))
        with pytest.raises(CandidateError, match="over the limit"):
            receive(read)
        with pytest.raises(CandidateError, match="over the limit"):
            send(write, "x" * 20)
    finally:
        os.close(write)
    with pytest.raises(CandidateError, match="process ended"):
        receive(read)
    os.close(read)


# ---------------------------------------------------------------- honest runs


@pytest.mark.parametrize("unsafe", MODES)
def test_values_of_every_plain_kind_reach_the_tests_as_themselves(unsafe: bool) -> None:
    result = judged("""\
        def f(x, *, scale=1):
            return (x * scale, [2.5, None], {"a": {1, 2}}, frozenset({x}), float("nan"))
        """, """\
        import math
        r = f(3, scale=2)
        assert r[:4] == (6, [2.5, None], {"a": {1, 2}}, frozenset({3})) and math.isnan(r[4])
        assert type(r) is tuple and type(r[2]["a"]) is set and f.__name__ == "f"
        """, unsafe=unsafe)
    assert result.passed, result.error


@pytest.mark.parametrize("unsafe", MODES)
def test_a_failing_test_shows_its_own_line_not_the_judges(unsafe: bool) -> None:
    result = judged("def f(a):\n    return a\n", "assert f(1) == 1\nassert f(2) == 3, 'two'\n", unsafe=unsafe)
    assert not result.passed
    assert 'File "<tests>", line 2' in result.error and "assert f(2) == 3, 'two'" in result.error
    assert "AssertionError: two" in result.error and "judge" not in result.error.split("]")[-1]


def test_exceptions_reach_the_tests_as_builtins_only() -> None:
    candidate = """\
        import builtins

        class ValueError(Exception):
            pass
        class Custom(Exception):
            pass
        def f(kind):
            if kind == "value":
                raise builtins.ValueError("bad value")
            if kind == "custom":
                raise Custom("mine")
            if kind == "shadow":
                raise ValueError("shadowing")
            raise SystemExit(0)
        """
    tests = """\
        def raised(kind):
            try:
                f(kind)
            except Exception as exc:
                return type(exc).__name__, str(exc)
        assert raised("value") == ("ValueError", "bad value (raised by the candidate as ValueError)")
        assert raised("custom")[0] == "CandidateError"
        assert raised("shadow")[0] == "ValueError"
        assert raised("exit")[0] == "CandidateError"
        """
    result = judged(candidate, tests, unsafe=True)
    assert result.passed, result.error


@pytest.mark.parametrize(("candidate", "why"), [
    ("def f(:\n", "SyntaxError"),
    ("def g():\n    return 1\n", "KeyError"),
    ("f = 3\n", "TypeError: f is a int, not a function"),
    ("import sys\nsys.exit(0)\ndef f():\n    return 1\n", "SystemExit"),
])
def test_a_candidate_that_does_not_load_fails_even_without_a_call(candidate: str, why: str) -> None:
    result = judged(candidate, "pass\n", unsafe=True)
    assert not result.passed and "did not load" in result.error and why in result.error


def test_arguments_the_candidate_cannot_receive_are_named_and_fail_the_run_even_if_caught() -> None:
    result = judged("def f(x):\n    return 1\n", "f(lambda: 0)\n", unsafe=True)
    assert not result.passed and "argument the candidate cannot receive" in result.error
    caught = "try:\n    f(lambda: 0)\nexcept:\n    pass\nassert f(1) == 1\n"  # the judge's refusal is no verdict
    result = judged("def f(x):\n    return 1\n", caught, unsafe=True)
    assert not result.passed and "JudgeError" in result.error


def test_ints_of_any_size_cross_both_ways() -> None:
    result = judged("def f(x):\n    return x * 10 ** 6000\n", "assert f(10 ** 5000) == 10 ** 11000\n", unsafe=True)
    assert result.passed, result.error


def test_the_entry_point_must_be_a_name() -> None:
    with pytest.raises(ValueError, match="entry point must be a Python name"):
        run_judged(JudgedProgram("x = 1", "not a name", "pass"), unsafe=True)
    problem = Problem("code", "code|x", "Spec.\ndef f(a):", "    return a", "assert f(1) == 1", "f(")
    with pytest.raises(ValueError, match="entry point must be the name"):
        CodeTask().check(problem)
    with pytest.raises(ValueError, match="entry point must be the name"):
        HumanEvalTask().check(Problem("humaneval", "h", "def f():\n", "", "def check(c):\n    pass\n", ""))


# ---------------------------------------------------------------- the candidate against the judge


SCALE_PROMPT = 'def scale(x):\n    return 3 * x\n\n\ndef f(a):\n    """a plus 1"""\n'
SCALED = Problem("humaneval", "HumanEval/scale", SCALE_PROMPT, "    return a + 1\n",
                 "def check(candidate):\n    assert scale(candidate(2)) == 9\n", "f")


@pytest.mark.parametrize("unsafe", MODES)
def test_humaneval_tests_use_the_prompts_helpers_not_the_completions(unsafe: bool) -> None:
    with unsafe_exec(unsafe):
        assert HumanEvalTask().score(SCALED, "    return a + 1\n")
        assert not HumanEvalTask().score(SCALED, "    return 0\n\n\ndef scale(x):\n    return 9\n")
        assert not HumanEvalTask().score(SCALED, "    return 0\n\n\nimport builtins\nbuiltins.scale = lambda x: 9\n")


@pytest.mark.parametrize("unsafe", MODES)
def test_humaneval_refuses_an_object_equal_to_everything(unsafe: bool) -> None:
    """Before the judge, HumanEval's `check` compared whatever the completion returned: such an
    object passed 151 of the 164 problems."""
    always = ("    class A:\n        __eq__ = lambda s, o: True\n        __bool__ = lambda s: True\n"
              "    return A()\n")
    with unsafe_exec(unsafe):
        assert not HumanEvalTask().score(SCALED, always)


@pytest.mark.parametrize("unsafe", MODES)
def test_killing_the_judge_or_writing_into_the_channels_is_no_pass(unsafe: bool) -> None:
    kill = "import os, signal\ndef f(a):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return a\n"
    assert not judged(kill, "assert f(1) == 2\n", unsafe=unsafe).passed
    junk = ("import os\nfor fd in range(3, 32):\n    try:\n        os.write(fd, b'\\0' * 8 + b'ready' * 10)\n"
            "    except OSError:\n        pass\ndef f(a):\n    return a\n")
    assert not judged(junk, "assert f(1) == 2\n", unsafe=unsafe).passed


@needs_bwrap
def test_the_candidate_cannot_reach_the_judge_or_the_hidden_tests() -> None:
    """The judge is non-dumpable and keeps the tests on an fd it closed: every way in must fail.
    The candidate returns the right answer only when none worked."""
    marker = f"hidden-{uuid.uuid4().hex}"
    candidate = f"""\
        import ctypes, os

        def reached():
            judge = os.getppid()
            found = []
            for what, attempt in [
                ("fds", lambda: os.listdir(f"/proc/{{judge}}/fd")),
                ("mem", lambda: open(f"/proc/{{judge}}/mem", "rb").read(1)),
                ("environ", lambda: open(f"/proc/{{judge}}/environ", "rb").read()),
                ("ptrace", lambda: ctypes.CDLL(None, use_errno=True).ptrace(16, judge, 0, 0) == 0 or None),
            ]:
                try:
                    if attempt():
                        found.append(what)
                except OSError:
                    pass
            seen = b""
            for root, _, files in os.walk("/sandbox"):
                for name in files:
                    seen += open(os.path.join(root, name), "rb").read()
            for fd in range(64):
                try:
                    seen += os.pread(fd, 1 << 20, 0)
                except OSError:
                    pass
            seen += open("/proc/self/cmdline", "rb").read() + open(f"/proc/{{judge}}/cmdline", "rb").read()
            if {marker[::-1]!r}[::-1].encode() in seen:
                found.append("tests")
            return found

        def f(a):
            return a + 1 if not reached() else reached()
        """
    result = judged(candidate, f"# {marker}\nassert f(1) == 2, f(1)\n")
    assert result.passed, result.error


def test_a_call_after_the_candidate_ended_says_so() -> None:
    candidate = "import os\ndef f(a):\n    if a:\n        os._exit(0)\n    return a\n"
    tests = ("try:\n    f(1)\nexcept Exception:\n    pass\nimport time\ntime.sleep(0.2)\n"
             "f(0)\n")
    result = judged(candidate, tests, unsafe=True)
    assert not result.passed and judge_process.ENDED in result.error and "BrokenPipe" not in result.error


def test_a_result_over_the_size_limit_is_named() -> None:
    result = judged("def f():\n    return 'x' * (20 << 20)\n", "assert f() == ''\n", unsafe=True)
    assert not result.passed and "over the limit" in result.error, result.error
