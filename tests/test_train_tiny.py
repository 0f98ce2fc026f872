"""Tiny-model training: masking, loss, schedule, and a few real steps that checkpoint and resume."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from dllm_viz.cli import train_tiny as cli
from dllm_viz.tasks import HARD_FAMILIES, TASKS
from dllm_viz.tasks.parallelbench import parse_list
from dllm_viz.train.config import config_from_dict
from dllm_viz.train.data import (
    DataConfig,
    answer_layouts,
    build_rows,
    encode_pairs,
    focus_pattern,
    mask_rows,
    training_batch,
    training_problems,
)
from dllm_viz.train.objective import SCORE_VERSION, heldout_batches, masked_loss
from dllm_viz.train.tiny import CHECKPOINT_NAME, ModelConfig, TrainConfig, _snapshot_due, build_model, lr_at, train
from dllm_viz.train.tokenizer import special_ids, train_tokenizer

TINY = TrainConfig(
    minutes=5,
    max_steps=3,
    eval_every=3,
    eval_arith=8,
    eval_hard=4,
    eval_code=4,
    log_every=1,
    warmup_steps=2,
    tokenizer_problems=300,
    data=DataConfig(batch_size=4),
    model=ModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64),
)


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    problems = TASKS["arith"].generate(200, seed=0, split="train") + TASKS["code"].generate(
        50, seed=0, split="train"
    )
    return train_tokenizer(
        [p.prompt for p in problems] + [p.target for p in problems], vocab_size=400
    )


def test_masking_never_touches_the_prompt(tokenizer: PreTrainedTokenizerFast) -> None:
    ids = special_ids(tokenizer)
    pairs = encode_pairs(tokenizer, TASKS["arith"].generate(8, seed=1, split="train"))
    rows, is_answer, is_content = build_rows(pairs, 64, ids["eos_token_id"])
    assert rows.shape[1] % 16 == 0
    assert all(int(is_answer[i].sum()) >= 64 for i in range(len(pairs)))
    batch = mask_rows(
        rows,
        is_answer,
        is_content,
        ids["mask_token_id"],
        generator=torch.Generator().manual_seed(0),
    )
    assert not (batch.is_masked & ~is_answer).any()
    assert batch.is_masked.any(dim=1).all()
    assert torch.equal(batch.input_ids == ids["mask_token_id"], batch.is_masked)
    full = mask_rows(
        rows,
        is_answer,
        is_content,
        ids["mask_token_id"],
        generator=torch.Generator(),
        t=torch.ones(len(pairs)),
    )
    assert torch.equal(full.is_masked, is_answer)


def test_answer_layout_marks_results_carries_and_the_final_answer(tokenizer: PreTrainedTokenizerFast) -> None:
    problem = TASKS["arith"].generate(1, seed=5, split="train", min_ops=2, max_ops=2)[0]
    code = TASKS["code"].generate(1, seed=5, split="train")[0]
    layout, code_layout = answer_layouts(tokenizer, [problem, code])
    pieces = tokenizer(problem.target, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert len(layout.line) == len(layout.computed) == len(pieces)
    marked = zip(pieces, layout.computed, strict=True)
    computed = "".join(problem.target[a:b] for (a, b), c in marked if c).replace(" ", "")
    first, second = (line.split(" = ")[1] for line in problem.target.split("\n")[:2])
    # line 1's result, line 2's carry (the same number), line 2's result, the final answer
    assert computed == first + first + second + problem.gold
    assert layout.line[0] == 0 and layout.line[-1] == 2 and list(layout.line) == sorted(layout.line)
    assert not any(code_layout.computed)


def test_a_list_answer_marks_each_last_name_as_bound_within_its_item(tokenizer: PreTrainedTokenizerFast) -> None:
    problem = TASKS["parallelbench/sort"].generate(1, seed=3, split="train", min_length=4, max_length=4)[0]
    (layout,) = answer_layouts(tokenizer, [problem])
    pieces = tokenizer(problem.target, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    names = parse_list(problem.target)
    assert names is not None and len(names) == 4
    for item, name in enumerate(names):
        on_item = [(a, b) for (a, b), unit in zip(pieces, layout.line, strict=True) if unit == item]
        bound = "".join(problem.target[a:b] for (a, b), c in zip(pieces, layout.computed, strict=True)
                        if c and (a, b) in on_item)
        assert name.split(" ")[1] in bound and name.split(" ")[0] not in bound  # the last name, not the first
    assert list(layout.line) == sorted(layout.line) and layout.line[-1] == 4  # the closing `]` after item 3


def test_focus_masking_hides_every_computed_number_after_a_visible_prefix(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    ids = special_ids(tokenizer)
    problems = TASKS["arith"].generate(12, seed=2, split="train", min_ops=3, max_ops=4)
    problems += TASKS["code"].generate(2, seed=2, split="train")
    problems += TASKS["parallelbench/shuffle"].generate(4, seed=2, split="train")  # last names: bound
    pairs = encode_pairs(tokenizer, problems)
    rows, is_answer, is_content = build_rows(pairs, 64, ids["eos_token_id"])
    layouts = answer_layouts(tokenizer, problems)
    must_mask, keep = focus_pattern([len(p) for p, _ in pairs], layouts, tuple(rows.shape), random.Random(0))
    batch = mask_rows(rows, is_answer, is_content, ids["mask_token_id"], generator=torch.Generator().manual_seed(0),
                      t=torch.full((len(pairs),), 0.3), must_mask=must_mask, keep=keep)  # fmt: skip
    cuts = set()
    for row, ((prompt, answer), layout) in enumerate(zip(pairs, layouts, strict=True)):
        span = slice(len(prompt), len(prompt) + len(answer))
        masked, kept, line = batch.is_masked[row, span], keep[row, span], torch.tensor(layout.line)
        if not any(layout.computed):  # code: plain i.i.d. masking
            assert not must_mask[row].any() and not keep[row].any()
            continue
        cut = int(line[~kept].min())
        cuts.add(cut)
        assert not masked[line < cut].any()  # the decoded prefix stays visible
        assert masked[(line >= cut) & torch.tensor(layout.computed)].all()
        assert not batch.is_masked[row, : len(prompt)].any()
    assert len(cuts) >= 2  # the cut line varies between rows
    assert sum(any(layout.computed) for layout in layouts) == 16  # the lists get focus masking too


def test_focus_last_fraction_cuts_at_the_last_worked_line(tokenizer: PreTrainedTokenizerFast) -> None:
    ids = special_ids(tokenizer)
    problems = TASKS["hard/long"].generate(6, seed=3, split="train")
    problems += TASKS["arith"].generate(6, seed=3, split="train", min_ops=3, max_ops=4)
    pairs = encode_pairs(tokenizer, problems)
    rows = build_rows(pairs, 64, ids["eos_token_id"])[0]
    layouts = answer_layouts(tokenizer, problems)
    starts, shape = [len(p) for p, _ in pairs], tuple(rows.shape)
    must_mask, keep = focus_pattern(starts, layouts, shape, random.Random(0), last_fraction=1.0)
    for row, (start, layout) in enumerate(zip(starts, layouts, strict=True)):
        line = torch.tensor(layout.line)
        span = slice(start, start + len(layout.line))
        last = layout.line[-1] - 1  # the last worked line; layout.line[-1] is the `#### answer` line
        assert torch.equal(keep[row, span], line < last)
        assert torch.equal(must_mask[row, span], (line >= last) & torch.tensor(layout.computed))
        assert must_mask[row, span][line == layout.line[-1]].any()  # the answer is masked with it
    uniform = focus_pattern(starts, layouts, shape, random.Random(0))
    assert torch.equal(focus_pattern(starts, layouts, shape, random.Random(0), last_fraction=0.0)[1], uniform[1])
    assert not torch.equal(uniform[1], keep)  # a uniform cut lands elsewhere on some row
    with pytest.raises(ValueError, match="focus_last_fraction"):
        DataConfig(focus_last_fraction=-0.1)


def test_focus_last_families_aim_the_last_line_cut_at_their_rows_alone(tokenizer: PreTrainedTokenizerFast) -> None:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["train-tiny", "--focus-last-fraction", "1", "--focus-last-families", "hard/long"])
    config = cli.config_from_args(args)
    assert config.data.focus_last_families == ("hard/long",)
    assert (config.data.focus_last_share("hard/long"), config.data.focus_last_share("hard/chain")) == (1.0, 0.0)
    assert DataConfig(focus_last_fraction=0.3).focus_last_share("hard/chain") == 0.3  # () = every family
    assert config_from_dict(json.loads(json.dumps(dataclasses.asdict(config)))) == config  # as a checkpoint stores it
    raw = dataclasses.asdict(TINY)
    del raw["data"]["focus_last_families"]
    assert config_from_dict(raw).data.focus_last_families == ()  # checkpoints from before the option
    from dllm_viz.train.checkpoint import TrainState
    from dllm_viz.train.export import training_card

    card = training_card(build_model(TINY.model, tokenizer), config, TrainState())
    assert "(1 of hard/long cut at the last worked line)" in card
    with pytest.raises(ValueError, match=r"'hard/lon', not a family .* pick from arith, hard/chain"):
        DataConfig(focus_last_families=("hard/lon",))

    # in a batch, every long row is cut at its last worked line; a chain row keeps a uniform cut
    data = replace(config.data, hard_fraction=0.9, code_fraction=0.0, focus_fraction=1.0,
                   hard_weights=(("hard/long", 1.0), ("hard/chain", 1.0)))
    ids = special_ids(tokenizer)
    firsts: Counter[str] = Counter()
    for step in range(3):
        problems, _ = training_problems(data, seed=5, step=step)
        batch = training_batch(data, tokenizer, ids, seed=5, step=step)
        pairs = encode_pairs(tokenizer, problems)
        for row, (problem, layout, (prompt, _)) in enumerate(
                zip(problems, answer_layouts(tokenizer, problems), pairs, strict=True)):
            if problem.task not in ("hard/long", "hard/chain"):
                continue
            span = slice(len(prompt), len(prompt) + len(layout.line))
            line = torch.tensor(layout.line)
            first_masked = int(line[batch.is_masked[row, span] & torch.tensor(layout.computed)].min())
            if problem.task == "hard/long":
                assert first_masked == layout.line[-1] - 1  # nothing computed before the last line is masked
            firsts[problem.task] += first_masked < layout.line[-1] - 1
    assert firsts["hard/chain"] >= 1 and firsts["hard/long"] == 0


def test_focus_window_fraction_masks_everything_after_the_cut_line(tokenizer: PreTrainedTokenizerFast) -> None:
    ids = special_ids(tokenizer)
    problems = TASKS["hard/long"].generate(4, seed=7, split="train")
    problems += TASKS["arith"].generate(4, seed=7, split="train", min_ops=3, max_ops=4)
    pairs = encode_pairs(tokenizer, problems)
    rows, is_answer, is_content = build_rows(pairs, 64, ids["eos_token_id"])
    layouts = answer_layouts(tokenizer, problems)
    starts, shape = [len(p) for p, _ in pairs], tuple(rows.shape)
    windows = [1.0] * 4 + [0.0] * 4  # the long chains in the window state, the arithmetic not
    must_mask, keep = focus_pattern(starts, layouts, shape, random.Random(1), last_fraction=1.0,
                                    window_fraction=windows)
    batch = mask_rows(rows, is_answer, is_content, ids["mask_token_id"], generator=torch.Generator().manual_seed(0),
                      t=torch.full((len(pairs),), 0.2), must_mask=must_mask, keep=keep)  # fmt: skip
    for row, (start, layout) in enumerate(zip(starts, layouts, strict=True)):
        line, end, last = torch.tensor(layout.line), start + len(layout.line), layout.line[-1] - 1
        masked = batch.is_masked[row]
        assert not masked[start:end][line < last].any()  # the lines above stay decoded
        if windows[row]:
            assert masked[start:end][line > last].all() and masked[end:].all()  # answer line and EOS tail
            assert not masked[start:end][(line == last) & ~torch.tensor(layout.computed)].all()  # i.i.d. in the line
        else:
            assert not masked[end:].all()  # at t = 0.2 the EOS tail keeps visible tokens
    # the share changes nothing when 0: the same draws, the same masks as a run without it
    assert all(torch.equal(a, b) for a, b in zip(
        focus_pattern(starts, layouts, shape, random.Random(1), last_fraction=1.0),
        focus_pattern(starts, layouts, shape, random.Random(1), last_fraction=1.0, window_fraction=0.0), strict=True))
    with pytest.raises(ValueError, match=r"`focus_window_fraction` must be in \[0, 1\]"):
        DataConfig(focus_window_fraction=1.5)
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["train-tiny", "--focus-window-fraction", "0.5", "--focus-last-families", "hard/long"])
    config = cli.config_from_args(args)
    assert (config.data.focus_window_share("hard/long"), config.data.focus_window_share("arith")) == (0.5, 0.0)
    assert config_from_dict(json.loads(json.dumps(dataclasses.asdict(config)))) == config
    raw = dataclasses.asdict(TINY)
    del raw["data"]["focus_window_fraction"]
    assert config_from_dict(raw).data.focus_window_fraction == 0.0  # checkpoints from before the option
    from dllm_viz.train.checkpoint import TrainState
    from dllm_viz.train.export import training_card

    card = training_card(build_model(TINY.model, tokenizer), config, TrainState())
    assert "(0.5 of hard/long masked whole after the cut line)" in card


def test_training_batches_use_focus_masking_on_their_share_of_rows(tokenizer: PreTrainedTokenizerFast) -> None:
    ids = special_ids(tokenizer)
    plain = training_batch(DataConfig(batch_size=16, focus_fraction=0.0), tokenizer, ids, seed=0, step=3)
    focus = training_batch(DataConfig(batch_size=16, focus_fraction=1.0), tokenizer, ids, seed=0, step=3)
    assert torch.equal(plain.labels, focus.labels)  # same problems, different masks
    assert not torch.equal(plain.is_masked, focus.is_masked)
    with pytest.raises(ValueError, match="focus_fraction"):
        DataConfig(focus_fraction=1.5)


def test_every_third_batch_is_a_wide_batch_of_short_drills(tokenizer: PreTrainedTokenizerFast) -> None:
    ids = special_ids(tokenizer)
    config = DataConfig(batch_size=8, drill_every=3, drill_batch_size=24, drill_max_ops=1)
    assert [config.is_drill_step(step) for step in range(6)] == [False, False, True, False, False, True]
    drill = training_batch(config, tokenizer, ids, seed=0, step=2)
    plain = training_batch(config, tokenizer, ids, seed=0, step=3)
    assert drill.input_ids.shape[0] == 24 and plain.input_ids.shape[0] == 8
    assert drill.input_ids.shape[1] < plain.input_ids.shape[1]
    text = tokenizer.decode(drill.labels[0], skip_special_tokens=True)
    assert re.search(r"Question: (\d+ [-+*/] \d+)\nAnswer:\n\1 = \d+\n#### \d+", text), text
    assert (drill.is_masked & drill.is_content).any()
    never = DataConfig(batch_size=8, drill_every=0)
    assert not any(never.is_drill_step(step) for step in range(10))
    with pytest.raises(ValueError, match="drill_every"):
        DataConfig(drill_every=-1)
    chained = training_batch(replace(config, drill_max_ops=3), tokenizer, ids, seed=0, step=2)
    texts = [tokenizer.decode(row, skip_special_tokens=True) for row in chained.labels]
    assert any(re.search(r"\n\d+ [-+*/] \d+ = (\d+)\n\1 [-+*/] \d+ = \d+\n#### \d+", t) for t in texts), texts
    for text in texts:  # the final answer is the last line's result
        last_line, final = text.split("\n")[-2:]
        assert final == "#### " + last_line.split(" = ")[1], text


def test_list_drill_steps_are_batches_of_parallelbench_problems_between_the_arithmetic_drills() -> None:
    config = DataConfig(batch_size=8, drill_every=3, list_drill_every=3, list_drill_batch_size=20, hard_fraction=0.3)
    kinds = ["drill" if config.is_drill_step(s) else "list" if config.is_list_drill_step(s) else "plain"
             for s in range(6)]
    assert kinds == ["list", "plain", "drill", "list", "plain", "drill"]  # arithmetic drills keep their steps
    problems, canvas = training_problems(config, seed=0, step=3)
    assert len(problems) == 20 and all(p.task.startswith("parallelbench/") for p in problems)
    assert len({p.task for p in problems}) >= 5 and canvas < min(config.canvas_lengths)  # a short canvas
    again, _ = training_problems(config, seed=0, step=3)
    assert [p.problem_id for p in again] == [p.problem_id for p in problems]  # a function of seed and step
    plain, _ = training_problems(config, seed=0, step=1)
    assert {p.task for p in plain} & {"arith", "code"}
    assert not any(DataConfig(list_drill_every=0).is_list_drill_step(s) for s in range(10))
    with pytest.raises(ValueError, match="list_drill_every"):
        DataConfig(list_drill_every=-1)


def test_list_drill_option_reaches_the_config_and_old_checkpoints_have_none() -> None:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["train-tiny", "--list-drill-every", "3", "--list-drill-batch-size", "24"])
    data = cli.config_from_args(args).data
    assert (data.list_drill_every, data.list_drill_batch_size) == (3, 24)
    raw = dataclasses.asdict(TINY)
    del raw["data"]["list_drill_every"]
    assert config_from_dict(raw).data.list_drill_every == 0


def test_hard_weights_shift_the_training_rows_and_list_drills() -> None:
    def hard_rows(config: DataConfig, steps: range) -> Counter[str]:
        return Counter(p.task for step in steps for p in training_problems(config, seed=0, step=step)[0]
                       if p.task.startswith(("hard/", "parallelbench/")))

    base = DataConfig(batch_size=32, drill_every=0, hard_fraction=0.6, code_fraction=0.1)
    chains = replace(base, hard_weights=(("hard/chain", 3.0), ("hard/breadth", 0.0)))
    before, after = hard_rows(base, range(12)), hard_rows(chains, range(12))
    assert after["hard/breadth"] == 0 < before["hard/breadth"]
    assert after["hard/chain"] / sum(after.values()) > 0.8 > 0.4 > before["hard/chain"] / sum(before.values())
    assert chains.hard_families()[0] == ("hard/chain", 3.0) and len(chains.hard_families()) == len(HARD_FAMILIES)
    lists = replace(base, list_drill_every=2, hard_weights=tuple(
        (name, 1.0 if name == "parallelbench/sudoku" else 0.0) for name, _ in HARD_FAMILIES
        if name.startswith("parallelbench/")))  # fmt: skip
    assert {p.task for p in training_problems(lists, seed=0, step=0)[0]} == {"parallelbench/sudoku"}
    for bad, match in [((("hard/chan", 1.0),), "unknown hard family 'hard/chan'.*choose from hard/chain"),
                       ((("hard/chain", -1.0),), "finite number >= 0, got -1.0"),
                       ((("hard/chain", 0.6), ("hard/chain", 0.9)), "name 'hard/chain' 2 times; give it one weight"),
                       ((("hard/chain", float("nan")),), "finite number"),
                       (tuple((name, 0.0) for name, _ in HARD_FAMILIES), "every hard family at 0")]:
        with pytest.raises(ValueError, match=match):
            DataConfig(hard_weights=bad)
    with pytest.raises(ValueError, match=r"list drills .* need a ParallelBench family"):
        DataConfig(list_drill_every=3, hard_weights=tuple(
            (name, 0.0) for name, _ in HARD_FAMILIES if name.startswith("parallelbench/")))  # fmt: skip


def test_hard_weight_option_reaches_the_config_the_card_and_a_checkpoint(
    tokenizer: PreTrainedTokenizerFast, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["train-tiny", "--hard-fraction", "0.5", "--hard-weight", "hard/chain=0.6",
                              "--hard-weight", "parallelbench/sudoku=0"])
    config = cli.config_from_args(args)
    assert config.data.hard_weights == (("hard/chain", 0.6), ("parallelbench/sudoku", 0.0))
    assert config_from_dict(json.loads(json.dumps(dataclasses.asdict(config)))) == config  # as a checkpoint stores it
    from dllm_viz.train.checkpoint import TrainState
    from dllm_viz.train.export import training_card

    card = training_card(build_model(TINY.model, tokenizer), config, TrainState())
    assert "hard fraction 0.5 (weights hard/chain 0.6, parallelbench/sudoku 0, the rest as held out)" in card
    raw = dataclasses.asdict(TINY)
    del raw["data"]["hard_weights"]
    assert config_from_dict(raw).data.hard_weights == ()  # checkpoints from before the option
    for bad in ["hard/chain", "hard/chain=lots", "=0.5"]:
        with pytest.raises(SystemExit):
            parser.parse_args(["train-tiny", "--hard-weight", bad])
        assert "is not FAMILY=WEIGHT; write e.g. hard/chain=0.6" in capsys.readouterr().err


def test_checkpoints_from_before_focus_masking_keep_their_recipe() -> None:
    raw = dataclasses.asdict(TINY)
    del raw["data"]["focus_fraction"], raw["data"]["drill_every"], raw["data"]["drill_max_ops"]
    assert config_from_dict(raw).data.focus_fraction == 0.0 and config_from_dict(raw).data.drill_every == 0
    assert config_from_dict(raw).data.drill_max_ops == 1
    assert config_from_dict(dataclasses.asdict(TINY)) == TINY


def test_heldout_score_includes_arithmetic_under_focus_masking(tokenizer: PreTrainedTokenizerFast) -> None:
    batches = heldout_batches(tokenizer, num_arith=4, num_code=2, limits=TINY.data.arith_limits())
    assert {task for task, _, _ in batches} == {"arith", "code", "arith_focus"}


def test_batches_are_a_function_of_seed_and_step(tokenizer: PreTrainedTokenizerFast) -> None:
    ids, config = special_ids(tokenizer), DataConfig(batch_size=6)
    first = training_batch(config, tokenizer, ids, seed=0, step=7)
    again = training_batch(config, tokenizer, ids, seed=0, step=7)
    other = training_batch(config, tokenizer, ids, seed=0, step=8)
    assert torch.equal(first.input_ids, again.input_ids) and torch.equal(first.t, again.t)
    assert first.input_ids.shape != other.input_ids.shape or not torch.equal(
        first.input_ids, other.input_ids
    )


def test_loss_weightings(tokenizer: PreTrainedTokenizerFast) -> None:
    batch = training_batch(
        DataConfig(batch_size=4), tokenizer, special_ids(tokenizer), seed=0, step=0
    )
    logits = torch.randn(*batch.input_ids.shape, len(tokenizer))
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch.labels, reduction="none")
    assert masked_loss(logits, batch, "none").item() == pytest.approx(
        ce[batch.is_masked].mean().item(), rel=1e-5
    )
    weighted = [masked_loss(logits, batch, w).item() for w in ("inv_t", "inv_t_clipped")]
    assert all(math.isfinite(w) for w in weighted) and weighted[1] <= weighted[0] + 1e-6
    with pytest.raises(ValueError, match="'squared'"):
        masked_loss(logits, batch, "squared")  # type: ignore[arg-type]


def test_lr_warms_up_then_decays_to_floor() -> None:
    config = TrainConfig(lr=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_at(config, session_step=0, budget_fraction=0.0) < lr_at(
        config, session_step=9, budget_fraction=0.0
    )
    assert lr_at(config, session_step=50, budget_fraction=0.0) == pytest.approx(1e-3)
    assert lr_at(config, session_step=50, budget_fraction=1.0) == pytest.approx(1e-4)


def test_trains_exports_and_resumes(tmp_path: Path) -> None:
    run_dir, export_dir, lines = tmp_path / "run", tmp_path / "export", []
    first = train(run_dir, TINY, export_dir=export_dir, progress=lines.append)
    assert first["step"] == 3 and (run_dir / CHECKPOINT_NAME).is_file()
    losses = [
        float(line.split("loss ")[1].split(" ")[0]) for line in lines if line.startswith("step ")
    ]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)

    config = json.loads((export_dir / "config.json").read_text())["dllm_viz"]
    tok = PreTrainedTokenizerFast.from_pretrained(export_dir)
    assert (
        config["mask_token_id"] == tok.mask_token_id and config["eos_token_id"] == tok.eos_token_id
    )
    assert "{prompt}" in config["prompt_template"] and config["delimiters"] == ["\n"]
    assert config["trained_steps"] == 3 and (export_dir / "MODEL_CARD.md").is_file()
    model = AutoModelForCausalLM.from_pretrained(export_dir)
    assert model.config.vocab_size == len(tok)

    with pytest.raises(FileExistsError, match="--resume"):
        train(run_dir, TINY, export_dir=None)
    second = train(
        run_dir, replace(TINY, max_steps=5), resume=True, export_dir=None, progress=lines.append
    )
    assert second["step"] == 5
    assert any(line.startswith("model ") and "start step 3" in line for line in lines)
    saved = torch.load(run_dir / CHECKPOINT_NAME, weights_only=False)
    assert saved["state"]["step"] == 5 and [h["step"] for h in saved["state"]["history"]] == [3, 5]


def test_batches_built_by_worker_processes_train_the_same_weights(tmp_path: Path) -> None:
    """Workers only change when a batch is built: the same 3 steps give the same weights.

    The learning rate follows a cosine over wall time, so a huge budget pins it to the warmup
    ramp (spawning the workers takes seconds). Equal to 1e-6, not bit for bit: two inline runs
    already differ by ~1e-8 after 3 steps (CPU backward kernels do not promise a summation
    order), while the steps move weights by > 1e-4.
    """
    config = replace(TINY, adaptive_threads=False, num_threads=1, minutes=1e9)
    inline = train(tmp_path / "inline", config, export_dir=None)
    with_workers = train(tmp_path / "workers", replace(config, data_workers=2), export_dir=None)
    assert inline["step"] == with_workers["step"] == 3
    a = torch.load(tmp_path / "inline" / CHECKPOINT_NAME, weights_only=False)["model"]
    b = torch.load(tmp_path / "workers" / CHECKPOINT_NAME, weights_only=False)["model"]
    torch.manual_seed(config.seed)
    init = build_model(config.model, PreTrainedTokenizerFast.from_pretrained(tmp_path / "inline" / "tokenizer"))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=0, atol=1e-6) for k in a)
    assert max((a[k] - v).abs().max().item() for k, v in init.state_dict().items()) > 1e-4
    with pytest.raises(ValueError, match="data_workers"):
        replace(TINY, data_workers=-1)


def test_batch_workers_are_closed_when_training_fails_before_its_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers are processes: an error between opening the run and its loop must not leak them."""
    import dllm_viz.train.tiny as tiny_module

    closed: list[bool] = []
    monkeypatch.setattr(tiny_module.BatchSource, "close", lambda self: closed.append(True))

    def failing_progress(line: str) -> None:
        if line.startswith("model "):
            raise RuntimeError("progress sink failed")

    with pytest.raises(RuntimeError, match="progress sink failed"):
        train(tmp_path / "run", replace(TINY, adaptive_threads=False, num_threads=1), export_dir=None,
              progress=failing_progress)
    assert closed == [True]


