"""HumanEval from a local (optionally gzipped) jsonl file or the hub, scored pass@1 in our sandbox.

Post-processing as Fast-dLLM/AdaBlock do (docs/ALGORITHMS.md §8.2): if the completion holds a
```python block, take its contents; if that code defines the entry point itself, run it after
the prompt's imports, otherwise append it to the prompt. Then the task's `check` runs on the
entry point inside the bubblewrap sandbox, in a judge process apart from the completion's
(tasks/judge.py): the judge runs the prompt (whose helpers some tests call) and the test code
with the entry point bound to the completion's function.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from dllm_viz.tasks.base import Problem, Split, first
from dllm_viz.tasks.code import check_compiles, check_entry_point
from dllm_viz.tasks.hub import HUB, hub_records
from dllm_viz.tasks.judge import JudgedProgram, run_judged

TIMEOUT_S = 10.0
_FENCE = re.compile(r"```(?:python|py)?\n(.*?)(?:```|$)", re.DOTALL)


def load_humaneval(path: str | Path, *, n: int | None = None) -> list[Problem]:
    """HumanEval problems (task_id, prompt, canonical_solution, test, entry_point).

    `path` is a jsonl(.gz) file, or "hub" for openai/openai_humaneval's test split.

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: a record lacks a HumanEval field, or the hub is unreachable.
    """
    if str(path) == HUB:
        return humaneval_problems(hub_records("humaneval"), source="hub", n=n)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"HumanEval file {str(path)!r} does not exist; pass the path to HumanEval.jsonl.gz (or 'hub' when online)"
        )
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
        records = [json.loads(line) for line in handle if line.strip()]
    return humaneval_problems(records, source=str(path), n=n)


def humaneval_problems(records: list[dict[str, Any]], *, source: str, n: int | None) -> list[Problem]:
    """HumanEval records -> problems; `source` names where they came from in errors."""
    problems = []
    for record in records:
        missing = {"task_id", "prompt", "canonical_solution", "test", "entry_point"} - set(record)
        if missing:
            raise ValueError(f"{source}: record {record.get('task_id', '?')!r} lacks {sorted(missing)}")
        problems.append(Problem(task="humaneval", problem_id=record["task_id"], prompt=record["prompt"],
                                target=record["canonical_solution"], gold=record["test"],
                                entry_point=record["entry_point"]))
    return first(problems, n)


def program(problem: Problem, completion: str) -> JudgedProgram:
    """The judged run for a completion: the candidate is the completed code, the judge runs the
    prompt then the tests and `check(<entry point>)`."""
    fenced = _FENCE.search(completion)
    code = fenced.group(1) if fenced else completion
    if problem.entry_point and re.search(rf"^def {re.escape(problem.entry_point)}\(", code, re.MULTILINE):
        imports = "\n".join(line for line in problem.prompt.splitlines() if line.startswith(("import ", "from ")))
        candidate = f"{imports}\n{code}"
    else:
        candidate = problem.prompt + code
    return JudgedProgram(candidate=f"{candidate}\n", entry_point=problem.entry_point or "",
                         tests=f"{problem.gold}\n\ncheck({problem.entry_point})\n", setup=problem.prompt)


@dataclass(frozen=True)
class HumanEvalTask:
    """pass@1 scorer for HumanEval problems (loaded from a file, never generated)."""

    name: str = "humaneval"
    runs_code: ClassVar[bool] = True  # its scorer executes the completion: evaluate checks the sandbox first

    def generate(self, n: int, *, seed: int, split: Split, **difficulty: int) -> list[Problem]:
        raise ValueError("humaneval is a real benchmark, not generated: load it with load_humaneval(path)")

    def score(self, problem: Problem, completion: str) -> bool:
        """True when the completed function passes the task's tests in the sandbox."""
        return run_judged(program(problem, completion), timeout_s=TIMEOUT_S).passed

    def check(self, problem: Problem) -> None:
        """HumanEval needs the entry point (its `check(candidate)` is called with it) and test code that compiles."""
        check_entry_point(problem)
        check_compiles(problem.gold, "gold (the test code)")

    def final_answer(self, completion: str) -> str:
        """The whole completion: the sandbox runs every character of it."""
        return completion
