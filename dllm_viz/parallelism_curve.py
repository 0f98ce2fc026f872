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

Beside it, each k is also measured the paper's way, item by item (`by_items`): windows of k whole
list items, left to right (`ItemWindows`), and in each pass every item of the window gets its next
token (`ItemByItem`). The ideal model draws each revealed item whole from its own marginal, so a
person's last name follows their first name, but knows nothing of the other k - 1 items drawn in the
same step; here likewise an item is written token by token and its k - 1 neighbours in parallel.
(Committing a whole item in one pass instead draws the last name beside the first name, not after
it, so a two-token item is itself parallel: session 30's step-77750 model then shuffled 0 of 4 lines
of five right even at k = 1, against 3 of 4 token by token.) The order is left to right, where the ideal model's
marginals do not care. The confidence-ordered curve is harsher: its first passes commit the format
tokens of every item (quotes, commas) and leave the names for last (session 29).

    python -m dllm_viz.tasks.parallelbench_theory --op shuffle --n 5 --model tiny --problems 30
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import ClassVar

import numpy as np

from dllm_viz.config import DecodeConfig
from dllm_viz.evaluation import ProblemResult, run_problem
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies import FixedBlocks, FixedStepsPolicy, Pipeline
from dllm_viz.policies.base import BlockSizer, CommitRule, Decision, StepView
from dllm_viz.tasks import Problem, get_task
from dllm_viz.tasks.parallelbench_theory import THEORY_OPS, closed_form_accuracy
from dllm_viz.train.config import DataConfig
from dllm_viz.train.data import answer_layouts

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
    # Item by item (`ItemByItem`): accuracy and mean passes; None at k = token.
    item_accuracy: float | None = None
    item_passes: float | None = None


@dataclass(frozen=True)
class ItemByItem(CommitRule):
    """Each pass commits the first open position of every list item in the window.

    `items` is each canvas position's item (-1 where nothing is to be written). A measurement rule
    for this curve only, like `ItemWindows`.
    """

    name: ClassVar[str] = "item_by_item"
    items: tuple[int, ...] = ()

    def init_state(self, gen_length: int) -> None:
        return None

    def step(self, view: StepView, state: None) -> tuple[Decision, None]:
        open_ = np.flatnonzero(view.open_positions)
        _, first = np.unique(np.asarray(self.items)[open_], return_index=True)  # open_ is ascending
        commit = np.zeros_like(view.open_positions)
        commit[open_[first]] = True
        return Decision.of(commit, "quota"), state


@dataclass(frozen=True)
class ItemWindows(BlockSizer):
    """Windows that end at given positions: here, after every k list items (`item_window_ends`).

    A measurement sizer for this curve only (not in the policy registry: its ends belong to one
    problem's answer, not to a knob a user sets).
    """

    name: ClassVar[str] = "items"
    ends: tuple[int, ...] = ()

    def validate(self, gen_length: int) -> None:
        if not self.ends or self.ends[-1] != gen_length or any(b <= a for a, b in pairwise((0, *self.ends))):
            raise ValueError(f"`ends` must rise strictly from above 0 to gen_length={gen_length}, got {self.ends}")

    def window_end(self, view: StepView, start: int) -> tuple[int, Mapping[str, np.ndarray]]:
        return next(end for end in self.ends if end > start), {}


def item_window_ends(items: tuple[int, ...], n: int, k: int, canvas_length: int) -> tuple[int, ...]:
    """Window ends that put k list items in each window, the last taking the remainder, the closing
    bracket and the given end-of-text tail.

    `items` is each answer token's item (train/data.py `answer_layouts`: item i is its name and the
    `, ` before it; the closing bracket is item n).
    """
    starts = [items.index(first) for first in range(k, n, k)]
    return (*starts, canvas_length)


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
    (k None), then k = 1..n items a pass, by confidence and item by item."""
    lengths = [answer_length(adapter, problem) for problem in problems]
    canvases = [given_length_canvas(adapter, length) for length in lengths]
    items = [layout.line for layout in answer_layouts(adapter.tokenizer, problems)]

    def decode_all(pipeline: Callable[[int], Pipeline]) -> list[ProblemResult]:
        """Each problem decoded on its canvas by `pipeline(i)`, i its index."""
        return [run_problem(adapter, problem, pipeline(i), DecodeConfig(gen_length=len(canvases[i])),
                            initial_tokens=canvases[i])[0]
                for i, problem in enumerate(problems)]

    def correct(steps: int | None) -> int:
        """Problems right with `steps` passes each (None: as many as the problem's answer has tokens)."""
        return sum(r.correct for r in decode_all(lambda i: Pipeline(FixedStepsPolicy(steps=steps or lengths[i]),
                                                                    FixedBlocks(len(canvases[i])))))

    def correct_by_items(k: int) -> tuple[int, int]:
        """Problems right with k items written a window, a token of each a pass; and the passes."""
        results = decode_all(lambda i: Pipeline(
            ItemByItem((*items[i], *[-1] * (len(canvases[i]) - len(items[i])))),
            ItemWindows(item_window_ends(items[i], n, k, len(canvases[i])))))
        return sum(r.correct for r in results), sum(r.nfe for r in results)

    count = len(problems)
    points = [CurvePoint(k=None, steps=round(sum(lengths) / count), accuracy=correct(None) / count,
                         closed_form=closed_form_accuracy(op, n, 1), tokens_per_step=1.0, problems=count)]
    for k in range(1, n + 1):
        steps = math.ceil(n / k)
        item_correct, item_passes = correct_by_items(k)
        points.append(CurvePoint(k=k, steps=steps, accuracy=correct(steps) / count,
                                 closed_form=closed_form_accuracy(op, n, k),
                                 tokens_per_step=sum(lengths) / (steps * count), problems=count,
                                 item_accuracy=item_correct / count, item_passes=item_passes / count))
    return points
