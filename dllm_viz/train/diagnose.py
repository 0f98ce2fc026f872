"""Which arithmetic skills a model has: one-pass token accuracy per token role, per masking ratio.

Full-problem accuracy hides *why* a model fails. Here every answer token of a held-out
arithmetic solution gets a role (copy the start number from the prompt, copy an operand from the
prompt, carry the previous line's result, the operator, a computed result, the final answer,
format, EOS tail); answer positions are masked i.i.d. with probability `ratio` and the model's
argmax at masked positions is scored by role. A model that gets `carry` wrong at ratio 0.15,
when the number to copy is visible on the line above, has not learned to copy yet; one that gets
copies right but `result` wrong has not learned the arithmetic.

I.i.d. masking flatters `result`: the next line starts with the same number (its carry), so a
masked result can usually be copied. `onehop_accuracy` scores the state a block decoder is in:
earlier lines decoded, the line's operands visible, its result and every later line masked.

`binding_accuracy` asks the same of ParallelBench's list answers: is a last name written because
the model found its first name in the prompt (binding), or because it is the one last name left
(elimination)? `line_accuracy` asks it by line number on long chains: how far down a solution the
model still reads each line's operation from the prompt and computes its result, and
`last_line_accuracy` how much the last lines' operations need the `#### answer` line to be visible.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from dllm_viz.models.base import ModelAdapter
from dllm_viz.tasks import TASKS, Problem
from dllm_viz.tasks.arith import SOLUTION_ROLES, solution_roles
from dllm_viz.tasks.parallelbench import WaitingLineTask
from dllm_viz.train.data import answer_layouts

ROLES: tuple[str, ...] = (*SOLUTION_ROLES, "format", "eos")
EOS_TAIL = 8  # EOS positions scored after each answer


@dataclass(frozen=True)
class RoleAccuracy:
    """Correct / scored masked tokens of one role at one masking ratio."""

    ratio: float
    role: str
    correct: int
    total: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else float("nan")


def token_roles(adapter: ModelAdapter, target: str) -> tuple[list[int], list[str]]:
    """The answer's token ids and one role per token (a token takes its first role character's role)."""
    encoded = adapter.tokenizer(target, add_special_tokens=False, return_offsets_mapping=True)
    roles = solution_roles(target)
    out = []
    for start, end in encoded["offset_mapping"]:
        out.append(next((roles[c] for c in range(start, end) if c in roles), "format"))
    return list(encoded["input_ids"]), out


def check_ratios(ratios: Sequence[float]) -> None:
    """Refuse masking ratios role_accuracy cannot measure: none at all (an empty table would read as
    a result), one outside (0, 1], or one given twice (its row would be printed twice, as if two
    measurements agreed). The CLI calls it before the model loads.

    Raises:
        ValueError: naming the ratios and the range, or the repeated ratio.
    """
    if not ratios:
        raise ValueError("no masking ratio given; pass e.g. --ratios 0.15,0.5,1.0")
    if any(not 0.0 < r <= 1.0 for r in ratios):
        raise ValueError(f"masking ratios must be in (0, 1], got {list(ratios)}; pass e.g. --ratios 0.15,0.5,1.0")
    if len(set(ratios)) < len(ratios):
        twice = next(r for r in ratios if list(ratios).count(r) > 1)
        raise ValueError(f"masking ratio {twice} is given twice in {list(ratios)}; give each ratio once")


def check_seed(seed: int) -> None:
    """Refuse a negative masking seed: random.Random takes its absolute value, so --seed -1 would
    silently repeat --seed 1's masks. The CLI calls it before the model loads.

    Raises:
        ValueError: naming the seed and the fix.
    """
    if seed < 0:
        raise ValueError(f"the masking seed must be >= 0, got {seed}; pass e.g. --seed 0")


@torch.no_grad()
def role_accuracy(adapter: ModelAdapter, problems: Sequence[Problem], ratios: Sequence[float] = (0.15, 0.5, 1.0),
                  *, seed: int = 0) -> list[RoleAccuracy]:
    """One-pass accuracy by role at each masking ratio over arithmetic `problems`.

    Raises:
        ValueError: no ratio, one outside (0, 1] or repeated (see check_ratios), or a negative seed.
    """
    check_ratios(ratios)
    check_seed(seed)
    mask, eos = adapter.info.mask_token_id, adapter.info.eos_token_id
    rng = random.Random(seed)
    out = []
    for ratio in ratios:
        tally = {role: [0, 0] for role in ROLES}
        for problem in problems:
            prompt = adapter.encode_prompt(problem.prompt)
            answer, roles = token_roles(adapter, problem.target)
            canvas, roles = answer + [eos] * EOS_TAIL, roles + ["eos"] * EOS_TAIL
            masked = [ratio >= 1.0 or rng.random() < ratio for _ in canvas]
            if not any(masked):
                continue
            tokens = torch.tensor(prompt + [mask if m else t for m, t in zip(masked, canvas, strict=True)])
            predicted = adapter.logits(tokens, last=len(canvas)).argmax(dim=-1).tolist()
            for is_masked, truth, guess, role in zip(masked, canvas, predicted, roles, strict=True):
                if is_masked:
                    tally[role][0] += int(guess == truth)
                    tally[role][1] += 1
        out += [RoleAccuracy(ratio, role, c, n) for role, (c, n) in tally.items() if n]
    return out


@dataclass(frozen=True)
class OneHopAccuracy:
    """Lines whose result the model computes exactly from the visible line, for one operator."""

    op: str
    correct: int
    total: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else float("nan")


@dataclass(frozen=True)
class WorkedLine:
    """Line `index` (0-based) of a worked solution, as token positions of its tokenized answer."""

    problem: Problem
    prompt: list[int]
    answer: list[int]
    index: int
    text: str
    positions: list[int]  # this line's answer positions, in order
    roles: list[str]  # the role of each of `positions`

    def at(self, *roles: str) -> list[int]:
        """This line's answer positions whose role is one of `roles`, in order."""
        return [i for i, role in zip(self.positions, self.roles, strict=True) if role in roles]

    def canvas(self, eos_token_id: int) -> list[int]:
        """The whole answer with an EOS tail: the canvas every one-pass test of the line masks."""
        return self.answer + [eos_token_id] * EOS_TAIL