def test_batch_source_builds_the_stream_in_any_order_and_names_bad_workers(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    from dllm_viz.train.prefetch import BatchSource

    tokenizer.save_pretrained(tmp_path / "tok")
    data = DataConfig(batch_size=3)
    ids = special_ids(tokenizer)
    with BatchSource(data, tokenizer, tmp_path / "tok", seed=1, workers=1, depth=2) as source:
        for step in (0, 1, 5, 6):  # a skip drops the stale futures and still returns step 5
            got = source.batch(step)
            want = training_batch(data, tokenizer, ids, seed=1, step=step)
            assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.labels, want.labels)
    with pytest.raises(ValueError, match="workers"):
        BatchSource(data, tokenizer, tmp_path / "tok", seed=1, workers=-1)


def test_bf16_training_learns_and_keeps_fp32_weights(tmp_path: Path) -> None:
    """bf16 autocast changes only the arithmetic of the training forward/backward: the weights,
    the optimizer state and the exported model stay fp32, and the steps still lower the loss on
    a fixed batch (the same steps in fp32 as the reference)."""
    config = replace(TINY, adaptive_threads=False, num_threads=1, minutes=1e9, max_steps=6, eval_every=6)
    results = {}
    for precision in ("fp32", "bf16"):
        lines: list[str] = []
        train(tmp_path / precision, replace(config, precision=precision), export_dir=tmp_path / f"x{precision}",
              progress=lines.append)
        saved = torch.load(tmp_path / precision / CHECKPOINT_NAME, weights_only=False)
        assert all(t.dtype == torch.float32 for t in saved["model"].values())
        assert saved["config"]["precision"] == precision
        assert any(line.startswith("model ") and precision in line for line in lines)
        results[precision] = saved["model"]
    # the two runs took the same steps on the same batches: close, but not the same arithmetic
    diffs = [(results["fp32"][k] - results["bf16"][k]).abs().max().item() for k in results["fp32"]]
    assert 0 < max(diffs) < 0.05
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "xbf16").dtype == torch.float32
    with pytest.raises(ValueError, match="precision"):
        replace(TINY, precision="fp16")  # type: ignore[arg-type]


