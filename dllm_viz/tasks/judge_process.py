"""The two processes of a judged run: the tests (the judge) and the code they judge (the candidate).

Why two: when tests and candidate share one interpreter, nothing in Python keeps the candidate
from the tests' state (it can read the runner's frame, patch `AssertionError`, return an object
equal to everything, or write the "finished" secret itself). Here the candidate runs in a
process of its own and is reached only through `candidate(...)` calls whose arguments and
results cross a pipe as plain data (None, bool, int, float, str, and lists, tuples, dicts, sets
of them, each of its exact type: `encode`), so what the tests compare is always a real value, and
an argument crosses as a copy (a function judged by how it changes its argument cannot be scored
here); the judge runs without the site module (no `.pth` startup hook) and is made
non-dumpable before the candidate starts, so the candidate (the same unprivileged user, without
capabilities in the sandbox) cannot ptrace it or open its /proc files. The hidden tests and the
secret reach the judge on an fd that it closes before the candidate starts: the candidate never
sees them.

Runs inside the sandbox with the standard library only (the sandbox binds no project code): its
source is passed to `python -I -B -S -c` for the judge (bwrap.LAUNCHER) and to `python -I -B -c` for
the candidate (whose program may import what the interpreter has installed). As the judge, with the runner's arguments
`<job fd> <done fd> <program path>` (`sandbox.RUNNER`'s contract: the job fd holds the secret,
a newline and the job as JSON: `entry_point`, `setup`, `tests`); as the candidate,
`--serve <request fd> <reply fd> <program path> <entry point>`.
"""

from __future__ import annotations

import builtins
import json
import numbers
import operator
import os
import struct
import sys
import traceback
from typing import Any

MAX_MESSAGE_BYTES = 16 << 20  # one call's arguments or one result
_LENGTH = struct.Struct(">Q")
_TAGS = ("tuple", "dict", "set", "frozenset")
_SCALARS = (type(None), bool, int, float, str)
# Errors a test must not see as the candidate's: raised inside `map`, `filter` or a `for` loop over
# them, a StopIteration reads as "no more items" (`all(map(f, xs))` holds).
_CONTROL_FLOW = ("StopIteration", "StopAsyncIteration")
ENDED = "the candidate's process ended (it exited, was killed, or closed its channel)"


class CandidateError(Exception):
    """The candidate raised, returned something that is not plain data, or ended; the test fails."""


def encode(value: Any) -> Any:
    """`value` as JSON-ready data; lists stay lists, the other containers become one-key tagged objects.

    What crosses is always a value of an exact plain type. A subclass of one (a Counter, a namedtuple,
    numpy's float64, an int whose `__eq__` says yes to everything) crosses as its base value, read by
    the base type's own methods (`int.__int__`, `dict.items`, ...), so no method it overrides survives
    the crossing; an integral or real number of another type (numpy's int64, a Fraction) crosses as
    the int or float it converts to. Anything else is refused: the reference HumanEval harness, one
    interpreter for both, compared whatever the function returned.

    Raises:
        TypeError: naming the first value that is not plain data.
    """
    if value is None or type(value) is bool:
        return value
    kind = type(value)  # its real type: isinstance would believe a `__class__` property
    for base, read in _BASES:
        if issubclass(kind, base):
            return read(value)
    if issubclass(kind, numbers.Integral):
        return int.__int__(operator.index(value))
    if issubclass(kind, numbers.Real):
        return float.__float__(float(value))
    raise TypeError(f"a {kind.__module__}.{kind.__qualname__} is not plain data (None, bool, int, float, str, "
                    "or lists, tuples, dicts and sets of them)")


_BASES: tuple[tuple[type, Any], ...] = (
    (int, int.__int__),
    (float, float.__float__),
    (str, str.__str__),
    (list, lambda v: [encode(item) for item in list.__iter__(v)]),
    (tuple, lambda v: {"tuple": [encode(item) for item in tuple.__iter__(v)]}),
    (dict, lambda v: {"dict": [[encode(key), encode(item)] for key, item in dict.items(v)]}),
    (set, lambda v: {"set": [encode(item) for item in set.__iter__(v)]}),
    (frozenset, lambda v: {"frozenset": [encode(item) for item in frozenset.__iter__(v)]}),
)


