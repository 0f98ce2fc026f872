"""How many intra-op torch threads inference on the CPU should use, decided per model size.

A forward pass of a small model is a few milliseconds of arithmetic split into many tiny ops;
with 2+ intra-op threads on a shared, busy machine every op waits for the thread that was
descheduled, and the waits dominate. Measured on the 2-core project machine with a training
job beside it (BENCHMARKS.md, "thread policy"): the six-layer 3M-parameter model bundled then: its pass at gen
128 took 16-23 ms with one thread and 130-250 ms (max 770 ms) with two. A large model (LLaDA-8B
on a CPU) is arithmetic-bound, where more threads do pay, so it keeps torch's default.
This module only picks and applies the number; callers (the app, the CLI) decide when.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

THREADS_ENV = "DLLM_VIZ_THREADS"  # the user's thread count for the app and the CLI

# Below this many parameters a CPU pass is op-overhead-bound: one thread is fastest.
SMALL_MODEL_PARAMETERS = 100_000_000


@dataclass(frozen=True, slots=True)
class ThreadChoice:
    """The thread count chosen for a model and why (shown in the app's sidebar)."""

    threads: int
    reason: str


def inference_threads(num_parameters: int, device: str, *, default_threads: int,
                      override: int | None = None) -> ThreadChoice:
    """The intra-op thread count for inference of a model with `num_parameters` on `device`.

    Args:
        num_parameters: the model's parameter count.
        device: where it runs ("cpu", "cuda", "cuda:0", "mps"); only "cpu" threads matter.
        default_threads: torch's own default (torch.get_num_threads() at start-up).
        override: a count the user asked for (e.g. from an environment variable); wins.

    Raises:
        ValueError: an override below 1.
    """
    if override is not None:
        if override < 1:
            raise ValueError(f"the thread count must be >= 1, got {override}")
        return ThreadChoice(override, f"{override} (set by the user)")
    if not device.startswith("cpu"):
        return ThreadChoice(default_threads, f"{default_threads} (torch default; the model runs on {device})")
    if num_parameters < SMALL_MODEL_PARAMETERS:
        return ThreadChoice(1, f"1 (a model of {num_parameters:,} parameters is fastest on one thread)")
    return ThreadChoice(default_threads, f"{default_threads} (torch default for a "
                                         f"{num_parameters / 1e9:.1f}B-parameter model)")


def env_override() -> int | None:
    """The thread count set in $DLLM_VIZ_THREADS, or None when it is unset or empty.

    Raises:
        ValueError: it is set to anything but a whole number >= 1 (the message names the value).
    """
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{THREADS_ENV}={raw!r} is not a thread count; set it to a whole number >= 1 "
                         "(1 is fastest for small models) or unset it")
    return int(raw)


def requested_threads(flag_value: int | None, flag: str = "--threads") -> int | None:
    """The thread count a user asked for: the command's `flag`, else $DLLM_VIZ_THREADS, else None
    (the policy decides). Checked here, before a model loads, so a bad value costs nothing.

    Raises:
        ValueError: the flag below 1, or the variable not a whole number >= 1.
    """
    if flag_value is None:
        return env_override()
    if flag_value < 1:
        raise ValueError(f"`{flag}` must be >= 1, got {flag_value}")
    return flag_value


def apply_inference_threads(model: torch.nn.Module, device: str, *, override: int | None = None) -> ThreadChoice:
    """Choose the thread count for `model` (see inference_threads) and set it (`apply_choice`)."""
    choice = inference_threads(sum(p.numel() for p in model.parameters()), device,
                               default_threads=_DEFAULT_THREADS, override=override)
    apply_choice(choice)
    return choice


def apply_choice(choice: ThreadChoice | None) -> None:
    """Give the calling thread `choice`'s count (None: leave it as it is).

    torch's count (OpenMP's, MKL's) belongs to each thread: setting it sets the calling thread's
    count and the one a new thread starts with, so it must be set in the thread that runs the
    model. Streamlit starts a thread for each script run, and a fragment's run (Decode's Step and
    Play, a fork, Tune's Verify) skips the page code that chose the count: it ran at whatever count
    any session had set last, e.g. torch's default, set by a session whose model is on a GPU, for
    another session's tiny model on the CPU. Cheap (a comparison) when the count is right already.
    """
    if choice is not None and torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)


_DEFAULT_THREADS = torch.get_num_threads()  # before any caller changed it
