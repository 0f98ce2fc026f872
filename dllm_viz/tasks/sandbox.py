"""Run untrusted Python (model completions, a user's gold code) contained, time-limited, bounded.

By default the program runs inside bubblewrap (see bwrap.py): no network, no host files beyond
the read-only interpreter, no view of host processes, a private 16 MiB work dir, nothing left
running after the call. Where bwrap is missing or not permitted, scoring refuses with the fix;
an explicit opt-in (`unsafe_exec=True`, the CLI's --unsafe-exec) runs the program as a plain
subprocess instead, still in its own process group with rlimits and bounded output.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from dllm_viz.tasks import bwrap, memory_cgroup
from dllm_viz.tasks.supervise import Outcome, watch

MAX_ERROR_CHARS = 2000
MAX_OUTPUT_BYTES = 64 << 10
MEMORY_LIMIT_BYTES = 1 << 30  # each process's address space, and all of a sandbox's memory together
FILE_SIZE_LIMIT_BYTES = 1 << 20
OPEN_FILES_LIMIT = 64
PROCESS_LIMIT = 32
# Once the sandbox init is killed, the kernel ends everything in its pid namespace before the
# init itself exits; this long is allowed for that before bwrap's own process group is killed.
KILL_WAIT_S = 2.0
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
UNSAFE_NOTE = ("code ran WITHOUT the bubblewrap sandbox (--unsafe-exec): it could reach the network, "
               "read and write your files, and leave processes behind, and a hostile program could forge its "
               "own score or a later run's")

EARLY_EXIT = ("the program exited before reaching its end (sys.exit, exit(), os._exit or a signal handler before "
              "the tests after it ran), which does not count as passing")
# With must_finish, the program runs as `python -I -B -S -c RUNNER <nonce fd> <done fd> <program>`: the
# runner reads a one-time secret from the first fd, runs the program as __main__, and writes the secret
# to the second fd only once the program's last statement has completed. An exit status of 0 alone
# (sys.exit(0), os._exit(0), a SystemExit-raising hook before the asserts) is then not a pass. The
# program shares the runner's interpreter, so it can still reach the secret: scorers use
# judge.run_judged, whose runner keeps the tests and the secret in a process the program cannot reach.
RUNNER = """\
import os, sys
def run():
    nonce_fd, done_fd, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    nonce, write, excepthook, exit = b"", os.write, sys.excepthook, sys.exit
    while chunk := os.read(nonce_fd, 256):
        nonce += chunk
    os.close(nonce_fd)
    os.set_inheritable(done_fd, False)
    with open(path, "rb") as handle:
        code = compile(handle.read(), path, "exec")
    main = type(sys)("__main__")
    main.__file__ = path
    sys.modules["__main__"], sys.argv[:] = main, [path]
    try:
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:  # reported as the interpreter would, without this runner's frames
        exc = exc.with_traceback(exc.__traceback__.tb_next)
        excepthook(type(exc), exc, exc.__traceback__)
        exit(1)
    write(done_fd, nonce)
