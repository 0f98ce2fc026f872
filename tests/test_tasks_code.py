"""Code task, registry and prompt-set files: determinism, split disjointness, sandboxed scoring."""

from __future__ import annotations

from pathlib import Path

import pytest

from dllm_viz.tasks import TASKS, dump_problems, get_task, load_problems
from dllm_viz.tasks.base import split_of
from dllm_viz.tasks.code import CodeTask
from dllm_viz.tasks.parallelbench import LIST_OPS, PUZZLES

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_prompts"


def test_generation_is_deterministic_and_splits_are_disjoint() -> None:
    task = CodeTask()
    first = task.generate(40, seed=5, split="heldout")
    assert first == task.generate(40, seed=5, split="heldout")
    train = task.generate(400, seed=5, split="train")
    assert {p.prompt for p in first}.isdisjoint(p.prompt for p in train)
    assert all(split_of(p.problem_id) == "heldout" for p in first)


def test_problem_shape_is_humaneval_like() -> None:
    for problem in CodeTask().generate(30, seed=1, split="train"):
        spec, def_line = problem.prompt.split("\n")
        assert spec.endswith(".") and def_line.startswith(f"def {problem.entry_point}(")
        assert all(line.startswith("    ") for line in problem.target.split("\n"))
        assert problem.gold.count("assert ") >= 3


def test_reference_passes_and_wrong_bodies_fail() -> None:
    task = get_task("code")
    problems = task.generate(4, seed=2, split="heldout")
    assert all(task.score(p, p.target) for p in problems)
    assert not any(task.score(p, "    return None") for p in problems)
    assert not task.score(problems[0], "    return (")  # syntax error
    assert not task.score(problems[0], "")


def test_get_task_names_bad_and_valid_names() -> None:
    families = {"hard/chain", "hard/breadth", "hard/long"} | {f"parallelbench/{op}" for op in LIST_OPS + PUZZLES}
    assert set(TASKS) == {"arith", "code", "gsm8k", "humaneval", "hard"} | families
    with pytest.raises(ValueError, match=r"'math'.*\['arith', 'code', 'gsm8k', 'hard', 'hard/breadth'"):
        get_task("math")


def test_problems_round_trip_through_jsonl(tmp_path: Path) -> None:
    problems = TASKS["arith"].generate(3, seed=0, split="train") + TASKS["code"].generate(
        3, seed=0, split="train"
    )
    dump_problems(problems, tmp_path / "set.jsonl")
    assert load_problems(tmp_path / "set.jsonl") == problems


def test_load_problems_rejects_bad_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl"):
        load_problems(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "arith"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="missing keys"):
        load_problems(bad)
    bad.write_text("not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1"):
        load_problems(bad)


def test_shipped_sets_are_heldout_with_gold() -> None:
    arith = load_problems(SAMPLE_DIR / "arith_heldout.jsonl")
    code = load_problems(SAMPLE_DIR / "code_heldout.jsonl")
    demo = load_problems(SAMPLE_DIR / "demo.jsonl")
    assert len(arith) >= 500 and len(code) >= 100 and 5 <= len(demo) <= 20
    for problem in arith + code + demo:
        assert split_of(problem.problem_id) == "heldout"
        assert problem.gold
    assert all(TASKS["arith"].score(p, p.target) for p in arith[:50])