def test_cli_precision_option_reaches_the_config() -> None:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    assert cli.config_from_args(parser.parse_args(["train-tiny", "--precision", "bf16"])).precision == "bf16"
    assert cli.config_from_args(parser.parse_args(["train-tiny"])).precision == "fp32"
    with pytest.raises(SystemExit):
        parser.parse_args(["train-tiny", "--precision", "fp8"])


def test_resume_without_checkpoint_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="without --resume"):
        train(tmp_path, TINY, resume=True, export_dir=None)


def test_cli_registers_train_tiny_subcommand() -> None:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(
        ["train-tiny", "--minutes", "3", "--resume", "--loss-weighting", "inv_t"]
    )
    assert args.func is cli.run and args.resume and args.minutes == 3
    assert cli.config_from_args(args).loss_weighting == "inv_t"


def test_thread_tuner_probes_both_settings_then_runs_the_faster() -> None:
    from dllm_viz.train import threads

    before = torch.get_num_threads()
    try:
        tuner = threads.ThreadTuner(max_threads=2)
        seen = []
        for _ in range(threads.PROBE_STEPS * 2 + 1):
            seen.append(tuner.current)
            # Pretend 1 thread is three times faster per token (a contended machine).
            tuner.observe(1.0 if tuner.current == 1 else 3.0, tokens=100)
        assert seen[0] == 2 and seen[threads.PROBE_STEPS] == 1
        assert tuner.current == 1 and torch.get_num_threads() == 1
        with pytest.raises(ValueError, match="max_threads"):
            threads.ThreadTuner(max_threads=0)
    finally:
        torch.set_num_threads(before)