run()
"""

_UNSAFE_EXEC: ContextVar[bool] = ContextVar("dllm_viz_unsafe_exec", default=False)


class SandboxUnavailableError(ValueError):
    """bwrap is missing or not permitted here; a ValueError so the CLI and pages report it as one line."""


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """Outcome of one run.

    Attributes:
        passed: the program exited with status 0 before the timeout.
        timed_out: the program was killed for exceeding the timeout.
        error: the tail of its output (or why it was killed); empty when passed.
        truncated: output beyond MAX_OUTPUT_BYTES was dropped (only its end is kept).
        isolated: it ran inside bubblewrap (False under unsafe_exec).
    """

    passed: bool
    timed_out: bool
    error: str
    truncated: bool = False
    isolated: bool = True


@contextmanager
def unsafe_exec(enabled: bool = True) -> Iterator[None]:
    """Within this block, run_sandboxed without an explicit choice runs unsafe when `enabled`.

    This is how evaluate / run_bench pass the opt-in down to the tasks' scorers without
    widening every task's `score` signature.
    """
    token = _UNSAFE_EXEC.set(enabled)
    try:
        yield
    finally:
        _UNSAFE_EXEC.reset(token)


@functools.cache
def unavailable_reason() -> str | None:
    """Why bwrap cannot sandbox code here (a sentence with the fix), or None when it can.

    Probed once per process by running an empty program in the real sandbox.
    """
    if shutil.which(bwrap.BWRAP) is None:
        return f"code scoring needs the bubblewrap sandbox, and {bwrap.BWRAP!r} is not on PATH: {INSTALL_HINT}"
    try:
        outcome = _run_bwrap("pass", timeout_s=10.0)
    except SandboxUnavailableError as exc:
        return f"code scoring needs the bubblewrap sandbox, and {exc}"
    if outcome.returncode == 0:
        return None
    detail = outcome.output.decode("utf-8", "replace").strip().splitlines()
    why = detail[-1] if detail else f"exit status {outcome.returncode}"
    return (f"code scoring needs the bubblewrap sandbox, and bwrap failed to start it here ({why}): check that "
            "bwrap works and that user namespaces are allowed (e.g. sysctl kernel.unprivileged_userns_clone=1, or a "
            "container started with user namespaces permitted)")


def require_sandbox(*, unsafe: bool = False) -> None:
    """Raise SandboxUnavailableError (naming the fix) unless code can be scored as asked.

    Call before expensive work (loading a model) so a run fails in seconds, not after decoding.
    """
    if unsafe:
        return
    reason = unavailable_reason()
    if reason is not None:
        raise SandboxUnavailableError(
            f"{reason}; or pass --unsafe-exec (unsafe_exec=True in the API) to run generated code unisolated")


def run_sandboxed(code: str, *, timeout_s: float = 5.0, unsafe: bool | None = None,
                  must_finish: bool = False, runner: str = RUNNER, job: bytes = b"") -> SandboxResult:
    """Run `code` in a fresh, contained interpreter and report whether it exited cleanly.

    Args:
        code: Python source; a failed assert or any exception counts as not passed.
        timeout_s: wall-clock limit; the whole sandbox is killed after it.
        unsafe: run without bwrap; None takes the surrounding `unsafe_exec` block's choice.
        must_finish: passing also needs the program to have run to its last statement (what a
            scorer whose tests come last wants): an exit with status 0 before it is a failure.
        runner / job: with must_finish, the runner's source (RUNNER's contract: `<secret fd>
            <done fd> <program>`; `judge.run_judged` passes the judge) and what its secret fd holds
            after the secret and a newline (the judge's tests; nothing for RUNNER).

    Raises:
        ValueError: if `timeout_s` is not positive.
        SandboxUnavailableError: bwrap is missing or not permitted and `unsafe` is off.
    """
    if not timeout_s > 0:
        raise ValueError(f"`timeout_s` must be > 0, got {timeout_s}")
    is_unsafe = _UNSAFE_EXEC.get() if unsafe is None else unsafe
    require_sandbox(unsafe=is_unsafe)
    with _FinishChannel.open(must_finish, runner=runner, job=job) as finish:
        run = _run_unsafe if is_unsafe else _run_bwrap
        outcome = run(code, timeout_s=timeout_s, finish=finish)
        finished = finish.reached() if finish is not None else None
    return _result(outcome, timeout_s=timeout_s, isolated=not is_unsafe, finished=finished)


@dataclass(slots=True)
class _FinishChannel:
    """The runner's channels: a one-time secret in (with the job after it), the same secret out
    once the program completed."""

    nonce: bytes
    runner: str
    secret_file: IO[bytes]
    done_r: int
    done_w: int
    child_fds_closed: bool = False

    @classmethod
    @contextmanager
    def open(cls, enabled: bool, *, runner: str, job: bytes) -> Iterator[_FinishChannel | None]:
        if not enabled:
            yield None
            return
        nonce = secrets.token_hex(32).encode()
        # An unlinked file, not a pipe: the job can be larger than a pipe holds before a reader starts.
        with tempfile.TemporaryFile() as secret_file:
            secret_file.write(nonce + (b"\n" + job if job else b""))
            secret_file.flush()
            secret_file.seek(0)
            done_r, done_w = os.pipe()
            channel = cls(nonce, runner, secret_file, done_r, done_w)
            try:
                yield channel
            finally:
                channel.close_child_fds()
                os.close(done_r)

    @property
    def child_fds(self) -> tuple[int, int]:
        return self.secret_file.fileno(), self.done_w

    def runner_args(self) -> tuple[str, str, str]:
        return self.runner, str(self.secret_file.fileno()), str(self.done_w)

    def close_child_fds(self) -> None:
        """Our copies of the child's ends, once it holds its own (so the done pipe can reach EOF)."""
        if not self.child_fds_closed:
            self.child_fds_closed = True
            self.secret_file.close()
            os.close(self.done_w)

    def reached(self) -> bool:
        """The secret came back: the program's last statement completed. Call after the child is gone."""
        self.close_child_fds()
        os.set_blocking(self.done_r, False)
        data = b""
        with contextlib.suppress(BlockingIOError):
            while len(data) <= MAX_OUTPUT_BYTES and (chunk := os.read(self.done_r, 1 << 16)):
                data += chunk
        return self.nonce in data


def rlimits(timeout_s: float) -> dict[str, int]:
    """The child's resource limits: CPU time, address space, file size, open files, processes."""
    return {"RLIMIT_CPU": max(1, int(timeout_s) + 1), "RLIMIT_AS": MEMORY_LIMIT_BYTES,
            "RLIMIT_FSIZE": FILE_SIZE_LIMIT_BYTES, "RLIMIT_NOFILE": OPEN_FILES_LIMIT,
            "RLIMIT_NPROC": PROCESS_LIMIT, "RLIMIT_CORE": 0}


def _result(outcome: Outcome, *, timeout_s: float, isolated: bool, finished: bool | None = None) -> SandboxResult:
    text = outcome.output.decode("utf-8", "replace")[-MAX_ERROR_CHARS:]
    if outcome.truncated:
        text = f"[output truncated: {outcome.total_bytes} bytes written, only the end is kept]\n{text}"
    if not isolated:
        text = f"[{UNSAFE_NOTE}]\n{text}"
    if outcome.timed_out:
        return SandboxResult(False, True, f"timed out after {timeout_s} s\n{text}", outcome.truncated, isolated)
    if outcome.returncode == 0 and finished is False:
        return SandboxResult(False, False, f"{EARLY_EXIT}\n{text}".strip(), outcome.truncated, isolated)
    if outcome.returncode == 0:
        return SandboxResult(True, False, "", outcome.truncated, isolated)
    return SandboxResult(False, False, text.strip() or f"exit status {outcome.returncode}", outcome.truncated,
                         isolated)


def _run_bwrap(code: str, *, timeout_s: float, finish: _FinishChannel | None = None) -> Outcome:
    """The program inside bubblewrap, in a memory cgroup of its own where the machine allows one;
    killing its pid-namespace init ends every process in it."""
    with memory_cgroup.bounded(MEMORY_LIMIT_BYTES) as group:
        proc, init = _start_bwrap(code, timeout_s=timeout_s, finish=finish, group=group)
        outcome = watch(proc, timeout_s=timeout_s, max_bytes=MAX_OUTPUT_BYTES,
                        kill=lambda: _kill_sandbox(proc, init))
        return _say_if_out_of_memory(outcome, group)


def memory_bound() -> str:
    """How the sandbox bounds memory here, in words (for a note where code is scored)."""
    limit = _size(MEMORY_LIMIT_BYTES)
    reason = memory_cgroup.unavailable_reason()
    if reason is None:
        return f"{limit} for all of a program's processes together (a memory cgroup per run)"
    return (f"{limit} per process only, up to {PROCESS_LIMIT} processes: no memory cgroup can be made here "
            f"({reason})")


def _size(n_bytes: int) -> str:
    return f"{n_bytes / (1 << 30):g} GiB" if n_bytes >= 1 << 30 else f"{n_bytes / (1 << 20):g} MiB"


def _say_if_out_of_memory(outcome: Outcome, group: memory_cgroup.MemoryGroup | None) -> Outcome:
    """Name the cgroup's limit in the output when the kernel killed the program for passing it
    (otherwise the program just vanishes with SIGKILL)."""
    if group is None or group.oom_kills() == 0:
        return outcome
    note = (f"\n[killed: the program's processes together passed the sandbox's memory limit of "
            f"{_size(group.limit_bytes)}]").encode()
    return replace(outcome, output=outcome.output + note, total_bytes=outcome.total_bytes + len(note))


@dataclass(frozen=True, slots=True)
class _Init:
    """The sandbox's pid-namespace init, held by a pidfd where the kernel has them.

    bwrap reports its exit status as soon as the program exits, while the init may still be
    ending the program's leftovers; waiting on the init itself is what proves they are gone.
    """

    pid: int
    fd: int | None


def _start_bwrap(code: str, *, timeout_s: float, finish: _FinishChannel | None = None,
                 group: memory_cgroup.MemoryGroup | None = None) -> tuple[subprocess.Popen[bytes], _Init | None]:
    """Start bwrap, hold its init, map its user (when we are root) and put it in `group` (when given),
    all before the program starts."""
    mapped = os.geteuid() == 0
    program_fd = os.memfd_create("dllm_viz_program")
    (info_r, info_w), (block_r, block_w) = os.pipe(), os.pipe()
    passed: tuple[int, ...] = (program_fd, info_w, block_r)
    init = None
    try:
        os.write(program_fd, code.encode("utf-8", "replace"))  # a lone surrogate fails the program, not us
        os.lseek(program_fd, 0, os.SEEK_SET)
        argv = bwrap.command(program_fd=program_fd, limits=rlimits(timeout_s), info_fd=info_w, block_fd=block_r,
                             mapped=mapped, runner=finish.runner_args() if finish is not None else ())
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={}, pass_fds=passed + (finish.child_fds if finish is not None else ()),
                                start_new_session=True)
        for fd in passed:
            os.close(fd)
        passed = ()
        if finish is not None:
            finish.close_child_fds()
        child_pid = bwrap.read_child_pid(info_r)
        if child_pid is not None:  # bwrap now waits on block_fd, so this pid is still its init's
            init = _Init(child_pid, _pidfd(child_pid))
            if mapped:
                _map_user(proc, init)
            if group is not None:
                _enter_group(proc, init, group)
            os.write(block_w, b"1")
    finally:
        for fd in (*passed, info_r, block_w):
            os.close(fd)
    return proc, init


