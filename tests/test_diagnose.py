"""Arithmetic skill diagnosis: roles per token, and scoring that an oracle passes and a copier fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from dllm_viz.cli import main
from dllm_viz.evaluation import heldout_problems
from dllm_viz.models import ModelAdapter, load
from dllm_viz.tasks import Problem
from dllm_viz.tasks.arith import solution_roles
from dllm_viz.train.diagnose import (
    EOS_TAIL,
    binding_accuracy,
    format_binding,
    format_last_lines,
    format_lines,
    format_onehop,
    format_table,
    last_line_accuracy,
    line_accuracy,
    onehop_accuracy,
    role_accuracy,
    token_roles,
)


def test_every_character_of_a_solution_gets_its_role() -> None:
    target = "12 + 7 = 19\n19 * 2 = 38\n#### 38"
    roles = solution_roles(target)
    assert [roles[i] for i in (0, 1, 3, 5, 9, 10)] == ["start", "start", "op", "operand", "result", "result"]
    assert roles[0] == "start" and roles[12] == "carry" and roles[15] == "op" and roles[17] == "operand"
    assert roles[21] == "result" and roles[len(target) - 1] == "final" and 2 not in roles


def test_an_oracle_scores_one_and_a_mask_copier_scores_zero(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = load(str(tiny_dir), device="cpu")
    problems = heldout_problems("arith", 4)
    vocab = adapter.info.vocab_size
    truth: dict[int, list[int]] = {}
    for p in problems:
        prompt = adapter.encode_prompt(p.prompt)
        answer, _ = token_roles(adapter, p.target)
        truth[len(prompt) + len(answer)] = answer  # prompt+answer lengths are distinct enough here
    assert len(truth) == len(problems)

    def oracle(tokens: torch.Tensor, *, last: int | None = None) -> torch.Tensor:
        answer = next(a for n, a in truth.items() if len(tokens) - 8 == n)
        canvas = answer + [adapter.info.eos_token_id] * 8
        return torch.nn.functional.one_hot(torch.tensor(canvas), vocab).float()

    monkeypatch.setattr(adapter, "logits", oracle)
    rows = role_accuracy(adapter, problems, (0.5, 1.0))
    assert {r.role for r in rows} >= {"start", "carry", "op", "operand", "result", "final", "format", "eos"}
    assert all(r.accuracy == 1.0 for r in rows)
    assert "| masked |" in format_table(rows)
    onehop = onehop_accuracy(adapter, problems)
    assert onehop[-1].op == "all" and onehop[-1].total == sum(p.target.count("\n") for p in problems)
    assert all(r.accuracy == 1.0 for r in onehop) and "| one-hop result |" in format_onehop(onehop)
    carried = onehop_accuracy(adapter, problems, from_line=1)
    assert carried[-1].total == onehop[-1].total - len(problems)  # every solution has one first line

    def copier(tokens: torch.Tensor, *, last: int | None = None) -> torch.Tensor:
        return torch.nn.functional.one_hot(tokens[-last:], vocab).float()  # predicts [MASK] where masked

    monkeypatch.setattr(adapter, "logits", copier)
    assert all(r.accuracy == 0.0 for r in role_accuracy(adapter, problems, (0.5,)))
    assert all(r.accuracy == 0.0 for r in onehop_accuracy(adapter, problems))
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        role_accuracy(adapter, problems, (0.0,))


def test_binding_counts_last_names_an_oracle_gets_and_a_copier_misses(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    adapter = load(str(tiny_dir), device="cpu")
    problems = heldout_problems("parallelbench/sort", 3) + heldout_problems("parallelbench/copy", 2)
    problems += heldout_problems("arith", 1)  # no last names: skipped
    truth = {tuple(adapter.encode_prompt(p.prompt)): token_roles(adapter, p.target)[0] for p in problems}
    vocab, eos = adapter.info.vocab_size, adapter.info.eos_token_id

    def oracle(tokens: torch.Tensor, *, last: int | None = None) -> torch.Tensor:
        prompt = next(key for key in truth if tuple(tokens[: len(key)].tolist()) == key)
        return torch.nn.functional.one_hot(torch.tensor(truth[prompt] + [eos] * EOS_TAIL), vocab).float()

    monkeypatch.setattr(adapter, "logits", oracle)
    rows = binding_accuracy(adapter, problems)
    names = sum(len(p.target.split('", "')) for p in problems[:3])
    assert [r.op for r in rows] == ["sort", "copy"] and rows[0].bound[1] == rows[0].eliminable[1] >= names
    assert all(r.bound[0] == r.bound[1] and r.eliminable[0] == r.eliminable[1] for r in rows)
    assert "| sort | 1.00 (" in format_binding(rows)

    def copier(tokens: torch.Tensor, *, last: int | None = None) -> torch.Tensor:
        return torch.nn.functional.one_hot(tokens[-last:], vocab).float()  # predicts [MASK] where masked

    monkeypatch.setattr(adapter, "logits", copier)
    assert all(r.bound[0] == r.eliminable[0] == 0 for r in binding_accuracy(adapter, problems))


def chains_and_truth(tiny_dir: Path) -> tuple[ModelAdapter, list[Problem], dict[tuple[int, ...], list[int]]]:
    """The random tiny model, two long and two story chains, and each one's right canvas (its answer
    and an EOS tail) by its encoded prompt, in the problems' order: what an oracle's logits return."""
    adapter = load(str(tiny_dir), device="cpu")
    problems = heldout_problems("hard/long", 2) + heldout_problems("hard/chain", 2)
    truth = {tuple(adapter.encode_prompt(p.prompt)): token_roles(adapter, p.target)[0]
             + [adapter.info.eos_token_id] * EOS_TAIL for p in problems}
    return adapter, problems, truth


def token_at(adapter: ModelAdapter, problem: Problem, character: int) -> int:
    """Index of the first token of `problem`'s answer that starts at or after `character`."""
    offsets = adapter.tokenizer(problem.target, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return next(i for i, (start, _) in enumerate(offsets) if start >= character)


def test_the_by_line_table_finds_the_line_where_a_model_starts_to_fail(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    adapter, problems, truth = chains_and_truth(tiny_dir)
    vocab, mask = adapter.info.vocab_size, adapter.info.mask_token_id
    # where line 5 starts, in tokens
    line_five = {key: token_at(adapter, p, [i for i, c in enumerate(p.target) if c == "\n"][3] + 1)
                 for key, p in zip(truth, problems, strict=True)}

    def oracle(*, fails_from_line_five: bool) -> Callable[..., torch.Tensor]:
        """Right on every position, or right before line 5 and [MASK] from there on."""
        def logits(tokens: torch.Tensor, *, last: int | None = None) -> torch.Tensor:
            key = next(key for key in truth if tuple(tokens[: len(key)].tolist()) == key)
            out = list(truth[key])
            if fails_from_line_five:
                out[line_five[key]:] = [mask] * (len(out) - line_five[key])
            return torch.nn.functional.one_hot(torch.tensor(out), vocab).float()
        return logits

    monkeypatch.setattr(adapter, "logits", oracle(fails_from_line_five=False))
    rows = line_accuracy(adapter, problems)
    assert [r.task for r in rows][:1] == ["hard/long"] and {r.task for r in rows} == {"hard/long", "hard/chain"}
    long_rows = [r for r in rows if r.task == "hard/long"]
    assert [(r.first, r.last) for r in long_rows[:3]] == [(1, 4), (5, 8), (9, 12)]
    lines = sum(p.target.count("\n") for p in problems)  # worked lines: every line but "#### n"
    assert sum(r.operation[1] for r in rows) == sum(r.result[1] for r in rows) == lines
    assert all(r.operation[0] == r.operation[1] and r.result[0] == r.result[1] for r in rows)
    table = format_lines(rows)
    assert "| hard/long operation | 1.00 (8) |" in table and "| by line, lines above given | 1-4 | 5-8 |" in table

    monkeypatch.setattr(adapter, "logits", oracle(fails_from_line_five=True))
    rows = line_accuracy(adapter, problems)
    assert all(r.operation[0] == r.operation[1] and r.result[0] == r.result[1] for r in rows if r.first == 1)
    assert all(r.operation[0] == 0 and r.result[0] == 0 for r in rows if r.first > 1)
    assert sum(r.first > 1 for r in rows) >= 6  # the long chains reach line 20
    by_two = line_accuracy(adapter, problems, band=2)
    long_by_two = [(r.first, r.operation[0] > 0) for r in by_two if r.task == "hard/long"]
    assert long_by_two[:3] == [(1, True), (3, True), (5, False)]
    with pytest.raises(ValueError, match="band"):
        line_accuracy(adapter, problems, band=0)
    assert line_accuracy(adapter, []) == []  # a held-out set with no chains: an empty table, no IndexError
    assert "no worked lines" in format_lines([])


def test_the_last_lines_table_says_what_the_answer_line_gives_the_last_lines(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    adapter, problems, truth = chains_and_truth(tiny_dir)
    vocab, mask = adapter.info.vocab_size, adapter.info.mask_token_id
    answer_at = {key: token_at(adapter, p, p.target.rindex("####")) for key, p in zip(truth, problems, strict=True)}

    def needs_the_answer(tokens: torch.Tensor, *, last: int | None = None) -> torch.Tensor:
        """Right everywhere while the `####` line is visible, [MASK] everywhere once it is masked."""
        key = next(key for key in truth if tuple(tokens[: len(key)].tolist()) == key)
        visible = int(tokens[len(key) + answer_at[key]]) != mask
        out = truth[key] if visible else [mask] * len(truth[key])
        return torch.nn.functional.one_hot(torch.tensor(out), vocab).float()

    monkeypatch.setattr(adapter, "logits", needs_the_answer)
    rows = last_line_accuracy(adapter, problems)
    assert [(r.task, r.from_end) for r in rows] == [("hard/long", 0), ("hard/long", 1), ("hard/long", 2),
                                                    ("hard/chain", 0), ("hard/chain", 1), ("hard/chain", 2)]
    assert all(r.masked == (0, 2) and r.answer_visible == (2, 2) for r in rows)
    table = format_last_lines(rows)
    assert "| last lines, operation | last | 1 before last | 2 before last |" in table
    assert "| hard/long, answer line masked | 0.00 (2) |" in table
    assert "| hard/chain, answer line visible | 1.00 (2) |" in table
    assert [r.from_end for r in last_line_accuracy(adapter, problems, lines=1)] == [0, 0]
    with pytest.raises(ValueError, match="lines"):
        last_line_accuracy(adapter, problems, lines=0)
    assert last_line_accuracy(adapter, []) == [] and "no worked lines" in format_last_lines([])


def test_diagnose_cli_prints_the_role_table(tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--model", str(tiny_dir), "--device", "cpu", "--n", "3", "--ratios", "0.5",
                 "--list-n", "1", "--lines-n", "1"]) == 0
    out = capsys.readouterr().out
    assert "| list operation | last name by elimination | by binding |" in out and "| shuffle |" in out
    assert out.startswith("| masked |") and "| carry |" in out and "| 0.5 |" in out
    assert "| one-hop result |" in out and "| all |" in out and "| drill result |" in out
    assert "| carried lines |" in out and "| chained drill, carried lines |" in out
    assert "| hard/chain operation |" in out and "| hard/long result |" in out and "| 21-24 |" in out
    assert "| last lines, operation | last |" in out and "| hard/long, answer line visible |" in out