def test_warm_start_from_an_export_continues_its_step_and_weights(tmp_path: Path) -> None:
    """A later session without the gitignored checkpoint continues from the committed export."""
    export_dir = tmp_path / "export"
    train(tmp_path / "first", TINY, export_dir=export_dir)
    section = json.loads((export_dir / "config.json").read_text())["dllm_viz"]
    assert section["trained_steps"] == 3 and section["history"] and section["best_score"] > -1
    exported = AutoModelForCausalLM.from_pretrained(export_dir).state_dict()
    lines: list[str] = []
    summary = train(tmp_path / "second", replace(TINY, max_steps=4), export_dir=None, progress=lines.append,
                    init_from=export_dir)
    assert summary["step"] == 4
    assert any("warm start" in line and "step 3" in line for line in lines)
    saved = torch.load(tmp_path / "second" / CHECKPOINT_NAME, weights_only=False)
    assert [h["step"] for h in saved["state"]["history"]] == [3, 4]
    moved = sum((saved["model"][k] - v).abs().sum().item() for k, v in exported.items())
    assert 0 < moved < sum(v.abs().sum().item() for v in exported.values())  # one step away, not re-initialised


def test_warm_start_from_a_later_snapshot_keeps_where_the_best_score_was_measured(tmp_path: Path) -> None:
    """A candidate continued past the bundled model keeps its best score as the bar to export, but
    not as its own: the best step stays where that score was measured, not the candidate's step."""
    export_dir = tmp_path / "export"
    train(tmp_path / "first", TINY, export_dir=export_dir)
    config_path = export_dir / "config.json"
    raw = json.loads(config_path.read_text())
    section = raw["dllm_viz"]
    section["history"][-1]["score"] = section["best_score"] = 2.0  # unbeatable: nothing exports
    section["history"].append({"step": 5, "minutes": 0.0, "score": 0.1, "train_loss": 1.0})
    section["trained_steps"] = 5
    config_path.write_text(json.dumps(raw))
    summary = train(tmp_path / "second", replace(TINY, max_steps=6), export_dir=None, init_from=export_dir)
    assert summary["step"] == 6 and summary["best_score"] == 2.0
    assert summary["best_step"] == 3


