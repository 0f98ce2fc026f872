"""The hard split: depth chains, breadth (several valid forms), ParallelBench's tasks, the mix."""

from __future__ import annotations

import collections
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dllm_viz.tasks import HARD_FAMILIES, TASKS, get_task
from dllm_viz.tasks.arith import first_wrong_number, worked_target
from dllm_viz.tasks.base import split_of
from dllm_viz.tasks.hard import BreadthTask, ChainTask, wrong_lines
from dllm_viz.tasks.parallelbench import (
    LIST_OPS,
    PuzzleTask,
    WaitingLineTask,
    _all_sudokus,
    format_list,
    list_is_correct,
    parse_grid,
    parse_list,
)

LINE_RE = re.compile(r"^(\d+) ([-+*/]) (\d+) = (\d+)$")
FAMILIES = [name for name, _ in HARD_FAMILIES]


def checked_chain(target: str) -> list[tuple[str, str, str, str]]:
    """The worked lines (left, op, right, result) of a chain's target, each asserted right, each
    starting from the result above, and the last result the `####` answer."""
    *lines, final = target.split("\n")
    worked = [LINE_RE.match(line).groups() for line in lines]  # type: ignore[union-attr]
    for i, (left, op, right, result) in enumerate(worked):
        assert eval(f"{left} {op.replace('/', '//')} {right}") == int(result)
        if i:
            assert int(left) == int(worked[i - 1][3])  # every line starts from the result above
    assert final == f"#### {worked[-1][3]}"
    return worked


@pytest.mark.parametrize("name", [*FAMILIES, "hard"])
def test_every_family_is_deterministic_held_out_by_content_and_solved_by_its_target(name: str) -> None:
    task = get_task(name)
    heldout = task.generate(40, seed=5, split="heldout")
    assert heldout == task.generate(40, seed=5, split="heldout")
    assert heldout != task.generate(40, seed=6, split="heldout")
    train = task.generate(200, seed=5, split="train")
    assert {p.problem_id for p in heldout}.isdisjoint(p.problem_id for p in train)
    assert all(split_of(p.problem_id) == "heldout" for p in heldout)
    assert len({p.problem_id for p in heldout}) == 40
    assert all(get_task(p.task).score(p, p.target) for p in heldout + train)
    assert all(task.score(p, p.target) for p in heldout)
    for problem in heldout + train:  # what a prompt set's loader checks, generated problems pass
        task.check(problem)


def test_hard_mix_follows_the_declared_weights() -> None:
    counts = collections.Counter(p.task for p in get_task("hard").generate(400, seed=1, split="heldout"))
    total = sum(w for _, w in HARD_FAMILIES)
    for name, weight in HARD_FAMILIES:
        assert int(400 * weight / total + 1e-9) <= counts[name] <= 400 * weight / total + 2  # + a drawn remainder
    assert set(counts) == set(FAMILIES) and all(name in TASKS for name in FAMILIES)
    assert counts["hard/long"] >= 30  # depth at length is in the mix since the bundled model learned it


def test_a_family_of_weight_0_leaves_the_mix_drawn_as_without_it() -> None:
    """A family of the split at weight 0 (as hard/long was until session 48) must leave the held-out
    set drawn exactly as without it, so that adding one never moves a recorded number."""
    from dllm_viz.tasks.hard_split import draw_mix

    for name in ("hard/long", "parallelbench/sudoku"):
        with_zero = tuple((family, 0.0 if family == name else weight) for family, weight in HARD_FAMILIES)
        without = tuple((family, weight) for family, weight in HARD_FAMILIES if family != name)
        for seed in range(5):
            drawn = [draw_mix(60, random.Random(seed), get_task, seed=seed, split="heldout", families=families)
                     for families in (with_zero, without)]
            assert drawn[0] == drawn[1] and all(problem.task != name for problem in drawn[0])


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_long_chains_are_twenty_to_twenty_four_dependent_lines(seed: int) -> None:
    from dllm_viz.tasks.hard import LONG_PROMPT

    (problem,) = get_task("hard/long").generate(1, seed=seed, split="train")
    lines = checked_chain(problem.target)
    assert 20 <= len(lines) <= 24 and problem.task == "hard/long"
    (left, *_), operations = lines[0], [f"{op} {right}" for _, op, right, _ in lines]
    assert problem.prompt == LONG_PROMPT.format(expression=" ".join([f"{left} {operations[0]}", *operations[1:]]))


