"""Bad inputs to the researcher scripts of tools/: each ends in one line naming the bad value and the
fix (SystemExit), never a traceback or a report of wrong numbers.

The `bench --out` files here are written by hand in bench's format (csv.writer's \\r\\n lines and a
`<out>.settings.json` beside them), so no model is loaded and each test takes milliseconds.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from tool_scripts import tool

from dllm_viz.bench import ROW_COLUMNS, summarize_bench

SETTINGS: dict[str, Any] = {
    "command": "bench", "model": "tiny", "model_weights": "2ff3069f3dfa636c", "data": None,
    "configs": {"dense": {"rule": {"name": "fixed_steps"}}, "threshold": {"rule": {"name": "threshold",
                                                                                    "threshold": 0.9}}},
    "decode": {"gen_length": 16, "seed": 0},
}


def row(config: str, problem: str, *, correct: bool = True, nfe: int = 16, **values: Any) -> dict[str, Any]:
    """One row as `bench --out` writes it (csv values are text)."""
    out: dict[str, Any] = {
        "config": config, "problem_id": problem, "task": "arith", "correct": str(correct), "nfe": str(nfe),
        "tokens": "12", "seconds": "0.1", "forward_seconds": "0.09", "policy_seconds": "0.001",
        "tokens_per_second": "120.0", "agrees_with_dense": "True", "complete": "True", "cut_off": "False",
        "candidate_flips": "2", "redundant_refinement": "0.5", "redundant_answer_refinement": "0.4",
        "completion": "#### 1",
    }
    return {**out, **values}


def run_rows(problems: Sequence[str], configs: Sequence[str] = ("dense", "threshold")) -> list[dict[str, Any]]:
    """Every configuration on every problem, problem by problem (bench's order); threshold takes 4 passes."""
    return [row(config, problem, nfe=16 if config == "dense" else 4) for problem in problems for config in configs]


def write_bench(path: Path, rows: list[dict[str, Any]], *, problems: Sequence[str] | None = None,
                columns: Sequence[str] = ROW_COLUMNS, settings: dict[str, Any] | None = None) -> Path:
    """`rows` (only `columns` of them) as `bench --out` writes them, with its settings beside them."""
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows([r[c] for c in columns] for r in rows)
    if problems is None:
        problems = list(dict.fromkeys(r["problem_id"] for r in rows))
    full = {**SETTINGS, "problems": list(problems), **(settings or {})}
    path.with_name(path.name + ".settings.json").write_text(json.dumps(full))
    return path


# --- tools/bench_summary.py -------------------------------------------------------------------------


def test_summary_names_a_value_that_is_not_a_number(tmp_path: Path) -> None:
    """Was: pandas' `ValueError: Unable to parse string 'abc' at position 0` with a traceback."""
    rows = run_rows(["p1", "p2"])
    rows[2]["nfe"] = "abc"
    path = write_bench(tmp_path / "rows.csv", rows)
    with pytest.raises(SystemExit, match=r"rows.csv: row 3 \(config 'dense', problem 'p2'\) holds 'abc' in 'nfe', "
                                         "not a number; repair or remove this row"):
        tool("bench_summary").main([str(path)])


def test_summary_names_a_value_that_is_not_true_or_false(tmp_path: Path) -> None:
    """Was: `TypeError: agg function failed [how->mean,dtype->object]` from deep in the summary."""
    rows = run_rows(["p1"])
    rows[1]["correct"] = "yes"
    path = write_bench(tmp_path / "rows.csv", rows)
    with pytest.raises(SystemExit, match=r"holds 'yes' in 'correct', not True or False"):
        tool("bench_summary").main([str(path)])


def test_summary_refuses_a_file_without_a_column_every_bench_file_has(tmp_path: Path) -> None:
    """Was: `TypeError: dtype 'str' does not support operation 'mean'` (the column read back empty)."""
    columns = [c for c in ROW_COLUMNS if c != "correct"]
    path = write_bench(tmp_path / "rows.csv", run_rows(["p1"]), columns=columns)
    with pytest.raises(SystemExit, match=r"rows.csv: it has no 'correct' column, which every `bench --out` file has"):
        tool("bench_summary").main([str(path)])


def test_summary_refuses_an_eval_jsonl(tmp_path: Path) -> None:
    """Was: "has no 'dense' rows yet" about a file of another kind, which no waiting fixes."""
    path = tmp_path / "eval.jsonl"
    path.write_text(json.dumps({"problem_id": "p1", "correct": True, "nfe": 3}) + "\n")
    with pytest.raises(SystemExit, match=r"eval.jsonl: it has no 'config' column"):
        tool("bench_summary").main([str(path)])


def test_summary_of_a_file_older_than_some_columns_reports_them_unknown(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A file from before `tokens`, `cut_off` and `candidate_flips`: was a ValueError (int('') of the
    empty cut_off column); with cut_off there, TPF and flip share were printed as 0.000 where the
    library reports NaN (unknown) for a column the file lacks."""
    older = [c for c in ROW_COLUMNS if c not in ("tokens", "cut_off", "candidate_flips")]
    path = write_bench(tmp_path / "old.csv", run_rows(["p1", "p2"]), columns=older)
    summary = tool("bench_summary")
    assert summary.main([str(path)]) == 0
    assert "2 problems finished" in capsys.readouterr().out
    table = summarize_bench(summary.bench_rows(path))
    assert math.isnan(table.loc["threshold", "tpf"]) and math.isnan(table.loc["threshold", "flip_share"])
    assert table.loc["threshold", "mean_nfe"] == 4


def test_summary_refuses_files_of_different_settings(tmp_path: Path) -> None:
    """Was: two runs at threshold 0.9 and 0.5 summarised as one 'threshold' configuration."""
    first = write_bench(tmp_path / "a.csv", run_rows(["p1"]))
    other = {"configs": {**SETTINGS["configs"], "threshold": {"rule": {"name": "threshold", "threshold": 0.5}}}}
    second = write_bench(tmp_path / "b.csv", run_rows(["p2"]), settings=other)
    with pytest.raises(SystemExit, match=r"b.csv: its settings differ from .*a.csv's in "
                                         r"configs.threshold.rule.threshold \(0.5 against 0.9\); give only slices"):
        tool("bench_summary").main([str(first), str(second)])


def test_summary_names_line_ends_another_program_wrote(tmp_path: Path) -> None:
    """A bench csv saved again by pandas (\\n line ends): was "has no 'dense' rows yet", every row
    being read as unfinished."""
    path = write_bench(tmp_path / "rows.csv", run_rows(["p1"]))
    pd.read_csv(path).to_csv(path, index=False)
    with pytest.raises(SystemExit, match=r"rows.csv: its lines end in \\n where `bench --out` writes \\r\\n"):
        tool("bench_summary").main([str(path)])


def test_summary_refuses_an_unknown_pair_before_its_report(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Was: the whole report printed, then the error: a typo read like a finished run."""
    path = write_bench(tmp_path / "rows.csv", run_rows(["p1"]))
    with pytest.raises(SystemExit, match=r"--pair threshold thresold: no rows for configuration 'thresold'"):
        tool("bench_summary").main([str(path), "--pair", "threshold", "thresold"])
    assert capsys.readouterr().out == ""


def test_summary_refuses_a_row_given_twice(tmp_path: Path) -> None:
    """Was: the row counted twice in accuracy, NFE and n (e.g. a file pasted onto itself)."""
    rows = run_rows(["p1", "p2"])
    path = write_bench(tmp_path / "rows.csv", [*rows, rows[1]])
    with pytest.raises(SystemExit, match=r"row 5 \(config 'threshold', problem 'p1'\) is in the file twice"):
        tool("bench_summary").main([str(path)])


def test_summary_says_a_directory_is_one(tmp_path: Path) -> None:
    """Was: "no such file" about a path that exists."""
    with pytest.raises(SystemExit, match=r"is a directory; give `bench --out` csv files"):
        tool("bench_summary").main([str(tmp_path)])


# --- tools/chain_errors.py --------------------------------------------------------------------------


def test_chain_errors_says_when_no_row_is_a_worked_chain(tmp_path: Path) -> None:
    """Was not there: without this, a file of breadth or list rows would print a table of zeros."""
    path = write_bench(tmp_path / "rows.csv", run_rows(["hard/breadth|2x3;2x2"]))
    with pytest.raises(SystemExit, match=r"rows.csv: no rows of a worked-chain task .*nothing to classify"):
        tool("chain_errors").main([str(path)])


def test_chain_errors_counts_the_role_of_each_wrong_answers_first_error(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    chain = "hard/long|3 * 4 = 12;12 / 3 = 4;4 * 2 = 8"
    rows = [row("dense", chain, completion="3 * 4 = 12\n12 / 3 = 4\n4 * 2 = 8\n#### 8"),
            row("threshold", chain, correct=False, completion="3 * 4 = 12\n12 / 3 = 5\n5 * 2 = 10\n#### 10"),
            row("dense", "hard/breadth|2x3;2x2"), row("threshold", "hard/breadth|2x3;2x2", correct=False)]
    table = tool("chain_errors").error_table(tool("bench_summary").bench_rows(write_bench(tmp_path / "rows.csv", rows)))
    assert table.loc["dense", ["chains", "wrong"]].tolist() == [1, 0]
    assert table.loc["threshold", ["chains", "wrong", "result", "format"]].tolist() == [1, 1, 1, 0]
    assert table.loc["threshold", "mean_place"] == pytest.approx(1 / 3)  # line 1 of 0..3 (3: the answer line)


# --- tools/merge_bench.py ---------------------------------------------------------------------------


def test_merge_names_a_part_whose_rows_are_missing(tmp_path: Path) -> None:
    """A part whose settings file is there but its csv not: was a FileNotFoundError traceback."""
    first = write_bench(tmp_path / "a.csv", run_rows(["p1"]))
    gone = write_bench(tmp_path / "b.csv", run_rows(["p2"]))
    gone.unlink()
    with pytest.raises(SystemExit, match=r"b.csv: no such file"):
        tool("merge_bench").main([str(first), str(gone), "--out", str(tmp_path / "all.csv")])


@pytest.mark.parametrize("problems", [None, "p1"], ids=["absent", "a string"])
def test_merge_refuses_settings_without_a_list_of_problems(tmp_path: Path, problems: str | None) -> None:
    """Was: KeyError 'problems' (absent), or a merged file whose settings listed the string's
    characters as its problems ("p", "1")."""
    path = write_bench(tmp_path / "a.csv", run_rows(["p1"]))
    settings = json.loads(Path(f"{path}.settings.json").read_text())
    settings["problems"] = problems
    Path(f"{path}.settings.json").write_text(json.dumps({k: v for k, v in settings.items() if v is not None}))
    with pytest.raises(SystemExit, match=r"a.csv: its settings file 'a.csv.settings.json' holds no bench run's list"):
        tool("merge_bench").main([str(path), "--out", str(tmp_path / "all.csv")])
    assert not (tmp_path / "all.csv").exists()


def test_merge_makes_the_folder_of_its_out(tmp_path: Path) -> None:
    """Was: a FileNotFoundError traceback; `bench --out` makes the folder, so the merge does too."""
    parts = [str(write_bench(tmp_path / f"{p}.csv", run_rows([p]))) for p in ("p1", "p2")]
    out = tmp_path / "merged" / "rows.csv"
    assert tool("merge_bench").main([*parts, "--out", str(out)]) == 0
    assert pd.read_csv(out)["problem_id"].tolist() == ["p1", "p1", "p2", "p2"]


def test_merge_refuses_a_part_with_a_bad_value(tmp_path: Path) -> None:
    """Was: merged as is, so `bench --resume` on the merged file failed later, far from the cause."""
    rows = run_rows(["p2"])
    rows[0]["seconds"] = "0.1s"
    parts = [write_bench(tmp_path / "a.csv", run_rows(["p1"])), write_bench(tmp_path / "b.csv", rows)]
    with pytest.raises(SystemExit, match=r"b.csv: row 1 .* holds '0.1s' in 'seconds', not a number"):
        tool("merge_bench").main([*map(str, parts), "--out", str(tmp_path / "all.csv")])
    assert not (tmp_path / "all.csv").exists()


def test_merge_refuses_rows_of_problems_its_settings_do_not_list(tmp_path: Path) -> None:
    """A part beside another run's settings file: was merged, its rows' problems missing from the
    merged settings (so `bench --resume` would take them for another run's)."""
    path = write_bench(tmp_path / "a.csv", run_rows(["p1", "p2"]), problems=["p1"])
    with pytest.raises(SystemExit, match=r"a.csv: its row of problem 'p2' is not among the problems of its settings"):
        tool("merge_bench").main([str(path), "--out", str(tmp_path / "all.csv")])


def test_merge_names_line_ends_another_program_wrote(tmp_path: Path) -> None:
    """Was: "its last row was cut short", then a merged file of 0 rows and exit status 0."""
    path = write_bench(tmp_path / "a.csv", run_rows(["p1"]))
    pd.read_csv(path).to_csv(path, index=False)
    with pytest.raises(SystemExit, match=r"its lines end in \\n"):
        tool("merge_bench").main([str(path), "--out", str(tmp_path / "all.csv")])
    assert not (tmp_path / "all.csv").exists()


def test_merge_writes_a_jsonl_part_of_an_older_version(tmp_path: Path) -> None:
    """A `bench --out rows.jsonl` part from before `redundant_answer_refinement`: was a KeyError."""
    path = tmp_path / "a.jsonl"
    rows = [{k: v for k, v in r.items() if k != "redundant_answer_refinement"} for r in run_rows(["p1"])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    Path(f"{path}.settings.json").write_text(json.dumps({**SETTINGS, "problems": ["p1"]}))
    assert tool("merge_bench").main([str(path), "--out", str(tmp_path / "all.csv")]) == 0
    merged = pd.read_csv(tmp_path / "all.csv")
    assert merged["nfe"].tolist() == [16, 4] and merged["redundant_answer_refinement"].isna().all()


# --- tools/compare_models.py ------------------------------------------------------------------------


def test_compare_pairs_a_run_still_being_written_per_configuration(tmp_path: Path) -> None:
    """The candidate has finished threshold on 2 of 3 problems: the base's threshold NFE was its mean
    over all 3 (beside a pairing of 2); now both are over the 2."""
    base_rows = run_rows(["p1", "p2", "p3"])
    base_rows[5]["nfe"] = "10"  # threshold on p3, which the candidate has not reached
    base = write_bench(tmp_path / "base.csv", base_rows)
    candidate = write_bench(tmp_path / "new.csv", run_rows(["p1", "p2", "p3"])[:-1])
    compare = tool("compare_models")
    table = compare.compare(compare.bench_rows(base), compare.bench_rows(candidate), ("base", "new"))
    assert table.loc["threshold", ["base_nfe", "new_nfe", "problems"]].tolist() == [4.0, 4.0, 2]
    assert table.loc["dense", "problems"] == 3


def test_compare_refuses_runs_of_different_data_files(tmp_path: Path) -> None:
    """gsm8k's problem ids are positions in the --data file: was a pairing of unrelated problems."""
    base = write_bench(tmp_path / "base.csv", run_rows(["gsm8k|0"]), settings={"data": ["a.jsonl"]})
    candidate = write_bench(tmp_path / "new.csv", run_rows(["gsm8k|0"]), settings={"data": ["b.jsonl"]})
    with pytest.raises(SystemExit, match=r"new.csv was benched on --data \['b.jsonl'\] and .*base.csv on --data "
                                         r"\['a.jsonl'\], so their problem ids name other problems"):
        tool("compare_models").main([str(base), str(candidate)])


def test_compare_says_when_the_runs_hold_other_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Runs of different --n: the figures are over the shared problems, as before, and now say so."""
    base = write_bench(tmp_path / "base.csv", run_rows(["p1", "p2"]))
    candidate = write_bench(tmp_path / "new.csv", run_rows(["p1", "p2", "p3", "p4"]))
    assert tool("compare_models").main([str(base), str(candidate)]) == 0
    assert "note: paired over the 2 problems both runs hold; " in capsys.readouterr().err


def test_compare_names_the_file_of_a_bad_value(tmp_path: Path) -> None:
    """Was: "compare_models: Unable to parse string 'abc' at position 0", naming neither file nor column."""
    rows = run_rows(["p1"])
    rows[0]["nfe"] = "abc"
    base = write_bench(tmp_path / "base.csv", run_rows(["p1"]))
    candidate = write_bench(tmp_path / "new.csv", rows)
    with pytest.raises(SystemExit, match=r"new.csv: row 1 .* holds 'abc' in 'nfe', not a number"):
        tool("compare_models").main([str(base), str(candidate)])


# --- the scripts that decode: refused before a model loads ------------------------------------------


def test_family_token_accuracy_without_a_model_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """Was: IndexError on sys.argv[1] (and `--help` was loaded as a model name)."""
    with pytest.raises(SystemExit) as exit_info:
        tool("family_token_accuracy").main([])
    assert exit_info.value.code == 2 and "required: model" in capsys.readouterr().err


@pytest.mark.parametrize("script, argv", [("family_token_accuracy", ["no/such/model/dir"]),
                                          ("floor_counts", ["--model", "no/such/model/dir"]),
                                          ("block_passes", ["--model", "no/such/model/dir", "--n", "1"]),
                                          ("ce_fires", ["--model", "no/such/model/dir", "--n", "1"]),
                                          ("confidence_reliability", ["--model", "no/such/model/dir", "--n", "1"])])
def test_a_model_that_is_not_there_is_one_line(script: str, argv: list[str]) -> None:
    """Was: a ModelLoadError traceback."""
    with pytest.raises(SystemExit, match=r"^error: model 'no/such/model/dir' is neither"):
        tool(script).main(argv)


@pytest.mark.parametrize("script_name, argv, message", [
    ("block_passes", ["--n", "0"], "--n must be >= 1"),
    ("block_passes", ["--policy", "threshhold"], "unknown configuration component 'threshhold'"),
    ("block_passes", ["--tasks", "hard/chian"], "--tasks 'hard/chian': unknown task 'hard/chian'"),
    ("block_passes", ["--gen-length", "100"], "`block_length` must divide `gen_length`"),
    ("block_passes", ["--block-length", "0"], "`block_length` must be >= 1"),
    ("ce_fires", ["--n", "0"], "--n must be >= 1"),
    ("confidence_reliability", ["--n", "0"], "--n must be >= 1"),
    ("confidence_reliability", ["--policy", "dens"], "unknown configuration component 'dens'"),
    ("cache_drift", ["--n", "0"], "--n must be >= 1"),
    ("cache_drift", ["--policy", "threshold+dual"], "--policy 'threshold\\+dual' already caches"),
    ("cache_drift", ["--policy", "bogus"], "unknown configuration component 'bogus'"),
    ("ce_fires", ["--rules", "threshold,bogus"], "--rules: unknown configuration component 'bogus'"),
    ("ce_fires", ["--rules", "threshold,"], "--rules 'threshold,' has an empty name"),
    ("ce_fires", ["--rules", "threshold+kalman"], "--rules: 'threshold\\+kalman' cannot take CE on top"),
    ("ce_fires", ["--gen-length", "0"], "`gen_length` must be an integer"),
])
def test_decoding_tools_refuse_bad_options_before_loading(monkeypatch: pytest.MonkeyPatch, script_name: str,
                                                          argv: list[str], message: str) -> None:
    """Was: a traceback once the model had loaded (for ce_fires, after the rules before the bad one had
    decoded, minutes), a ZeroDivisionError for --n 0 or after decoding nothing, or "names two
    extrapolates" for a ce_fires rule with +kalman."""
    script = tool(script_name)
    monkeypatch.setattr(script, "load_or_exit",
                        lambda name, **_: pytest.fail("loaded the model before checking the options"))
    with pytest.raises(SystemExit, match=f"^error: {message}"):
        script.main(argv)
