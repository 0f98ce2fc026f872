"""Watch one child process: a wall-clock deadline, and its output read incrementally to a bound.

The child's stdout and stderr arrive on one pipe that is read as it fills and cut to its last
`max_bytes`, so a print flood costs a fixed amount of memory. The watch ends when the child
exits, even if a descendant keeps the pipe open, or at the deadline; either way the caller's
`kill` runs so nothing the child started is left. Knows nothing about Python, bwrap or scoring.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

# How often the watch looks at the clock and the child while the pipe is quiet.
POLL_S = 0.05
# After the child exits, output still in the pipe is read for this long; a descendant that
# keeps the pipe open past it is the caller's `kill` to end, not a reason to wait.
DRAIN_S = 0.2
# Reads in a row before the clock is checked again (a flood never starves the deadline).
READS_PER_CHECK = 16
READ_BYTES = 1 << 16


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a watched child did.

    Attributes:
        returncode: the child's exit status (negative: killed by that signal); None when it was
            killed at the deadline.
        output: the last bytes of its merged stdout/stderr (at most the bound).
        total_bytes: how many bytes it wrote in all (more than len(output) when cut).
    """

    returncode: int | None
    output: bytes
    total_bytes: int

    @property
    def timed_out(self) -> bool:
        """The child was still running at the deadline."""
        return self.returncode is None

    @property
    def truncated(self) -> bool:
        """Some output was dropped to stay within the bound."""
        return self.total_bytes > len(self.output)


class _Tail:
    """The last `max_bytes` of a byte stream, in amortised O(1) per byte."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._buf = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self._buf += data
        if len(self._buf) > 2 * self._max:
            del self._buf[: -self._max]

    def value(self) -> bytes:
        return bytes(self._buf[-self._max :]) if self._max else b""


def watch(
    proc: subprocess.Popen[bytes], *, timeout_s: float, max_bytes: int, kill: Callable[[], None]
) -> Outcome:
    """Read `proc.stdout` until the child exits or `timeout_s` passes, then `kill()` and reap.

    Args:
        proc: a child started with stdout=PIPE (stderr merged into it).
        timeout_s: wall-clock limit from now.
        max_bytes: how much of the output to keep (the end of it, where a traceback is).
        kill: ends the child and everything it started; must tolerate them being gone already.
    """
    assert proc.stdout is not None, "watch needs stdout=PIPE"
    deadline = time.monotonic() + timeout_s
    tail = _Tail(max_bytes)
    try:
        exited = _read_until_exit(proc, proc.stdout.fileno(), tail, deadline)
    finally:
        kill()
        proc.wait()
        proc.stdout.close()
    return Outcome(returncode=proc.returncode if exited else None, output=tail.value(), total_bytes=tail.total)


def _read_until_exit(proc: subprocess.Popen[bytes], fd: int, tail: _Tail, deadline: float) -> bool:
    """True when the child exited before the deadline (its output is then in `tail`)."""
    os.set_blocking(fd, False)
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > DRAIN_S:
                return True  # a descendant still holds the pipe: stop listening
            if now >= deadline:
                return exited_at is not None
            if selector.select(min(POLL_S, deadline - now)) and not _read_some(fd, tail):
                break  # end of file: everyone closed the pipe
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False  # closed its output but kept running
    return True


def _read_some(fd: int, tail: _Tail) -> bool:
    """Read what the pipe holds (a bounded number of chunks); False at end of file."""
    for _ in range(READS_PER_CHECK):
        try:
            data = os.read(fd, READ_BYTES)
        except BlockingIOError:
            return True
        if not data:
            return False
        tail.feed(data)
    return True