def worked_lines(adapter: ModelAdapter, problems: Sequence[Problem]) -> Iterator[WorkedLine]:
    """Every worked line (`a op b = c`) of `problems`' solutions, in order; the final answer line and
    any line of another form are left out."""
    layouts = answer_layouts(adapter.tokenizer, problems)
    for problem, layout in zip(problems, layouts, strict=True):
        prompt = adapter.encode_prompt(problem.prompt)
        answer, roles = token_roles(adapter, problem.target)
        for k, line in enumerate(problem.target.split("\n")[:-1]):
            on_line = [i for i, index in enumerate(layout.line) if index == k]
            if any(roles[i] == "result" for i in on_line):
                yield WorkedLine(problem, prompt, answer, k, line, on_line, [roles[i] for i in on_line])


def _right_when_masked(adapter: ModelAdapter, prompt: list[int], canvas: list[int], masked: Sequence[int],
                      scored: Sequence[int] | None = None) -> int:
    """How many of the `scored` positions of `canvas` (default: the `masked` ones) the model's one-pass
    argmax gets right with the `masked` positions masked."""
    tokens = list(canvas)
    for i in masked:
        tokens[i] = adapter.info.mask_token_id
    predicted = adapter.logits(torch.tensor(prompt + tokens), last=len(tokens)).argmax(dim=-1)
    return sum(int(predicted[i]) == canvas[i] for i in (masked if scored is None else scored))


def _exact_when_masked(adapter: ModelAdapter, line: WorkedLine, visible_to: int, scored: Sequence[int]) -> bool:
    """Whether the one-pass argmax writes all of `scored` right when the answer is visible before
    position `visible_to` except `scored`, masked from there on (an EOS tail too)."""
    canvas = line.canvas(adapter.info.eos_token_id)
    masked = [*scored, *range(visible_to, len(canvas))]
    return _right_when_masked(adapter, line.prompt, canvas, masked, scored) == len(scored)


