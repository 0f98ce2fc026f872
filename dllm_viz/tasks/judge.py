"""Scoring code by tests that run apart from it: the judge and the candidate in two processes.

A scorer that runs the completion and its asserts as one program can be fooled by the completion
(reading the runner's secret from its frame, patching the asserts' names, returning an object
equal to everything). `run_judged` runs the tests in a judge process and the completion in a
candidate process of its own, both inside the same sandbox (`judge_process.py` says how they
talk and why the candidate cannot reach the judge); the run passes only when the judge's last test
statement completed.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from dllm_viz.tasks import judge_process
from dllm_viz.tasks.sandbox import SandboxResult, run_sandboxed


@dataclass(frozen=True, slots=True)
class JudgedProgram:
    """What one judged run needs.

    Attributes:
        candidate: the program the candidate process runs as __main__ (the completion and what it
            needs from the prompt); it must define `entry_point`.
        entry_point: the function the tests call; in the judge that name is bound to the candidate.
        tests: run by the judge after `setup`; failing means raising.
        setup: run by the judge first: trusted definitions the tests use (HumanEval's prompt, whose
            helpers some tests call), never the completion.
    """

    candidate: str
    entry_point: str
    tests: str
    setup: str = ""

    def job(self) -> bytes:
        """The judge's half, which the candidate never sees."""
        return json.dumps({"entry_point": self.entry_point, "setup": self.setup, "tests": self.tests}).encode()


@functools.cache
def judge_source() -> str:
    """judge_process.py's text: the sandbox runs it with `python -c` (no project files are bound there)."""
    return Path(judge_process.__file__).read_text(encoding="utf-8")


def run_judged(program: JudgedProgram, *, timeout_s: float = 5.0, unsafe: bool | None = None) -> SandboxResult:
    """Run `program.tests` against `program.candidate` in the sandbox; passed means every test
    statement ran and nothing raised.

    Args:
        timeout_s / unsafe: as `sandbox.run_sandboxed` (the limit covers both processes).

    Raises:
        ValueError: `entry_point` is not a Python name, or as `run_sandboxed`.
        SandboxUnavailableError: as `run_sandboxed`.
    """
    if not program.entry_point.isidentifier():
        raise ValueError(f"the entry point must be a Python name, got {program.entry_point!r}")
    return run_sandboxed(program.candidate, timeout_s=timeout_s, unsafe=unsafe, must_finish=True,
                         runner=judge_source(), job=program.job())