def _pidfd(pid: int) -> int | None:
    """A pidfd for `pid` (Linux >= 5.3), or None where the kernel has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _map_user(proc: subprocess.Popen[bytes], init: _Init) -> None:
    """bwrap.map_user, or end that bwrap and say why the sandbox cannot start."""
    try:
        bwrap.map_user(init.pid)
    except OSError as exc:
        _kill_sandbox(proc, init)
        proc.wait()
        raise SandboxUnavailableError(f"its user could not be mapped into bwrap's namespace ({exc})") from exc


def _enter_group(proc: subprocess.Popen[bytes], init: _Init, group: memory_cgroup.MemoryGroup) -> None:
    """Put the waiting init in the memory group (all it starts follows), or end that bwrap and say why."""
    try:
        group.add(init.pid)
    except OSError as exc:
        _kill_sandbox(proc, init)
        proc.wait()
        raise SandboxUnavailableError(f"its processes could not be put in their memory cgroup {str(group.path)!r} "
                                      f"({exc})") from exc


def _kill_sandbox(proc: subprocess.Popen[bytes], init: _Init | None) -> None:
    """SIGKILL the namespace init and wait until it is gone (the kernel ends all in it first), then
    bwrap's own process group."""
    if init is not None and init.fd is not None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(init.fd, signal.SIGKILL)
        select.select([init.fd], [], [], KILL_WAIT_S)  # readable once the init has exited
        os.close(init.fd)
    elif init is not None and proc.poll() is None:  # no pidfd: the pid is the init's while bwrap runs
        _signal(os.kill, init.pid)
        deadline = time.monotonic() + KILL_WAIT_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    _signal(os.killpg, proc.pid)


