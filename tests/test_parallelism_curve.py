"""The ParallelBench curve: canvases, steps and scoring against an oracle, and the command's errors."""

from __future__ import annotations

import math

import pytest
import torch

from dllm_viz.models import ModelAdapter, load
from dllm_viz.parallelism_curve import answer_length, curve_problems, measure_curve
from dllm_viz.tasks import Problem
from dllm_viz.tasks.parallelbench_theory import closed_form_accuracy, main


class Oracle(ModelAdapter):
    """The wrapped adapter's tokenizer and prompts, with logits that put each problem's reference
    answer (then end-of-text) on its canvas, each position as sure as the next: what is left to
    go wrong is the plumbing (canvas, steps, scoring)."""

    def __init__(self, inner: ModelAdapter, problems: list[Problem]) -> None:
        super().__init__(inner.model, inner.tokenizer, inner.info, prompt_template=inner.prompt_template)
        self.answers = {tuple(inner.encode_prompt(p.prompt)): [*inner.encode_text(p.target), inner.info.eos_token_id]
                        for p in problems}

    def logits(self, tokens: torch.Tensor, *, last: int | None = None, valid: int | None = None) -> torch.Tensor:
        ids = tokens.tolist()
        answer = next(a for prompt, a in self.answers.items() if tuple(ids[: len(prompt)]) == prompt)
        out = torch.full((len(ids), self.info.vocab_size), -20.0)
        out[range(len(ids) - len(answer), len(ids)), answer] = 20.0
        return out[-(last or len(ids)):]


@pytest.fixture(scope="module")
def bundled() -> ModelAdapter:
    """The bundled model's tokenizer and prompt template (ParallelBench's names are in its vocabulary)."""
    return load("tiny", device="cpu")


def test_an_oracle_copies_at_every_parallelism_and_the_steps_follow_k(bundled: ModelAdapter) -> None:
    problems = curve_problems("copy", 4, 3)
    assert all(p.target.count('", "') == 3 for p in problems)  # four names each
    points = measure_curve(Oracle(bundled, problems), problems, "copy", 4)
    assert [(p.k, p.steps) for p in points] == [(1, 4), (2, 2), (3, 2), (4, 1)]
    assert all(p.accuracy == 1.0 and p.closed_form == 1.0 and p.problems == 3 for p in points)
    tokens = sum(answer_length(bundled, p) + 1 for p in problems) / 3
    assert [p.tokens_per_step for p in points] == pytest.approx([tokens / math.ceil(4 / k) for k in range(1, 5)])


def test_the_closed_form_column_is_the_papers_for_each_k(bundled: ModelAdapter) -> None:
    problems = curve_problems("shuffle", 3, 2)
    points = measure_curve(Oracle(bundled, problems), problems, "shuffle", 3)
    assert [p.closed_form for p in points] == [closed_form_accuracy("shuffle", 3, k) for k in (1, 2, 3)]
    assert all(p.accuracy == 1.0 for p in points)  # the oracle writes the reference, one valid shuffle


def test_bad_requests_name_the_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="closed form"):
        curve_problems("sort", 4, 2)
    with pytest.raises(SystemExit):
        main(["--op", "copy", "--n", "40", "--model", "tiny"])
    assert "--n must be 2-15" in capsys.readouterr().err
    assert main(["--op", "copy", "--n", "3", "--model", "/nowhere/model", "--problems", "2"]) == 2
    assert "error" in capsys.readouterr().err
    assert main(["--op", "shuffle", "--n", "3"]) == 0
    assert "k=3 accuracy=0.2222" in capsys.readouterr().out