def test_long_answers_fill_a_256_token_canvas_and_fit_it() -> None:
    from dllm_viz.train.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(str(Path(__file__).resolve().parents[1] / "dllm_viz" / "assets" / "tiny"))
    problems = get_task("hard/long").generate(100, seed=0, split="heldout")
    lengths = [len(ids) for ids in tokenizer([p.target for p in problems], add_special_tokens=False)["input_ids"]]
    assert 180 <= sum(lengths) / len(lengths) <= 230 and max(lengths) < 256, (min(lengths), max(lengths))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"min_ops": 0}, "1 <= min_ops"), ({"max_ops": 33}, "max_ops <= 32"), ({"min_ops": 9, "max_ops": 8}, "min_ops"),
    ({"max_multiplier": 1}, "max_multiplier"),
])  # fmt: skip
def test_long_chain_knobs_out_of_range_are_named(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        get_task("hard/long").generate(1, seed=0, **kwargs)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_chains_are_five_to_twelve_dependent_lines(seed: int) -> None:
    (problem,) = ChainTask().generate(1, seed=seed, split="train")
    assert 5 <= len(checked_chain(problem.target)) <= 12 and problem.task == "hard/chain"


def test_breadth_problems_have_several_valid_forms_that_all_score() -> None:
    task = BreadthTask()
    forms = collections.defaultdict(set)
    for seed in range(60):
        for problem in task.generate(30, seed=seed, split="train", max_extra=0, max_groups=2):
            forms[problem.problem_id].add(problem.target)
    multi = [targets for targets in forms.values() if len(targets) > 1]
    assert multi, "the same problem never came in two surface forms"
    for targets in multi:
        first, second = sorted(targets)[:2]
        assert first.split("\n")[-1] == second.split("\n")[-1]  # same `#### N`
        assert not wrong_lines(first) and not wrong_lines(second)


def test_breadth_mixing_two_forms_line_by_line_is_caught() -> None:
    # "3 * 4 = 12" and "4 * 3 = 12" mixed position by position: left of one form, right of the other.
    assert wrong_lines("3 * 3 = 12\n2 * 5 = 10\n12 + 10 = 22\n#### 22") == ["3 * 3 = 12"]
    assert wrong_lines("4 * 3 = 12\n12 / 5 = 2") == ["12 / 5 = 2"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"groups": 1}, "2 <= groups"), ({"max_groups": 4}, "max_groups <= 3"),
    ({"min_extra": 3, "max_extra": 2}, "min_extra <= max_extra"), ({"max_extra": 9}, "<= 8"),
    ({"max_result": 8}, "max_result >= 12"),
])  # fmt: skip
def test_breadth_knobs_out_of_range_are_named(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        BreadthTask().generate(1, seed=0, **kwargs)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"min_ops": 0}, "1 <= min_ops"), ({"max_ops": 17}, "max_ops <= 16"), ({"max_operand": 2}, "max_operand >= 3"),
])  # fmt: skip
def test_chain_knobs_out_of_range_are_named(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ChainTask().generate(1, seed=0, **kwargs)


def test_a_too_small_space_says_so() -> None:
    with pytest.raises(ValueError, match=r"distinct 'heldout' problems.*widen"):
        ChainTask().generate(500, seed=0, split="heldout", min_ops=1, max_ops=1, max_operand=3, max_result=6,
                             max_multiplier=2)


@pytest.mark.parametrize("bad", [-1, 2.5, "3"])
def test_bad_counts_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="`n` must be a whole number"):
        ChainTask().generate(bad, seed=0)  # type: ignore[arg-type]