def decode(data: Any) -> Any:
    """The value `encode` made `data` from.

    Raises:
        ValueError: `data` is not something `encode` makes (an unknown tag, a tag with another key).
        TypeError: a dict key or set member that cannot be hashed.
    """
    kind = type(data)
    if any(kind is plain for plain in _SCALARS):
        return data
    if kind is list:
        return [decode(item) for item in data]
    if kind is not dict or len(data) != 1:
        raise ValueError(f"not an encoded value: {str(data)[:80]}")
    (tag, items), = data.items()
    if tag not in _TAGS or type(items) is not list:
        raise ValueError(f"not an encoded value: {str(data)[:80]}")
    if tag == "dict":
        pairs = [decode(pair) for pair in items]
        if any(type(pair) is not list or len(pair) != 2 for pair in pairs):
            raise ValueError("an encoded dict holds [key, value] pairs")
        return {key: item for key, item in pairs}
    return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](decode(item) for item in items)


def send(fd: int, message: Any) -> None:
    """`message` (JSON) to `fd`, length first."""
    send_bytes(fd, json.dumps(message).encode())


def send_bytes(fd: int, data: bytes) -> None:
    """One message already in JSON to `fd`, length first."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise CandidateError(f"a message of {len(data)} bytes is over the limit of {MAX_MESSAGE_BYTES}")
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def receive(fd: int) -> Any:
    """The next message on `fd`.

    Raises:
        CandidateError: the other end closed, sent more than the limit, or sent something that is not JSON.
    """
    header = _read_exactly(fd, _LENGTH.size)
    (length,) = _LENGTH.unpack(header)
    if length > MAX_MESSAGE_BYTES:
        raise CandidateError(f"a message of {length} bytes is over the limit of {MAX_MESSAGE_BYTES}")
    try:
        return json.loads(_read_exactly(fd, length))
    except (ValueError, RecursionError) as exc:
        raise CandidateError(f"a message that is not JSON ({exc})") from None


def _read_exactly(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, min(n - len(data), 1 << 20))
        if not chunk:
            raise CandidateError(ENDED)
        data += chunk
    return data


class JudgeError(BaseException):
    """The judge could not do what the tests asked (an argument that cannot cross to the candidate).

    A BaseException, so a test's `except TypeError` cannot take it for the candidate's own error (and a
    wrong answer pass for a right one); and `refused` below fails the run even if a bare `except` does.
    """


class Candidate:
    """The judged function as the tests see it: each call crosses to the candidate's process."""

    def __init__(self, name: str, request_fd: int, reply_fd: int) -> None:
        self.__name__ = self.__qualname__ = name
        self._request_fd, self._reply_fd = request_fd, reply_fd
        self.refused: str | None = None  # why a call could not be made, once one could not

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            request = json.dumps({"args": encode(list(args)), "kwargs": encode(kwargs)}).encode()
        except (TypeError, ValueError, RecursionError) as exc:
            self.refused = f"the tests passed {self.__name__} an argument the candidate cannot receive: {exc}"
            raise JudgeError(self.refused) from None
        try:
            send_bytes(self._request_fd, request)
        except BrokenPipeError:
            raise CandidateError(ENDED) from None
        reply = receive(self._reply_fd)
        if type(reply) is not dict:
            raise CandidateError("the candidate's reply is not a reply")
        if "error" in reply:
            raise _raised(reply["error"])
        try:
            return decode(reply["result"])
        except (KeyError, ValueError, TypeError, RecursionError) as exc:
            raise CandidateError(f"the candidate's reply is not plain data ({exc})") from None


def _raised(error: Any) -> Exception:
    """The candidate's exception as the tests may expect it: the builtin exception class of that
    name (a test may assert a ValueError), else CandidateError; never anything the candidate defines,
    nor an exception that steers the tests' own control flow (StopIteration)."""
    name, message = (error if type(error) is list and len(error) == 2 else ["CandidateError", str(error)])
    kind = getattr(builtins, str(name), None)
    if not (isinstance(kind, type) and issubclass(kind, Exception)) or name in _CONTROL_FLOW:
        kind = CandidateError
    return kind(f"{message} (raised by the candidate as {name})"[:2000])


