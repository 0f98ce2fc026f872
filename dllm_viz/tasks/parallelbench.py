"""ParallelBench's synthetic tasks as our own generators: waiting-line list edits and 4x4 puzzles.

ParallelBench (furiosa-ai/ParallelBench, ICLR 2026) collects tasks that are easy for people and
for autoregressive models but on which a dLLM's accuracy falls as more tokens are committed per
step, because the right answer's tokens are not independent given the prompt. We follow its
published task definitions (docs/TESTBED.md), in our own wording and with our
own name list so the tiny model's tokenizer and context fit:

- waiting line: a list of 3-6 "First Last" names in ParallelBench's list format
  `["Mia Stone", "Tom Reed"]`, and one operation: copy, reverse, sort (by the full name string,
  which is what ParallelBench's answers do), shuffle (any order but the original), insert / remove
  / replace at a 0-based index, and their `random` variants where the position is the model's
  choice (any valid answer passes, scored as ParallelBench scores them);
- puzzles: a 4x4 latin square over four given symbols (any valid square), and a 4x4 sudoku with
  12 givens and a unique solution (exact match).

Every answer is scored by parsing the last `[...]` list (or the grid lines), so an answer that
mixes two valid orders ("Mia Stone, Mia Stone, ...") is wrong however it is formatted.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from dllm_viz.tasks.base import (
    Problem,
    Split,
    check_ordered,
    check_split,
    check_whole_numbers,
    draw_distinct,
    running_count,
)

FIRST_NAMES: tuple[str, ...] = (
    "Mia", "Tom", "Ava", "Leo", "Zoe", "Sam", "Emma", "Ben", "Lily", "Max", "Nora", "Omar", "Ivy",
    "Jack", "Ruby", "Ravi", "Anna", "Eli", "Maya", "Noah", "Lena", "Finn", "Iris", "Owen",
)  # fmt: skip
LAST_NAMES: tuple[str, ...] = (
    "Stone", "Reed", "Park", "Hill", "Gray", "Ford", "Wood", "Lane", "Cole", "Fox", "King", "Shaw",
    "Moss", "Dale", "Hart", "Wells", "Brook", "Rowe", "Nash", "Price", "Ward", "Lowe", "Bell", "Frost",
)  # fmt: skip
PEOPLE: tuple[str, ...] = tuple(f"{first} {last}" for first, last in itertools.product(FIRST_NAMES, LAST_NAMES))
# The words a waiting line is written in, as a tokenizer meets them: a first name after `"`, a
# last name after a space (train-tiny --name-tokens makes each a token of its own).
NAME_WORDS: tuple[str, ...] = FIRST_NAMES + tuple(f" {last}" for last in LAST_NAMES)
LIST_OPS: tuple[str, ...] = (
    "copy", "reverse", "sort", "shuffle", "insert_index", "insert_random", "remove_index",
    "remove_random", "replace_index", "replace_random",
)  # fmt: skip
PUZZLES: tuple[str, ...] = ("latin_square", "sudoku")
MIN_LENGTH = 3
MAX_LENGTH = 6
# A name is up to ~5 tokens; 15 names (ParallelBench's long variant) still fit a 256 canvas.
LENGTH_CAP = 15
SYMBOLS: str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_LIST_RE = re.compile(r"\[([^\[\]]*)\]")
_ITEM_RE = re.compile(r'"[^" ]+ ([^"]+)"')


def format_list(names: list[str]) -> str:
    """ParallelBench's list format: `["Mia Stone", "Tom Reed"]`."""
    return "[" + ", ".join(f'"{name}"' for name in names) + "]"


def parse_list(completion: str) -> list[str] | None:
    """The last `[...]` list of a completion, items stripped of spaces and quotes; None if absent."""
    found = _LIST_RE.findall(completion)
    if not found:
        return None
    body = found[-1].strip()
    return [item.strip().strip('"').strip("'").strip() for item in body.split(",")] if body else []


