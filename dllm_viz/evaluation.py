"""Decode a prompt set with one pipeline and score every completion.

Shared by `python -m dllm_viz eval`, the benchmark and the app. Knows tasks (scoring) and the
engine (decoding); knows nothing about printing or widgets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies.pipeline import Pipeline
from dllm_viz.tasks import BENCHMARK_TASKS, Problem, get_task, load_gsm8k, load_humaneval, load_problems, sandbox
from dllm_viz.tasks.base import first
from dllm_viz.tasks.export_sets import HELDOUT_SEED
from dllm_viz.trace import Trace

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_prompts"
# Held-out problems generated for a task without a bundled file (one hard family on its own).
GENERATED_HELDOUT = 500


CUT_OFF_NOTE = "filled the whole canvas without an end-of-text token; they may be wrong only for lack of room"


@dataclass(frozen=True, slots=True)
class ProblemResult:
    """The outcome of one problem under one pipeline.

    Attributes:
        problem_id: the problem.
        task: its task name.
        correct: the task's scorer accepted the completion.
        nfe: forward passes.
        seconds: wall time of the decode loop.
        forward_seconds: part of it spent in forward passes (model + statistics).
        policy_seconds: part of it spent inside the policy's calls (the rest is the engine's).
        tokens_per_second: Fast-dLLM throughput (committed non-EOS tokens / seconds).
        completion: the answer text up to the first EOS.
        complete: every position was committed.
        cut_off: the answer ran out of canvas (Trace.cut_off), so a wrong answer may only be
            too short a gen length.
        tokens: committed answer tokens that are not end-of-text (what TPF counts).
    """

    problem_id: str
    task: str
    correct: bool
    nfe: int
    seconds: float
    forward_seconds: float
    policy_seconds: float
    tokens_per_second: float
    completion: str
    complete: bool
    cut_off: bool = False
    tokens: int = 0

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class EvalSummary:
    """Aggregate over a prompt set."""

    accuracy: float
    n: int
    mean_nfe: float
    mean_seconds: float
    cut_off: int = 0

    def warning(self) -> str | None:
        """What to tell the user when answers ran into the end of the canvas, else None."""
        if not self.cut_off:
            return None
        return f"{self.cut_off} of {self.n} answers {CUT_OFF_NOTE}: raise the gen length"

    def line(self) -> str:
        """The CLI's final line: `accuracy=<fraction> n=<count> mean_nfe=<x>`."""
        return f"accuracy={self.accuracy:.4f} n={self.n} mean_nfe={self.mean_nfe:.2f}"


def heldout_problems(task: str, n: int | None = None) -> list[Problem]:
    """The held-out set of `task`, first n: the bundled sample_prompts/<task>_heldout.jsonl where
    there is one (arith, code, hard), else generated from the held-out split with the export seed
    (each hard family on its own, e.g. `hard/chain` or `parallelbench/shuffle`: GENERATED_HELDOUT
    problems unless `n` asks for another count).
    """
    generator = get_task(task)
    path = SAMPLE_DIR / f"{task}_heldout.jsonl"
    if not path.is_file():
        return generator.generate(GENERATED_HELDOUT if n is None else n, seed=HELDOUT_SEED, split="heldout")
    return first(load_problems(path), n)


def take(problems: Sequence[Problem], skip: int = 0, n: int | None = None) -> list[Problem]:
    """Problems skip .. skip + n - 1 of a set: e.g. a calibration slice, then a validation slice.

    Raises:
        ValueError: a negative or non-integer skip or n, or a skip that leaves no problem (the
            message says how many the set has).
    """
    if isinstance(skip, bool) or not isinstance(skip, int):  # a float failed as a slice TypeError
        raise ValueError(f"`--skip` must be a whole number, got {skip!r}")
    if skip < 0:
        raise ValueError(f"`--skip` must be >= 0, got {skip}")
    if skip and skip >= len(problems):
        raise ValueError(f"`--skip {skip}` leaves no problem: the set has {len(problems)}; use a smaller --skip")
    return first(problems[skip:], n)  # checks n: a negative one dropped problems from the end


