"""The hard split's arithmetic: where parallel decoding fails for depth and for breadth.

The literature names two reasons committing many tokens per step goes wrong (docs/TESTBED.md):

- depth (`hard/chain`): 5-12 worked lines, each starting from the line above's result, so a
  line's numbers cannot be known before the line above is committed; under one-token-a-step
  decoding confidence rises over steps in a staircase, line by line.
- breadth (`hard/breadth`): answers with several valid surface forms. Two or three independent
  groups ("3 boxes with 4 apples in each and 2 bags with 5") are worked in any order, and each
  product is written either way round (`3 * 4` or `4 * 3`); the sums follow the chosen order.
  The training data draws the form at random, so the model learns a multi-modal answer, and
  positions committed independently in one step can mix two valid forms into an invalid one
  (`3 * 5 = 12`). Scored, like every arithmetic task, by the number after `####`.

Both reuse the arithmetic word-problem vocabulary and line format (`a op b = c`), so the bundled
model's operation table carries over and the same diagnostics (solution roles) apply.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from dllm_viz.tasks.arith import (
    CONTAINERS,
    DEFAULT_MAX_MULTIPLIER,
    DEFAULT_MAX_OPERAND,
    DEFAULT_MAX_RESULT,
    FRIENDS,
    ITEMS,
    NAMES,
    QUESTIONS,
    ArithTask,
    NumberAnswer,
    _pick_step,
    _sentence,
    _Step,
    _worked,
    check_arith_knobs,
    expression,
    expression_start,
)
from dllm_viz.tasks.base import Problem, Split, check_ordered, check_split, check_whole_numbers, draw_distinct

CHAIN_MIN_OPS = 5
CHAIN_MAX_OPS = 12
MAX_GROUPS = 3
# hard/long: enough lines that the answer fills most of a 256-token canvas (20 lines are ~190 tokens
# of the bundled tokenizer, 24 ~225, the longest ~245), and a cap that still fits a 512-position model.
LONG_MIN_OPS = 20
LONG_MAX_OPS = 24
LONG_OPS_CAP = 32
LONG_PROMPT = "Work left to right: {expression}"


class ChainTask(ArithTask):
    """Depth: word problems of 5-12 chained operations (the arith generator with longer chains)."""

    name = "hard/chain"

    def generate(  # type: ignore[override]
        self,
        n: int,
        *,
        seed: int,
        split: Split = "train",
        min_ops: int = CHAIN_MIN_OPS,
        max_ops: int = CHAIN_MAX_OPS,
        max_operand: int = DEFAULT_MAX_OPERAND,
        max_result: int = DEFAULT_MAX_RESULT,
        max_multiplier: int = DEFAULT_MAX_MULTIPLIER,
    ) -> list[Problem]:
        """`n` distinct chains of `min_ops`..`max_ops` worked lines (at most arith's OPS_CAP).

        Raises:
            ValueError: naming a knob out of range, or when the knobs leave too few problems.
        """
        return super().generate(
            n, seed=seed, split=split, min_ops=min_ops, max_ops=max_ops, max_operand=max_operand,
            max_result=max_result, max_multiplier=max_multiplier,
        )  # fmt: skip


class LongChainTask(NumberAnswer):
    """Depth at length: one bare expression of 20-24 operations worked left to right, a line each.

    Why: `hard/chain`'s answers (5-12 lines, ~80 tokens) fill a third of a 256-token canvas, so at
    gen 256 most blocks are end-of-text, which every rule commits in one pass. Here the answer
    fills most of the canvas, every line still starting from the result above, and the prompt stays
    short (the expression, not a word problem: a 24-step story would not fit a 512-position model
    beside its canvas). Lines read as `arith`'s (`a op b = c`), so the drills' operation table carries over.
    """

    name = "hard/long"

    def generate(
        self,
        n: int,
        *,
        seed: int,
        split: Split = "train",
        min_ops: int = LONG_MIN_OPS,
        max_ops: int = LONG_MAX_OPS,
        max_operand: int = DEFAULT_MAX_OPERAND,
        max_result: int = DEFAULT_MAX_RESULT,
        max_multiplier: int = DEFAULT_MAX_MULTIPLIER,
    ) -> list[Problem]:
        """`n` distinct expressions of `min_ops`..`max_ops` operations (at most LONG_OPS_CAP).

        Raises:
            ValueError: naming a knob out of range, or when the knobs leave too few problems.
        """
        check_split(split)
        check_ordered("min_ops", min_ops, "max_ops", max_ops, floor=1, cap=LONG_OPS_CAP)
        check_arith_knobs(1, 1, max_operand, max_result, max_multiplier)
        rng = random.Random(f"{self.name}:{seed}:{split}")

        def draw() -> Problem:
            steps = [expression_start(rng, max_operand, max_result, max_multiplier)]
            for _ in range(rng.randint(min_ops, max_ops) - 1):
                steps.append(_pick_step(rng, steps[-1].result, max_operand, max_result, max_multiplier))
            problem_id, target = _worked(self.name, steps)
            prompt = LONG_PROMPT.format(expression=expression(steps))
            return Problem(self.name, problem_id, prompt, target, gold=str(steps[-1].result))

        return draw_distinct(n, split, draw, f"{min_ops}-{max_ops} operations, max_result={max_result}")


@dataclass(frozen=True, slots=True)
class _Group:
    """`count` containers with `each` items in each."""

    count: int
    each: int
    container: str

    @property
    def total(self) -> int:
        return self.count * self.each


class BreadthTask(NumberAnswer):
    """Breadth: independent groups summed, each group worked in either order and either way round;
    scored by the number after `####`, so any valid surface form counts."""

    name = "hard/breadth"

    def generate(
        self,
        n: int,
        *,
        seed: int,
        split: Split = "train",
        groups: int = 2,
        max_groups: int = MAX_GROUPS,
        min_extra: int = 0,
        max_extra: int = 3,
        max_operand: int = DEFAULT_MAX_OPERAND,
        max_result: int = DEFAULT_MAX_RESULT,
        max_multiplier: int = DEFAULT_MAX_MULTIPLIER,
    ) -> list[Problem]:
        """`n` distinct problems of `groups`..`max_groups` groups and `min_extra`..`max_extra` chained steps.

        Args:
            groups: fewest independent groups (2 or 3); `max_groups` the most.
            min_extra / max_extra: chained operations after the groups are summed (0-8).
            max_operand / max_result / max_multiplier: number ranges as in `arith`; every
                product, sum and later result stays within `max_result`.

        Raises:
            ValueError: naming a knob out of range, or when the knobs leave too few problems.
        """
        check_split(split)
        check_ordered("groups", groups, "max_groups", max_groups, floor=2, cap=MAX_GROUPS)
        check_ordered("min_extra", min_extra, "max_extra", max_extra, floor=0, cap=8)
        check_whole_numbers(max_result=max_result)
        if max_result < 4 * max_groups:
            raise ValueError(
                f"need max_result >= {4 * max_groups} for {max_groups} groups of at least 2 x 2, got {max_result}"
            )
        check_arith_knobs(1, 1, max_operand, max_result, max_multiplier)
        rng = random.Random(f"{self.name}:{seed}:{split}")
        limits = (max_operand, max_result, max_multiplier)
        what = f"{groups}-{max_groups} groups, {min_extra}-{max_extra} extra steps, max_result={max_result}"
        def draw() -> Problem:
            return self._one(rng, rng.randint(groups, max_groups), rng.randint(min_extra, max_extra), limits)

        return draw_distinct(n, split, draw, what)

    def _one(self, rng: random.Random, num_groups: int, num_extra: int, limits: tuple[int, int, int]) -> Problem:
        max_operand, max_result, max_multiplier = limits
        name, pron, poss = rng.choice(NAMES)
        items = rng.choice(ITEMS)
        budget = max_result // num_groups
        containers = rng.sample(CONTAINERS, num_groups)
        drawn = []
        for container in containers:
            count = rng.randint(2, max(2, min(max_multiplier + 1, budget // 2)))
            each = rng.randint(2, max(2, min(max_operand, budget // count)))
            drawn.append(_Group(count, each, container))
        described = [f"{g.count} {g.container} with {g.each} {items} in each" for g in drawn]
        listing = ", ".join(described[:-1]) + f" and {described[-1]}"
        sentences = [f"{name} has {listing}."]
        who = {
            "name": name, "p": pron, "P": pron.capitalize(), "poss": poss, "items": items,
            "f": rng.choice(FRIENDS), "F": rng.choice(FRIENDS).capitalize(), "cont": containers[0],
        }  # fmt: skip
        extra: list[_Step] = []
        value = sum(g.total for g in drawn)
        for _ in range(num_extra):
            extra.append(_pick_step(rng, extra[-1].result if extra else value, max_operand, max_result, max_multiplier))
            sentences.append(_sentence(rng, extra[-1], who))
        sentences.append(rng.choice(QUESTIONS).format(**who))
        # The canonical content ignores the surface form: the same problem in any order is one problem.
        canonical = f"{self.name}|" + ";".join(
            [*(f"{g.count}x{g.each}" for g in drawn), *(s.line() for s in extra)]
        )
        answer = extra[-1].result if extra else value
        target = "\n".join([*surface_lines(rng, drawn), *(s.line() for s in extra), f"#### {answer}"])
        prompt = " ".join(sentences)
        return Problem(task=self.name, problem_id=canonical, prompt=prompt, target=target, gold=str(answer))


def surface_lines(rng: random.Random, drawn: list[_Group]) -> list[str]:
    """One valid worked form of the group sums: a random order, each product either way round."""
    order = rng.sample(drawn, len(drawn))
    lines = []
    for group in order:
        left, right = (group.count, group.each) if rng.random() < 0.5 else (group.each, group.count)
        lines.append(f"{left} * {right} = {group.total}")
    running = order[0].total
    for group in order[1:]:
        lines.append(f"{running} + {group.total} = {running + group.total}")
        running += group.total
    return lines


def wrong_lines(completion: str) -> list[str]:
    """The worked lines `a op b = c` of a completion whose arithmetic is wrong.

    Why: a breadth answer can end with the right `####` number while a line in the middle mixes
    two valid forms; this names those lines for the views and the Learn page.
    """
    bad = []
    for line in completion.split("\n"):
        match = re.fullmatch(r"\s*(\d+) ([-+*/]) (\d+) = (\d+)\s*", line)
        if match is None:
            continue
        left, op, right, result = int(match[1]), match[2], int(match[3]), int(match[4])
        value = {"+": left + right, "-": left - right, "*": left * right,
                 "/": left // right if right and left % right == 0 else None}[op]  # fmt: skip
        if value != result:
            bad.append(line.strip())
    return bad