@torch.no_grad()
def onehop_accuracy(
    adapter: ModelAdapter, problems: Sequence[Problem], *, from_line: int = 0
) -> list[OneHopAccuracy]:
    """Exact one-pass result of each worked line given the lines above and its own operands.

    For line k of each arithmetic solution: lines before k are visible, line k is visible except
    its result digits, everything after (later lines, the final answer, an EOS tail) is masked.
    Only lines k >= `from_line` count: `from_line=1` keeps the carried lines, whose left operand
    is the line above's result rather than a number of the prompt.
    Returns one row per operator, in `+ - * /` order, plus an "all" row.
    """
    tally: dict[str, list[int]] = {op: [0, 0] for op in "+-*/"}
    for line in worked_lines(adapter, problems):
        if line.index < from_line:
            continue
        result = line.at("result")
        op = line.text.split(" ")[1]
        tally[op][0] += _exact_when_masked(adapter, line, line.positions[-1] + 1, result)
        tally[op][1] += 1
    rows = [OneHopAccuracy(op, c, n) for op, (c, n) in tally.items() if n]
    return [*rows, OneHopAccuracy("all", sum(r.correct for r in rows), sum(r.total for r in rows))]


@dataclass(frozen=True)
class LineAccuracy:
    """Worked lines numbered `first`..`last` (1-based) of one task written right in one pass, two ways.

    `operation`: the lines above visible, this line and everything after masked; its operator and
    operand right, which are read from the prompt at this line's place (hard/long: the expression's
    next operation; hard/chain: the story's next sentence).
    `result`: the lines above and this line's operands visible; its result right (the one-hop state).
    Each is (correct, total) over lines.
    """

    task: str
    first: int
    last: int
    operation: tuple[int, int]
    result: tuple[int, int]


LINE_BAND = 4  # worked lines per column of the by-line table