def task_problems(task: str, n: int | None = None, data: str | Path | None = None) -> list[Problem]:
    """Problems of any task: synthetic held-out sets, or GSM8K / HumanEval from `data`.

    Raises:
        ValueError: a real benchmark without a data file.
    """
    if task in BENCHMARK_TASKS:
        if data is None:
            raise ValueError(f"task {task!r} needs its data: pass --data PATH "
                             "(e.g. ../shared/data/gsm8k_test.jsonl or HumanEval.jsonl.gz) or --data hub when online")
        return load_gsm8k(data, n=n) if task == "gsm8k" else load_humaneval(data, n=n)
    return heldout_problems(task, n)


def require_code_sandbox(problems: Sequence[Problem], *, unsafe: bool = False) -> None:
    """Refuse before any decoding when a problem's scorer runs code and the sandbox cannot.

    Raises:
        SandboxUnavailableError: naming the fix (install bubblewrap, or opt in to unsafe_exec).
    """
    if runs_code(problems):
        sandbox.require_sandbox(unsafe=unsafe)


def runs_code(problems: Sequence[Problem]) -> bool:
    """Whether scoring any of `problems` executes code (its task says `runs_code`)."""
    return any(getattr(get_task(p.task), "runs_code", False) for p in problems)


def run_problem(adapter: ModelAdapter, problem: Problem, pipeline: Pipeline,
                config: DecodeConfig, *, unsafe_exec: bool = False,
                initial_tokens: np.ndarray | None = None) -> tuple[ProblemResult, Trace]:
    """Decode one problem and score it with its task's scorer (code: see `evaluate`'s unsafe_exec).

    `initial_tokens` starts from a partly filled canvas (engine.iter_decode), e.g. an answer's
    length given by an EOS tail (dllm_viz/parallelism_curve.py).
    """
    trace = decode(adapter, adapter.encode_prompt(problem.prompt), pipeline, config, prompt_text=problem.prompt,
                   initial_tokens=initial_tokens)
    completion = trace.meta.answer_text
    with sandbox.unsafe_exec(unsafe_exec):
        correct = bool(get_task(problem.task).score(problem, completion))
    headline = trace.summary()
    result = ProblemResult(
        problem_id=problem.problem_id,
        task=problem.task,
        correct=correct,
        nfe=trace.nfe,
        seconds=trace.wall_seconds,
        forward_seconds=float(trace.forward_seconds.sum()),
        policy_seconds=float(trace.policy_seconds.sum()),
        tokens_per_second=headline["tokens_per_second"],
        completion=completion,
        complete=trace.is_complete,
        cut_off=trace.cut_off,
        tokens=int(headline["tokens"]),
    )
    return result, trace


def evaluate(
    adapter: ModelAdapter,
    problems: Sequence[Problem],
    pipeline: Pipeline,
    config: DecodeConfig,
    *,
    on_result: Callable[[int, ProblemResult], None] | None = None,
    unsafe_exec: bool = False,
) -> list[ProblemResult]:
    """Decode and score each problem with its own task's scorer.

    Args:
        adapter: the model.
        problems: the prompt set.
        pipeline: decoding policy.
        config: decode settings (the same seed for every problem).
        on_result: called with (index, result) after each problem (progress).
        unsafe_exec: score code without the bubblewrap sandbox (only its own process group,
            rlimits and bounded output), for machines where bwrap cannot run.

    Raises:
        SandboxUnavailableError: code problems, no usable bwrap, and `unsafe_exec` off.
    """
    require_code_sandbox(problems, unsafe=unsafe_exec)
    results = []
    for index, problem in enumerate(problems):
        result, _ = run_problem(adapter, problem, pipeline, config, unsafe_exec=unsafe_exec)
        results.append(result)
        if on_result is not None:
            on_result(index, result)
    return results


def summarize(results: Sequence[ProblemResult]) -> EvalSummary:
    """Accuracy, count, mean NFE and mean seconds of a result list."""
    n = len(results)
    if n == 0:
        return EvalSummary(accuracy=0.0, n=0, mean_nfe=0.0, mean_seconds=0.0)
    return EvalSummary(
        accuracy=sum(r.correct for r in results) / n,
        n=n,
        mean_nfe=sum(r.nfe for r in results) / n,
        mean_seconds=sum(r.seconds for r in results) / n,
        cut_off=sum(r.cut_off for r in results),
    )
