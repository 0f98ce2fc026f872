"""HumanEval-shaped code tasks: a one-sentence spec plus a `def` line; the model writes the body.

Problems come from parameterised templates (arithmetic on arguments, string and list operations,
conditionals). Hidden asserts are computed by running the reference body in-process at generation
time (it is our own code); completions are scored only inside the sandbox.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Any

from dllm_viz.tasks.base import Problem, Split, check_count, check_split, check_whole_numbers, split_of
from dllm_viz.tasks.judge import JudgedProgram, run_judged

NUM_TESTS = 4
SCORE_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class _Template:
    """A spec/body pair over argument slots a, b (ints), s (str), xs (list of ints).

    `spec` and `body` are format strings; argument slots are filled with the chosen argument
    names, `{k}`/`{j}` with small integer constants and `{c}` with a lowercase letter.
    """

    names: tuple[str, ...]
    args: tuple[str, ...]
    spec: str
    body: str


T = _Template
TEMPLATES: tuple[_Template, ...] = (
    T(
        ("add", "add_two", "total"),
        ("a", "b"),
        "Return the sum of {a} and {b}.",
        "return {a} + {b}",
    ),
    T(("subtract", "minus", "difference"), ("a", "b"), "Return {a} minus {b}.", "return {a} - {b}"),
    T(
        ("multiply", "product", "times"),
        ("a", "b"),
        "Return the product of {a} and {b}.",
        "return {a} * {b}",
    ),
    T(("add_k", "plus_const", "shift"), ("a",), "Return {a} plus {k}.", "return {a} + {k}"),
    T(("scale", "times_k", "mul_const"), ("a",), "Return {a} times {k}.", "return {a} * {k}"),
    T(
        ("affine", "linear", "calc"),
        ("a",),
        "Return {a} times {k} plus {j}.",
        "return {a} * {k} + {j}",
    ),
    T(
        ("larger", "max_of_two", "bigger"),
        ("a", "b"),
        "Return the larger of {a} and {b}.",
        "if {a} > {b}:\n    return {a}\nreturn {b}",
    ),
    T(
        ("smaller", "min_of_two", "lesser"),
        ("a", "b"),
        "Return the smaller of {a} and {b}.",
        "if {a} < {b}:\n    return {a}\nreturn {b}",
    ),
    T(
        ("is_even", "even", "check_even"),
        ("a",),
        "Return True if {a} is even, otherwise False.",
        "return {a} % 2 == 0",
    ),
    T(
        ("divisible", "is_multiple", "check_div"),
        ("a",),
        "Return True if {a} is divisible by {k}, otherwise False.",
        "return {a} % {k} == 0",
    ),
    T(
        ("absolute", "abs_value", "magnitude"),
        ("a",),
        "Return the absolute value of {a}.",
        "if {a} < 0:\n    return -{a}\nreturn {a}",
    ),
    T(
        ("clip_low", "at_least", "floor_at"),
        ("a",),
        "Return {a} if it is greater than {k}, otherwise {k}.",
        "if {a} > {k}:\n    return {a}\nreturn {k}",
    ),
    T(
        ("reverse", "reversed_text", "flip"),
        ("s",),
        "Return the string {s} reversed.",
        "return {s}[::-1]",
    ),
    T(
        ("upper", "shout", "to_upper"),
        ("s",),
        "Return the string {s} in upper case.",
        "return {s}.upper()",
    ),
    T(
        ("prefix", "head", "first_chars"),
        ("s",),
        "Return the first {k} characters of the string {s}.",
        "return {s}[:{k}]",
    ),
    T(
        ("last_char", "final_char", "tail_char"),
        ("s",),
        "Return the last character of the string {s}.",
        "return {s}[-1]",
    ),
    T(
        ("count_char", "char_count", "how_many"),
        ("s",),
        "Return how many times the letter '{c}' appears in the string {s}.",
        "return {s}.count('{c}')",
    ),
    T(
        ("repeat", "echo", "copies"),
        ("s",),
        "Return the string {s} repeated {k} times.",
        "return {s} * {k}",
    ),
    T(
        ("append_char", "add_suffix", "extend"),
        ("s",),
        "Return the string {s} with '{c}' added at the end.",
        "return {s} + '{c}'",
    ),
    T(
        ("starts_with", "begins", "has_prefix"),
        ("s",),
        "Return True if the string {s} starts with '{c}', otherwise False.",
        "return {s}.startswith('{c}')",
    ),
    T(
        ("list_sum", "sum_all", "add_up"),
        ("xs",),
        "Return the sum of the numbers in the list {xs}.",
        "total = 0\nfor x in {xs}:\n    total += x\nreturn total",
    ),
    T(
        ("list_max", "largest", "biggest"),
        ("xs",),
        "Return the largest number in the list {xs}.",
        "best = {xs}[0]\nfor x in {xs}:\n    if x > best:\n        best = x\nreturn best",
    ),
    T(
        ("count_even", "num_even", "evens"),
        ("xs",),
        "Return how many numbers in the list {xs} are even.",
        "count = 0\nfor x in {xs}:\n    if x % 2 == 0:\n        count += 1\nreturn count",
    ),
    T(
        ("count_above", "num_greater", "above"),
        ("xs",),
        "Return how many numbers in the list {xs} are greater than {k}.",
        "count = 0\nfor x in {xs}:\n    if x > {k}:\n        count += 1\nreturn count",
    ),
    T(
        ("scale_all", "multiply_all", "times_all"),
        ("xs",),
        "Return a list with every number in {xs} multiplied by {k}.",
        "return [x * {k} for x in {xs}]",
    ),
    T(
        ("add_all", "shift_all", "plus_all"),
        ("xs",),
        "Return a list with {k} added to every number in {xs}.",
        "return [x + {k} for x in {xs}]",
    ),
    T(
        ("keep_above", "filter_big", "greater_than"),
        ("xs",),
        "Return a list of the numbers in {xs} that are greater than {k}.",
        "return [x for x in {xs} if x > {k}]",
    ),
    T(
        ("sum_squares", "squares_total", "square_sum"),
        ("xs",),
        "Return the sum of the squares of the numbers in the list {xs}.",
        "total = 0\nfor x in {xs}:\n    total += x * x\nreturn total",
    ),
    T(
        ("first_item", "head_item", "front"),
        ("xs",),
        "Return the first element of the list {xs}.",
        "return {xs}[0]",
    ),
    T(
        ("sort_list", "ascending", "ordered"),
        ("xs",),
        "Return the list {xs} sorted in increasing order.",
        "return sorted({xs})",
    ),
    T(
        ("drop_first", "skip", "tail"),
        ("xs",),
        "Return the list {xs} without its first {k} elements.",
        "return {xs}[{k}:]",
    ),
    T(
        ("length_plus", "size_plus", "len_k"),
        ("xs",),
        "Return the length of the list {xs} plus {k}.",
        "return len({xs}) + {k}",
    ),
)
ARG_NAMES: dict[str, tuple[str, ...]] = {
    "a": ("a", "x", "n", "m"),
    "b": ("b", "y", "k2", "p"),
    "s": ("s", "text", "word"),
    "xs": ("xs", "nums", "values", "items"),
}


def _random_arg(rng: random.Random, slot: str) -> Any:
    """A random test input for an argument slot (strings and lists are never empty)."""
    if slot in ("a", "b"):
        return rng.randint(-20, 40)
    if slot == "s":
        return "".join(
            rng.choice("abcde" + string.ascii_lowercase) for _ in range(rng.randint(1, 8))
        )
    return [rng.randint(-5, 20) for _ in range(rng.randint(2, 9))]


def _instantiate(rng: random.Random, template: _Template) -> tuple[str, str, str, str]:
    """(prompt, body, entry_point, def_line) for one random instance of `template`."""
    names = {slot: rng.choice(ARG_NAMES[slot]) for slot in template.args}
    if "a" in names and "b" in names and names["a"] == names["b"]:
        names["b"] = "b" if names["a"] != "b" else "y"
    consts = {
        "k": rng.randint(2, 5 if "[{k}:]" in template.body else 9),
        "j": rng.randint(1, 9),
        "c": rng.choice("abcdeiost"),
    }
    fields = {**names, **consts}
    entry_point = rng.choice(template.names)
    def_line = f"def {entry_point}({', '.join(names[slot] for slot in template.args)}):"
    prompt = f"{template.spec.format(**fields)}\n{def_line}"
    body = "\n".join("    " + line for line in template.body.format(**fields).split("\n"))
    return prompt, body, entry_point, def_line


def _hidden_tests(
    rng: random.Random, template: _Template, def_line: str, body: str, entry_point: str
) -> str:
    """Asserts pinning the reference behaviour on random inputs (trusted code, run in-process)."""
    namespace: dict[str, Any] = {}
    exec(f"{def_line}\n{body}\n", namespace)
    reference = namespace[entry_point]
    lines = []
    for _ in range(NUM_TESTS):
        args = [_random_arg(rng, slot) for slot in template.args]
        expected = reference(*args)
        lines.append(f"assert {entry_point}({', '.join(map(repr, args))}) == {expected!r}")
    return "\n".join(lines)


def check_entry_point(problem: Problem) -> None:
    """The entry point must be a Python name: the judge binds it to the completion's function."""
    if not (problem.entry_point or "").isidentifier():
        raise ValueError(f"problem {problem.problem_id!r}: the entry point must be the name of the function the "
                         f"tests call, got {problem.entry_point!r}")


