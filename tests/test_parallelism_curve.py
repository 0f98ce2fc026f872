"""The ParallelBench curve: canvases, steps and scoring against an oracle, and the command's errors."""

from __future__ import annotations

import math

import pytest
import torch

from dllm_viz.models import ModelAdapter, load
from dllm_viz.parallelism_curve import (
    CURVE_CANVAS,
    ItemWindows,
    answer_length,
    curve_problems,
    given_length_canvas,
    item_window_ends,
    measure_curve,
)
from dllm_viz.tasks import Problem
from dllm_viz.tasks.parallelbench_theory import closed_form_accuracy, main
from dllm_viz.train.data import answer_layouts


class Oracle(ModelAdapter):
    """The wrapped adapter's tokenizer and prompts, with logits that put each problem's reference
    answer right after its prompt and end-of-text after it, each position as sure as the next: what
    is left to go wrong is the plumbing (canvas, steps, scoring). It keeps every input it is given."""

    def __init__(self, inner: ModelAdapter, problems: list[Problem]) -> None:
        super().__init__(inner.model, inner.tokenizer, inner.info, prompt_template=inner.prompt_template)
        self.answers = {tuple(inner.encode_prompt(p.prompt)): inner.encode_text(p.target) for p in problems}
        self.inputs: list[list[int]] = []

    def logits(self, tokens: torch.Tensor, *, last: int | None = None, valid: int | None = None) -> torch.Tensor:
        ids = tokens.tolist()
        self.inputs.append(ids)
        prompt, answer = next((p, a) for p, a in self.answers.items() if tuple(ids[: len(p)]) == p)
        written = [*answer, *[self.info.eos_token_id] * (len(ids) - len(prompt) - len(answer))]
        out = torch.full((len(ids), self.info.vocab_size), -20.0)
        out[range(len(prompt), len(ids)), written] = 20.0
        return out[-(last or len(ids)):]


@pytest.fixture(scope="module")
def bundled() -> ModelAdapter:
    """The bundled model: its tokenizer and prompt template (ParallelBench's names are tokens of it)."""
    return load("tiny", device="cpu")


def test_an_oracle_copies_at_every_parallelism_and_the_steps_follow_k(bundled: ModelAdapter) -> None:
    problems = curve_problems("copy", 4, 3)
    assert all(p.target.count('", "') == 3 for p in problems)  # four names each
    points = measure_curve(Oracle(bundled, problems), problems, "copy", 4)
    tokens = sum(answer_length(bundled, p) for p in problems) / 3
    assert [(p.k, p.steps) for p in points] == [(None, round(tokens)), (1, 4), (2, 2), (3, 2), (4, 1)]
    assert all(p.accuracy == 1.0 and p.closed_form == 1.0 and p.problems == 3 for p in points)
    expected = [1.0, *(tokens / math.ceil(4 / k) for k in range(1, 5))]
    assert [p.tokens_per_step for p in points] == pytest.approx(expected)


def test_the_sequential_end_commits_one_token_a_pass(bundled: ModelAdapter) -> None:
    """k=token: as many passes as the answer has tokens, each committing one (the oracle's inputs show
    the open positions shrinking by one a pass), scored against k = 1's closed form."""
    problems = curve_problems("shuffle", 3, 1)
    oracle = Oracle(bundled, problems)
    first = measure_curve(oracle, problems, "shuffle", 3)[0]
    answer = answer_length(bundled, problems[0])
    passes = oracle.inputs[:answer]
    open_counts = [row.count(bundled.info.mask_token_id) for row in passes]
    assert open_counts == list(range(answer, 0, -1))
    assert oracle.inputs[answer].count(bundled.info.mask_token_id) == answer  # k = 1 starts afresh
    assert (first.k, first.steps, first.tokens_per_step) == (None, answer, 1.0)
    assert first.closed_form == closed_form_accuracy("shuffle", 3, 1) == 1.0