@torch.no_grad()
def line_accuracy(adapter: ModelAdapter, problems: Sequence[Problem], *, band: int = LINE_BAND) -> list[LineAccuracy]:
    """Per task and per band of `band` line numbers, worked lines whose operation and whose result
    the model writes right in one pass with the lines above given (`LineAccuracy`).

    Why: on long chains (hard/long, 20-24 lines) a decoder that gets the first lines right can still
    fail late, and whole-problem accuracy on a few problems cannot say where or why. Session 35's
    pilot went wrong from about the 15th line by taking an operand from the wrong place in the
    expression; this table measures that per line depth, on every line of every problem, with the
    lines above given so that one early slip does not hide every later line.
    Rows come in the order the tasks first appear, bands in line order.

    Raises:
        ValueError: `band` < 1.
    """
    if band < 1:
        raise ValueError(f"`band` must be >= 1 line, got {band}")
    tally: dict[str, dict[int, list[int]]] = {}  # task -> band index -> operation right, result right, lines
    for line in worked_lines(adapter, problems):
        copied, result = line.at("op", "operand"), line.at("result")
        counts = tally.setdefault(line.problem.task, {}).setdefault(line.index // band, [0, 0, 0])
        counts[0] += _exact_when_masked(adapter, line, line.positions[0], copied)
        counts[1] += _exact_when_masked(adapter, line, line.positions[-1] + 1, result)
        counts[2] += 1
    return [LineAccuracy(task, b * band + 1, (b + 1) * band, (c[0], c[2]), (c[1], c[2]))
            for task, bands in tally.items() for b, c in sorted(bands.items())]


@dataclass(frozen=True)
class LastLineAccuracy:
    """Worked lines `from_end` lines before the last of one task's solutions (0: the last), their
    operation (operator and operand) written right in one pass with the lines above given, two ways.

    `masked`: this line and everything after masked, the `#### answer` line too (the state a decoder
    whose window ends at this line's newline is in). `answer_visible`: the same with the answer line
    visible (a decoder that committed the answer first). Each is (correct, total) over lines.
    """

    task: str
    from_end: int
    masked: tuple[int, int]
    answer_visible: tuple[int, int]


LAST_LINES = 3  # lines from the end in the last-lines table


@torch.no_grad()
def last_line_accuracy(adapter: ModelAdapter, problems: Sequence[Problem], *,
                       lines: int = LAST_LINES) -> list[LastLineAccuracy]:
    """Per task and per place from the end, the last `lines` worked lines of each solution whose
    operation the model writes right in one pass, with and without the answer line (`LastLineAccuracy`).

    Why: on the long chains a decoder that writes a line at a time (AdaBlock's one-line windows)
    loses most of its answers at the last line, which it writes before the answer line is open,
    while one that commits the answer first writes the last line knowing it (BENCHMARKS.md, session
    49). Rows come in the order the tasks first appear, places from the last line back.

    Raises:
        ValueError: `lines` < 1.
    """
    if lines < 1:
        raise ValueError(f"`lines` must be >= 1, got {lines}")
    by_problem: dict[str, list[WorkedLine]] = {}
    for line in worked_lines(adapter, problems):
        by_problem.setdefault(line.problem.problem_id, []).append(line)
    tally: dict[str, dict[int, list[int]]] = {}  # task -> place from the end -> masked, visible, lines
    for worked in by_problem.values():
        answer_line = set(range(worked[-1].positions[-1] + 1, len(worked[-1].answer)))
        for from_end, line in enumerate(reversed(worked[-lines:])):
            canvas, copied = line.canvas(adapter.info.eos_token_id), line.at("op", "operand")
            after = range(line.positions[0], len(canvas))
            counts = tally.setdefault(line.problem.task, {}).setdefault(from_end, [0, 0, 0])
            counts[0] += _right_when_masked(adapter, line.prompt, canvas, after, copied) == len(copied)
            counts[1] += _right_when_masked(adapter, line.prompt, canvas, [i for i in after if i not in answer_line],
                                            copied) == len(copied)
            counts[2] += 1
    return [LastLineAccuracy(task, place, (c[0], c[2]), (c[1], c[2]))
            for task, places in tally.items() for place, c in sorted(places.items())]


@dataclass(frozen=True)
class BindingAccuracy:
    """Last names of one list operation's answers the model writes right in one pass, two ways.

    `eliminable`: one last name masked, every other visible (the one left over is right).
    `bound`: every last name masked, every first name visible (only a lookup by content works).
    Each is (correct, total) over last-name tokens.
    """

    op: str
    eliminable: tuple[int, int]
    bound: tuple[int, int]


@torch.no_grad()
def binding_accuracy(adapter: ModelAdapter, problems: Sequence[Problem]) -> list[BindingAccuracy]:
    """Per list operation of `problems` (ParallelBench waiting lines), last names right by elimination
    and by binding (`BindingAccuracy`), answers written out with an EOS tail.

    Why: a model that sorts or shuffles a line must carry each person's last name with the first
    name; the step-74000 model wrote sorted first names with last names in the wrong places even
    one token a pass, because it had only learned elimination (session 29, BENCHMARKS.md).
    Problems whose answers hold no last name (other tasks) are skipped.
    """
    tally: dict[str, list[int]] = {}
    for problem, layout in zip(problems, answer_layouts(adapter.tokenizer, problems), strict=True):
        if not isinstance(TASKS.get(problem.task), WaitingLineTask) or not any(layout.computed):
            continue
        prompt = adapter.encode_prompt(problem.prompt)
        answer, _ = token_roles(adapter, problem.target)
        canvas = answer + [adapter.info.eos_token_id] * EOS_TAIL
        last_names = [i for i, bound in enumerate(layout.computed) if bound]
        counts = tally.setdefault(problem.task.removeprefix("parallelbench/"), [0, 0, 0])  # eliminated, bound, of
        counts[0] += sum(_right_when_masked(adapter, prompt, canvas, [i]) for i in last_names)
        counts[1] += _right_when_masked(adapter, prompt, canvas, last_names)
        counts[2] += len(last_names)
    return [BindingAccuracy(op, (c[0], c[2]), (c[1], c[2])) for op, c in tally.items()]


def format_binding(rows: Sequence[BindingAccuracy]) -> str:
    """Markdown table: one row per list operation, last names right by elimination and by binding."""
    lines = ["| list operation | last name by elimination | by binding |", "|---|---|---|"]
    return "\n".join([*lines, *(f"| {r.op} | {_share(r.eliminable)} | {_share(r.bound)} |" for r in rows)])


def _share(counts: tuple[int, int] | None) -> str:
    """A table cell for (correct, total): the share and the total, or "-" for no count."""
    return "-" if counts is None else f"{counts[0] / counts[1]:.2f} ({counts[1]})"


def _task_rows(rows: Sequence[Any], column: Callable[[Any], Any], columns: Sequence[Any],
               fields: Sequence[tuple[str, str]]) -> list[str]:
    """Markdown rows of a by-task table: per task (in first-seen order) and per (field, label), the
    field's counts of the row in each of `columns` (`column(row)` says which a row is in)."""
    cell = {(r.task, column(r)): r for r in rows}
    out = []
    for task in dict.fromkeys(r.task for r in rows):
        for name, label in fields:
            counts = [getattr(cell[task, c], name) if (task, c) in cell else None for c in columns]
            out.append(f"| {task}{label} | " + " | ".join(map(_share, counts)) + " |")
    return out


def format_lines(rows: Sequence[LineAccuracy]) -> str:
    """Markdown table: two rows per task (operation, result), one column per band of line numbers."""
    if not rows:
        return "| by line, lines above given | no worked lines |\n|---|---|"
    bands = sorted({(r.first, r.last) for r in rows})
    lines = ["| by line, lines above given | " + " | ".join(f"{a}-{b}" for a, b in bands) + " |",
             "|---|" + "---|" * len(bands)]
    fields = (("operation", " operation"), ("result", " result"))
    return "\n".join([*lines, *_task_rows(rows, lambda r: r.first, [a for a, _ in bands], fields)])


def format_last_lines(rows: Sequence[LastLineAccuracy]) -> str:
    """Markdown table: two rows per task (answer line masked, visible), one column per place from the end."""
    if not rows:
        return "| last lines, operation | no worked lines |\n|---|---|"
    places = sorted({r.from_end for r in rows})
    names = {0: "last"} | {p: f"{p} before last" for p in places if p}
    lines = ["| last lines, operation | " + " | ".join(names[p] for p in places) + " |", "|---|" + "---|" * len(places)]
    fields = (("masked", ", answer line masked"), ("answer_visible", ", answer line visible"))
    return "\n".join([*lines, *_task_rows(rows, lambda r: r.from_end, places, fields)])


def format_onehop(rows: Sequence[OneHopAccuracy], label: str = "one-hop result") -> str:
    """Markdown table: one column per operator; `label` names the table in its corner cell."""
    lines = [f"| {label} | " + " | ".join(r.op for r in rows) + " |", "|---|" + "---|" * len(rows)]
    return "\n".join([*lines, "| exact | " + " | ".join(f"{r.accuracy:.2f} ({r.total})" for r in rows) + " |"])


def format_table(rows: Sequence[RoleAccuracy]) -> str:
    """Markdown table: one row per ratio, one column per role."""
    ratios = sorted({r.ratio for r in rows})
    roles = [role for role in ROLES if any(r.role == role for r in rows)]
    cell = {(r.ratio, r.role): f"{r.accuracy:.2f} ({r.total})" for r in rows}
    lines = ["| masked | " + " | ".join(roles) + " |", "|---|" + "---|" * len(roles)]
    lines += [f"| {ratio:g} | " + " | ".join(cell.get((ratio, role), "-") for role in roles) + " |" for ratio in ratios]
    return "\n".join(lines)