def test_waiting_line_knobs_and_lengths() -> None:
    with pytest.raises(ValueError, match="max_length <= 15"):
        WaitingLineTask("copy").generate(1, seed=0, max_length=16)
    problems = WaitingLineTask("copy").generate(50, seed=0, min_length=3, max_length=6)
    assert {len(parse_list(p.target) or []) for p in problems} == {3, 4, 5, 6}


NAMES = ["Mia Stone", "Tom Reed", "Ava Park", "Leo Hill"]


@pytest.mark.parametrize(("op", "word", "index", "answer", "ok"), [
    ("copy", "", 0, NAMES, True),
    ("copy", "", 0, NAMES[::-1], False),
    ("reverse", "", 0, NAMES[::-1], True),
    ("sort", "", 0, sorted(NAMES), True),
    ("shuffle", "", 0, NAMES[1:] + NAMES[:1], True),
    ("shuffle", "", 0, NAMES, False),  # the original order is not a shuffle
    ("shuffle", "", 0, [NAMES[0]] * 4, False),  # two valid orders mixed: a name twice
    ("insert_index", "Eli Bell", 1, [NAMES[0], "Eli Bell", *NAMES[1:]], True),
    ("insert_index", "Eli Bell", 1, ["Eli Bell", *NAMES], False),
    ("insert_random", "Eli Bell", 0, [*NAMES, "Eli Bell"], True),
    ("insert_random", "Eli Bell", 0, [*NAMES[:3], "Eli Bell"], False),
    ("remove_index", "", 2, NAMES[:2] + NAMES[3:], True),
    ("remove_random", "", 0, NAMES[1:], True),
    ("remove_random", "", 0, NAMES[2:], False),
    ("replace_index", "Eli Bell", 3, [*NAMES[:3], "Eli Bell"], True),
    ("replace_random", "Eli Bell", 0, ["Eli Bell", *NAMES[1:]], True),
    ("replace_random", "Eli Bell", 0, ["Eli Bell", "Eli Bell", *NAMES[2:]], False),
])  # fmt: skip
def test_list_verdicts_follow_parallelbench(op: str, word: str, index: int, answer: list[str], ok: bool) -> None:
    assert op in LIST_OPS
    assert list_is_correct(op, NAMES, word, index, answer) is ok


def test_scoring_parses_the_last_list_leniently() -> None:
    (problem,) = WaitingLineTask("reverse").generate(1, seed=2, split="heldout")
    names = parse_list(problem.target) or []
    assert get_task(problem.task).score(problem, "[\"x\"]\n" + format_list(names) + "<eos>")
    assert get_task(problem.task).score(problem, "[" + ", ".join(names) + "]")  # quotes optional
    assert not get_task(problem.task).score(problem, "no list here")
    assert parse_list("[]") == []


def test_latin_squares_accept_any_valid_square_over_the_given_symbols() -> None:
    task = PuzzleTask("latin_square")
    (problem,) = task.generate(1, seed=4, split="heldout")
    a, b, c, d = problem.gold
    assert task.score(problem, f"{a},{b},{c},{d}\n{b},{a},{d},{c}\n{c},{d},{a},{b}\n{d},{c},{b},{a}")
    assert not task.score(problem, f"{a},{b},{c},{d}\n{b},{a},{d},{c}\n{c},{d},{a},{b}\n{d},{c},{a},{b}")
    assert not task.score(problem, "A,B\nB,A")
    forms = {p.target for seed in range(40) for p in task.generate(1, seed=seed, split="train")}
    assert len(forms) > 30