def test_only_the_answer_is_open_the_tail_is_given_as_end_of_text(bundled: ModelAdapter) -> None:
    """The model sees a training-length canvas whose end-of-text tail is written (what the ideal
    model knows: the length), not an answer-long canvas it never saw in training."""
    problems = curve_problems("copy", 3, 1)
    oracle = Oracle(bundled, problems)
    measure_curve(oracle, problems, "copy", 3)
    prompt_length, answer = len(bundled.encode_prompt(problems[0].prompt)), answer_length(bundled, problems[0])
    first = oracle.inputs[0][prompt_length:]
    assert len(first) == CURVE_CANVAS == 64
    info = bundled.info
    assert first == [info.mask_token_id] * answer + [info.eos_token_id] * (CURVE_CANVAS - answer)
    assert len(given_length_canvas(bundled, 70)) == 71  # a longer answer still gets its end-of-text


def test_a_model_that_copies_one_token_a_pass_copies_on_the_curve(bundled: ModelAdapter) -> None:
    """The bundled model copies lists one token a pass; the curve at k = 1 must agree (an
    answer-long canvas gave 0 here: the model had never seen one)."""
    problems = curve_problems("copy", 3, 3)
    points = {p.k: p for p in measure_curve(bundled, problems, "copy", 3)}
    assert points[1].accuracy == 1.0 and points[None].accuracy == 1.0


def test_the_closed_form_column_is_the_papers_for_each_k(bundled: ModelAdapter) -> None:
    problems = curve_problems("shuffle", 3, 2)
    points = measure_curve(Oracle(bundled, problems), problems, "shuffle", 3)
    assert [p.closed_form for p in points] == [closed_form_accuracy("shuffle", 3, k) for k in (1, 1, 2, 3)]
    assert all(p.accuracy == 1.0 for p in points)  # the oracle writes the reference, one valid shuffle


def test_item_windows_hold_k_whole_items_the_last_one_the_rest() -> None:
    """Items as `answer_layouts` numbers them: `["A B"` is item 0, `, "C D"` item 1, `]` item n."""
    items = (0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3)  # three names and the closing bracket
    assert item_window_ends(items, 3, 1, 64) == (4, 9, 64)
    assert item_window_ends(items, 3, 2, 64) == (9, 64)
    assert item_window_ends(items, 3, 3, 64) == (64,)
    with pytest.raises(ValueError, match="gen_length=64"):
        ItemWindows((9, 32)).validate(64)
    with pytest.raises(ValueError, match=r"\(9, 9, 64\)"):
        ItemWindows((9, 9, 64)).validate(64)


def test_item_by_item_writes_each_item_a_token_a_pass_its_window_in_parallel(bundled: ModelAdapter) -> None:
    """The paper's protocol: a window of k items takes as many passes as its longest item, and each
    pass commits one token of every item still open in it (the oracle's inputs show it)."""
    problems = curve_problems("copy", 4, 1)
    oracle = Oracle(bundled, problems)
    points = {p.k: p for p in measure_curve(oracle, problems, "copy", 4)}
    assert all(p.item_accuracy == 1.0 for k, p in points.items() if k is not None)
    assert points[None].item_accuracy is None
    items = answer_layouts(bundled.tokenizer, problems)[0].line
    sizes = [items.count(i) for i in range(5)]  # four names, then the closing bracket (one token)
    assert sizes[4] == 1
    assert points[1].item_passes == sum(sizes[:3]) + max(sizes[3], 1)
    assert points[2].item_passes == max(sizes[:2]) + max(sizes[2:])
    assert points[4].item_passes == max(sizes)
    # At k = 4 the first pass sees every answer token open, the second five fewer (a token of each
    # name and the bracket), the third four fewer again (the bracket is done).
    answer = answer_length(bundled, problems[0])
    open_counts = [row.count(bundled.info.mask_token_id) for row in oracle.inputs]
    k4 = [answer, answer - 5, answer - 9]
    assert any(open_counts[i:i + 3] == k4 for i in range(len(open_counts)))


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


def test_the_command_prints_the_sequential_end_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--op", "copy", "--n", "2", "--model", "tiny", "--problems", "1", "--device", "cpu"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("k=")]
    assert [line.split()[0] for line in lines] == ["k=token", "k=1", "k=2"]
    assert "tokens/step=1.0" in lines[0] and "closed_form=1.0000" in lines[0]
