"""Arithmetic task: deterministic generation, disjoint splits, worked-solution shape, scoring."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dllm_viz.tasks import get_task
from dllm_viz.tasks.arith import DEFAULT_MAX_MULTIPLIER, DEFAULT_MAX_RESULT, ArithTask, extract_answer
from dllm_viz.tasks.base import split_of

LINE_RE = re.compile(r"^(\d+) ([-+*/]) (\d+) = (\d+)$")
LINE_RE_M = re.compile(LINE_RE.pattern, re.MULTILINE)


def small_factor(left: str, op: str, right: str, limit: int) -> bool:
    """Divisors, and one factor of a product, lie in [2, limit] ("3 boxes with 7 each": the left one)."""
    if op == "/":
        return 2 <= int(right) <= limit
    return op != "*" or 2 <= int(right) <= limit or 2 <= int(left) <= limit


def test_generation_is_deterministic_by_seed() -> None:
    task = ArithTask()
    assert task.generate(50, seed=3, split="train") == task.generate(50, seed=3, split="train")
    assert task.generate(50, seed=3, split="train") != task.generate(50, seed=4, split="train")


def test_train_and_heldout_never_overlap() -> None:
    task = ArithTask()
    limits = {"min_ops": 1, "max_ops": 2, "max_operand": 10, "max_result": 99, "max_multiplier": 5}
    heldout = task.generate(300, seed=0, split="heldout", **limits)
    train = task.generate(3000, seed=0, split="train", **limits)
    assert {p.problem_id for p in heldout}.isdisjoint(p.problem_id for p in train)
    assert all(split_of(p.problem_id) == "heldout" for p in heldout)
    assert all(split_of(p.problem_id) == "train" for p in train)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), max_ops=st.integers(1, 4))
def test_each_line_uses_the_previous_result(seed: int, max_ops: int) -> None:
    (problem,) = ArithTask().generate(1, seed=seed, split="train", min_ops=1, max_ops=max_ops)
    *lines, final = problem.target.split("\n")
    assert 1 <= len(lines) <= max_ops
    previous = None
    for line in lines:
        left, op, right, result = LINE_RE.match(line).groups()  # type: ignore[union-attr]
        assert eval(f"{left} {op.replace('/', '//')} {right}") == int(result)
        if op == "/":
            assert int(left) % int(right) == 0
        if previous is not None:
            assert int(left) == previous
        assert 0 <= int(result) <= DEFAULT_MAX_RESULT
        assert small_factor(left, op, right, DEFAULT_MAX_MULTIPLIER)
        previous = int(result)
    assert final == f"#### {previous}" and problem.gold == str(previous)
    assert problem.task == "arith" and problem.entry_point is None


def test_asking_for_more_problems_than_the_range_holds_names_the_fix() -> None:
    with pytest.raises(ValueError, match=r"distinct 'heldout' problems.*ask for fewer"):
        ArithTask().generate(500, seed=0, split="heldout", min_ops=1, max_ops=1, max_operand=3, max_result=6,
                             max_multiplier=2)


def test_difficulty_knobs_bound_operations_and_operands() -> None:
    problems = ArithTask().generate(200, seed=1, split="train", min_ops=2, max_ops=2, max_operand=9)
    assert all(p.target.count("\n") == 2 for p in problems)
    starts = [int(p.target.split(" ")[0]) for p in problems if "with" not in p.prompt]
    assert max(starts) <= 9


def test_number_ranges_bound_every_result_and_factor() -> None:
    problems = ArithTask().generate(300, seed=2, split="train", max_result=40, max_multiplier=3)
    for problem in problems:
        for left, op, right, result in LINE_RE_M.findall(problem.target):
            assert int(result) <= 40 and int(left) <= 40
            assert small_factor(left, op, right, 3)
    assert {op for p in problems for _, op, _, _ in LINE_RE_M.findall(p.target)} == set("+-*/")


def test_drills_are_one_correct_operation_in_range_and_deterministic() -> None:
    task = ArithTask()
    drills = task.drills(400, seed=3, max_result=40, max_multiplier=3)
    assert drills == task.drills(400, seed=3, max_result=40, max_multiplier=3)
    assert drills != task.drills(400, seed=4, max_result=40, max_multiplier=3)
    ops = set()
    for drill in drills:
        line, final = drill.target.split("\n")
        left, op, right, result = LINE_RE.fullmatch(line).groups()  # type: ignore[union-attr]
        assert drill.prompt == f"{left} {op} {right}" and final == f"#### {result}" == f"#### {drill.gold}"
        assert int(result) == {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "/": int.__floordiv__}[op](
            int(left), int(right)
        )
        assert 0 <= int(result) <= 40 and int(left) <= 40 and small_factor(left, op, right, 3)
        assert op != "/" or int(left) % int(right) == 0
        assert task.score(drill, drill.target)
        ops.add(op)
    assert ops == set("+-*/")


def test_chained_drills_carry_each_result_into_the_next_line_and_hide_it_from_the_prompt() -> None:
    task = ArithTask()
    drills = task.drills(300, seed=5, max_ops=4)
    assert drills == task.drills(300, seed=5, max_ops=4)
    assert task.drills(50, seed=5) == task.drills(50, seed=5, max_ops=1)  # one op: session 3's stream
    apply = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "/": int.__floordiv__}
    counts = set()
    for drill in drills:
        *lines, final = drill.target.split("\n")
        steps = [LINE_RE.fullmatch(line).groups() for line in lines]  # type: ignore[union-attr]
        counts.add(len(steps))
        assert drill.prompt == " ".join([" ".join(steps[0][:3]), *(f"{op} {right}" for _, op, right, _ in steps[1:])])
        for (left, op, right, result), (next_left, *_rest) in zip(steps, [*steps[1:], ("end",)], strict=True):
            assert int(result) == apply[op](int(left), int(right)) and 0 <= int(result) <= DEFAULT_MAX_RESULT
            assert next_left in ("end", result)
        assert final == f"#### {steps[-1][3]}" == f"#### {drill.gold}" and task.score(drill, drill.target)
    assert counts == {1, 2, 3, 4}
    with pytest.raises(ValueError, match="max_ops"):
        task.drills(1, seed=0, max_ops=0)


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("3 + 4 = 7\n#### 7", "7"),
        ("#### 1,234", "1234"),
        ("#### -5", "-5"),
        ("####12<eos>", "12"),
        ("#### 7.0", "7"),
        ("#### 2.5", "2.5"),
        ("no answer here", None),
        ("#### ", None),
        ("#### 4\n#### 9", "4"),
    ],
)
def test_extract_answer_edge_cases(completion: str, expected: str | None) -> None:
    assert extract_answer(completion) == expected


def test_score_compares_final_number_to_gold() -> None:
    task = get_task("arith")
    (problem,) = task.generate(1, seed=0, split="heldout")
    assert task.score(problem, problem.target)
    assert task.score(problem, f"wrong work\n#### {problem.gold}")
    assert not task.score(problem, f"#### {int(problem.gold) + 1}")
    assert not task.score(problem, problem.target.replace("####", "##"))


def test_invalid_difficulty_names_the_value() -> None:
    with pytest.raises(ValueError, match="min_ops=3, max_ops=2"):
        ArithTask().generate(1, seed=0, split="train", min_ops=3, max_ops=2)
    with pytest.raises(ValueError, match="'test'"):
        ArithTask().generate(1, seed=0, split="test")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_multiplier=1"):
        ArithTask().generate(1, seed=0, split="train", max_multiplier=1)
