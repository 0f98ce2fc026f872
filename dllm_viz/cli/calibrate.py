"""`python -m dllm_viz calibrate`: choose a policy's operating point on one slice, check it on another.

CORA-Diff's protocol (docs/ALGORITHMS.md §6.1; dllm_viz/calibrate.py): the grid point with the
fewest NFE within --tolerance accuracy points of dense on problems 0..n-1, then dense and that
point on problems n..n+check_n-1. docs/TESTBED.md says how a family default is recalibrated.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dllm_viz.cli.bench import table_text
from dllm_viz.cli.options import (
    add_decode_options,
    add_model_options,
    add_results_options,
    add_scoring_options,
    check_options_apply,
    check_pipelines,
    check_resume,
    check_scoring,
    data_setting,
    decode_config,
    load_model,
    model_block_defaults,
    model_settings,
    passed_options,
    policy_fields,
    recorded_pipeline,
    warn_scoring,
)
from dllm_viz.cli.results import ResultsFile
from dllm_viz.writable import check_new_file

if TYPE_CHECKING:  # the library module imports pandas and the bench; the CLI loads them only to run
    import pandas as pd

    from dllm_viz.calibrate import Calibration


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `calibrate` subcommand."""
    parser = subparsers.add_parser(
        "calibrate", help="choose a policy's operating point on a calibration slice, check it on a disjoint one",
        description="Run dense and every grid point of --policy on problems 0..n-1; choose the point with the "
                    "fewest mean NFE whose accuracy is within --tolerance points of dense (ties: higher "
                    "accuracy, then the earlier point); run dense and it on problems n..n+check_n-1 and report "
                    "both slices (CORA-Diff's calibration protocol).")
    parser.add_argument("--policy", required=True,
                        help="the configuration to calibrate, named as in bench --policies, e.g. cora, "
                             "adablock+threshold, 'cora(m=2)+kalman'")
    parser.add_argument("--grid", required=True,
                        help="knob values to try, every combination: name=v1,v2;name=v1,v2, e.g. "
                             "'delta_p=0.9,0.95,0.97;m=1,2' or 'delimiter_threshold=0.3,0.5,0.7,0.9'; each "
                             "knob goes to the component of --policy that has it")
    parser.add_argument("--tasks", default="hard",
                        help="comma-separated tasks, as bench --tasks (default: hard)")
    parser.add_argument("--data", type=Path, action="append", default=None,
                        help="data file (or 'hub') for gsm8k / humaneval, as bench --data")
    parser.add_argument("--prompts", type=Path, default=None,
                        help="a jsonl prompt set instead of --tasks (as bench --prompts)")
    parser.add_argument("--n", type=int, default=100,
                        help="calibration slice: problems 0..n-1 of each task (default: 100)")
    parser.add_argument("--check-n", type=int, default=100,
                        help="check slice: problems n..n+check_n-1 of each task, disjoint from it (default: 100)")
    parser.add_argument("--tolerance", type=float, default=1.0,
                        help="accuracy points below dense a point may lose on the calibration slice (default: 1.0)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the grid, per-point results, the chosen point, the check and the settings to "
                             "this .json file (never replaces an existing file)")
    add_results_options(parser, record="every measured row with its slice (.csv, else jsonl)", unit="rows",
                        flag="--rows")
    parser.add_argument("--dense-rows", type=Path, default=None,
                        help="reuse dense's rows from the --rows file of another calibrate run with the same model, "
                             "prompts, slices and decode settings (only --policy, --grid and the knobs differ), or "
                             "from a `bench --out` file of the same model, decode settings and dense over generated "
                             "--tasks (its rows of this run's two slices' problems): dense is the same measurement "
                             "for every policy, and on a long canvas it is most of a run's time; the rows reused "
                             "are copied into --rows")
    add_scoring_options(parser)
    add_model_options(parser)
    add_decode_options(parser, components=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Calibrate, print both slices' tables, and write --out; returns the exit status."""
    from dllm_viz.bench import cut_off_warning, parse_config
    from dllm_viz.calibrate import calibrate, check_tolerance, grid_configs, knob_value, parse_grid, table_records

    for flag, value in (("--n", args.n), ("--check-n", args.check_n)):
        if value < 1:
            raise ValueError(f"`{flag}` must be >= 1, got {value}")
    check_tolerance(args.tolerance)
    _check_out(args.out)
    check_resume(args, "--rows")
    _check_model_options(args)
    grid = parse_grid(args.grid)
    both = sorted(set(grid.knobs) & set(passed_options(args)))
    if both:
        flag = "--" + both[0].replace("_", "-")
        raise ValueError(f"{flag} is fixed and swept by --grid at once; drop {flag} or {both[0]!r} from --grid")
    options = {name: getattr(args, name, None) for name in policy_fields()}
    default_block = model_block_defaults(args, options)  # a block-causal model's aligned blocks, as bench
    points = grid_configs(args.policy, grid, options, default_block=default_block)
    dense = parse_config("dense", options, default_block=default_block)
    config = decode_config(args)
    check_options_apply(args, [dense, *points.values()])
    check_pipelines([dense, *points.values()], config.gen_length)
    calibration = _slice(args, 0, args.n, "calibration")
    check = _slice(args, args.n, args.check_n, "check")
    check_scoring(args, [*calibration, *check])

    settings = {"command": "calibrate", **model_settings(args), "policy": args.policy, "grid": args.grid,
                "tasks": None if args.prompts is not None else args.tasks,
                "prompts": None if args.prompts is None else str(args.prompts), "data": data_setting(args), "n": args.n,
                "check_n": args.check_n, "tolerance": args.tolerance, "decode": config.to_dict(),
                "options": {name: options[name] for name in passed_options(args)},
                "dense": recorded_pipeline(dense, args),
                "points": {label: recorded_pipeline(pipe, args) for label, pipe in points.items()}}
    rows_file_settings = {**settings, "problems": [p.problem_id for p in (*calibration, *check)]}
    if args.dense_rows is not None and args.rows is not None and args.dense_rows.resolve() == args.rows.resolve():
        raise ValueError(f"--dense-rows {str(args.dense_rows)!r} is this run's --rows file; give the rows file of "
                         "another policy's calibration (its own rows are resumed with --resume)")
    rows_file = _open_rows(args, rows_file_settings) if args.rows is not None else None
    known = list(rows_file.rows) if rows_file is not None else []
    if known:
        print(f"resuming {args.rows}: {len(known)} rows already measured", file=sys.stderr)
    if args.dense_rows is not None:
        slices = {"calibration": [p.problem_id for p in calibration], "check": [p.problem_id for p in check]}
        borrowed = _new_rows(_dense_rows(args.dense_rows, rows_file_settings, slices), known)
        print(f"reusing {len(borrowed)} dense rows of {args.dense_rows}", file=sys.stderr)
        known += borrowed
        for row in borrowed if rows_file is not None else ():
            rows_file.append(row)  # the rows file holds every row its report used
    finished = _finished(known) if known else None

    def progress(name: str, row: dict) -> None:
        if rows_file is not None:
            rows_file.append({"slice": name, **row})
        print(f"[{name}] {row['config']} {row['problem_id']} nfe={row['nfe']} correct={row['correct']}",
              file=sys.stderr, flush=True)

    try:
        adapter = load_model(args)
        result = calibrate(adapter, calibration, check, dense, points, config, args.tolerance, on_row=progress,
                           finished=finished, unsafe_exec=args.unsafe_exec)
    finally:
        if rows_file is not None:
            rows_file.close()
    warn_scoring(args, [*calibration, *check])
    source = f"prompts={args.prompts}" if args.prompts is not None else f"tasks={args.tasks}"
    print(f"model={args.model} {source} policy={args.policy} grid={args.grid} tolerance={args.tolerance} "
          f"gen_length={config.gen_length}")
    for name, table, size in (("calibration", result.calibration, len(calibration)),
                              ("check", result.check, len(check))):
        print(f"{name} slice ({size} problems):")
        print(table_text(table))
        if (warning := cut_off_warning(table)) is not None:
            print(f"warning: {warning}", file=sys.stderr)
    print(_verdict(result, args.tolerance))
    if args.out is not None:
        report = {
            "settings": settings,
            "grid": [{"config": label, "values": {knob: knob_value(pipe, knob) for knob in grid.knobs},
                      "pipeline": settings["points"][label]} for label, pipe in points.items()],
            "calibration": {"problems": [p.problem_id for p in calibration],
                            "results": table_records(result.calibration)},
            "chosen": {"config": result.chosen, "qualified": result.qualified,
                       "values": {knob: knob_value(points[result.chosen], knob) for knob in grid.knobs}},
            "check": {"problems": [p.problem_id for p in check], "results": table_records(result.check),
                      "holds": result.holds},
        }
        with args.out.open("x", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2, default=str)
        print(f"wrote {args.out}")
    return 0


def _check_model_options(args: argparse.Namespace) -> None:
    """Refuse a bad --threads or --device before the --rows file is made: load_model checks them
    only after it, so `--threads 0` left an empty rows file behind, and rerunning with the value
    fixed was refused because that file 'already exists'.

    Raises:
        ValueError: --threads below 1 or $DLLM_VIZ_THREADS not a thread count.
        ModelLoadError: a device that is not one, or is not available here.
    """
    from dllm_viz.models.loading import resolve_device
    from dllm_viz.threads import requested_threads

    requested_threads(args.threads)
    resolve_device(args.device)


def _open_rows(args: argparse.Namespace, settings: dict) -> ResultsFile:  # type: ignore[type-arg]
    """The --rows file (ResultsFile), its errors naming --rows: ResultsFile is shared with bench and
    eval, whose results file is --out, and calibrate's --out is the .json report, so 'pass --resume
    to continue it, or choose a new --out' sent the user to the wrong flag."""
    try:
        return ResultsFile(args.rows, settings, resume=args.resume, columns=_row_file_columns())
    except ValueError as exc:
        raise ValueError(str(exc).replace("--out", "--rows")) from None


def _row_file_columns() -> tuple[str, ...]:
    from dllm_viz.bench import ROW_COLUMNS

    return ("slice", *ROW_COLUMNS)


def _finished(rows: list[dict]) -> dict:  # type: ignore[type-arg]
    """Rows read back from --rows, per slice, with run_bench's types."""
    import pandas as pd

    from dllm_viz.bench import ROW_COLUMNS
    from dllm_viz.cli.bench import typed_rows

    table = pd.DataFrame(rows, columns=list(_row_file_columns()))
    return {str(name): typed_rows(part[list(ROW_COLUMNS)].reset_index(drop=True))
            for name, part in table.groupby("slice", sort=False)}


# What may differ between two calibrations whose dense rows are the same measurement: dense's own
# configuration is its own settings key ("dense"), so the knobs passed for the policy do not matter.
POLICY_SETTINGS = frozenset({"policy", "grid", "options", "points"})


def _dense_rows(path: Path, settings: dict, slices: dict[str, list[str]]) -> list[dict]:  # type: ignore[type-arg]
    """Dense's rows for this run's `slices` (name -> problem ids) in `path`: the --rows file of
    another calibration, refused unless its settings are this run's apart from the policy, its
    grid and its knobs; or a `bench --out` file, refused unless its model, decode settings, data
    and dense configuration are this run's (its rows are matched by problem id and given the slice
    that holds the problem, so the bench of item 5 feeds both slices of a calibration)."""
    from dllm_viz.bench import BASELINE
    from dllm_viz.cli.results import as_saved, read_settings

    if not path.is_file():
        raise ValueError(f"--dense-rows {str(path)!r} is not a file; give the --rows file of another calibrate run "
                         "or a bench --out file")
    try:
        saved = read_settings(path)
    except ValueError as exc:
        raise ValueError(f"cannot reuse --dense-rows: {exc}; give a --rows file calibrate wrote or a bench --out "
                         "file") from None
    mine = as_saved(settings)
    if saved.get("command") == "calibrate":
        _refuse_other(path, saved, mine, ignore=POLICY_SETTINGS)
        return [row for row in _whole_rows(path, _row_file_columns()) if row.get("config") == BASELINE]
    if saved.get("command") == "bench":
        return _bench_dense_rows(path, saved, mine, slices)
    raise ValueError(f"--dense-rows {str(path)!r} was not written by calibrate --rows or bench --out; give such a file")


# What a bench --out file's settings share with a calibration's: the rest (its configurations, its
# problems) is checked row by row.
BENCH_SHARED = ("model", "model_weights", "decode", "data")


def _bench_dense_rows(path: Path, saved: dict, mine: dict,  # type: ignore[type-arg]
                      slices: dict[str, list[str]]) -> list[dict]:  # type: ignore[type-arg]
    """Dense's rows of a bench --out file for the problems of `slices`, each with its slice."""
    from dllm_viz.bench import BASELINE, ROW_COLUMNS

    if mine.get("prompts") is not None:
        raise ValueError(f"cannot reuse the bench rows of --dense-rows {str(path)!r} with --prompts: a bench file "
                         "keeps problem ids, not prompts; reuse them with generated --tasks, or give the --rows "
                         "file of another calibration")
    _refuse_other(path, {k: saved[k] for k in BENCH_SHARED if k in saved}, {k: mine.get(k) for k in BENCH_SHARED})
    dense = (saved.get("configs") or {}).get(BASELINE)
    if dense != mine["dense"]:
        ran = "no dense" if dense is None else "a dense of another block length or options"
        raise ValueError(f"cannot reuse --dense-rows {str(path)!r}: its bench ran {ran}; give a bench file "
                         "run with this calibration's --block-length and decode options")
    slice_of = {problem: name for name, problems in slices.items() for problem in problems}
    return [{"slice": slice_of[str(row["problem_id"])], **row} for row in _whole_rows(path, ROW_COLUMNS)
            if row.get("config") == BASELINE and str(row.get("problem_id")) in slice_of]


def _refuse_other(path: Path, saved: dict, mine: dict, ignore: frozenset[str] = frozenset()) -> None:  # type: ignore[type-arg]
    """Refuse --dense-rows `path` when its settings differ from this run's outside `ignore`."""
    from dllm_viz.cli.results import differing_settings, show_differences

    differ = differing_settings(saved, mine, ignore=ignore)
    if differ:
        raise ValueError(f"cannot reuse --dense-rows {str(path)!r}: its dense ran with other settings "
                         f"({show_differences(saved, mine, differ)}); rerun with the same options as that run")


def _whole_rows(path: Path, columns: tuple[str, ...]) -> list[dict]:  # type: ignore[type-arg]
    """The file's whole rows: a row its command is still writing is left out."""
    from dllm_viz.cli.results import read_rows

    rows, _ = read_rows(path, columns)
    return rows


def _new_rows(rows: list[dict], known: list[dict]) -> list[dict]:  # type: ignore[type-arg]
    """`rows` less those whose (slice, config, problem) `known` already holds, each once."""
    def key(row: dict) -> tuple[str, str, str]:  # type: ignore[type-arg]
        return str(row.get("slice")), str(row.get("config")), str(row.get("problem_id"))

    seen = {key(row) for row in known}
    fresh = []
    for row in rows:
        if key(row) not in seen:
            seen.add(key(row))
            fresh.append(row)
    return fresh


def _check_out(out: Path | None) -> None:
    """Refuse before any decoding an --out that would be replaced or cannot be written."""
    if out is None:
        return
    if out.suffix != ".json":
        raise ValueError(f"`--out` writes a .json report, got {str(out)!r}; name it e.g. calibration.json")
    check_new_file(out, "--out")


def _slice(args: argparse.Namespace, skip: int, n: int, name: str) -> list:  # type: ignore[type-arg]
    """Problems skip..skip+n-1 of each task; a short slice is an error (it would not be the one asked for)."""
    from dllm_viz.cli.bench import problem_set
    from dllm_viz.cli.options import task_list

    problems = problem_set(args, skip, n, note_short=False)
    sets = 1 if args.prompts is not None else len(task_list(args.tasks))
    if len(problems) < n * sets:
        raise ValueError(f"the {name} slice (problems {skip}..{skip + n - 1}) has only {len(problems)} problems, "
                         f"not {n * sets}: the prompt set is too small; lower --n or --check-n")
    return problems


def _verdict(result: Calibration, tolerance: float) -> str:
    """The run's conclusion in one line. Accuracy is said against dense with its sign (loss_points
    counts a loss as positive; printed as is, a point 2 below dense read "+2.0 points")."""
    row = result.calibration.loc[result.chosen]
    if result.qualified:
        head = (f"chosen: {result.chosen} ({row['nfe_speedup']:.2f}x fewer NFE than dense, "
                f"{_against_dense(row)}) within {tolerance} points of dense on the calibration slice")
    else:
        head = (f"no grid point is within {tolerance} points of dense on the calibration slice; the most "
                f"accurate is {result.chosen} ({_against_dense(row)})")
    check = result.check.loc[result.chosen]
    tail = "holds" if result.holds else "does NOT hold"
    return (f"{head}; check slice: {check['nfe_speedup']:.2f}x, {_against_dense(check)}, "
            f"the tolerance {tail}")


def _against_dense(row: pd.Series) -> str:
    """'-2.0 points against dense' for a point 2 below dense, '+1.0' for one above."""
    return f"{-row['loss_points']:+.1f} points against dense"
