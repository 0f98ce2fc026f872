"""calibrate: CORA-Diff's selection rule, the grid, disjoint slices, and one-line errors."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest

from dllm_viz.bench import set_options
from dllm_viz.calibrate import Choice, choose_point, grid_configs, parse_grid, within_tolerance
from dllm_viz.cli import main
from dllm_viz.evaluation import heldout_problems
from dllm_viz.policies import AdaBlock, CoraPolicy, ThresholdPolicy
from dllm_viz.tasks import dump_problems


def test_fewest_nfe_within_tolerance_wins() -> None:
    # dense 0.80; the fastest point (nfe 5) lost 10 points, so the next fastest that kept accuracy wins
    points = [(0.80, 20.0), (0.70, 5.0), (0.795, 9.0), (0.81, 12.0)]
    assert choose_point(points, 0.80, 1.0) == Choice(2, True)
    assert choose_point(points, 0.80, 10.0) == Choice(1, True)  # a looser tolerance lets the fastest in
    assert choose_point(points, 0.80, 0.0) == Choice(3, True)  # no loss allowed: only >= dense qualifies


def test_nfe_ties_go_to_accuracy_then_to_the_earlier_point() -> None:
    assert choose_point([(0.79, 8.0), (0.80, 8.0), (0.80, 9.0)], 0.80, 1.0) == Choice(1, True)
    assert choose_point([(0.80, 8.0), (0.79, 7.0), (0.80, 8.0), (0.79, 7.0)], 0.80, 1.0) == Choice(1, True)
    assert choose_point([(0.80, 8.0), (0.80, 8.0)], 0.80, 1.0) == Choice(0, True)


def test_none_qualifies_reports_the_most_accurate() -> None:
    points = [(0.50, 4.0), (0.60, 9.0), (0.60, 6.0), (0.55, 3.0)]
    assert choose_point(points, 0.90, 1.0) == Choice(2, False)  # most accurate, then fewer NFE
    assert choose_point([(0.6, 5.0), (0.6, 5.0)], 0.9, 1.0) == Choice(0, False)


@pytest.mark.parametrize(("accuracy", "dense", "tolerance", "inside"), [
    (0.49, 0.50, 1.0, True),  # exactly 1 point: (0.50 - 0.49) * 100 is 1.0000000000000009 in floats
    (0.4899, 0.50, 1.0, False),
    (0.75, 0.75, 0.0, True),
    (0.7499, 0.75, 0.0, False),
    (1.0, 0.5, 0.0, True),  # better than dense always qualifies
    (0.0, 1.0, 100.0, True),
])
def test_tolerance_edges(accuracy: float, dense: float, tolerance: float, inside: bool) -> None:
    assert within_tolerance(accuracy, dense, tolerance) is inside
    assert choose_point([(accuracy, 3.0)], dense, tolerance).qualified is inside


@pytest.mark.parametrize("tolerance", [-0.5, 100.5, float("nan"), float("inf")])
def test_bad_tolerance_is_refused(tolerance: float) -> None:
    with pytest.raises(ValueError, match=r"must be in \[0, 100\]"):
        choose_point([(0.5, 3.0)], 0.5, tolerance)


def test_grid_points_in_order_and_into_the_owning_component() -> None:
    grid = parse_grid("delta_p=0.9,0.97; m=1,2")
    assert grid.points() == [{"delta_p": "0.9", "m": "1"}, {"delta_p": "0.9", "m": "2"},
                             {"delta_p": "0.97", "m": "1"}, {"delta_p": "0.97", "m": "2"}]
    configs = grid_configs("cora", grid, {"block_length": 16})
    assert list(configs) == ["cora(delta_p=0.9,m=1)", "cora(delta_p=0.9,m=2)", "cora(delta_p=0.97,m=1)",
                             "cora(delta_p=0.97,m=2)"]
    assert configs["cora(delta_p=0.97,m=2)"].rule == CoraPolicy(delta_p=0.97, m=2)
    assert configs["cora(delta_p=0.9,m=1)"].block.block_length == 16  # type: ignore[union-attr]
    ada = grid_configs("adablock+threshold", parse_grid("delimiter_threshold=0.3,0.9"))
    assert list(ada) == ["adablock(delimiter_threshold=0.3)+threshold", "adablock(delimiter_threshold=0.9)+threshold"]
    assert ada["adablock(delimiter_threshold=0.9)+threshold"].block == AdaBlock(delimiter_threshold=0.9)
    assert set_options("adablock(init_block_length=16)+threshold", {"threshold": "0.8"}) == \
        "adablock(init_block_length=16)+threshold(threshold=0.8)"
    both = grid_configs("adablock(init_block_length=16)+threshold", parse_grid("threshold=0.8"))
    assert both["adablock(init_block_length=16)+threshold(threshold=0.8)"].rule == ThresholdPolicy(0.8)


@pytest.mark.parametrize(("policy", "spec", "message"), [
    ("cora", "", "names no knob"),
    ("cora", "delta_p", "cannot read grid part 'delta_p'"),
    ("cora", "delta_p=", "has no value"),
    ("cora", "m=1;m=2", "names 'm' twice"),
    ("cora", "m=1,1", "repeats a value"),
    ("cora", "m=1,01", "are the same configuration"),
    ("cora", "delta=0.9", "no component of 'cora' has the option 'delta'; its options: delta_p, m, steps"),
    ("cora", "delta_p=1.5", r"grid point cora\(delta_p=1.5\): `delta_p` must be in \(0, 1\], got 1.5"),
    ("cora", "m=two", "grid point cora\\(m=two\\): cora option m='two' is not an integer"),
    ("cora(m=2)", "m=1,3", r"already set in 'cora\(m=2\)'"),
    ("dense", "m=1", "is the baseline"),
    ("cora", "m=" + ",".join(map(str, range(60))), "more than 50"),
])
def test_bad_grids_are_refused(policy: str, spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        grid_configs(policy, parse_grid(spec))


BASE = ["calibrate", "--model", "tiny", "--device", "cpu", "--tasks", "hard", "--gen-length", "64"]


@pytest.mark.parametrize(("argv", "needle"), [
    (["--policy", "cora", "--grid", "delta=0.9"], "has the option 'delta'; its options: delta_p, m, steps"),
    (["--policy", "cora", "--grid", "delta_p=0.9,2"], "`delta_p` must be in (0, 1], got 2"),
    (["--policy", "cora", "--grid", "delta_p:0.9"], "write name=v1,v2;name=v1,v2"),
    (["--policy", "cora", "--grid", "m=1", "--tolerance", "-1"], "--tolerance 1.0"),
    (["--policy", "cora", "--grid", "m=1", "--tolerance", "nan"], "must be in [0, 100]"),
    (["--policy", "cora", "--grid", "m=1,2", "--m", "2"], "--m is fixed and swept by --grid at once"),
    (["--policy", "cora", "--grid", "m=1", "--threshold", "0.9"], "--threshold applies to"),
    (["--policy", "cora", "--grid", "m=1", "--n", "0"], "`--n` must be >= 1, got 0"),
    (["--policy", "cora", "--grid", "m=1", "--n", "400", "--check-n", "200"], "lower --n or --check-n"),
    (["--policy", "cora+warp", "--grid", "m=1"], "unknown configuration component 'warp'"),
    (["--policy", "cora", "--grid", "m=1", "--out", "result.csv"], "name it e.g. calibration.json"),
])
def test_bad_arguments_exit_2_with_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--n", "2", "--check-n", "2", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_existing_out_is_never_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "done.json"
    out.write_text("{}")
    assert main([*BASE, "--policy", "cora", "--grid", "m=1", "--n", "2", "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err and out.read_text() == "{}"


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict]:
    """One real run on the bundled model: two CORA points, 2 + 2 problems of the hard split, gen 64
    (module-wide: capsys is per test, so stdout is captured here)."""
    out = tmp_path_factory.mktemp("calibrate") / "result.json"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        status = main([*BASE, "--policy", "cora", "--grid", "delta_p=0.9,0.97;m=1", "--n", "2", "--check-n", "2",
                       "--tolerance", "1.0", "--out", str(out)])
    return status, stdout.getvalue(), json.loads(out.read_text()) if out.exists() else {}


def test_calibrate_runs_and_chooses_by_the_rule(calibrated: tuple[int, str, dict]) -> None:
    status, printed, report = calibrated
    assert status == 0
    results = {r["config"]: r for r in report["calibration"]["results"]}
    labels = [point["config"] for point in report["grid"]]
    assert labels == ["cora(delta_p=0.9,m=1)", "cora(delta_p=0.97,m=1)"] and list(results) == ["dense", *labels]
    assert [point["values"] for point in report["grid"]] == [{"delta_p": 0.9, "m": 1}, {"delta_p": 0.97, "m": 1}]
    expected = choose_point([(results[label]["accuracy"], results[label]["mean_nfe"]) for label in labels],
                            results["dense"]["accuracy"], 1.0)
    assert report["chosen"]["config"] == labels[expected.index]
    assert report["chosen"]["qualified"] is expected.qualified
    assert results["dense"]["nfe_speedup"] == 1.0 and results["dense"]["mean_nfe"] == 64.0  # one token a pass
    check = {r["config"]: r for r in report["check"]["results"]}
    assert list(check) == ["dense", report["chosen"]["config"]]
    chosen = check[report["chosen"]["config"]]
    assert chosen["nfe_speedup"] == pytest.approx(check["dense"]["mean_nfe"] / chosen["mean_nfe"])
    assert report["check"]["holds"] is within_tolerance(chosen["accuracy"], check["dense"]["accuracy"], 1.0)
    assert report["settings"]["decode"]["gen_length"] == 64 and report["settings"]["tolerance"] == 1.0
    assert "calibration slice (2 problems):" in printed and "check slice (2 problems):" in printed
    assert f"chosen: {report['chosen']['config']}" in printed or "no grid point is within" in printed


def test_the_verdict_says_accuracy_against_dense_with_its_sign() -> None:
    """A point 2 below dense printed "+2.0 points" (its loss, unsigned) until session 23."""
    import pandas as pd

    from dllm_viz.calibrate import Calibration
    from dllm_viz.cli.calibrate import _verdict

    table = pd.DataFrame({"nfe_speedup": [1.0, 12.0], "loss_points": [0.0, 2.0]}, index=["dense", "p"])
    above = pd.DataFrame({"nfe_speedup": [1.0, 9.0], "loss_points": [0.0, -1.0]}, index=["dense", "p"])
    line = _verdict(Calibration(table, above, "p", qualified=False, holds=True), 1.0)
    assert "the most accurate is p (-2.0 points against dense)" in line
    assert "check slice: 9.00x, +1.0 points against dense, the tolerance holds" in line


def test_slices_are_disjoint_and_follow_the_heldout_order(calibrated: tuple[int, str, dict]) -> None:
    _, _, report = calibrated
    first, second = report["calibration"]["problems"], report["check"]["problems"]
    heldout = [p.problem_id for p in heldout_problems("hard", 4)]
    assert first == heldout[:2] and second == heldout[2:4]
    assert not set(first) & set(second)


def test_an_interrupted_calibration_resumes_from_its_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    argv = [*BASE, "--policy", "cora", "--grid", "m=1,2", "--n", "2", "--check-n", "1", "--rows", str(rows)]
    assert main([*argv, "--out", str(tmp_path / "first.json")]) == 0
    capsys.readouterr()
    lines = rows.read_text().splitlines()
    slices = [json.loads(line)["slice"] for line in lines]
    assert slices == ["calibration"] * 6 + ["check"] * 2  # (dense + 2 points) x 2, then (dense + chosen) x 1
    one_line = main([*argv, "--out", str(tmp_path / "again.json")])  # the rows file is never overwritten
    assert one_line == 2 and "--resume" in capsys.readouterr().err
    rows.write_text("\n".join(lines[:4]) + "\n" + lines[4][:30])  # killed while writing the fifth row
    assert main([*argv, "--resume", "--out", str(tmp_path / "second.json")]) == 0
    err = capsys.readouterr().err
    assert "4 rows already measured" in err
    assert sum(line.startswith(("[calibration]", "[check]")) for line in err.splitlines()) == 4  # only the rest
    first, second = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("first", "second"))
    assert second["calibration"] == first["calibration"] and second["check"] == first["check"]
    assert second["chosen"] == first["chosen"]
    assert [json.loads(line)["slice"] for line in rows.read_text().splitlines()] == slices
    assert main([*argv, "--resume", "--tolerance", "3", "--out", str(tmp_path / "third.json")]) == 2
    assert "other settings" in capsys.readouterr().err


def test_resume_needs_a_rows_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--policy", "cora", "--grid", "m=1", "--n", "2", "--resume"]) == 2
    assert "pass --rows PATH" in capsys.readouterr().err


def test_a_second_policy_reuses_dense_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # dense is the same measurement for every policy: a second calibration takes it from the first's rows
    first_rows, second_rows = tmp_path / "cora.jsonl", tmp_path / "adablock.jsonl"
    slices = ["--n", "2", "--check-n", "1"]
    assert main([*BASE, "--policy", "cora", "--grid", "m=1", *slices, "--rows", str(first_rows),
                 "--out", str(tmp_path / "cora.json")]) == 0
    capsys.readouterr()
    argv = [*BASE, "--policy", "adablock+threshold", "--grid", "delimiter_threshold=0.5,0.9", *slices,
            "--rows", str(second_rows), "--dense-rows", str(first_rows)]
    assert main([*argv, "--out", str(tmp_path / "adablock.json")]) == 0
    err = capsys.readouterr().err
    assert "reusing 3 dense rows" in err
    measured = [line.split()[1] for line in err.splitlines() if line.startswith(("[calibration]", "[check]"))]
    assert "dense" not in measured and len(measured) == 2 * 2 + 1  # two points on two problems, the choice on one
    cora, adablock = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("cora", "adablock"))
    assert adablock["calibration"]["results"][0] == cora["calibration"]["results"][0]  # dense, reused
    assert adablock["check"]["results"][0] == cora["check"]["results"][0]
    kept = [json.loads(line) for line in second_rows.read_text().splitlines()]
    assert [r["config"] for r in kept].count("dense") == 3  # the rows file holds every row the report used
    # resuming with the same --dense-rows copies nothing twice
    assert main([*argv, "--resume", "--out", str(tmp_path / "again.json")]) == 0
    assert "reusing 0 dense rows" in capsys.readouterr().err
    assert len(second_rows.read_text().splitlines()) == len(kept)


@pytest.mark.parametrize(("case", "needle"), [
    ("another canvas", "its dense ran with other settings (decode:"),
    ("other slices", "its dense ran with other settings (check_n:"),
    ("its own rows", "is this run's --rows file"),
    ("no such file", "is not a file"),
])
def test_dense_rows_of_other_settings_are_refused(case: str, needle: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    first_rows = tmp_path / "cora.jsonl"
    assert main([*BASE, "--policy", "cora", "--grid", "m=1", "--n", "1", "--check-n", "1",
                 "--rows", str(first_rows)]) == 0
    capsys.readouterr()
    rows, dense_rows, extra = tmp_path / "next.jsonl", first_rows, []
    if case == "another canvas":
        extra = ["--gen-length", "96"]
    elif case == "other slices":
        extra = ["--check-n", "2"]
    elif case == "its own rows":
        rows, extra = first_rows, ["--resume"]
    else:
        dense_rows = tmp_path / "none.jsonl"
    argv = [*BASE, "--policy", "cora", "--grid", "m=2", "--n", "1", "--check-n", "1", "--rows", str(rows),
            "--dense-rows", str(dense_rows), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_a_bench_file_gives_dense_rows_to_both_slices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # item 5's bench runs dense on the problems a calibration slices: its rows are matched by problem
    # id and given the slice that holds the problem; a problem the bench did not run is measured
    bench_rows = tmp_path / "bench.csv"
    assert main(["bench", "--model", "tiny", "--device", "cpu", "--tasks", "hard", "--gen-length", "64",
                 "--n", "2", "--policies", "dense", "--out", str(bench_rows)]) == 0
    capsys.readouterr()
    rows = tmp_path / "cora.jsonl"
    assert main([*BASE, "--policy", "cora", "--grid", "m=1", "--n", "1", "--check-n", "2", "--rows", str(rows),
                 "--dense-rows", str(bench_rows), "--out", str(tmp_path / "cora.json")]) == 0
    err = capsys.readouterr().err
    assert "reusing 2 dense rows" in err
    measured = [line.split()[:2] for line in err.splitlines() if line.startswith(("[calibration]", "[check]"))]
    assert measured.count(["[check]", "dense"]) == 1 and ["[calibration]", "dense"] not in measured
    benched = {row["problem_id"]: row for row in csv.DictReader(bench_rows.open())}
    kept = [json.loads(line) for line in rows.read_text().splitlines()]
    reused = [row for row in kept if row["config"] == "dense" and row["problem_id"] in benched]
    # the bench's problems 0 and 1: 0 is the calibration slice, 1 the check slice's first (2 is measured)
    assert [row["slice"] for row in reused] == ["calibration", "check"]
    assert all(row["completion"] == benched[row["problem_id"]]["completion"] for row in reused)


@pytest.mark.parametrize(("case", "needle"), [
    ("another canvas", "its dense ran with other settings (decode:"),
    ("another block", "its bench ran a dense of another block length"),
    ("no dense", "its bench ran no dense"),
    ("prompts", "with --prompts: a bench file keeps problem ids"),
])
def test_bench_files_of_other_settings_are_refused(case: str, needle: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    bench_rows = tmp_path / "bench.csv"
    assert main(["bench", "--model", "tiny", "--device", "cpu", "--tasks", "hard", "--gen-length", "64",
                 "--n", "1", "--policies", "dense", "--out", str(bench_rows)]) == 0
    capsys.readouterr()
    if case == "no dense":  # a hand-edited settings file: bench always runs dense
        settings = tmp_path / "bench.csv.settings.json"
        saved = json.loads(settings.read_text())
        settings.write_text(json.dumps({**saved, "configs": {}}))
    extra = {"another canvas": ["--gen-length", "96"], "another block": ["--block-length", "16"],
             "no dense": [], "prompts": ["--prompts", str(_prompt_file(tmp_path))]}[case]
    argv = [*BASE, "--policy", "cora", "--grid", "m=1", "--n", "1", "--check-n", "1",
            "--dense-rows", str(bench_rows), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1



def _prompt_file(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    dump_problems(heldout_problems("hard", 2), path)
    return path


def test_calibrate_on_a_block_model_runs_its_aligned_blocks_unless_told(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """As bench (session 34): calibrate parsed its points and dense on fixed blocks of 32 on a
    block-causal model, where decode, bench and the app run the model's aligned blocks."""
    from dllm_viz.random_block_model import BlockModelShape, build_random_block_model

    model = build_random_block_model(tmp_path / "block", BlockModelShape(
        hidden=64, layers=1, heads=2, intermediate=128, block_length=8, max_positions=512, head_scale=12.0, seed=0))
    argv = ["calibrate", "--model", str(model), "--tasks", "arith", "--n", "1", "--check-n", "1",
            "--gen-length", "30", "--policy", "threshold", "--grid", "threshold=0.5,0.9"]
    assert main([*argv, "--out", str(tmp_path / "own.json")]) == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "own.json").read_text())
    blocks = [report["settings"]["dense"]["block"], *(p["block"] for p in report["settings"]["points"].values())]
    assert blocks == [{"name": "aligned", "block_length": 8}] * 3, blocks
    assert "configurations that name no block sizer run on aligned blocks of 8" in capsys.readouterr().err
    told = [*argv, "--block-length", "6", "--out", str(tmp_path / "told.json")]
    assert main(told) == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "told.json").read_text())
    assert report["settings"]["dense"]["block"] == {"name": "aligned", "block_length": 6}
