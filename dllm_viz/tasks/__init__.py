"""Synthetic task registry: prompt sets, answer extraction and scoring for the tiny model.

`TASKS` maps a task name to its generator/scorer; `load_problems` reads the project's jsonl
prompt sets (sample_prompts/*.jsonl). Nothing here knows about models or tokenizers.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path

from dllm_viz.tasks.arith import ArithTask, extract_answer
from dllm_viz.tasks.base import Problem, Split, Task
from dllm_viz.tasks.code import CodeTask
from dllm_viz.tasks.gsm8k import Gsm8kTask, load_gsm8k
from dllm_viz.tasks.hard import BreadthTask, ChainTask, LongChainTask
from dllm_viz.tasks.hard_split import HARD_FAMILIES, HardTask
from dllm_viz.tasks.humaneval import HumanEvalTask, load_humaneval
from dllm_viz.tasks.parallelbench import parallelbench_tasks

TASKS: dict[str, Task] = {"arith": ArithTask(), "code": CodeTask(), "gsm8k": Gsm8kTask(),
                          "humaneval": HumanEvalTask(), "hard/chain": ChainTask(), "hard/breadth": BreadthTask(),
                          "hard/long": LongChainTask(), **parallelbench_tasks()}
_PROBLEM_FIELDS = frozenset(f.name for f in fields(Problem))

__all__ = [
    "HARD_FAMILIES",
    "TASKS",
    "Problem",
    "Split",
    "Task",
    "dump_problems",
    "extract_answer",
    "get_task",
    "load_gsm8k",
    "load_humaneval",
    "load_problems",
]


def get_task(name: str) -> Task:
    """The task registered under `name`.

    Raises:
        ValueError: naming the unknown task and the valid ones.
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {sorted(TASKS)}")
    return TASKS[name]


TASKS["hard"] = HardTask(get_task)


def load_problems(path: str | Path) -> list[Problem]:
    """Read a jsonl prompt set (one Problem per line, as written by `dump_problems`).

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: a directory, a file that is not UTF-8 text or cannot be read, a line that is
            not a JSON object with the Problem fields, a problem its task cannot score as
            written (`Task.check`: e.g. a gold answer the scorer cannot read), or a repeated
            problem_id (it would be counted twice, and skipped once on --resume).
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"prompt set {str(path)!r} is a directory; give a .jsonl file, e.g. "
                         "sample_prompts/arith_heldout.jsonl")
    if not path.is_file():
        raise FileNotFoundError(f"prompt set {str(path)!r} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:  # a binary file: the codec's message names no file
        raise ValueError(f"prompt set {str(path)!r} is not UTF-8 text (byte {exc.start}); give a .jsonl file "
                         "with one JSON problem per line") from None
    except OSError as exc:
        raise ValueError(f"cannot read prompt set {str(path)!r} ({exc.strerror or exc.__class__.__name__}); "
                         "check its permissions") from None
    problems = []
    first_line: dict[str, int] = {}  # problem_id -> the line that holds it
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{line_no} is not valid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{line_no} must be a JSON object, got {type(record).__name__}")
        unknown = set(record) - _PROBLEM_FIELDS
        missing = {"task", "problem_id", "prompt", "target", "gold"} - set(record)
        if unknown or missing:
            raise ValueError(
                f"{path}:{line_no} has unknown keys {sorted(unknown)} / "
                f"missing keys {sorted(missing)}; "
                f"expected {sorted(_PROBLEM_FIELDS)}"
            )
        _check_types(record, f"{path}:{line_no}")
        problem = Problem(**record)
        try:
            TASKS[problem.task].check(problem)  # what its scorer needs (a readable gold), before any decode
        except ValueError as exc:
            raise ValueError(f"{path}:{line_no}: {exc}") from exc
        if problem.problem_id in first_line:
            raise ValueError(f"{path}:{line_no} repeats problem_id {problem.problem_id!r} of line "
                             f"{first_line[problem.problem_id]}; give each problem once (results and --resume "
                             "are keyed by problem_id)")
        first_line[problem.problem_id] = line_no
        problems.append(problem)
    return problems


def _check_types(record: dict, where: str) -> None:
    """Every field a string (entry_point may be null), a known task and a non-empty prompt.

    A number as the prompt would otherwise fail deep inside tokenization, and an unknown task
    only when its first completion is scored.
    """
    for key, value in record.items():
        if not (isinstance(value, str) or (key == "entry_point" and value is None)):
            raise ValueError(f"{where}: field {key!r} must be a string, got {type(value).__name__} {value!r:.40}; "
                             "quote it in the jsonl")
    if record["task"] not in TASKS:
        raise ValueError(f"{where}: unknown task {record['task']!r}; valid tasks: {sorted(TASKS)}")
    if not record["prompt"].strip():
        raise ValueError(f"{where}: the prompt is empty; give each problem its prompt text")


def dump_problems(problems: list[Problem], path: str | Path) -> None:
    """Write problems as jsonl (the format `load_problems` reads)."""
    lines = [json.dumps(asdict(p), ensure_ascii=False) for p in problems]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
