"""The CPU thread policy: one intra-op thread for small models, torch's default otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from dllm_viz.threads import (
    SMALL_MODEL_PARAMETERS,
    THREADS_ENV,
    apply_inference_threads,
    env_override,
    inference_threads,
    requested_threads,
)


def test_a_small_model_on_the_cpu_gets_one_thread() -> None:
    assert inference_threads(3_000_000, "cpu", default_threads=8).threads == 1


@pytest.mark.parametrize(("params", "device"), [(SMALL_MODEL_PARAMETERS, "cpu"), (3_000_000, "cuda:0"),
                                                (3_000_000, "mps")])
def test_large_models_and_accelerators_keep_the_default(params: int, device: str) -> None:
    assert inference_threads(params, device, default_threads=8).threads == 8


def test_a_user_override_wins_and_must_be_positive() -> None:
    assert inference_threads(3_000_000, "cpu", default_threads=8, override=4).threads == 4
    with pytest.raises(ValueError, match="thread count"):
        inference_threads(3_000_000, "cpu", default_threads=8, override=0)


def test_apply_sets_torchs_thread_count() -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        choice = apply_inference_threads(torch.nn.Linear(4, 4), "cpu")
        assert choice.threads == 1 and torch.get_num_threads() == 1
        assert "1" in choice.reason
    finally:
        torch.set_num_threads(before)


def test_the_environment_override_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert env_override() is None
    monkeypatch.setenv(THREADS_ENV, " 3 ")
    assert env_override() == 3
    for bad in ("0", "two", "-1", "1.5"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(ValueError, match=f"{THREADS_ENV}='{re.escape(bad)}' is not a thread count"):
            env_override()


def test_the_flag_wins_over_the_environment_and_both_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_ENV, "3")
    assert requested_threads(2) == 2 and requested_threads(None) == 3
    with pytest.raises(ValueError, match="`--threads` must be >= 1, got 0"):
        requested_threads(0)
    monkeypatch.setenv(THREADS_ENV, "lots")
    assert requested_threads(1) == 1  # the flag wins, so the variable is not read
    with pytest.raises(ValueError, match="is not a thread count"):
        requested_threads(None)
    monkeypatch.delenv(THREADS_ENV)
    assert requested_threads(None) is None


def test_the_cli_applies_the_policy_to_the_model_it_loads(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A bench process on a 2-core machine with torch's default of 2 threads, two processes side by
    side, oversubscribed the cores (passes 2-3x slower); the CLI now runs small models on one."""
    from dllm_viz.cli import main

    monkeypatch.delenv(THREADS_ENV, raising=False)
    decode = ["decode", "--model", str(tiny_dir), "--device", "cpu", "--prompt", "1 + 1?", "--gen-length", "8",
              "--block-length", "8", "--rule", "threshold"]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert main(decode) == 0
        assert torch.get_num_threads() == 1
        assert "note: CPU threads: 1 (a model of" in capsys.readouterr().err
        assert main([*decode, "--threads", "2"]) == 0
        assert torch.get_num_threads() == 2
        monkeypatch.setenv(THREADS_ENV, "3")
        assert main(decode) == 0 and torch.get_num_threads() == 3
        monkeypatch.setenv(THREADS_ENV, "lots")
        capsys.readouterr()
        assert main(decode) == 2
        assert "DLLM_VIZ_THREADS='lots' is not a thread count" in capsys.readouterr().err
        assert main([*decode, "--threads", "0"]) == 2
    finally:
        torch.set_num_threads(before)
