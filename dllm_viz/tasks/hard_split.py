"""The `hard` task: one prompt set mixing every family on which parallel decoding can fail.

`HARD_FAMILIES` is the one declaration of the mix: the held-out set (`--task hard`), the
training rows (`train-tiny --hard-fraction`) and the held-out training score all read it. Each
problem keeps its family's task name (`hard/chain`, `parallelbench/copy`, ...), so it is scored
by its own family's scorer and a report can break accuracy down by family.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from dllm_viz.tasks.base import Problem, Split, Task, check_count, check_split
from dllm_viz.tasks.parallelbench import LIST_OPS, PUZZLES

Families = tuple[tuple[str, float], ...]  # (task name, weight) pairs

# Depth and breadth arithmetic (hard/long: depth at length, answers that fill a 256-token canvas),
# then ParallelBench's synthetic tasks. A family of weight 0 would belong to the split but not to the
# default mix: `--task hard` and the held-out file would draw none of it (and the others exactly as
# without it) while a run may still train on it (`--hard-weight <family>=0.3`) and it runs on its own.
# hard/long was such a family until a bundled model had learned it (docs/TESTBED.md: the bar was 90%
# dense; the step-109000 model, bundled in session 48, writes 90.6% of 0-63, 89.0% of 0-99); it joined at
# 0.1 then, which moved the held-out file and the training score (train/objective.py SCORE_VERSION 5).
HARD_FAMILIES: Families = (
    ("hard/chain", 0.3),
    ("hard/breadth", 0.2),
    *((f"parallelbench/{op}", 0.04) for op in LIST_OPS),
    *((f"parallelbench/{puzzle}", 0.05) for puzzle in PUZZLES),
    ("hard/long", 0.1),
)


def parallelbench_only(families: Families) -> Families:
    """ParallelBench's synthetic families of `families`, by the same weights: `train-tiny
    --list-drill-every`'s batches."""
    return tuple((name, weight) for name, weight in families if name.startswith("parallelbench/"))


def reweighted(overrides: Families, families: Families = HARD_FAMILIES) -> Families:
    """`families` in their order with the weights that `overrides` names replaced.

    Why: a training run may want more of one family (`train-tiny --hard-weight hard/chain=0.6`:
    session 26's stage lost accuracy on the chains alone) while the held-out set, the training
    score and every bench keep `HARD_FAMILIES`, so models trained on different mixes are still
    measured on the same problems.

    Raises:
        ValueError: a name not among `families` or named twice, a weight below 0 or not finite, or
            every weight 0.
    """
    weights = dict(families)
    named = [name for name, _ in overrides]
    for name, weight in overrides:
        if named.count(name) > 1:
            raise ValueError(f"the training weights name {name!r} {named.count(name)} times; give it one weight")
        if name not in weights:
            raise ValueError(f"unknown hard family {name!r} in the training weights; "
                             f"choose from {', '.join(weights)}")
        if not 0.0 <= weight < float("inf"):
            raise ValueError(f"the weight of {name!r} must be a finite number >= 0, got {weight}")
        weights[name] = weight
    if not any(weights.values()):
        raise ValueError(f"the training weights {overrides} leave every hard family at 0; "
                         "give one a positive weight or set the hard fraction to 0")
    return tuple(weights.items())


def family_counts(n: int, rng: random.Random, families: Families = HARD_FAMILIES) -> dict[str, int]:
    """How many of `n` problems each family gets: by weight, the remainder drawn at random."""
    check_count(n)
    total = sum(weight for _, weight in families)
    counts = {name: int(n * weight / total + 1e-9) for name, weight in families}
    names = [name for name, _ in families]
    weights = [weight for _, weight in families]
    for name in rng.choices(names, weights=weights, k=n - sum(counts.values())):
        counts[name] += 1
    return counts


def draw_mix(n: int, rng: random.Random, lookup: Callable[[str], Task], *, seed: int, split: Split,
             families: Families = HARD_FAMILIES) -> list[Problem]:
    """`n` problems of `split` split across `families` by `family_counts`, family by family.

    Shared by the `hard` task (which then shuffles them) and the training batches (which mix
    them into a batch), so the mix is drawn one way.
    """
    problems: list[Problem] = []
    for name, count in family_counts(n, rng, families).items():
        if count:
            problems += lookup(name).generate(count, seed=seed, split=split)
    return problems


class HardTask:
    """Every hard family, mixed by `HARD_FAMILIES`; scoring goes to each problem's own family."""

    name = "hard"

    def __init__(self, lookup: Callable[[str], Task]) -> None:
        """`lookup` resolves a family name (the registry's get_task, passed in to avoid a cycle)."""
        self._lookup = lookup

    def generate(self, n: int, *, seed: int, split: Split = "train") -> list[Problem]:
        """`n` problems of `split` across the families, interleaved in a seeded order.

        Each family's defaults are its difficulty; to change a knob, generate that family
        (e.g. `--task hard/chain`) on its own.
        """
        check_split(split)
        rng = random.Random(f"hard:{seed}:{split}")
        problems = draw_mix(n, rng, self._lookup, seed=seed, split=split)
        rng.shuffle(problems)
        return problems

    def score(self, problem: Problem, completion: str) -> bool:
        """The problem's own family's verdict.

        Raises:
            ValueError: for a problem that names the mix instead of its family (which would score
                itself forever).
        """
        self._refuse_the_mix(problem)
        return self._lookup(problem.task).score(problem, completion)

    def check(self, problem: Problem) -> None:
        """The problem's own family's check (never the mix's: see `_refuse_the_mix`)."""
        self._refuse_the_mix(problem)
        self._lookup(problem.task).check(problem)

    def _refuse_the_mix(self, problem: Problem) -> None:
        """A problem names its family, never the mix: scored as "hard" it would score itself forever."""
        if problem.task == self.name:
            raise ValueError(f"task {self.name!r} is a mix of families, not one a problem can have; give the "
                             f"problem's family, one of {[name for name, _ in HARD_FAMILIES]}")

    def final_answer(self, completion: str) -> str:
        """Not decidable here: every hard problem carries its family's name, whose task reads it.

        Raises:
            ValueError: always, naming the fix.
        """
        raise ValueError("a hard problem's final answer is read by its family: use get_task(problem.task), "
                         "e.g. 'hard/chain', not 'hard'")
