"""TPF, AUP (d3LLM's definition) and the frontier verdict; sweeps of one knob; the bench's columns."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from dllm_viz.bench import Paired, paired, summarize_bench, summarize_sweep
from dllm_viz.cli import main
from dllm_viz.metrics import aup, format_p, frontier_position, sign_test_p, tokens_per_forward
from dllm_viz.sweep import parse_sweep
from dllm_viz.tasks import Problem


def test_aup_reproduces_d3llms_worked_example() -> None:
    # d3LLM's AUP leaderboard, GSM8K-CoT: d3LLM-LLaDA's two points and the task's best accuracy.
    assert aup([(9.11, 73.09), (1.0, 74.02)], 74.98).value == pytest.approx(637.65, abs=0.01)
    # One point: rho * y, unweighted (an autoregressive model at TPF 1 scores its accuracy).
    assert aup([(1.0, 74.10)], 74.98).value == pytest.approx(74.10)


def test_aup_counts_points_that_share_a_tpf_once_at_their_best_accuracy() -> None:
    """d3LLM sorts by TPF alone (a stable sort), so tied points scored by the order they were listed
    in: (1, 80) before (1, 90) gave 80 + the trapezoid from (1, 90), the reverse 90 + the one from
    (1, 80). A curve has one value per TPF: the best, in any order, as the frontier verdict counts it."""
    w = math.exp(-3 * (1 - 88 / 90))
    expected = 90.0 + 0.5 * 1.0 * (88.0 * w + 90.0)
    for points in ([(1.0, 80.0), (1.0, 90.0), (2.0, 88.0)], [(2.0, 88.0), (1.0, 90.0), (1.0, 80.0)]):
        result = aup(points, 90.0)
        assert result.value == pytest.approx(expected) and result.dropped == 0
    # The bench's two-point curve: a configuration at dense's TPF adds no parallelism, so no area.
    assert aup([(0.5, 95.0), (0.5, 90.0)], 95.0).value == aup([(0.5, 95.0)], 95.0).value
    assert aup([(0.5, 90.0), (0.5, 95.0)], 95.0).value == pytest.approx(0.5 * 95.0)


def test_aup_drops_points_over_five_below_the_slowest_and_weights_lost_accuracy() -> None:
    result = aup([(1.0, 90.0), (4.0, 80.0), (2.0, 89.0)], 90.0)
    assert result.dropped == 1
    w = math.exp(-3 * (1 - 89 / 90))
    assert result.value == pytest.approx(90.0 + 0.5 * 1.0 * (89.0 * w + 90.0))
    # Holding accuracy while doubling TPF earns the full trapezoid; losing 4 points earns less.
    assert aup([(1.0, 90.0), (2.0, 90.0)], 90.0).value == pytest.approx(180.0)
    assert aup([(1.0, 90.0), (2.0, 86.0)], 90.0).value < 180.0
    with pytest.raises(ValueError, match="at least one"):
        aup([], 90.0)
    with pytest.raises(ValueError, match="y_max"):
        aup([(1.0, 0.0)], 0.0)
    with pytest.raises(ValueError, match="finite"):
        aup([(float("nan"), 1.0)], 1.0)


def test_tokens_per_forward() -> None:
    assert tokens_per_forward(50, 10) == 5.0
    assert math.isnan(tokens_per_forward(5, 0))


@pytest.mark.parametrize(("nfe", "acc", "where"), [
    (15.0, 80.0, "above"), (15.0, 70.0, "on"), (15.0, 60.0, "below"), (5.0, 90.0, "outside"),
    (10.0, 60.5, "on"), (40.0, 70.0, "outside"),
])  # fmt: skip
def test_frontier_position_interpolates_between_sweep_points(nfe: float, acc: float, where: str) -> None:
    assert frontier_position(nfe, acc, [(10.0, 60.0), (20.0, 80.0), (30.0, 85.0)]) == where


def test_sweep_specs_expand_to_configurations() -> None:
    sweep = parse_sweep("threshold(threshold=0.5:0.9:5)")
    assert sweep.knob == "threshold" and sweep.values == pytest.approx((0.5, 0.6, 0.7, 0.8, 0.9))
    assert sweep.labels[0] == "threshold(threshold=0.5)" and sweep.labels[-1] == "threshold(threshold=0.9)"
    steps = parse_sweep("fixed_steps(steps=8:32:4)+eos")
    assert steps.labels == ("fixed_steps(steps=8)+eos", "fixed_steps(steps=16)+eos", "fixed_steps(steps=24)+eos",
                            "fixed_steps(steps=32)+eos")
    assert parse_sweep("cora(delta_p=0.5:0.99:2,m=3)").labels == ("cora(delta_p=0.5,m=3)", "cora(delta_p=0.99,m=3)")


@pytest.mark.parametrize(("spec", "message"), [
    ("threshold", "exactly one knob range"), ("threshold(threshold=0.5:0.9:1)", "2..50 points"),
    ("threshold(threshold=0.9:0.5:3)", "from low to high"),
    ("cora(delta_p=0.5:0.9:3,m=1:3:3)", "has 2"),
])  # fmt: skip
def test_bad_sweeps_name_the_form(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_sweep(spec)


def _rows(config: str, correct: list[bool], nfe: int, tokens: int) -> list[dict]:
    return [{"config": config, "problem_id": f"p{i}", "correct": ok, "nfe": nfe, "tokens": tokens, "seconds": 1.0,
             "forward_seconds": 0.9, "policy_seconds": 0.05, "tokens_per_second": tokens, "agrees_with_dense": True}
            for i, ok in enumerate(correct)]


def test_sign_test_is_exact_and_two_sided() -> None:
    # 0 vs 5 discordant problems: 2 / 2^5; symmetric in its arguments; a tie or nothing discordant is 1.
    assert sign_test_p(0, 5) == pytest.approx(2 / 32) and sign_test_p(5, 0) == sign_test_p(0, 5)
    assert sign_test_p(1, 9) == pytest.approx(2 * (1 + 10) / 2**10)
    assert sign_test_p(3, 3) == 1.0 and sign_test_p(0, 0) == 1.0
    # Session 19's swap (BENCHMARKS.md): threshold lost 38 and gained 23 problems, AdaBlock 47 / 23.
    assert sign_test_p(38, 23) == pytest.approx(0.0722, abs=1e-4)
    assert sign_test_p(47, 23) == pytest.approx(0.0056, abs=1e-4)
    # Thousands of problems: exact integer arithmetic, no overflow.
    assert 0.0 < sign_test_p(3000, 2900) < 1.0 and sign_test_p(2000, 0) == 0.0
    with pytest.raises(ValueError, match="lost=-1"):
        sign_test_p(-1, 2)


def test_printed_p_values_never_read_as_zero() -> None:
    from dllm_viz.cli.bench import table_text

    assert format_p(0.0003) == "<0.001" and format_p(0.0722) == "0.072" and format_p(1.0) == "1.000"
    rows = pd.DataFrame(_rows("dense", [True] * 12, 64, 32) + _rows("threshold", [False] * 12, 8, 32))
    text = table_text(summarize_bench(rows))
    assert "<0.001" in text.splitlines()[2] and "1.000" in text.splitlines()[1]  # 12 lost: p = 2 / 4096


def test_summary_pairs_each_configuration_with_dense_problem_by_problem() -> None:
    rows = pd.DataFrame(_rows("dense", [True, True, False, False, True], 64, 32)
                        + _rows("threshold", [True, False, True, False, False], 8, 32)
                        + _rows("cora", [True, True, False], 12, 32))  # ran p0-p2 only: paired on those
    summary = summarize_bench(rows)
    assert summary.loc["dense", ["lost", "gained", "sign_p"]].tolist() == [0, 0, 1.0]
    # threshold: lost p1 and p4, gained p2, although its accuracy is only 20 points under dense's.
    assert summary.loc["threshold", ["lost", "gained"]].tolist() == [2, 1]
    assert summary.loc["threshold", "sign_p"] == pytest.approx(sign_test_p(2, 1))
    assert summary.loc["cora", ["lost", "gained", "sign_p"]].tolist() == [0, 0, 1.0]
    # Any two configurations pair the same way (what CE adds to a rule: `--pair` in tools/bench_summary.py).
    assert paired(rows, "threshold", "cora") == Paired(lost=1, gained=1, sign_p=1.0, problems=3)
    assert paired(rows, "threshold") == Paired(lost=2, gained=1, sign_p=sign_test_p(2, 1), problems=5)
    with pytest.raises(ValueError, match="no rows for configuration 'tspd'"):
        paired(rows, "tspd")


def test_summary_reports_tpf_aup_and_the_frontier() -> None:
    sweep = parse_sweep("threshold(threshold=0.5:0.9:2)")
    rows = pd.DataFrame(_rows("dense", [True] * 4, 64, 32) + _rows(sweep.labels[0], [True, False, False, False], 8, 32)
                        + _rows(sweep.labels[1], [True, True, True, False], 16, 32)
                        + _rows("cora", [True] * 4, 12, 32))
    summary = summarize_bench(rows)
    assert summary.loc["dense", "tpf"] == pytest.approx(0.5) and summary.loc["cora", "tpf"] == pytest.approx(32 / 12)
    assert summary.loc["dense", "aup"] == pytest.approx(0.5 * 100)
    # cora keeps dense's accuracy at 5.3x the TPF: the full trapezoid from dense to it.
    assert summary.loc["cora", "aup"] == pytest.approx(50 + (32 / 12 - 0.5) * 100)
    # 25%: more than 5 points below dense, so only dense's area is credited.
    assert summary.loc[sweep.labels[0], "aup"] == pytest.approx(50)
    table, area, positions = summarize_sweep(summary, sweep)
    assert list(table["threshold"]) == pytest.approx([0.5, 0.9]) and list(table["accuracy"]) == [0.25, 0.75]
    # Sorted by TPF the slowest point is 0.9's (TPF 2, 75%); 0.5's 25% is over 5 below it: dropped.
    assert area.value == pytest.approx(2 * 75) and area.dropped == 1
    assert positions["cora"] == "above" and positions["dense"] == "outside"


def test_bench_cli_sweeps_a_knob_and_plots_the_frontier(tiny_dir: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import dllm_viz.evaluation as evaluation

    problems = [Problem(task="arith", problem_id=f"p{i}", prompt=f"{i} + 1?", target=f"#### {i + 1}",
                        gold=str(i + 1)) for i in range(2)]
    monkeypatch.setattr(evaluation, "task_problems", lambda task, n=None, data=None: problems[:n])
    plot = tmp_path / "frontier.html"
    status = main(["bench", "--model", str(tiny_dir), "--device", "cpu", "--n", "2", "--policies", "dense,cora",
                   "--sweep", "threshold(threshold=0.001:0.99:3)", "--gen-length", "16", "--block-length", "8",
                   "--plot", str(plot)])
    out = capsys.readouterr().out
    assert status == 0
    assert "tpf" in out and "aup" in out and "frontier of threshold" in out and "sweep AUP=" in out
    assert "threshold(threshold=0.001)" in out and "threshold(threshold=0.99)" in out
    assert "cora: " in out and " the threshold frontier" in out
    assert plot.is_file() and "NFE vs accuracy" in plot.read_text(encoding="utf-8")
    assert main(["bench", "--model", str(tiny_dir), "--sweep", "threshold(threshold=0.5:0.9:3)",
                 "--plot", str(tmp_path / "x.png")]) == 2


@pytest.mark.parametrize(("nfe", "acc", "frontier", "message"), [
    (15.0, float("nan"), [(10.0, 60.0), (20.0, 80.0)], "accuracy nan"),
    (float("nan"), 70.0, [(10.0, 60.0), (20.0, 80.0)], "NFE nan"),
    (15.0, 70.0, [(10.0, float("nan")), (20.0, 80.0)], "frontier points"),
])  # fmt: skip
def test_frontier_position_refuses_what_it_cannot_place(nfe: float, acc: float, frontier: list, message: str) -> None:
    # A NaN compares false both ways: it used to read as "on" the frontier (or "outside" for a NaN NFE).
    with pytest.raises(ValueError, match=message):
        frontier_position(nfe, acc, frontier)
    with pytest.raises(ValueError, match="tolerance"):
        frontier_position(15.0, 70.0, [(10.0, 60.0), (20.0, 80.0)], tolerance=float("nan"))


def test_frontier_points_sharing_an_nfe_count_at_their_best_accuracy() -> None:
    # Two swept values that land on the same NFE (40% and 60%): a configuration equal to the better one
    # is on the frontier, not above it (the lower point used to be taken as the frontier's value).
    assert frontier_position(10.0, 60.0, [(10.0, 40.0), (10.0, 60.0)]) == "on"
    assert frontier_position(10.0, 50.0, [(10.0, 60.0), (10.0, 40.0), (20.0, 80.0)]) == "below"
    assert frontier_position(15.0, 70.0, [(10.0, 40.0), (10.0, 60.0), (20.0, 80.0)]) == "on"


def test_sign_test_refuses_counts_that_are_not_whole_numbers() -> None:
    with pytest.raises(ValueError, match=r"lost=2\.5"):
        sign_test_p(2.5, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gained=nan"):
        sign_test_p(1, float("nan"))  # type: ignore[arg-type]
    # Whole-valued floats (a pandas sum of a float column) are counts.
    assert sign_test_p(2.0, 1.0) == sign_test_p(2, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize(("points", "y_max", "options", "message"), [
    ([(1.0, 90.0), (2.0, 80.0)], 90.0, {"drop": -1.0}, "`drop`"),  # used to be an IndexError
    ([(1.0, 90.0), (2.0, 80.0)], 90.0, {"drop": float("nan")}, "`drop`"),
    ([(1.0, 90.0), (2.0, 88.0)], 90.0, {"alpha": float("nan")}, "`alpha`"),
    ([(-1.0, 50.0), (2.0, 50.0)], 50.0, {}, "TPF >= 0"),  # used to score 100
    ([(1.0, -50.0)], 50.0, {}, "0..100"),  # used to score -50
    ([(1.0, 90.0)], float("inf"), {}, "y_max"),  # used to weight every point by exp(-3)
])  # fmt: skip
def test_aup_refuses_values_outside_its_definition(points: list, y_max: float, options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        aup(points, y_max, **options)
