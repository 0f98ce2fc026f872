"""Accuracy against list items committed per step on ParallelBench's operations, beside its closed form.

ParallelBench (ICLR 2026, section 4) gives the accuracy of an ideal model that knows every item's
marginal and reveals k of n list items per step (tasks/parallelbench_theory.py). A model commits
tokens, not items, so here each problem gets a canvas of exactly its answer's tokens plus one
end-of-text, in one window, and LLaDA's fixed_steps rule with ceil(n / k) steps: each pass commits
about k items' worth of tokens, the most confident first. The measured accuracy at each k then sits
beside the closed form for the same k and n. Exact canvases tell the model the answer's length,
which the ideal model knows too; what is left to fail is committing items together. Two
approximations: the tokens of a pass are the most confident ones, not whole items, and where k
does not divide n the ceil(n / k) passes split the tokens evenly while the closed form reveals k
items a step and the remainder last.

    python -m dllm_viz.tasks.parallelbench_theory --op shuffle --n 5 --model tiny --problems 30
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dllm_viz.config import DecodeConfig
from dllm_viz.evaluation import run_problem
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies import FixedBlocks, FixedStepsPolicy, Pipeline
from dllm_viz.tasks import Problem, get_task
from dllm_viz.tasks.parallelbench_theory import THEORY_OPS, closed_form_accuracy


@dataclass(frozen=True)
class CurvePoint:
    """One k of the curve: items per step, the steps that gives, measured and ideal accuracy."""

    k: int
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


def measure_curve(adapter: ModelAdapter, problems: list[Problem], op: str, n: int) -> list[CurvePoint]:
    """The measured and closed-form accuracy for k = 1..n items a step on `problems` (n names each)."""
    canvases = [answer_length(adapter, problem) + 1 for problem in problems]
    points = []
    for k in range(1, n + 1):
        steps = math.ceil(n / k)
        correct = sum(run_problem(adapter, problem, Pipeline(FixedStepsPolicy(steps=steps), FixedBlocks(canvas)),
                                  DecodeConfig(gen_length=canvas))[0].correct
                      for problem, canvas in zip(problems, canvases, strict=True))
        points.append(CurvePoint(k=k, steps=steps, accuracy=correct / len(problems),
                                 closed_form=closed_form_accuracy(op, n, k),
                                 tokens_per_step=sum(canvases) / (steps * len(problems)), problems=len(problems)))
    return points
