"""Accuracy against list items committed per step on ParallelBench's operations, beside its closed form.

ParallelBench (ICLR 2026, section 4) gives the accuracy of an ideal model that knows every item's
marginal and reveals k of n list items per step (tasks/parallelbench_theory.py). A model commits
tokens, not items, so here each problem's answer positions are the only open ones: the canvas is
the shortest one training uses (train/config.py `canvas_lengths`, longer if the answer needs it)
with its end-of-text tail already written after the reference answer's length, and LLaDA's
fixed_steps rule gets ceil(n / k) steps, so each pass commits about k items' worth of answer tokens,
the most confident first. Giving the length tells the model what the ideal model knows too; what is
left to fail is committing items together. Why the tail is given, not left open: a canvas of the
answer plus one open end-of-text is one the model never saw in training (rows carry at least 64
positions), and on it the then-bundled model (step 27250) copied 0 of 8 lists even at one token a pass,
against 8 of 8 with the tail given (session 18). Two approximations remain: a pass's tokens are the most
confident ones, not whole items, and where k does not divide n the ceil(n / k) passes split the
tokens evenly while the closed form reveals k items a step and the remainder last. The curve starts
one step more sequential than k = 1: one token a pass (`k=token` in the command's output), where the
ideal model is as right as at k = 1, so a model that is not fails on something other than
parallelism (the bundled model: many passes over a canvas whose end is already written).

    python -m dllm_viz.tasks.parallelbench_theory --op shuffle --n 5 --model tiny --problems 30
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dllm_viz.config import DecodeConfig
from dllm_viz.evaluation import run_problem
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies import FixedBlocks, FixedStepsPolicy, Pipeline
from dllm_viz.tasks import Problem, get_task
from dllm_viz.tasks.parallelbench_theory import THEORY_OPS, closed_form_accuracy
from dllm_viz.train.config import DataConfig

# The shortest canvas a training row has: the curve's canvases are at least this long.
CURVE_CANVAS = min(DataConfig().canvas_lengths)


@dataclass(frozen=True)
class CurvePoint:
    """One k of the curve: items per step, the steps that gives, measured and ideal accuracy, and the
    answer tokens committed per pass (end-of-text tail excluded: it is given).

    `k` None is the curve's sequential end, one token a pass (`steps` is then the mean answer
    length): an item takes several tokens, so this is less parallel than k = 1, and the ideal model
    is exactly as right there as at k = 1. A model need not be: the bundled one copies lists of five
    names worse one token a pass than one name a pass (session 19, BENCHMARKS.md)."""

    k: int | None
    steps: int
    accuracy: float
    closed_form: float
    tokens_per_step: float
    problems: int


def curve_problems(op: str, n: int, count: int, *, seed: int = 0) -> list[Problem]:
    """`count` held-out problems of `parallelbench/<op>` whose lines have exactly `n` names."""
    if op not in THEORY_OPS:
        raise ValueError(f"ParallelBench derives a closed form for {THEORY_OPS}, not {op!r}")
    return get_task(f"parallelbench/{op}").generate(count, seed=seed, split="heldout", min_length=n, max_length=n)


def answer_length(adapter: ModelAdapter, problem: Problem) -> int:
    """Tokens of the problem's reference answer under the adapter's tokenizer."""
    return len(adapter.encode_text(problem.target))


def given_length_canvas(adapter: ModelAdapter, answer_tokens: int) -> np.ndarray:
    """A canvas whose first `answer_tokens` positions are open and the rest already end-of-text."""
    canvas = np.full(max(CURVE_CANVAS, answer_tokens + 1), adapter.info.eos_token_id, dtype=np.int64)
    canvas[:answer_tokens] = adapter.info.mask_token_id
    return canvas


def measure_curve(adapter: ModelAdapter, problems: list[Problem], op: str, n: int) -> list[CurvePoint]:
    """The measured and closed-form accuracy on `problems` (n names each): first one token a pass
    (k None), then k = 1..n items a pass."""
    lengths = [answer_length(adapter, problem) for problem in problems]
    canvases = [given_length_canvas(adapter, length) for length in lengths]

    def correct(steps: int | None) -> int:
        """Problems right with `steps` passes each (None: as many as the problem's answer has tokens)."""
        return sum(run_problem(adapter, problem,
                               Pipeline(FixedStepsPolicy(steps=steps or length), FixedBlocks(len(canvas))),
                               DecodeConfig(gen_length=len(canvas)), initial_tokens=canvas)[0].correct
                   for problem, canvas, length in zip(problems, canvases, lengths, strict=True))

    count = len(problems)
    points = [CurvePoint(k=None, steps=round(sum(lengths) / count), accuracy=correct(None) / count,
                         closed_form=closed_form_accuracy(op, n, 1), tokens_per_step=1.0, problems=count)]
    for k in range(1, n + 1):
        steps = math.ceil(n / k)
        points.append(CurvePoint(k=k, steps=steps, accuracy=correct(steps) / count,
                                 closed_form=closed_form_accuracy(op, n, k),
                                 tokens_per_step=sum(lengths) / (steps * count), problems=count))
    return points
