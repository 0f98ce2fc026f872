"""Evaluation: decode + score a prompt set; the eval CLI's final line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dllm_viz.cli import main
from dllm_viz.config import DecodeConfig
from dllm_viz.evaluation import evaluate, summarize, take
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.tasks import Problem, dump_problems

PROBLEMS = [
    Problem(task="arith", problem_id="a1", prompt="1 + 2?", target="1 + 2 = 3\n#### 3", gold="3"),
    Problem(task="arith", problem_id="a2", prompt="4 + 4?", target="4 + 4 = 8\n#### 8", gold="8"),
]


class OracleAdapter(ModelAdapter):
    """Wraps a real tokenizer; its logits spell out a fixed answer, then EOS."""

    def __init__(self, base: ModelAdapter, answer: str) -> None:
        super().__init__(base.model, base.tokenizer, base.info, prompt_template=base.prompt_template)
        self.answer_ids = base.tokenizer(answer, add_special_tokens=False)["input_ids"]

    def logits(self, tokens: torch.Tensor, *, last: int | None = None) -> torch.Tensor:
        n, vocab = tokens.shape[0], self.info.vocab_size
        out = torch.zeros(n, vocab)
        want = [self.info.eos_token_id] * n
        start = n - 64  # decode() uses gen_length 64 below
        for i, tok in enumerate(self.answer_ids):
            want[start + i] = tok
        out[torch.arange(n), torch.tensor(want)] = 20.0
        return out[-(last or n) :]


@pytest.mark.parametrize(("answer", "expected"), [("x = 3\n#### 3", [True, False]), ("#### 8", [False, True])])
def test_evaluate_scores_each_completion(tiny_adapter: ModelAdapter, answer: str, expected: list[bool]) -> None:
    oracle = OracleAdapter(tiny_adapter, answer)
    results = evaluate(oracle, PROBLEMS, Pipeline.from_names("threshold", block_length=32), DecodeConfig(gen_length=64))
    assert [r.correct for r in results] == expected
    assert results[0].completion == answer
    summary = summarize(results)
    assert summary.accuracy == 0.5 and summary.n == 2 and summary.mean_nfe == results[0].nfe == 2
    assert summary.line() == "accuracy=0.5000 n=2 mean_nfe=2.00"


def test_eval_cli_last_line(tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = tmp_path / "set.jsonl"
    dump_problems(PROBLEMS, prompts)
    out = tmp_path / "rows.jsonl"
    status = main(["eval", "--model", str(tiny_dir), "--prompts", str(prompts), "--policy", "fixed_steps",
                   "--gen-length", "16", "--block-length", "8", "--device", "cpu", "--out", str(out), "--quiet"])
    assert status == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("accuracy=") and " n=2 " in last and last.endswith("mean_nfe=16.00")
    assert len(out.read_text().splitlines()) == 2


def test_eval_cli_skips_to_a_later_slice(tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = tmp_path / "set.jsonl"
    dump_problems(PROBLEMS, prompts)
    out = tmp_path / "rows.jsonl"
    status = main(["eval", "--model", str(tiny_dir), "--prompts", str(prompts), "--skip", "1", "--n", "5",
                   "--gen-length", "16", "--block-length", "8", "--device", "cpu", "--out", str(out), "--quiet"])
    assert status == 0 and " n=1 " in capsys.readouterr().out
    assert [json.loads(line)["problem_id"] for line in out.read_text().splitlines()] == ["a2"]
    assert main(["eval", "--model", str(tiny_dir), "--prompts", str(prompts), "--skip", "2", "--device", "cpu"]) == 2
    assert "`--skip 2` leaves no problem: the set has 2" in capsys.readouterr().err


def test_take_slices_after_skipping() -> None:
    problems = [Problem(task="arith", problem_id=str(i), prompt="?", target="#### 1", gold="1") for i in range(5)]
    assert [p.problem_id for p in take(problems, 2, 2)] == ["2", "3"]
    assert [p.problem_id for p in take(problems, 3)] == ["3", "4"] and take(problems) == problems
    assert [p.problem_id for p in take(problems, 4, 10)] == ["4"]
    with pytest.raises(ValueError, match="must be >= 0"):
        take(problems, -1)


def test_eval_cli_rejects_bad_n(tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--model", str(tiny_dir), "--n", "0", "--device", "cpu"]) == 2
    assert "--n" in capsys.readouterr().err


def test_hard_sets_come_from_the_bundled_file_or_the_held_out_generator() -> None:
    from dllm_viz.evaluation import heldout_problems
    from dllm_viz.tasks import HARD_FAMILIES
    from dllm_viz.tasks.base import split_of

    hard = heldout_problems("hard")
    assert len(hard) == 500 and {p.task for p in hard} == {name for name, weight in HARD_FAMILIES if weight > 0}
    copies = heldout_problems("parallelbench/copy", 7)
    assert copies == heldout_problems("parallelbench/copy", 7) and len(copies) == 7
    assert {p.task for p in copies} == {"parallelbench/copy"}
    assert all(split_of(p.problem_id) == "heldout" for p in copies)
    with pytest.raises(ValueError, match="unknown task 'hard/none'"):
        heldout_problems("hard/none")


def test_eval_cli_takes_a_hard_family(tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["eval", "--model", str(tiny_dir), "--task", "parallelbench/sudoku", "--n", "2", "--policy",
                   "threshold", "--gen-length", "32", "--block-length", "32", "--device", "cpu", "--quiet"])
    assert status == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("accuracy=")
