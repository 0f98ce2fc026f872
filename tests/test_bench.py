"""The benchmark: configuration names, rows, and ratios against the dense baseline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tool_scripts import tool

from dllm_viz.bench import (
    ROW_COLUMNS,
    SUMMARY_COLUMNS,
    accuracy_by_task,
    parse_config,
    run_bench,
    split_configs,
    summarize_bench,
    uncached_label,
)
from dllm_viz.cli import main
from dllm_viz.config import DecodeConfig
from dllm_viz.policies import AdaBlock, CoraPolicy, FixedStepsPolicy, KalmanExtrapolation, ThresholdPolicy
from dllm_viz.tasks import Problem, dump_problems

PROBLEMS = [Problem(task="arith", problem_id=f"p{i}", prompt=f"{i} + 1?", target=f"#### {i + 1}", gold=str(i + 1))
            for i in range(3)]


def test_parse_config_names_components() -> None:
    dense = parse_config("dense")
    assert dense.rule == FixedStepsPolicy() and dense.cache == "none"
    p = parse_config("adablock+cora+kalman+eos+dual", {"delta_p": 0.9})
    assert isinstance(p.block, AdaBlock) and p.rule == CoraPolicy(delta_p=0.9)
    assert isinstance(p.extrapolate, KalmanExtrapolation) and p.stop is not None and p.cache == "dual"
    assert parse_config("threshold+prefix", {"threshold": 0.7}).rule == ThresholdPolicy(0.7)
    with pytest.raises(ValueError, match="unknown configuration component 'warp'"):
        parse_config("threshold+warp")
    with pytest.raises(ValueError, match="two rules"):
        parse_config("threshold+cora")
    with pytest.raises(ValueError, match="no commit rule"):
        parse_config("adablock+dual")


def test_bench_rows_and_dense_agreement(tiny_adapter) -> None:
    configs = {"dense": parse_config("dense", {"block_length": 8}),
               "threshold": parse_config("threshold", {"block_length": 8, "threshold": 0.05}),
               "dense+dual": parse_config("dense+dual", {"block_length": 8})}
    rows = run_bench(tiny_adapter, PROBLEMS, configs, DecodeConfig(gen_length=16))
    assert list(rows.columns) == list(ROW_COLUMNS) and len(rows) == 9
    assert set(rows["config"]) == {"dense", "threshold", "dense+dual"}
    assert rows[rows["config"] == "dense"]["agrees_with_dense"].all()
    summary = summarize_bench(rows)
    with pytest.raises(ValueError, match="baseline"):
        run_bench(tiny_adapter, PROBLEMS, {"threshold": configs["threshold"]}, DecodeConfig(gen_length=16))
    assert summary.loc["dense", "agreement"] == 1.0
    assert summary.loc["dense", "nfe_speedup"] == 1.0 and summary.loc["dense", "wall_speedup"] == 1.0
    assert summary.loc["threshold", "mean_nfe"] <= 16
    # SUMMARY_COLUMNS declares the columns, their order and their meaning (the app shows it as help).
    assert list(summary.columns) == list(SUMMARY_COLUMNS)
    assert {"accuracy", "lost", "gained", "sign_p", "mean_nfe", "tpf", "aup", "n"} <= set(SUMMARY_COLUMNS)
    assert all(text.strip() for text in SUMMARY_COLUMNS.values())
    dense_rows = rows[rows["config"] == "dense"].set_index("problem_id")["completion"]
    dual_rows = rows[rows["config"] == "dense+dual"].set_index("problem_id")["completion"]
    assert summary.loc["dense+dual", "same_as_uncached"] == pytest.approx((dense_rows == dual_rows).mean())
    assert np.isnan(summary.loc["dense", "same_as_uncached"]) and np.isnan(summary.loc["threshold", "same_as_uncached"])
    assert summary.loc["dense+dual", "same_answer_as_uncached"] >= summary.loc["dense+dual", "same_as_uncached"]
    # The policy's time is measured apart from the engine's: both are parts of the step.
    assert (rows["policy_seconds"] > 0).all()
    assert (rows["policy_seconds"] + rows["forward_seconds"] <= rows["seconds"]).all()
    assert (summary["engine_overhead"] > 0).all()


@pytest.mark.parametrize(("name", "options", "message"), [
    ("tspd", {"block_length": 8}, "configuration 'tspd': tspd controller 'bundled' was trained for 'tiny'"),
    ("fixed_steps", {"block_length": 8, "steps": 5}, "configuration 'fixed_steps': .*steps"),
])  # fmt: skip
def test_every_configuration_is_checked_before_the_first_decode(tiny_adapter, name: str, options: dict,
                                                                 message: str) -> None:
    """A configuration the model cannot run used to fail at its first decode, after dense (and the
    configurations before it) had decoded the first problem."""
    rows: list[dict] = []
    configs = {"dense": parse_config("dense", {"block_length": 8}), name: parse_config(name, options)}
    with pytest.raises(ValueError, match=message):
        run_bench(tiny_adapter, PROBLEMS, configs, DecodeConfig(gen_length=16), on_row=rows.append)
    assert rows == []


def test_same_answer_as_uncached_reads_final_answers_by_task() -> None:
    # A cache that reorders a breadth answer's lines keeps its answer; one that changes the number does not.
    forms = {"b1": ("3 * 4 = 12\n2 * 5 = 10\n12 + 10 = 22\n#### 22", "5 * 2 = 10\n4 * 3 = 12\n10 + 12 = 22\n#### 22"),
             "b2": ("2 * 2 = 4\n3 * 3 = 9\n4 + 9 = 13\n#### 13", "2 * 2 = 4\n3 * 3 = 9\n4 + 9 = 14\n#### 14"),
             "x1": ("#### 5", "####  5")}  # a task the registry does not know keeps its whole output
    rows = pd.DataFrame([
        {**dict.fromkeys(ROW_COLUMNS, 0), "config": config, "problem_id": pid, "completion": pair[k],
         "task": "stand-in" if pid == "x1" else "hard/breadth", "correct": True, "nfe": 4, "seconds": 1.0,
         "forward_seconds": 0.5, "policy_seconds": 0.1, "tokens_per_second": 10.0, "agrees_with_dense": True,
         "cut_off": False, "tokens": 8, "candidate_flips": 0, "redundant_refinement": 0.5,
         "redundant_answer_refinement": 0.5}
        for pid, pair in forms.items() for k, config in enumerate(["dense", "dense+dual"])])
    summary = summarize_bench(rows)
    assert summary.loc["dense+dual", "same_as_uncached"] == 0.0
    assert summary.loc["dense+dual", "same_answer_as_uncached"] == pytest.approx(1 / 3)
    assert np.isnan(summary.loc["dense", "same_answer_as_uncached"])


def test_components_carry_their_own_options_over_the_shared_ones() -> None:
    p = parse_config("cora(delta_p=0.99, m=3)+kalman(tau_ce=0.95,h_max=2)", {"delta_p": 0.9, "tau_ce": 0.8})
    assert p.rule == CoraPolicy(delta_p=0.99, m=3) and isinstance(p.rule.m, int)
    assert p.extrapolate == KalmanExtrapolation(tau_ce=0.95, h_max=2)
    assert parse_config("cora+kalman", {"delta_p": 0.9}).rule == CoraPolicy(delta_p=0.9)  # shared option
    ada = parse_config(r"adablock(delimiters=\n,.,init_block_length=16,delimiter_threshold=none)+threshold")
    assert ada.block == AdaBlock(init_block_length=16, delimiters=("\n", "."))
    eos = parse_config("threshold+eos(eos_mode=halt)")
    assert eos.stop is not None and eos.stop.eos_mode == "halt"
    assert parse_config("threshold(threshold=1)").rule == ThresholdPolicy(1)


@pytest.mark.parametrize(("name", "message"), [
    ("cora(delta=0.9)", "cora has no option 'delta'; its options: delta_p, m"),
    ("cora(m=two)", "cora option m='two' is not an integer"),
    ("cora(m=1.5)", "not an integer"),
    ("threshold(threshold=1.5)", r"`threshold` must be in \(0, 1\], got 1.5"),  # the component's own check
    ("threshold+eos(eos_mode=later)", r"choose one of \['finish', 'halt'\]"),
    ("cora(0.99)", "needs the form name=value"),
    ("dense(steps=4)", "takes no options; write fixed_steps"),
    ("threshold+dual(k=1)", "takes no options"),
    ("cora(delta_p=0.99", "unbalanced '\\('"),
    ("cora)delta_p=0.99", "unbalanced '\\)'"),
    ("cora[delta_p=0.99]", "cannot read configuration part"),
])
def test_bad_component_options_name_the_value_and_the_fix(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_config(name)


def test_configuration_lists_split_outside_parentheses() -> None:
    assert split_configs("dense, cora(delta_p=0.99,m=3)+kalman(tau_ce=0.95),threshold,") == [
        "dense", "cora(delta_p=0.99,m=3)+kalman(tau_ce=0.95)", "threshold"]
    assert uncached_label("cora(delta_p=0.99,m=3)+dual") == "cora(delta_p=0.99,m=3)"
    assert uncached_label("threshold(threshold=0.8)") is None


def test_uncached_label_drops_only_the_cache_component() -> None:
    assert uncached_label("threshold+dual") == "threshold"
    assert uncached_label("adablock+threshold+kalman+prefix") == "adablock+threshold+kalman"
    assert uncached_label("dense+dual") == "dense"
    assert uncached_label("cora+kalman") is None and uncached_label("threshold+none") == "threshold"


def test_summary_splits_policy_and_engine_time() -> None:
    rows = pd.DataFrame([
        {"config": "dense", "problem_id": "p0", "correct": True, "nfe": 10, "seconds": 1.2, "forward_seconds": 1.0,
         "policy_seconds": 0.05, "tokens_per_second": 5.0, "agrees_with_dense": True},
        {"config": "tspd", "problem_id": "p0", "correct": False, "nfe": 2, "seconds": 0.4, "forward_seconds": 0.2,
         "policy_seconds": 0.1, "tokens_per_second": 20.0, "agrees_with_dense": False},
    ])
    summary = summarize_bench(rows)
    assert summary.loc["dense", "overhead"] == pytest.approx(0.05)
    assert summary.loc["dense", "engine_overhead"] == pytest.approx(0.15)
    assert summary.loc["tspd", "overhead"] == pytest.approx(0.5)
    assert summary.loc["tspd", "engine_overhead"] == pytest.approx(0.5)
    assert summary.loc["tspd", "wall_speedup"] == pytest.approx(3.0)


def test_accuracy_by_task_counts_each_family_per_configuration() -> None:
    rows = pd.DataFrame([
        {"config": "dense", "task": "hard/chain", "correct": True},
        {"config": "dense", "task": "hard/chain", "correct": False},
        {"config": "dense", "task": "parallelbench/copy", "correct": True},
        {"config": "threshold", "task": "hard/chain", "correct": False},
        {"config": "threshold", "task": "hard/chain", "correct": False},
        {"config": "threshold", "task": "parallelbench/copy", "correct": True},
    ])
    table = accuracy_by_task(rows)
    assert table is not None and list(table.columns) == ["dense", "threshold"]
    assert table.loc["hard/chain", "dense"] == "1/2" and table.loc["hard/chain", "threshold"] == "0/2"
    assert table.loc["parallelbench/copy"].tolist() == ["1/1", "1/1"]
    assert accuracy_by_task(rows[rows["task"] == "hard/chain"]) is None  # one task: the summary says it all


def test_bench_cli_writes_csv_and_prints_summary(tiny_dir: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import dllm_viz.evaluation as evaluation

    monkeypatch.setattr(evaluation, "task_problems", lambda task, n=None, data=None: PROBLEMS[:n])
    out = tmp_path / "rows.csv"
    status = main(["bench", "--model", str(tiny_dir), "--device", "cpu", "--n", "2", "--policies",
                   "dense,threshold,threshold(threshold=0.001)", "--caches", "none,dual", "--gen-length", "16",
                   "--block-length", "8", "--threshold", "0.99", "--out", str(out)])
    assert status == 0
    table = capsys.readouterr().out
    for label in ("dense", "dense+dual", "threshold", "threshold+dual", "threshold(threshold=0.001)+dual",
                  "wall_speedup"):
        assert label in table
    rows = pd.read_csv(out)
    assert len(rows) == 12
    # Two operating points of one rule ran side by side: 0.001 commits whole blocks, 0.99 (the flag) one a pass.
    nfe = rows.groupby("config")["nfe"].mean()
    assert nfe["threshold(threshold=0.001)"] == 2 and nfe["threshold"] == 16


def test_bench_on_a_block_model_runs_its_aligned_blocks_unless_told(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`decode` and the app give a block-causal model aligned blocks of its own length; bench gave every
    configuration (the dense baseline too) fixed blocks of 32, and refused a canvas of 30 they decode."""
    import json

    import dllm_viz.evaluation as evaluation
    from dllm_viz.cli.results import settings_path
    from dllm_viz.random_block_model import BlockModelShape, build_random_block_model

    model = build_random_block_model(tmp_path / "block", BlockModelShape(
        hidden=64, layers=1, heads=2, intermediate=128, block_length=8, max_positions=512, head_scale=12.0, seed=0))
    monkeypatch.setattr(evaluation, "task_problems", lambda task, n=None, data=None: PROBLEMS[:n])
    out = tmp_path / "rows.csv"
    status = main(["bench", "--model", str(model), "--n", "1", "--gen-length", "30", "--policies",
                   "dense,block_refinement,threshold+fixed", "--block-length", "6", "--out", str(out)])
    assert status == 0, capsys.readouterr().err
    settings = json.loads(settings_path(out).read_text())
    blocks = {label: config["block"] for label, config in settings["configs"].items()}
    assert blocks == {"dense": {"name": "aligned", "block_length": 6},
                      "block_refinement": {"name": "aligned", "block_length": 6},
                      "threshold+fixed": {"name": "fixed", "block_length": 6}}, blocks
    assert main(["bench", "--model", str(model), "--n", "1", "--gen-length", "30", "--policies", "dense"]) == 0
    assert "configurations that name no block sizer run on aligned blocks of 8" in capsys.readouterr().err


