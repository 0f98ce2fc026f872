"""Run untrusted Python (model-written code) in a separate, isolated, time-limited process.

Isolation: `python -I` (no user site, no env vars, no cwd on sys.path), a fresh temporary
working directory, CPU/memory/file-size limits via `resource` where the OS has it, and a prelude
that disables sockets before the user code runs. This is a guard against accidents in generated
code, not a security boundary against a determined attacker.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MAX_ERROR_CHARS = 2000
MEMORY_LIMIT_BYTES = 1 << 30
FILE_SIZE_LIMIT_BYTES = 1 << 20

_PRELUDE = """\
def _dllm_viz_block_network():
    import socket

    def blocked(*_args, **_kwargs):
        raise PermissionError("network access is disabled in the dllm_viz sandbox")

    class BlockedSocket:
        def __init__(self, *_args, **_kwargs):
            blocked()

    socket.socket = BlockedSocket
    for name in ("create_connection", "socketpair", "getaddrinfo", "gethostbyname", "fromfd"):
        setattr(socket, name, blocked)


_dllm_viz_block_network()
del _dllm_viz_block_network
"""


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """Outcome of one sandboxed run.

    Attributes:
        passed: the program exited with status 0 before the timeout.
        timed_out: the program was killed for exceeding the timeout.
        error: the tail of stderr (or the reason it was killed); empty when passed.
    """

    passed: bool
    timed_out: bool
    error: str


def _limit_resources(cpu_seconds: int) -> None:
    """Child-side rlimits (POSIX only); called between fork and exec."""
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES))


def run_sandboxed(code: str, *, timeout_s: float = 5.0) -> SandboxResult:
    """Run `code` in a fresh isolated interpreter and report whether it exited cleanly.

    Args:
        code: Python source; a failed assert or any exception counts as not passed.
        timeout_s: wall-clock limit; the process is killed after it.

    Raises:
        ValueError: if `timeout_s` is not positive.
    """
    if timeout_s <= 0:
        raise ValueError(f"`timeout_s` must be > 0, got {timeout_s}")
    use_rlimits = sys.platform != "win32"
    cpu_seconds = max(1, int(timeout_s) + 1)
    limits = (lambda: _limit_resources(cpu_seconds)) if use_rlimits else None
    with tempfile.TemporaryDirectory(prefix="dllm_viz_sandbox_") as tmp:
        script = Path(tmp) / "program.py"
        script.write_text(_PRELUDE + "\n" + code, encoding="utf-8")
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-B", str(script)],
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
                env={},
                preexec_fn=limits,
            )
        except subprocess.TimeoutExpired:
            return SandboxResult(
                passed=False, timed_out=True, error=f"timed out after {timeout_s} s"
            )
    if proc.returncode == 0:
        return SandboxResult(passed=True, timed_out=False, error="")
    error = proc.stderr[-MAX_ERROR_CHARS:] or f"exit status {proc.returncode}"
    return SandboxResult(passed=False, timed_out=False, error=error)