def test_model_card_and_config_say_where_each_session_trained(tmp_path: Path) -> None:
    export_dir = tmp_path / "export"
    train(tmp_path / "first", TINY, export_dir=export_dir)
    section = json.loads((export_dir / "config.json").read_text())["dllm_viz"]
    assert section["trained_on"].startswith("cpu (") and section["arith_limits"] == TINY.data.arith_limits()
    assert f"on {section['trained_on']}" in (export_dir / "MODEL_CARD.md").read_text()
    with pytest.raises(ValueError, match="'tpu'"):
        replace(TINY, device="tpu")


def test_warm_start_on_another_arithmetic_difficulty_forgets_the_best_score(tmp_path: Path) -> None:
    """A best score measured on other held-out problems must not block exporting the new ones."""
    export_dir = tmp_path / "export"
    train(tmp_path / "first", TINY, export_dir=export_dir)
    harder = replace(TINY, max_steps=4, data=replace(TINY.data, max_result=150))
    lines: list[str] = []
    train(tmp_path / "second", harder, export_dir=tmp_path / "export2", progress=lines.append, init_from=export_dir)
    assert any("(best)" in line for line in lines if line.startswith("eval step 4"))
    section = json.loads((tmp_path / "export2" / "config.json").read_text())["dllm_viz"]
    assert section["arith_limits"]["max_result"] == 150 and section["trained_steps"] == 4