def bound_names(answer: str) -> tuple[list[int], set[int]]:
    """Per character of a list answer, the item it belongs to; and the characters of every last name.

    Why: a last name is bound to the first name before it (the pair is one person of the prompt),
    so writing it needs a lookup by content, not by position, once the line is reordered (sort,
    shuffle). A model can instead eliminate: with every other last name visible, the one left is
    right. Training masks every bound name from a cut item on (train/data.py `focus_pattern`),
    the state a left-to-right decoder is in, where elimination is not available. A character's
    item is the number of closed quote pairs before it: a name and its quotes are one item, the
    `, ` between two names belongs to the later one.
    """
    item = [quotes // 2 for quotes in running_count(answer, '"')]
    bound = {c for match in _ITEM_RE.finditer(answer) for c in range(match.start(1), match.end(1))}
    return item, bound


def _instruction(op: str, word: str, index: int) -> str:
    """Our wording of each operation (ParallelBench's meaning, shorter prompts)."""
    return {
        "copy": "Copy the line exactly.",
        "reverse": "Reverse the order of the line.",
        "sort": "Sort the line alphabetically.",
        "shuffle": "Shuffle the line into any different order.",
        "insert_index": f'Insert "{word}" at position {index}.',
        "insert_random": f'Insert "{word}" at any position.',
        "remove_index": f"Remove the person at position {index}.",
        "remove_random": "Remove any one person.",
        "replace_index": f'Replace the person at position {index} with "{word}".',
        "replace_random": f'Replace any one person with "{word}".',
    }[op]


def _reference(op: str, names: list[str], word: str, index: int, rng: random.Random) -> list[str]:
    """One correct answer (for the random variants and shuffle: one of many, drawn by `rng`)."""
    out = list(names)
    if op == "reverse":
        return out[::-1]
    if op == "sort":
        return sorted(out)
    if op == "shuffle":
        while out == names:
            rng.shuffle(out)
        return out
    if op.startswith("insert"):
        out.insert(index if op == "insert_index" else rng.randint(0, len(out)), word)
    elif op.startswith("remove"):
        out.pop(index if op == "remove_index" else rng.randrange(len(out)))
    elif op.startswith("replace"):
        out[index if op == "replace_index" else rng.randrange(len(out))] = word
    return out


def list_is_correct(op: str, names: list[str], word: str, index: int, answer: list[str]) -> bool:
    """ParallelBench's verdict for `answer` to operation `op` on `names` (any valid answer passes)."""
    if op == "shuffle":
        return sorted(answer) == sorted(names) and answer != names
    if op == "insert_random":
        return answer.count(word) == 1 and [a for a in answer if a != word] == names
    if op == "remove_random":
        return len(answer) == len(names) - 1 and any(names[:i] + names[i + 1 :] == answer for i in range(len(names)))
    if op == "replace_random":
        return len(answer) == len(names) and any(
            [*names[:i], word, *names[i + 1 :]] == answer for i in range(len(names))
        )
    return answer == _reference(op, names, word, index, random.Random(0))


@dataclass(frozen=True, slots=True)
class WaitingLineTask:
    """One ParallelBench list operation over a waiting line of names."""

    op: str

    @property
    def name(self) -> str:
        return f"parallelbench/{self.op}"

    def generate(
        self, n: int, *, seed: int, split: Split = "train", min_length: int = MIN_LENGTH,
        max_length: int = MAX_LENGTH,
    ) -> list[Problem]:
        """`n` distinct problems with lines of `min_length`..`max_length` names (at most LENGTH_CAP).

        Raises:
            ValueError: naming a knob out of range, or when the knobs leave too few problems.
        """
        check_split(split)
        check_ordered("min_length", min_length, "max_length", max_length, floor=2, cap=LENGTH_CAP)
        rng = random.Random(f"{self.name}:{seed}:{split}")
        return draw_distinct(n, split, lambda: self._one(rng, rng.randint(min_length, max_length)),
                             f"lines of {min_length}-{max_length} names")  # fmt: skip

    def _one(self, rng: random.Random, length: int) -> Problem:
        names = rng.sample(PEOPLE, length + 1)
        word, names = names[-1], names[:-1]
        index = rng.randint(0, length) if self.op.startswith("insert") else rng.randrange(length)
        uses_word = self.op.startswith(("insert", "replace"))
        uses_index = self.op.endswith("_index")
        canonical = "|".join([self.name, ";".join(names), word if uses_word else "", str(index) if uses_index else ""])
        prompt = f"Waiting line: {format_list(names)}\n{_instruction(self.op, word, index)}"
        answer = _reference(self.op, names, word, index, rng)
        # gold: what the scorer needs to accept every valid answer (the input, the new name, the index).
        gold = "\n".join([format_list(names), word if uses_word else "", str(index) if uses_index else ""])
        return Problem(task=self.name, problem_id=canonical, prompt=prompt, target=format_list(answer), gold=gold)

    def score(self, problem: Problem, completion: str) -> bool:
        """ParallelBench's lenient verdict on the last list in `completion`."""
        answer = parse_list(completion)
        if answer is None:
            return False
        listing, word, index = problem.gold.split("\n")
        names = parse_list(listing) or []
        return list_is_correct(self.op, names, word, int(index) if index else 0, answer)

    def check(self, problem: Problem) -> None:
        """gold is three lines, as `generate` writes it: the input list, the new name (insert and replace)
        and the index (the `_index` operations)."""
        lines = problem.gold.split("\n")
        layout = "three lines: the input list, the new name (insert / replace) and the index (*_index)"
        if len(lines) != 3 or not parse_list(lines[0]):
            raise ValueError(f"gold of a {self.name!r} problem must be {layout}")
        names, word, index = parse_list(lines[0]) or [], lines[1], lines[2]
        if self.op.startswith(("insert", "replace")) and not word.strip():
            raise ValueError(f"gold of a {self.name!r} problem names no new name on its second line; {layout}")
        last = len(names) if self.op == "insert_index" else len(names) - 1  # a new name may also go last
        if self.op.endswith("_index") and not (index.isdigit() and int(index) <= last):
            raise ValueError(f"gold of a {self.name!r} problem has index {index!r} on its third line; give a position "
                             f"in 0..{last}")

    def final_answer(self, completion: str) -> str:
        """The last list's items, one canonical spelling (a list's spacing and quotes do not count)."""
        answer = parse_list(completion)
        return "" if answer is None else format_list(answer)


def _is_latin(rows: list[list[str]], symbols: set[str]) -> bool:
    size = len(symbols)
    return (
        len(rows) == size
        and all(len(row) == size and set(row) == symbols for row in rows)
        and all({row[c] for row in rows} == symbols for c in range(size))
    )


def parse_grid(completion: str, size: int = 4) -> list[list[str]] | None:
    """The first `size` lines that hold exactly `size` cells (comma- or space-separated, or packed)."""
    rows = []
    for line in completion.split("\n"):
        cells = [c for c in re.split(r"[,\s]+", line.strip()) if c]
        if len(cells) == 1 and len(cells[0]) == size:
            cells = list(cells[0])
        if len(cells) == size:
            rows.append(cells)
        if len(rows) == size:
            return rows
    return None


@cache
def _all_sudokus() -> tuple[tuple[int, ...], ...]:
    """Every solved 4x4 sudoku (288), as 16 digits row by row, built row by row (backtracking)."""
    perms = list(itertools.permutations((1, 2, 3, 4)))

    def fits(rows: list[tuple[int, ...]], row: tuple[int, ...]) -> bool:
        r = len(rows)
        if any(row[c] == above[c] for above in rows for c in range(4)):
            return False  # a column repeats
        if r % 2 == 1:  # the second row of a band: each 2x2 box holds four digits
            return all(len({*rows[-1][c : c + 2], *row[c : c + 2]}) == 4 for c in (0, 2))
        return True

    grids: list[tuple[int, ...]] = []

    def extend(rows: list[tuple[int, ...]]) -> None:
        if len(rows) == 4:
            grids.append(tuple(x for row in rows for x in row))
            return
        for row in perms:
            if fits(rows, row):
                extend([*rows, row])

    extend([])
    return tuple(grids)


@cache
def _sudoku_array() -> np.ndarray:
    """`_all_sudokus` as a [288, 16] array, for a vectorised uniqueness check."""
    return np.array(_all_sudokus(), dtype=np.int8)


@dataclass(frozen=True, slots=True)
class PuzzleTask:
    """A 4x4 latin square (any valid one) or a 4x4 sudoku with a unique solution (exact)."""

    puzzle: str

    @property
    def name(self) -> str:
        return f"parallelbench/{self.puzzle}"

    def generate(self, n: int, *, seed: int, split: Split = "train", blanks: int = 4) -> list[Problem]:
        """`n` distinct puzzles; a sudoku has `blanks` empty cells (1-8) and one solution.

        Raises:
            ValueError: naming a knob out of range, or when the knobs leave too few problems.
        """
        check_split(split)
        check_whole_numbers(blanks=blanks)
        if not 1 <= blanks <= 8:
            raise ValueError(f"need 1 <= blanks <= 8, got blanks={blanks}")
        rng = random.Random(f"{self.name}:{seed}:{split}")
        draw: Callable[[], Problem] = (lambda: self._latin(rng)) if self.puzzle == "latin_square" else (
            lambda: self._sudoku(rng, blanks))  # fmt: skip
        return draw_distinct(n, split, draw, f"{self.puzzle} puzzles")

    def _latin(self, rng: random.Random) -> Problem:
        symbols = rng.sample(SYMBOLS, 4)
        base = [symbols[i:] + symbols[:i] for i in range(4)]
        rng.shuffle(base)
        columns = rng.sample(range(4), 4)  # rows and columns permuted: 576 of the 576 squares' forms
        base = [[row[c] for c in columns] for row in base]
        answer = "\n".join(",".join(row) for row in base)
        listing = ", ".join(symbols)
        return Problem(task=self.name, problem_id=f"{self.name}|{''.join(symbols)}",
                       prompt=f"Write a 4x4 latin square with the symbols {listing}, as CSV.",
                       target=answer, gold="".join(symbols))  # fmt: skip

    def _sudoku(self, rng: random.Random, blanks: int) -> Problem:
        solutions = _all_sudokus()
        grids = _sudoku_array()
        while True:
            index = rng.randrange(len(solutions))  # the draw rng.choice makes, keeping the index
            solution = solutions[index]
            hidden = set(rng.sample(range(16), blanks))
            given = [i for i in range(16) if i not in hidden]
            if int((grids[:, given] == grids[index, given]).all(axis=1).sum()) == 1:
                break
        rows = ["".join("_" if 4 * r + c in hidden else str(solution[4 * r + c]) for c in range(4)) for r in range(4)]
        answer = "\n".join("".join(str(solution[4 * r + c]) for c in range(4)) for r in range(4))
        return Problem(task=self.name, problem_id=f"{self.name}|{'/'.join(rows)}",
                       prompt="Solve the 4x4 sudoku (fill each _ so every row, column and 2x2 box has 1-4):\n"
                       + "\n".join(rows), target=answer, gold=answer)  # fmt: skip

    def score(self, problem: Problem, completion: str) -> bool:
        """Latin square: any valid square over the given symbols; sudoku: the unique solution."""
        grid = parse_grid(completion)
        if grid is None:
            return False
        if self.puzzle == "latin_square":
            return _is_latin(grid, set(problem.gold))
        return "\n".join("".join(row) for row in grid) == problem.gold

    def check(self, problem: Problem) -> None:
        """Latin square: gold is its 4 distinct symbols; sudoku: the solved grid, 4 rows of 4 digits 1-4."""
        if self.puzzle == "latin_square":
            if len(problem.gold) != 4 or len(set(problem.gold)) != 4:
                raise ValueError(f"gold of a latin square is its 4 distinct symbols, e.g. 'ABCD'; got {problem.gold!r}")
        elif not re.fullmatch(r"[1-4]{4}(\n[1-4]{4}){3}", problem.gold):
            raise ValueError(f"gold of a sudoku is its solved grid, 4 lines of 4 digits 1-4; got {problem.gold!r}")

    def final_answer(self, completion: str) -> str:
        """The parsed grid, a packed row a line."""
        grid = parse_grid(completion)
        return "" if grid is None else "\n".join("".join(row) for row in grid)


def parallelbench_tasks() -> dict[str, WaitingLineTask | PuzzleTask]:
    """Every ParallelBench task we generate, by registry name."""
    tasks: list[WaitingLineTask | PuzzleTask] = [WaitingLineTask(op) for op in LIST_OPS]
    tasks += [PuzzleTask(p) for p in PUZZLES]
    return {task.name: task for task in tasks}
