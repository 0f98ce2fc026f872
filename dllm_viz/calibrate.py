"""Recalibrate a policy's operating point by CORA-Diff's protocol (docs/ALGORITHMS.md §6.1).

A family default (AdaBlock's tau_D, CORA's (delta_p, m)) is only as good as the model it was
measured on; when the bundled model is retrained, the defaults have to be measured again. The
protocol: run dense and every point of a grid on a calibration slice, keep the point with the
fewest forward passes whose accuracy is within a tolerance of dense's, then confirm it on a
disjoint check slice, so the number reported was not fitted to the problems it is reported on.

Decoding is the bench's (`run_bench`: one engine, every configuration on each prompt before the
next); this module adds the grid, the selection rule and the check. Knows nothing about printing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dllm_viz.bench import BASELINE, parse_config, run_bench, set_options, summarize_bench
from dllm_viz.config import DecodeConfig
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies.pipeline import Pipeline
from dllm_viz.sweep import MAX_POINTS
from dllm_viz.tasks import Problem

# Accuracy is a fraction in the bench's tables; the tolerance is in accuracy points (percent).
POINTS = 100.0
# Slack for the tolerance comparison: (0.50 - 0.49) * 100 is 1.0000000000000009 in floats, and
# a point exactly at the tolerance must qualify.
TOLERANCE_SLACK = 1e-9


@dataclass(frozen=True, slots=True)
class Grid:
    """Knob values to try, every combination of them.

    Attributes:
        spec: what the user wrote, e.g. 'delta_p=0.9,0.95,0.97;m=1,2'.
        knobs: the knob names, in the order written.
        values: per knob, its values as written (text; the component's parser types them).
    """

    spec: str
    knobs: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]

    def points(self) -> list[dict[str, str]]:
        """Every combination, the first knob varying slowest ('earlier grid point' follows this order)."""
        return [dict(zip(self.knobs, combo, strict=True)) for combo in itertools.product(*self.values)]


def parse_grid(spec: str) -> Grid:
    """Read `name=v1,v2,...;name=v1,...` (knobs separated by ';', values by ',').

    Raises:
        ValueError: an empty grid, a part without '=', a knob with no value, a knob or a value
            named twice, or more than MAX_POINTS combinations (the message shows the form).
    """
    form = "write name=v1,v2;name=v1,v2, e.g. 'delta_p=0.9,0.95,0.97;m=1,2'"
    knobs: list[str] = []
    values: list[tuple[str, ...]] = []
    for part in (p.strip() for p in spec.split(";")):
        if not part:
            continue
        name, sep, texts = part.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise ValueError(f"cannot read grid part {part!r} of --grid {spec!r}; {form}")
        if name in knobs:
            raise ValueError(f"--grid {spec!r} names {name!r} twice; give all its values in one part")
        items = tuple(t.strip() for t in texts.split(",") if t.strip())
        if not items:
            raise ValueError(f"grid knob {name!r} of --grid {spec!r} has no value; {form}")
        if len(set(items)) < len(items):
            raise ValueError(f"grid knob {name!r} of --grid {spec!r} repeats a value; give each value once")
        knobs.append(name)
        values.append(items)
    if not knobs:
        raise ValueError(f"--grid {spec!r} names no knob; {form}")
    count = math.prod(len(v) for v in values)
    if count > MAX_POINTS:
        raise ValueError(f"--grid {spec!r} has {count} points, more than {MAX_POINTS}; give fewer values")
    return Grid(spec=spec, knobs=tuple(knobs), values=tuple(values))


def grid_configs(policy: str, grid: Grid, options: Mapping[str, Any] | None = None, *,
                 default_block: str = "fixed") -> dict[str, Pipeline]:
    """Bench label -> Pipeline of every grid point of configuration `policy` (e.g. 'cora' and
    delta_p=0.9,m=1 -> 'cora(delta_p=0.9,m=1)'); `options` and `default_block` are as in
    `parse_config`, and a grid value wins over the options.

    Raises:
        ValueError: `policy` is the dense baseline, a grid knob that no component of `policy` has
            or a bad value (named with its grid point), or two points that are the same
            configuration.
    """
    if policy.strip() == BASELINE:
        raise ValueError(f"--policy {policy!r} is the baseline every point is measured against; give the "
                         "configuration to calibrate, e.g. cora or adablock+threshold")
    configs: dict[str, Pipeline] = {}
    for point in grid.points():
        label = set_options(policy, point)
        try:
            pipe = parse_config(label, options, default_block=default_block)
        except ValueError as exc:
            raise ValueError(f"grid point {label}: {exc}") from None
        same = next((other for other, known in configs.items() if known == pipe), None)
        if same is not None:
            raise ValueError(f"grid points {same} and {label} are the same configuration; give each value once")
        configs[label] = pipe
    return configs


def knob_value(pipe: Pipeline, name: str) -> Any:
    """The value field `name` has in whichever component of `pipe` has it (typed, for the JSON)."""
    for component in (pipe.rule, pipe.block, pipe.extrapolate, pipe.stop):
        if component is not None and hasattr(component, name):
            return getattr(component, name)
    raise KeyError(name)


def check_tolerance(tolerance: float) -> None:
    """Raises ValueError unless `tolerance` is a number of accuracy points in [0, 100]."""
    if not (math.isfinite(tolerance) and 0.0 <= tolerance <= POINTS):
        raise ValueError(f"`--tolerance` is in accuracy points and must be in [0, 100], got {tolerance}; "
                         "pass e.g. --tolerance 1.0")


def loss_points(accuracy: float, dense_accuracy: float) -> float:
    """Accuracy points lost against dense (negative when the point beats dense)."""
    return (dense_accuracy - accuracy) * POINTS


def within_tolerance(accuracy: float, dense_accuracy: float, tolerance: float) -> bool:
    """Whether `accuracy` (a fraction) is at most `tolerance` points below dense's, the edge included."""
    return loss_points(accuracy, dense_accuracy) <= tolerance + TOLERANCE_SLACK


@dataclass(frozen=True, slots=True)
class Choice:
    """The selected grid point.

    Attributes:
        index: its position in the grid's order.
        qualified: it is within the tolerance of dense; False means no point was, and `index` is
            the most accurate one instead.
    """

    index: int
    qualified: bool


def choose_point(points: Sequence[tuple[float, float]], dense_accuracy: float, tolerance: float) -> Choice:
    """CORA-Diff's selection: the fewest mean NFE among the points within `tolerance` of dense.

    Args:
        points: per grid point, (accuracy as a fraction, mean NFE), in grid order.
        dense_accuracy: dense's accuracy on the same slice (a fraction).
        tolerance: accuracy points (percent) a point may lose against dense.

    Ties on NFE go to the higher accuracy, then to the earlier point. When no point qualifies,
    the most accurate one is returned (ties: fewer NFE, then earlier) with `qualified` False.

    Raises:
        ValueError: no point, or a tolerance outside [0, 100].
    """
    if not points:
        raise ValueError("a calibration needs at least one grid point")
    check_tolerance(tolerance)
    order = range(len(points))
    qualifying = [i for i in order if within_tolerance(points[i][0], dense_accuracy, tolerance)]
    if qualifying:
        return Choice(min(qualifying, key=lambda i: (points[i][1], -points[i][0], i)), True)
    return Choice(min(order, key=lambda i: (-points[i][0], points[i][1], i)), False)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Both slices' results and the chosen point.

    Attributes:
        calibration: per configuration (dense first, then the grid in order) on the calibration
            slice: accuracy, mean_nfe, nfe_speedup, loss_points, within, lost / gained / sign_p
            (paired against dense: whether a loss within the tolerance is told apart from
            noise; dllm_viz/bench.py), cut_off, n.
        check: the same columns for dense and the chosen point on the check slice.
        chosen: the chosen point's label.
        qualified: see Choice.
        holds: the chosen point is still within the tolerance on the check slice.
    """

    calibration: pd.DataFrame
    check: pd.DataFrame
    chosen: str
    qualified: bool
    holds: bool


TABLE_COLUMNS = ("accuracy", "mean_nfe", "nfe_speedup", "loss_points", "within", "lost", "gained", "sign_p",
                 "cut_off", "n")


def slice_table(rows: pd.DataFrame, tolerance: float) -> pd.DataFrame:
    """Bench rows of one slice -> TABLE_COLUMNS per configuration, ratios against that slice's dense."""
    summary = summarize_bench(rows)
    dense = float(summary.loc[BASELINE, "accuracy"])
    table = summary[["accuracy", "mean_nfe", "nfe_speedup", "lost", "gained", "sign_p", "cut_off", "n"]].copy()
    table["loss_points"] = [loss_points(float(a), dense) for a in table["accuracy"]]
    table["within"] = [within_tolerance(float(a), dense, tolerance) for a in table["accuracy"]]
    return table[list(TABLE_COLUMNS)]


def calibrate(
    adapter: ModelAdapter,
    calibration: Sequence[Problem],
    check: Sequence[Problem],
    dense: Pipeline,
    points: Mapping[str, Pipeline],
    config: DecodeConfig,
    tolerance: float,
    *,
    on_row: Callable[[str, dict[str, Any]], None] | None = None,
    finished: Mapping[str, pd.DataFrame] | None = None,
    unsafe_exec: bool = False,
) -> Calibration:
    """Dense and every point on `calibration`, the selection, then dense and the choice on `check`.

    `on_row` gets (slice name, bench row) as each row is measured (progress, the rows file);
    `finished` holds, per slice name ("calibration", "check"), rows of an interrupted run, which
    are not measured again (only those of this slice's problems and configurations count).

    Raises:
        ValueError: an empty slice, slices that share a problem id, no point, or a bad tolerance.
        SandboxUnavailableError: code problems, no usable bwrap, and `unsafe_exec` off.
    """
    check_tolerance(tolerance)
    if not points:
        raise ValueError("a calibration needs at least one grid point")
    if not calibration or not check:
        raise ValueError("both the calibration and the check slice need at least one problem")
    shared = sorted({p.problem_id for p in calibration} & {p.problem_id for p in check})
    if shared:
        raise ValueError(f"the calibration and check slices share problem ids {shared[:3]}; the prompt set "
                         "repeats ids, give one whose ids are unique")

    def run(name: str, problems: Sequence[Problem], configs: dict[str, Pipeline]) -> pd.DataFrame:
        report = None if on_row is None else (lambda row: on_row(name, row))
        prior = None if finished is None else finished.get(name)
        if prior is not None:
            ids = {p.problem_id for p in problems}
            prior = prior[prior["config"].isin(list(configs)) & prior["problem_id"].astype(str).isin(ids)]
        return run_bench(adapter, problems, configs, config, on_row=report, unsafe_exec=unsafe_exec,
                         finished=None if prior is None or prior.empty else prior.reset_index(drop=True))

    first = slice_table(run("calibration", calibration, {BASELINE: dense, **points}), tolerance)
    labels = list(points)
    dense_accuracy = float(first.loc[BASELINE, "accuracy"])
    choice = choose_point([(float(first.loc[label, "accuracy"]), float(first.loc[label, "mean_nfe"]))
                           for label in labels], dense_accuracy, tolerance)
    chosen = labels[choice.index]
    second = slice_table(run("check", check, {BASELINE: dense, chosen: points[chosen]}), tolerance)
    return Calibration(calibration=first, check=second, chosen=chosen, qualified=choice.qualified,
                       holds=bool(second.loc[chosen, "within"]))


_COUNTS = frozenset({"lost", "gained", "cut_off", "n"})


def table_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready rows of a slice table, each with its configuration label."""
    out = []
    for label, row in table.iterrows():
        record: dict[str, Any] = {"config": str(label)}
        for column in TABLE_COLUMNS:
            value = row[column]
            record[column] = bool(value) if column == "within" else int(value) if column in _COUNTS else float(value)
        out.append(record)
    return out