def test_warm_start_from_an_older_score_definition_forgets_the_best_score(tmp_path: Path) -> None:
    export_dir = tmp_path / "export"
    train(tmp_path / "first", TINY, export_dir=export_dir)
    config_path = export_dir / "config.json"
    raw = json.loads(config_path.read_text())
    assert raw["dllm_viz"]["score_version"] == SCORE_VERSION
    raw["dllm_viz"].update(score_version=SCORE_VERSION - 1, best_score=2.0)  # unbeatable, if compared
    config_path.write_text(json.dumps(raw))
    lines: list[str] = []
    train(tmp_path / "second", replace(TINY, max_steps=4), export_dir=None, progress=lines.append, init_from=export_dir)
    assert any("(best)" in line for line in lines if line.startswith("eval step 4"))
    # the starting weights are measured under today's definition, the bar the run's lines compare with
    start = next(line for line in lines if line.startswith("warm start's weights score"))
    exported = json.loads(config_path.read_text())["dllm_viz"]["history"][-1]["score"]
    assert f"score {exported:.4f} under score version {SCORE_VERSION}" in start  # the same weights, the same sets
    assert f"the export's {exported:.4f} is of another version" in start


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_trains_on_cuda_and_resumes_on_cpu(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = train(run_dir, replace(TINY, device="cuda"), export_dir=tmp_path / "export")
    assert first["step"] == 3
    section = json.loads((tmp_path / "export" / "config.json").read_text())["dllm_viz"]
    assert "cuda" in section["trained_on"]
    second = train(run_dir, replace(TINY, max_steps=5), resume=True, export_dir=None)
    assert second["step"] == 5


@pytest.mark.parametrize(("flags", "native"), [("fpu sse avx2 avx512f", False), ("fpu avx2 avx512_bf16", True),
                                               ("fpu amx_bf16 amx_tile", True)])
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path: Path, flags: str, native: bool) -> None:
    from dllm_viz.train.cpu_bf16 import bf16_warning, native_bf16

    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: {flags}\n\n"
                    f"processor\t: 1\nflags\t\t: {flags}\n")
    assert native_bf16(info) is native
    assert (bf16_warning(info) is None) is native
    assert native or "--precision fp32" in str(bf16_warning(info))
    assert native_bf16(tmp_path / "missing") is None and bf16_warning(tmp_path / "missing") is None
    (tmp_path / "arm").write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")
    assert native_bf16(tmp_path / "arm") is None  # not x86 flags: unknown, no warning