def check_compiles(source: str, what: str) -> None:
    """Refuse `source` that is not Python (every answer would fail on it, not on the answer)."""
    try:
        compile(source, "<gold>", "exec")
    except SyntaxError as exc:
        raise ValueError(f"{what} is not valid Python ({exc.msg}, line {exc.lineno}); fix the test code") from exc


class CodeTask:
    """Short Python functions from a one-sentence spec, scored by hidden asserts in a sandbox."""

    name = "code"
    runs_code = True  # its scorer executes the completion: evaluate checks the sandbox first

    def generate(
        self, n: int, *, seed: int, split: Split = "train", max_tries: int = 200_000
    ) -> list[Problem]:
        """`n` distinct problems of `split`, deterministic in `seed` (split by prompt content).

        Raises:
            ValueError: a negative or non-integer `n` or `max_tries`, or when the template space
                cannot supply `n` distinct problems.
        """
        check_split(split)
        check_count(n)  # a negative n returned [] and a float one (2.5) three problems, silently
        check_whole_numbers(max_tries=max_tries)
        rng = random.Random(f"code:{seed}:{split}")
        out: list[Problem] = []
        seen: set[str] = set()
        for _ in range(max_tries):
            if len(out) >= n:
                break
            template_idx = rng.randrange(len(TEMPLATES))
            template = TEMPLATES[template_idx]
            prompt, body, entry_point, def_line = _instantiate(rng, template)
            if prompt in seen or split_of("code|" + prompt) != split:
                continue
            seen.add(prompt)
            gold = _hidden_tests(rng, template, def_line, body, entry_point)
            out.append(Problem("code", f"code|{prompt}", prompt, body, gold, entry_point))
        if len(out) < n:
            raise ValueError(
                f"could only generate {len(out)} distinct {split} code problems, asked for n={n}"
            )
        return out

    @staticmethod
    def def_line(problem: Problem) -> str:
        """The prompt's last line: the function's `def` line, which the completion continues."""
        return problem.prompt.rsplit("\n", 1)[-1]

    def program(self, problem: Problem, completion: str) -> JudgedProgram:
        """The judged run: the candidate is the prompt's def line and the completion; the judge
        runs the asserts with the entry point bound to it (so its results arrive as plain data,
        and no object whose `__eq__` says yes to everything can pass)."""
        return JudgedProgram(candidate=f"{self.def_line(problem)}\n{completion}\n",
                             entry_point=problem.entry_point or "", tests=problem.gold)

    def score(self, problem: Problem, completion: str) -> bool:
        """True when the completion passes every hidden assert inside the sandbox."""
        if problem.task != self.name:
            raise ValueError(f"CodeTask cannot score a {problem.task!r} problem")
        return run_judged(self.program(problem, completion), timeout_s=SCORE_TIMEOUT_S).passed

    def check(self, problem: Problem) -> None:
        """The hidden tests (gold) must be Python that compiles, and the prompt must end in the def line."""
        check_compiles(problem.gold, "gold (the hidden asserts)")
        check_entry_point(problem)
        if not self.def_line(problem).startswith("def "):
            raise ValueError("a code problem's prompt must end with the function's `def` line, which the completion "
                             "continues")

    def final_answer(self, completion: str) -> str:
        """The whole completion: the sandbox runs every character of it."""
        return completion
