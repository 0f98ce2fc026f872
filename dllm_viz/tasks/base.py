"""The task contract: a `Problem` record and the `Task` protocol every generator/scorer follows.

Also holds the held-out split rule, so every task splits the same way: the split of a problem is
a pure function of its canonical content, which is what makes train/held-out disjoint by design.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from dllm_viz.whole_numbers import is_whole

Split = Literal["train", "heldout"]

# One problem in HELDOUT_BUCKETS out of HASH_BUCKETS is held out. 1/8 keeps enough distinct
# held-out items for the exported sets while leaving the training space large.
HASH_BUCKETS = 8
HELDOUT_BUCKETS = 1
# Consecutive duplicate / other-split draws before a generator gives up on a too-small space.
MAX_MISSES = 20_000


@dataclass(frozen=True, slots=True)
class Problem:
    """One task instance.

    Attributes:
        task: task name ("arith" | "code").
        problem_id: stable id derived from the canonical content.
        prompt: user text given to the model (before the model's prompt template).
        target: reference completion used for training (worked solution / function body).
        gold: arith: the final number as a string; code: hidden test code (asserts).
        entry_point: code: the function name; arith: None.
    """

    task: str
    problem_id: str
    prompt: str
    target: str
    gold: str
    entry_point: str | None = None


class Task(Protocol):
    """A synthetic task: deterministic generation by seed, and a scorer for completions."""

    name: str

    def generate(self, n: int, *, seed: int, split: Split, **difficulty: int) -> list[Problem]:
        """`n` distinct problems of `split`, a pure function of the arguments."""
        ...

    def score(self, problem: Problem, completion: str) -> bool:
        """Whether `completion` (the model's answer text) solves `problem`."""
        ...

    def check(self, problem: Problem) -> None:
        """Raise ValueError naming the field and the fix when `problem` cannot be scored as written.

        Why: a prompt set is a user's file; a gold answer the scorer cannot read (`1e400` for a
        number, a list without its index) would mark every answer wrong, or one it only half reads
        right, and nothing would say so.
        """
        ...

    def final_answer(self, completion: str) -> str:
        """The part of `completion` that `score` reads, normalised ("" when there is none).

        Two completions with the same final answer get the same verdict on any problem, so
        comparing final answers tells a change of answer from a change of surface form (a
        breadth problem's lines in another order, a list's spacing).
        """
        ...


def content_hash(canonical: str) -> str:
    """Stable hex digest of a problem's canonical content (independent of Python's hash seed)."""
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def split_of(canonical: str) -> Split:
    """The split a problem belongs to, decided only by its canonical content."""
    bucket = int(content_hash(canonical)[:8], 16) % HASH_BUCKETS
    return "heldout" if bucket < HELDOUT_BUCKETS else "train"


def check_split(split: str) -> Split:
    """Validate a split name."""
    if split not in ("train", "heldout"):
        raise ValueError(f"`split` must be 'train' or 'heldout', got {split!r}")
    return split  # type: ignore[return-value]


def check_whole_numbers(**knobs: object) -> None:
    """Validate difficulty knobs as integers, naming the first that is not.

    Why: a float knob (2.5) failed inside `random.randrange` ("non-integer arg 1") or was used
    silently, a string failed on a comparison naming no knob, and True read as 1.

    Raises:
        ValueError: `` `min_ops` must be a whole number, got 2.5 ``.
    """
    for name, value in knobs.items():
        if not is_whole(value):
            raise ValueError(f"`{name}` must be a whole number, got {value!r}")


def check_ordered(low_name: str, low: int, high_name: str, high: int, *, floor: int, cap: int) -> None:
    """Validate a pair of difficulty knobs `floor <= low <= high <= cap`, naming both and the range.

    Raises:
        ValueError: `need 1 <= min_ops <= max_ops <= 16, got min_ops=0, max_ops=4`, or a knob
            that is not a whole number (`check_whole_numbers`).
    """
    check_whole_numbers(**{low_name: low, high_name: high})
    if not floor <= low <= high <= cap:
        raise ValueError(
            f"need {floor} <= {low_name} <= {high_name} <= {cap}, got {low_name}={low}, {high_name}={high}"
        )


def check_count(n: int) -> int:
    """Validate a requested number of problems."""
    if not is_whole(n) or n < 0:
        raise ValueError(f"`n` must be a whole number >= 0, got {n!r}")
    return int(n)


def first(problems: Sequence[Problem], n: int | None) -> list[Problem]:
    """The first `n` problems (all of them when `n` is None).

    Why not `problems[:n]`: a negative n silently dropped problems from the end (n=-1 scored all
    but the last) and a float one failed as a slice TypeError.

    Raises:
        ValueError: `n` is not None or a whole number >= 0 (`check_count`).
    """
    return list(problems) if n is None else list(problems[: check_count(n)])


def draw_distinct(n: int, split: Split, draw: Callable[[], Problem], what: str) -> list[Problem]:
    """`n` problems from repeated `draw()` calls, distinct by problem_id and all of `split`.

    Every generator splits the same way: a problem belongs to the split its canonical content
    (its problem_id) hashes to, whatever seed drew it.

    Raises:
        ValueError: when MAX_MISSES draws in a row were duplicates or of the other split (the
            knobs leave too few distinct problems); `what` describes the knobs in the message.
    """
    check_count(n)
    out: list[Problem] = []
    seen: set[str] = set()
    misses = 0
    while len(out) < n:
        problem = draw()
        if problem.problem_id in seen or split_of(problem.problem_id) != split:
            misses += 1
            if misses > MAX_MISSES:
                raise ValueError(
                    f"found only {len(out)} distinct {split!r} problems of the {n} asked for with {what}; "
                    "ask for fewer or widen the difficulty knobs"
                )
            continue
        misses = 0
        seen.add(problem.problem_id)
        out.append(problem)
    return out


def running_count(text: str, char: str) -> list[int]:
    """Per character of `text`, how many `char` come before it."""
    return list(itertools.accumulate((c == char for c in text), initial=0))[: len(text)]