def test_bench_cli_reads_a_prompt_file(tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = tmp_path / "mine.jsonl"
    dump_problems(PROBLEMS, prompts)
    out = tmp_path / "rows.csv"
    status = main(["bench", "--model", str(tiny_dir), "--device", "cpu", "--prompts", str(prompts), "--n", "2",
                   "--policies", "dense", "--gen-length", "16", "--block-length", "8", "--out", str(out)])
    assert status == 0
    rows = pd.read_csv(out)
    assert rows["problem_id"].tolist() == [p.problem_id for p in PROBLEMS[:2]]
    assert f"prompts={prompts} n=2" in capsys.readouterr().out
    status = main(["bench", "--model", str(tiny_dir), "--device", "cpu", "--prompts", str(prompts), "--skip", "1",
                   "--n", "5", "--policies", "dense", "--gen-length", "16", "--block-length", "8",
                   "--out", str(out.with_name("rows2.csv"))])  # an existing --out is never overwritten
    assert status == 0
    assert pd.read_csv(out.with_name("rows2.csv"))["problem_id"].tolist() == [p.problem_id for p in PROBLEMS[1:]]


def resumes_without_decoding(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str],
                             out: Path, rows: int, problems: int) -> Callable[..., None]:
    """Run bench `argv` with --resume on `out` with model loading forbidden (left so), and check that it
    found all `rows` done and summarised `problems`; returns the forbidding stand-in for later runs."""
    import dllm_viz.models as models

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"bench --resume on {out.name} decoded again")

    monkeypatch.setattr(models, "load", no_load)
    assert main([*argv, "--out", str(out), "--resume"]) == 0
    captured = capsys.readouterr()
    assert f"{rows} of {rows} rows already done" in captured.err
    assert f"n={problems}" in captured.out
    return no_load