def test_sudokus_have_one_solution_and_need_the_exact_one() -> None:
    assert len(set(_all_sudokus())) == 288  # the known count of solved 4x4 sudokus
    for grid in _all_sudokus():
        rows = [grid[4 * r : 4 * r + 4] for r in range(4)]
        assert all(len(set(row)) == 4 for row in rows) and all(len({row[c] for row in rows}) == 4 for c in range(4))
        assert all(len({rows[r][c] for r in (br, br + 1) for c in (bc, bc + 1)}) == 4 for br in (0, 2) for bc in (0, 2))
    task = PuzzleTask("sudoku")
    for problem in task.generate(20, seed=1, split="heldout"):
        grid = problem.prompt.split("\n")[1:]
        assert sum(row.count("_") for row in grid) == 4
        solutions = [s for s in _all_sudokus() if all(
            ch == "_" or int(ch) == s[4 * r + c] for r, row in enumerate(grid) for c, ch in enumerate(row))]
        assert len(solutions) == 1
        assert task.score(problem, problem.target)
        rows = problem.target.split("\n")
        assert not task.score(problem, "\n".join(rows[1:] + rows[:1]))
    assert parse_grid("1 2 3 4\n2,1,4,3\n3412\n4321") == [list("1234"), list("2143"), list("3412"), list("4321")]


def test_training_rows_mix_in_the_hard_families() -> None:
    from dllm_viz.train.config import DataConfig
    from dllm_viz.train.data import training_problems

    config = DataConfig(batch_size=64, hard_fraction=0.6, code_fraction=0.1, drill_every=0)
    problems, _ = training_problems(config, seed=0, step=1)
    tasks = collections.Counter(p.task for p in problems)
    hard = sum(n for name, n in tasks.items() if name in FAMILIES)
    assert len(problems) == 64 and 25 <= hard <= 52 and tasks["arith"] > 0
    assert all(p.problem_id for p in problems)
    assert training_problems(config, seed=0, step=1) == (problems, _)
    with pytest.raises(ValueError, match="hard_fraction"):
        DataConfig(hard_fraction=0.95, code_fraction=0.1)
    random.Random(0)  # the batch stream is a pure function of (seed, step): no global RNG used


def test_parallelbench_closed_forms_match_the_papers_special_cases() -> None:
    import math

    from dllm_viz.tasks.parallelbench_theory import closed_form_accuracy

    for n in (3, 4, 6):
        assert closed_form_accuracy("shuffle", n, 1) == 1.0
        assert closed_form_accuracy("shuffle", n, n) == pytest.approx(math.factorial(n) / n**n)
        assert closed_form_accuracy("copy", n, n) == 1.0 and closed_form_accuracy("replace_index", n, 2) == 1.0
    # k = 2 gives (n-1)!! / n!! for even n.
    assert closed_form_accuracy("shuffle", 6, 2) == pytest.approx((5 * 3 * 1) / (6 * 4 * 2))
    assert [closed_form_accuracy("replace_random", 6, k) for k in (1, 2, 3, 6)] == [1.0, 0.5, 0.0, 0.0]
    assert closed_form_accuracy("replace_random", 5, 2) == 1.0  # the last step reveals one position
    with pytest.raises(ValueError, match="closed form"):
        closed_form_accuracy("sort", 4, 2)


@pytest.mark.parametrize("name", [*FAMILIES, "arith", "code"])
def test_equal_final_answers_get_equal_verdicts(name: str) -> None:
    # Task.final_answer is what score reads: any two completions it maps together are judged alike.
    task = get_task(name)
    problems = task.generate(12, seed=3, split="heldout")
    for problem in problems:  # generated problems pass what a prompt set's loader checks
        task.check(problem)
    completions = [p.target for p in problems] + [p.target + "\n<eos>" for p in problems] + ["", "no answer here"]
    for problem in problems[:4]:
        verdicts: dict[str, set[bool]] = collections.defaultdict(set)
        for text in completions:
            verdicts[task.final_answer(text)].add(task.score(problem, text))
        assert all(len(seen) == 1 for seen in verdicts.values()), verdicts
        assert task.final_answer(problem.target)  # a target always has an answer to read