def _non_dumpable() -> None:
    """PR_SET_DUMPABLE 0: processes of the same user without CAP_SYS_PTRACE can no longer ptrace
    us or open our /proc files (mem, fd, environ). Linux only; elsewhere there is no sandbox anyway."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _compiled(source: str, name: str) -> Any:
    """`source` compiled, its lines registered so a failing test's traceback shows them."""
    import linecache

    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    return compile(source, name, "exec")


def judge(job_fd: int, done_fd: int, program: str) -> None:
    """Run the job's tests against the candidate in its own process; write the secret to `done_fd`
    only once the last test statement completed."""
    import subprocess

    _non_dumpable()
    sys.set_int_max_str_digits(0)  # an int of any size crosses (json reads ints as decimal text)
    data = b""
    while chunk := os.read(job_fd, 1 << 16):
        data += chunk
    os.close(job_fd)
    os.set_inheritable(done_fd, False)
    secret, _, job_json = data.partition(b"\n")
    job = json.loads(job_json)
    entry_point = job["entry_point"]
    setup, tests = _compiled(job["setup"], "<setup>"), _compiled(job["tests"], "<tests>")
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    serve_args = ["--serve", str(request_r), str(reply_w), program, entry_point]
    server = subprocess.Popen([sys.executable, "-I", "-B", "-c", _own_source(), *serve_args],
                              stdin=subprocess.DEVNULL, pass_fds=(request_r, reply_w), close_fds=True)
    os.close(request_r)
    os.close(reply_w)
    try:
        ready = receive(reply_r)
        if ready != "ready":
            raise CandidateError(f"the candidate's program did not load: {str(ready)[:2000]}")
        namespace: dict[str, Any] = {"__name__": "__main__"}
        exec(setup, namespace)
        candidate = namespace[entry_point] = Candidate(entry_point, request_w, reply_r)
        exec(tests, namespace)
    finally:
        server.kill()
    if candidate.refused is not None:  # a test caught the judge's own refusal: no verdict was reached
        raise JudgeError(candidate.refused)
    os.write(done_fd, secret)


def serve(request_fd: int, reply_fd: int, program: str, entry_point: str) -> None:
    """Load `program` as __main__ and answer the judge's calls of `entry_point` until it closes.

    Nothing here is guarded against the program: it owns this process, and what it can send the
    judge (any message at all) is checked there.
    """
    sys.set_int_max_str_digits(0)  # as the judge: a result of any size crosses
    main = type(sys)("__main__")
    main.__file__ = program
    sys.modules["__main__"], sys.argv[:] = main, [program]
    try:
        with open(program, "rb") as handle:
            exec(compile(handle.read(), program, "exec"), main.__dict__)
        function = main.__dict__[entry_point]
        if not callable(function):
            raise TypeError(f"{entry_point} is a {type(function).__name__}, not a function")
    except BaseException as exc:
        send(reply_fd, f"{type(exc).__name__}: {exc}")
        raise
    send(reply_fd, "ready")
    while True:
        try:
            call = receive(request_fd)
        except CandidateError:
            return
        try:
            reply = {"result": encode(function(*decode(call["args"]), **decode(call["kwargs"])))}
        except BaseException as exc:
            reply = {"error": [type(exc).__name__, str(exc)[:2000]]}
        try:
            send(reply_fd, reply)
        except (CandidateError, ValueError, RecursionError) as exc:  # over the size limit, say: not vanish
            send(reply_fd, {"error": [type(exc).__name__, str(exc)[:2000]]})


def _report(exc: BaseException) -> None:
    """`exc` as the interpreter would print it, with only the tests' and setup's frames (the
    judge's own say nothing about the code judged)."""
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename in ("<setup>", "<tests>")]
    if frames:
        print("Traceback (most recent call last):", file=sys.stderr)
        print("".join(traceback.format_list(frames)), end="", file=sys.stderr)
    print("".join(traceback.format_exception_only(type(exc), exc)), end="", file=sys.stderr)


def _own_source() -> str:
    """This file's text, as `python -c` was given it (the sandbox has no project files to import)."""
    return sys.orig_argv[sys.orig_argv.index("-c") + 1]


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    else:
        try:
            judge(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
        except SystemExit:
            raise
        except BaseException as exc:
            _report(exc)
            sys.exit(1)