def test_slices_merged_by_the_tool_resume_as_one_run(tiny_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """tools/merge_bench.py: two processes' slices become one file that `bench --resume` summarises
    whole without decoding again; mismatched or overlapping slices are refused."""
    merge = tool("merge_bench")
    prompts = tmp_path / "mine.jsonl"
    dump_problems(PROBLEMS, prompts)
    common = ["bench", "--model", str(tiny_dir), "--device", "cpu", "--prompts", str(prompts), "--policies",
              "dense,threshold", "--gen-length", "16", "--block-length", "8"]
    for skip, n in ((0, 2), (2, 1)):
        assert main([*common, "--skip", str(skip), "--n", str(n), "--out", str(tmp_path / f"part{skip}.csv")]) == 0
    parts = [str(tmp_path / "part0.csv"), str(tmp_path / "part2.csv")]
    with pytest.raises(SystemExit, match="also in an earlier part"):
        merge.main([parts[0], parts[0], "--out", str(tmp_path / "twice.csv")])
    assert merge.main([*parts, "--out", str(tmp_path / "all.csv")]) == 0
    with pytest.raises(SystemExit, match="already exists"):
        merge.main([*parts, "--out", str(tmp_path / "all.csv")])
    capsys.readouterr()
    # The whole run's options: every row is found done, so nothing is decoded (no model is loaded).
    no_load = resumes_without_decoding(monkeypatch, capsys, [*common, "--n", "3"], tmp_path / "all.csv", 6, 3)
    rows = pd.read_csv(tmp_path / "all.csv")
    assert rows["problem_id"].tolist() == [p.problem_id for p in PROBLEMS for _ in range(2)]
    monkeypatch.undo()
    # --configs keeps one configuration: the file resumes under that configuration alone, decoding nothing
    assert merge.main([*parts, "--out", str(tmp_path / "dense.csv"), "--configs", "dense"]) == 0
    assert pd.read_csv(tmp_path / "dense.csv")["config"].tolist() == ["dense"] * 3
    dense_only = ["dense" if option == "dense,threshold" else option for option in common]
    import dllm_viz.models as models

    monkeypatch.setattr(models, "load", no_load)
    assert main([*dense_only, "--n", "3", "--out", str(tmp_path / "dense.csv"), "--resume"]) == 0
    assert "3 of 3 rows already done" in capsys.readouterr().err
    monkeypatch.undo()
    with pytest.raises(SystemExit, match="--configs cora: not run by these parts; they ran dense, threshold"):
        merge.main([*parts, "--out", str(tmp_path / "cora.csv"), "--configs", "dense,cora"])
    with pytest.raises(SystemExit, match="names no configuration"):
        merge.main([*parts, "--out", str(tmp_path / "none.csv"), "--configs", " , "])
    # tools/bench_summary.py reads unfinished files as they are: a problem some configuration has
    # not finished, and a row cut in half, are left out of the report, and the file is not changed.
    summary = tool("bench_summary")
    cut = tmp_path / "part2.csv"
    text = cut.read_bytes()
    cut.write_bytes(text[:-9])  # the last row (threshold on the third problem) cut short
    assert summary.main([parts[0], str(cut)]) == 0
    report = capsys.readouterr().out
    assert "2 problems finished under every configuration (3 started)" in report
    assert cut.read_bytes() == text[:-9]
    assert summary.main([parts[0], str(cut), "--pair", "threshold", "dense"]) == 0
    assert "threshold against dense: lost " in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--pair cora dense: no rows for configuration 'cora'"):
        summary.main([parts[0], "--pair", "cora", "dense"])
    with pytest.raises(SystemExit, match="also in an earlier file"):
        summary.main([parts[0], parts[0]])
    with pytest.raises(SystemExit, match="no rows for"):
        summary.main([parts[0], "--sweep", "threshold(threshold=0.5:0.9:2)"])
    # a part cut mid-row merges without the cut row (named), which the merged file's --resume measures again
    assert merge.main([parts[0], str(cut), "--out", str(tmp_path / "cut.csv")]) == 0
    assert "part2.csv: its last row was cut short" in capsys.readouterr().err
    merged = pd.read_csv(tmp_path / "cut.csv")
    assert merged["config"].tolist() == ["dense", "threshold"] * 2 + ["dense"]
    assert merged.equals(rows.iloc[:5])
    other = [*common, "--skip", "0", "--n", "1", "--threshold", "0.5", "--out", str(tmp_path / "other.csv")]
    assert main(other) == 0
    with pytest.raises(SystemExit, match="settings differ"):
        merge.main([parts[1], str(tmp_path / "other.csv"), "--out", str(tmp_path / "mixed.csv")])


def test_merged_lanes_of_several_tasks_resume_as_the_whole_run(tiny_dir: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Lanes of `--tasks a,b` list their problems a0 b0 | a1 b1, the whole run a0 a1 b0 b1; the merged
    file resumes under the whole run's options all the same (a row does not depend on the order), and
    its summary counts each task's problems once."""
    merge = tool("merge_bench")
    common = ["bench", "--model", str(tiny_dir), "--device", "cpu", "--tasks", "arith,hard/chain", "--policies",
              "dense", "--gen-length", "16", "--block-length", "8"]
    for skip in (0, 2):
        assert main([*common, "--skip", str(skip), "--n", "2", "--out", str(tmp_path / f"lane{skip}.csv")]) == 0
    lanes = [str(tmp_path / "lane0.csv"), str(tmp_path / "lane2.csv")]
    assert merge.main([*lanes, "--out", str(tmp_path / "all.csv")]) == 0
    merged = pd.read_csv(tmp_path / "all.csv")["problem_id"].tolist()
    assert [p.split("|")[0] for p in merged] == ["arith"] * 2 + ["hard/chain"] * 2 + ["arith"] * 2 + ["hard/chain"] * 2
    capsys.readouterr()
    resumes_without_decoding(monkeypatch, capsys, [*common, "--n", "4"], tmp_path / "all.csv", 8, 8)
    monkeypatch.undo()
    # the same problems in another order are the same run; other problems are not
    assert main([*common, "--n", "3", "--out", str(tmp_path / "all.csv"), "--resume"]) != 0
    assert "with other settings (problems:" in capsys.readouterr().err


def test_two_runs_of_the_same_problems_are_compared_by_problem(tiny_dir: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """tools/compare_models.py, the swap's evidence in tools/gpu_stage.sh: per configuration both runs
    hold, each run's accuracy and NFE and the candidate's lost / gained against the base."""
    compare = tool("compare_models")
    prompts = tmp_path / "mine.jsonl"
    dump_problems(PROBLEMS, prompts)
    common = ["bench", "--model", str(tiny_dir), "--device", "cpu", "--prompts", str(prompts), "--policies",
              "dense,threshold", "--gen-length", "16", "--block-length", "8", "--n", "3"]
    assert main([*common, "--out", str(tmp_path / "base.csv")]) == 0
    assert main([*common, "--threshold", "0.01", "--out", str(tmp_path / "other.csv")]) == 0
    capsys.readouterr()
    assert compare.main([str(tmp_path / "base.csv"), str(tmp_path / "other.csv"), "--names", "old", "new"]) == 0
    out = capsys.readouterr().out
    assert "new (" in out and "against old (" in out
    table = compare.compare(compare.bench_rows(tmp_path / "base.csv"), compare.bench_rows(tmp_path / "other.csv"),
                            ("old", "new"))
    assert list(table.index) == ["dense", "threshold"]
    assert table.loc["dense", ["lost", "gained", "sign_p", "problems"]].tolist() == [0, 0, 1.0, 3]  # same model
    assert table.loc["threshold", "new_nfe"] <= table.loc["threshold", "old_nfe"]
    assert main([*common[:-2], "--n", "1", "--skip", "2", "--out", str(tmp_path / "late.csv")]) == 0
    assert main([*common[:-2], "--n", "2", "--out", str(tmp_path / "early.csv")]) == 0
    with pytest.raises(SystemExit, match="share no problem"):
        compare.main([str(tmp_path / "early.csv"), str(tmp_path / "late.csv")])
    # Runs of different --n: every figure is over the shared problems, not each run's own.
    base = pd.DataFrame({"config": ["dense"], "problem_id": ["p1"], "correct": [False], "nfe": [16]})
    longer = pd.DataFrame({"config": ["dense"] * 2, "problem_id": ["p1", "p2"], "correct": [True, False],
                           "nfe": [16, 8]})
    short = compare.compare(base, longer, ("old", "new"))
    assert short.loc["dense", ["old_accuracy", "new_accuracy", "new_nfe", "gained", "problems"]].tolist() == \
        [0.0, 1.0, 16.0, 1, 1]


def test_a_csv_of_an_earlier_version_is_read_but_not_resumed(tiny_dir: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A column added since a file was written (here `redundant_answer_refinement`, session 29) leaves
    the file readable by the summary and merge tools, the column empty; `--resume` appends rows, so it
    refuses the file with the reason."""
    prompts = tmp_path / "mine.jsonl"
    dump_problems(PROBLEMS, prompts)
    args = ["bench", "--model", str(tiny_dir), "--device", "cpu", "--prompts", str(prompts), "--policies",
            "dense,threshold", "--gen-length", "16", "--block-length", "8", "--n", "2", "--out",
            str(tmp_path / "old.csv")]
    assert main(args) == 0
    old = pd.read_csv(tmp_path / "old.csv").drop(columns=["redundant_answer_refinement"])
    old.to_csv(tmp_path / "old.csv", index=False, lineterminator="\r\n")
    capsys.readouterr()
    assert tool("bench_summary").main([str(tmp_path / "old.csv")]) == 0
    out = capsys.readouterr().out
    assert "redundant_answer" in out and "2 problems finished" in out
    assert tool("merge_bench").main([str(tmp_path / "old.csv"), "--out", str(tmp_path / "merged.csv")]) == 0
    merged = pd.read_csv(tmp_path / "merged.csv")
    assert list(merged.columns) == list(ROW_COLUMNS) and merged["redundant_answer_refinement"].isna().all()
    capsys.readouterr()
    assert main([*args, "--resume"]) != 0
    assert "written by another dllm_viz version" in capsys.readouterr().err


def test_summaries_name_a_missing_baseline_or_sweep_point() -> None:
    from dllm_viz.bench import summarize_bench, summarize_sweep
    from dllm_viz.sweep import parse_sweep

    def rows(config: str, n: int) -> list[dict]:
        return [{"config": config, "problem_id": f"p{i}", "correct": True, "nfe": 8, "tokens": 32, "seconds": 1.0,
                 "forward_seconds": 0.9, "policy_seconds": 0.05, "tokens_per_second": 32.0,
                 "agrees_with_dense": True} for i in range(n)]

    # Used to be KeyError('dense').
    with pytest.raises(ValueError, match=r"no rows for the baseline 'dense'.*'cora'"):
        summarize_bench(pd.DataFrame(rows("cora", 2)))
    sweep = parse_sweep("threshold(threshold=0.5:0.9:2)")
    summary = summarize_bench(pd.DataFrame(rows("dense", 2) + rows(sweep.labels[0], 2)))
    # Used to be a KeyError listing the index.
    with pytest.raises(ValueError, match=r"no row for the swept configuration 'threshold\(threshold=0\.9\)'"):
        summarize_sweep(summary, sweep)