def _run_unsafe(code: str, *, timeout_s: float, finish: _FinishChannel | None = None) -> Outcome:
    """The program as a plain subprocess: own session and process group, rlimits, bounded output."""
    limits = rlimits(timeout_s)
    # Outside a user namespace RLIMIT_NPROC counts every thread of the user: allow the program
    # PROCESS_LIMIT more than they run now. Host root is exempt from it, so it is left out.
    running = _threads_of_user(os.getuid())
    if running is None:
        del limits["RLIMIT_NPROC"]
    else:
        limits["RLIMIT_NPROC"] = running + PROCESS_LIMIT
    with tempfile.TemporaryDirectory(prefix="dllm_viz_sandbox_") as tmp, \
            memory_cgroup.bounded(MEMORY_LIMIT_BYTES) as group:
        script = Path(tmp) / "program.py"
        script.write_text(code, encoding="utf-8", errors="replace")
        runner = ["-S", "-c", *finish.runner_args()] if finish is not None else []  # -S: bwrap.LAUNCHER says why
        procs = str(group.path / "cgroup.procs") if group is not None else None
        proc = subprocess.Popen([sys.executable, "-I", "-B", *runner, str(script)], cwd=tmp, env={},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=lambda: _set_limits(limits, procs),
                                pass_fds=finish.child_fds if finish is not None else ())
        if finish is not None:
            finish.close_child_fds()
        outcome = watch(proc, timeout_s=timeout_s, max_bytes=MAX_OUTPUT_BYTES,
                        kill=lambda: _signal(os.killpg, proc.pid))
        return _say_if_out_of_memory(outcome, group)


def _threads_of_user(uid: int) -> int | None:
    """Threads the real user `uid` runs now (what RLIMIT_NPROC counts); None for root or without /proc."""
    if uid == 0 or not Path("/proc/self/status").is_file():
        return None
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:  # the process ended while we looked
            continue
        if int(fields.get("Uid", "-1 0").split()[0]) == uid:
            count += int(fields.get("Threads", "1"))
    return count


def _set_limits(limits: dict[str, int], cgroup_procs: str | None = None) -> None:
    """Child-side, between fork and exec: enter the memory cgroup (its cgroup.procs file) where
    there is one, then set the rlimits."""
    if cgroup_procs is not None:
        fd = os.open(cgroup_procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


def _signal(send: Callable[[int, int], None], target: int) -> None:
    """SIGKILL `target` through os.kill / os.killpg, ignoring that it is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        send(target, signal.SIGKILL)
