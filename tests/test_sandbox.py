"""The sandbox runs code in a separate process, kills runaway loops and refuses network access."""

from __future__ import annotations

import time

import pytest

from dllm_viz.tasks.sandbox import run_sandboxed


def test_clean_program_passes_and_failure_reports_error() -> None:
    assert run_sandboxed("assert 1 + 1 == 2").passed
    result = run_sandboxed("assert 1 + 1 == 3, 'bad sum'")
    assert not result.passed and not result.timed_out and "bad sum" in result.error


def test_infinite_loop_is_killed() -> None:
    start = time.monotonic()
    result = run_sandboxed("while True:\n    pass", timeout_s=1.0)
    assert result.timed_out and not result.passed
    assert time.monotonic() - start < 10


@pytest.mark.parametrize(
    "code",
    [
        "import socket\nsocket.create_connection(('127.0.0.1', 9))",
        "import socket\nsocket.socket().connect(('127.0.0.1', 9))",
        "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9')",
    ],
)
def test_network_attempt_is_refused(code: str) -> None:
    result = run_sandboxed(code)
    assert not result.passed
    assert "network access is disabled" in result.error


def test_runs_in_isolated_temp_cwd() -> None:
    code = "import os, sys\nassert 'dllm_viz_sandbox_' in os.getcwd()\nassert sys.flags.isolated"
    assert run_sandboxed(code).passed


def test_bad_timeout_is_rejected() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        run_sandboxed("pass", timeout_s=0)