def test_bf16_training_on_a_cpu_without_native_bf16_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dllm_viz.train import tiny

    monkeypatch.setattr(tiny, "bf16_warning", lambda: "warning: no native bf16")
    config = replace(TINY, adaptive_threads=False, num_threads=1, minutes=1e9, max_steps=1, eval_every=1)
    lines: list[str] = []
    train(tmp_path / "bf16", replace(config, precision="bf16"), export_dir=None, progress=lines.append)
    train(tmp_path / "fp32", config, export_dir=None, progress=lines.append)
    assert lines.count("warning: no native bf16") == 1  # the bf16 run only


def test_add_words_makes_each_name_one_token_and_keeps_every_id(tmp_path: Path) -> None:
    from dllm_viz.tasks.parallelbench import NAME_WORDS
    from dllm_viz.train.tokenizer import add_words, load_tokenizer, train_tokenizer

    line = 'Waiting line: ["Noah Fox", "Mia Price"]\nCopy the line exactly.'
    nameless = "Question: What is 12 + 5?\nAnswer:\n12 + 5 = 17\n#### 17"
    # A tokenizer trained without the names as tokens (a model trained with --name-tokens already has them).
    tokenizer = train_tokenizer([nameless, "Noah has 3 apples. Mia gives him 2 more."] * 20, vocab_size=300)
    before, size = tokenizer.encode(nameless, add_special_tokens=False), len(tokenizer)
    added = add_words(tokenizer, NAME_WORDS)
    assert added and all(len(ids) > 1 for ids in added.values()) and len(tokenizer) == size + len(added)
    assert all(len(tokenizer.encode(word, add_special_tokens=False)) == 1 for word in NAME_WORDS)
    assert tokenizer.decode(tokenizer.encode(line, add_special_tokens=False)) == line  # text round-trips exactly
    assert [tokenizer.decode([i]) for i in tokenizer.encode('"Noah Fox"', add_special_tokens=False)] == \
        ['"', "Noah", " Fox", '"']
    assert tokenizer.convert_tokens_to_ids(list(added)) == list(range(size, size + len(added)))  # the next ids
    assert tokenizer.encode(nameless, add_special_tokens=False) == before  # text without names: the same ids
    assert add_words(tokenizer, NAME_WORDS) == {}  # a second time: nothing left to add
    tokenizer.save_pretrained(str(tmp_path))
    assert load_tokenizer(str(tmp_path)).encode(line, add_special_tokens=False) == tokenizer.encode(
        line, add_special_tokens=False)