def test_final_answers_ignore_surface_form_and_name_the_family_for_the_mix() -> None:
    breadth = get_task("hard/breadth")
    one, other = "3 * 4 = 12\n2 * 5 = 10\n12 + 10 = 22\n#### 22", "5 * 2 = 10\n4 * 3 = 12\n10 + 12 = 22\n#### 22"
    assert breadth.final_answer(one) == breadth.final_answer(other) == "22"
    assert breadth.final_answer("12 + 10 = 22") == ""
    listing = get_task("parallelbench/reverse")
    assert listing.final_answer('["Mia Stone", "Tom Reed"]') == listing.final_answer("[Mia Stone,Tom Reed]<eos>")
    assert listing.final_answer('["Tom Reed", "Mia Stone"]') != listing.final_answer('["Mia Stone", "Tom Reed"]')
    assert get_task("parallelbench/sudoku").final_answer("1,2,3,4\n3,4,1,2\n2,1,4,3\n4,3,2,1") == \
        "1234\n3412\n2143\n4321"
    assert get_task("code").final_answer("    return x\n") == "    return x\n"
    assert get_task("gsm8k").final_answer("so 3 + 4 = 7\n#### 7") == "7"
    with pytest.raises(ValueError, match=re.escape("get_task(problem.task)")):
        get_task("hard").final_answer("#### 3")


def test_the_committed_prompt_sets_are_what_the_generators_make() -> None:
    """Every recorded number was measured on sample_prompts/; a generator change (a family added to
    the split, a refactored drawing helper) must not move them without a deliberate re-export."""
    from dllm_viz.tasks import load_problems
    from dllm_viz.tasks.export_sets import SAMPLE_DIR, heldout_sets

    for name, problems in heldout_sets().items():
        assert load_problems(SAMPLE_DIR / f"{name}.jsonl") == problems, name


SOLUTION = "3 * 4 = 12\n12 / 3 = 4\n4 * 2 = 8\n#### 8"


@pytest.mark.parametrize(("completion", "found"), [
    (SOLUTION, None),
    (SOLUTION + "\n", None),
    ("3 * 5 = 15\n15 / 3 = 5\n5 * 2 = 10\n#### 10", ("operand", 0)),  # the first line's step misread
    ("3 * 4 = 12\n12 - 3 = 9\n9 * 2 = 18\n#### 18", ("op", 1)),
    ("3 * 4 = 12\n12 / 2 = 6\n6 * 2 = 12\n#### 12", ("operand", 1)),
    ("3 * 4 = 12\n12 / 3 = 5\n5 * 2 = 10\n#### 10", ("result", 1)),
    ("3 * 4 = 12\n13 / 3 = 4\n4 * 2 = 8\n#### 8", ("carry", 1)),
    ("4 * 4 = 16\n16 / 4 = 4\n4 * 2 = 8\n#### 8", ("start", 0)),
    ("3 * 4 = 12\n12 / 3 = 4\n4 * 2 = 8\n#### 9", ("final", 3)),
    ("3 * 4 = 12\n12 / 3 = 4 4 * 2 = 8\n#### 8", ("format", 1)),  # two lines run together
    ("3 * 4 = 12\n12 / 3 = 4\n#### 4", ("format", 2)),  # a line left out
    ("3 * 4 = 12\n12 / 3 = 4", ("format", 2)),  # cut short
    ("3 * 4 = 12\n12 / 3 = 4\n4 * 2 = 8\n8 - 1 = 7\n#### 7", ("format", 3)),  # a line too many
    (SOLUTION + "\n1 + 1 = 2", ("format", 4)),  # runs on after its answer
])
def test_first_wrong_number_names_the_number_that_broke_first(completion: str,
                                                               found: tuple[str, int] | None) -> None:
    assert first_wrong_number(SOLUTION, completion) == found


def test_worked_target_inverts_the_ids_of_worked_chains_only() -> None:
    for task in ("hard/chain", "hard/long", "arith"):
        for problem in get_task(task).generate(5, seed=3, split="heldout"):
            assert worked_target(problem.problem_id) == problem.target
            assert first_wrong_number(problem.target, problem.target) is None
    for problem in get_task("hard/breadth").generate(5, seed=3, split="heldout"):
        assert worked_target(problem.problem_id) is None
    assert worked_target("hard/long|") is None and worked_target("no bar") is None
