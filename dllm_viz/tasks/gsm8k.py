"""GSM8K from a local jsonl file (or the hub): few-shot prompts and lm-evaluation-harness answer extraction.

Extraction follows lm-eval's gsm8k task (docs/ALGORITHMS.md §8.2): the completion is cut at the stop
sequence "Question:"; *strict-match* takes the first `#### <number>`; *flexible-extract* takes
the last number-like string. Both normalise by dropping commas, "$" and a trailing period, then
compare with the gold number after `#### ` in the reference answer. Papers rarely say which
filter they report, so both are computed; `score` is strict-match.
Few-shot examples are the first k problems of the same file other than the one asked (the
shared data has only the test split; lm-eval draws its shots from the train split).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from dllm_viz.tasks.base import Problem, Split, first
from dllm_viz.tasks.hub import HUB, hub_records

STOP = "Question:"
_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")


def normalize_number(text: str) -> str:
    """Drop commas, '$' and surrounding periods/spaces, as lm-eval's regexes_to_ignore do."""
    return text.replace(",", "").replace("$", "").strip().rstrip(".").strip()


def gold_answer(answer: str) -> str:
    """The number after `#### ` in a GSM8K reference answer."""
    match = _STRICT.search(answer)
    if match is None:
        raise ValueError(f"GSM8K answer has no '#### <number>' line: {answer[-60:]!r}")
    return normalize_number(match.group(1))


def strict_match(completion: str) -> str | None:
    """lm-eval strict-match: the first `#### <number>` before the stop sequence."""
    match = _STRICT.search(completion.split(STOP)[0])
    return None if match is None else normalize_number(match.group(1))


def flexible_extract(completion: str) -> str | None:
    """lm-eval flexible-extract: the last number-like string before the stop sequence."""
    found = [a or b for a, b in _FLEXIBLE.findall(completion.split(STOP)[0])]
    found = [normalize_number(f) for f in found if normalize_number(f) not in ("", "-")]
    return found[-1] if found else None


def few_shot_prompt(question: str, shots: list[tuple[str, str]]) -> str:
    """lm-eval's format: `Question: q\\nAnswer: a\\n\\n` per shot, then the question."""
    parts = [f"Question: {q}\nAnswer: {a}\n\n" for q, a in shots]
    return "".join(parts) + f"Question: {question}\nAnswer:"


def load_gsm8k(path: str | Path, *, n: int | None = None, shots: int = 5) -> list[Problem]:
    """GSM8K problems from a jsonl file with `question` and `answer` fields, or from the hub.

    Args:
        path: e.g. ../shared/data/gsm8k_test.jsonl, or "hub" for openai/gsm8k's test split.
        n: keep the first n problems (after the ones used as shots).
        shots: few-shot examples prepended to each prompt (Fast-dLLM/AdaBlock use 5).

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: a line is not a GSM8K record, or the hub is unreachable.
    """
    if str(path) == HUB:
        records = [(r["question"], r["answer"]) for r in hub_records("gsm8k")]
        return gsm8k_problems(records, n=n, shots=shots)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"GSM8K file {str(path)!r} does not exist; pass the path to gsm8k_test.jsonl (or 'hub' when online)"
        )
    records = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        if not isinstance(record, dict) or not {"question", "answer"} <= set(record):
            raise ValueError(f"{path}:{line_no} is not a GSM8K record (needs question and answer)")
        records.append((record["question"], record["answer"]))
    return gsm8k_problems(records, n=n, shots=shots)


def gsm8k_problems(records: list[tuple[str, str]], *, n: int | None, shots: int) -> list[Problem]:
    """(question, answer) records -> problems; the first `shots` records become the examples."""
    examples, rest = records[:shots], records[shots:]
    problems = [
        Problem(task="gsm8k", problem_id=f"gsm8k/{i + shots}", prompt=few_shot_prompt(q, examples),
                target=a, gold=gold_answer(a))
        for i, (q, a) in enumerate(rest)
    ]
    return first(problems, n)


@dataclass(frozen=True)
class Gsm8kTask:
    """Scorer for GSM8K problems (they are loaded from a file, never generated)."""

    name: str = "gsm8k"

    def generate(self, n: int, *, seed: int, split: Split, **difficulty: int) -> list[Problem]:
        raise ValueError("gsm8k is a real benchmark, not generated: load it with load_gsm8k(path)")

    def score(self, problem: Problem, completion: str) -> bool:
        """strict-match exact match."""
        return strict_match(completion) == problem.gold

    def check(self, problem: Problem) -> None:
        """The gold must be what strict-match reads back from `#### <gold>`: a number without commas."""
        if not problem.gold or strict_match(f"#### {problem.gold}") != problem.gold:
            raise ValueError(f"gold {problem.gold!r} of a gsm8k problem is not what strict-match reads from "
                             f"'#### {problem.gold}'; write the number without commas or '$', e.g. '1200'")

    def final_answer(self, completion: str) -> str:
        """What strict-match extracts (the number after `#### `)."""
        return strict_match(completion) or ""

    def score_both(self, problem: Problem, completion: str) -> dict[str, bool]:
        """Both lm-eval filters."""
        return {"strict": strict_match(completion) == problem.gold,
                "flexible": flexible_extract(completion) == problem.gold}