def test_grown_rows_start_each_word_at_the_mean_of_its_pieces() -> None:
    from dllm_viz.train.tiny import VOCAB_ROWS, grown_rows

    weights = {name: torch.arange(12.0).reshape(6, 2) for name in VOCAB_ROWS} | {"other": torch.ones(3)}
    grown = grown_rows(weights, {"Noah": [0, 2], " Fox": [5]}, vocab=8)
    for name in VOCAB_ROWS:
        assert torch.equal(grown[name][:6], weights[name])
        assert torch.equal(grown[name][6], torch.tensor([2.0, 3.0])) and torch.equal(grown[name][7], weights[name][5])
    assert grown["other"] is weights["other"] and grown_rows(weights, {}, vocab=6) is weights
    with pytest.raises(ValueError, match="another tokenizer"):
        grown_rows(weights, {"Noah": [0, 2]}, vocab=9)


def test_a_warm_start_with_name_tokens_grows_the_vocabulary_and_keeps_the_old_rows(tmp_path: Path) -> None:
    from dllm_viz.tasks.parallelbench import NAME_WORDS
    from dllm_viz.train.tokenizer import load_tokenizer

    export_dir = tmp_path / "export"
    train(tmp_path / "first", TINY, export_dir=export_dir)
    old = AutoModelForCausalLM.from_pretrained(export_dir).state_dict()
    lines: list[str] = []
    # another arithmetic difficulty forgets the export's best score, so this run exports its own
    other = replace(TINY, max_steps=4, lr=1e-9, name_tokens=True, data=replace(TINY.data, max_result=150))
    train(tmp_path / "second", other, export_dir=tmp_path / "export2", progress=lines.append, init_from=export_dir)
    tokenizer = load_tokenizer(str(tmp_path / "export2"))
    assert all(len(tokenizer.encode(word, add_special_tokens=False)) == 1 for word in NAME_WORDS)
    new = AutoModelForCausalLM.from_pretrained(tmp_path / "export2").state_dict()
    rows = new["model.embed_tokens.weight"]
    assert rows.shape[0] == len(tokenizer) > old["model.embed_tokens.weight"].shape[0]
    kept = old["model.embed_tokens.weight"].shape[0]
    assert torch.allclose(rows[:kept], old["model.embed_tokens.weight"], atol=1e-4)  # lr 1e-9: one step moved nothing
    assert any(line.startswith("name tokens:") for line in lines)
    card = (tmp_path / "export2" / "MODEL_CARD.md").read_text()
    assert "ParallelBench names as tokens" in card
    from dllm_viz import decode, load
    from dllm_viz.config import DecodeConfig
    from dllm_viz.policies import Pipeline

    adapter = load(str(tmp_path / "export2"), device="cpu")  # the app's loader reads the grown model
    assert len(adapter.encode_text('"Noah Fox"')) == 4
    prompt = adapter.encode_prompt('Waiting line: ["Noah Fox", "Mia Price"]\nCopy the line exactly.')
    assert decode(adapter, prompt, Pipeline.from_names("threshold", block_length=8), DecodeConfig(gen_length=8)).nfe
    again: list[str] = []  # continuing from that export without the flag keeps its tokenizer and says so
    third = replace(TINY, max_steps=5, data=replace(TINY.data, max_result=120))
    train(tmp_path / "third", third, export_dir=tmp_path / "export3", progress=again.append,
          init_from=tmp_path / "export2")
    assert not any(line.startswith("name tokens:") for line in again)
    assert "ParallelBench names as tokens" in (tmp_path / "export3" / "MODEL_CARD.md").read_text()


def test_snapshots_are_exported_at_each_multiple_of_their_interval_whatever_the_score(tmp_path: Path) -> None:
    config = replace(TINY, max_steps=4, eval_every=1, snapshot_every=2)
    lines: list[str] = []
    train(tmp_path / "run", config, export_dir=None, progress=lines.append)
    snapshots = tmp_path / "run" / "snapshots"
    assert sorted(p.name for p in snapshots.iterdir()) == ["step_2", "step_4"]
    section = json.loads((snapshots / "step_4" / "config.json").read_text())["dllm_viz"]
    assert section["trained_steps"] == 4 and (snapshots / "step_2" / "MODEL_CARD.md").is_file()
    assert AutoModelForCausalLM.from_pretrained(snapshots / "step_2") is not None
    assert any(line.startswith("snapshot of step 4") for line in lines)


def test_a_snapshot_falls_at_the_first_evaluation_past_a_multiple() -> None:
    history = [{"step": s} for s in (250, 500, 750, 1000, 1250)]
    assert [_snapshot_due(400, history[: i + 1]) for i in range(5)] == [False, True, False, True, True]
    assert not _snapshot_due(0, history) and not _snapshot_due(400, [])
    with pytest.raises(ValueError, match="snapshot_every"):
        replace(TINY, snapshot_every=-1)


def test_cli_snapshot_option_reaches_the_config() -> None:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    assert cli.config_from_args(parser.parse_args(["train-tiny", "--snapshot-every", "2000"])).snapshot_every == 2000
    assert cli.config_from_args(parser.parse_args(["train-tiny"])).snapshot_every == 0
