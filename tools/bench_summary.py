"""What the finished rows of `bench --out` files say so far, without decoding anything.

Why: a bench of every configuration over 200 hard problems at gen 256 takes hours on two CPU
cores, and a session may end before it does. Its --out files keep every finished row (and
`bench --resume` continues them later), but bench prints its summary only at the end. This
prints the same report (per configuration, per task, the sweep's frontier and where every other
configuration sits against it) over the problems that every configuration of the files has
finished, and says how many that is:

    python tools/bench_summary.py rows_chain.csv rows_breadth.csv \\
        --sweep 'threshold(threshold=0.5:0.99:6)' --pair threshold+kalman threshold

Files from parallel processes may be given together (slices of one run: their settings must agree
but for the problems, which must not overlap; wall-clock columns then compare within a file's rows
only).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_files import bench_frame, check_one_run  # tools/ is not a package: found through sys.path

from dllm_viz.bench import BASELINE, paired
from dllm_viz.cli.bench import print_report
from dllm_viz.metrics import format_p
from dllm_viz.sweep import parse_sweep


def bench_rows(path: Path) -> pd.DataFrame:
    """The whole rows of one `bench --out` csv, typed as bench's own (checked: tools/bench_files.py)."""
    return bench_frame(path)


def finished_problems(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of the problems every configuration (dense included) has finished, in file order."""
    configs = rows["config"].unique()
    counts = rows.groupby("problem_id")["config"].nunique()
    whole = set(counts[counts == len(configs)].index)
    return rows[rows["problem_id"].isin(whole)].reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+", help="`bench --out` csv files")
    parser.add_argument("--sweep", help="the sweep the run was given (its points are configurations of the files)")
    parser.add_argument("--pair", nargs=2, action="append", default=[], metavar=("CONFIG", "BASE"),
                        help="also pair CONFIG with BASE problem by problem (lost, gained, sign test), e.g. "
                             "--pair threshold+kalman threshold for what CE adds; repeatable")
    args = parser.parse_args(argv)
    try:  # as bench reads it: '' is an error, not "no sweep"
        sweep = parse_sweep(args.sweep) if args.sweep is not None else None
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    parts = [bench_rows(path) for path in args.files]
    check_one_run(args.files)
    for path, part in zip(args.files, parts, strict=True):
        if BASELINE not in set(part["config"]):
            raise SystemExit(f"{path}: has no {BASELINE!r} rows yet, so nothing can be compared")
    seen: set[str] = set()
    for path, part in zip(args.files, parts, strict=True):
        mine = set(part["problem_id"])
        if mine & seen:
            raise SystemExit(f"{path}: problem {sorted(mine & seen)[0]!r} is also in an earlier file")
        seen |= mine
    everything = pd.concat(parts, ignore_index=True)
    rows = finished_problems(everything)
    if rows.empty:
        raise SystemExit("no problem is finished under every configuration yet")
    if sweep is not None and not set(sweep.labels) <= set(rows["config"]):
        missing = sorted(set(sweep.labels) - set(rows["config"]))
        raise SystemExit(f"--sweep {args.sweep!r}: the files have no rows for {missing[0]!r}; give the run's sweep")
    for label, base in args.pair:  # before the report, so a typo ends the run with its one line
        for name in (label, base):
            if name not in set(rows["config"]):
                raise SystemExit(f"--pair {label} {base}: no rows for configuration {name!r}; the rows hold "
                                 f"{sorted(set(rows['config']))}")
    problems = rows["problem_id"].nunique()
    started = everything["problem_id"].nunique()
    summary = print_report(rows, sweep, f"{problems} problems finished under every configuration ({started} "
                                        f"started) in {', '.join(str(path) for path in args.files)}")
    for label, base in args.pair:
        try:
            result = paired(rows, label, base)
        except ValueError as exc:
            raise SystemExit(f"--pair {label} {base}: {exc}") from exc
        print(f"{label} against {base}: lost {result.lost}, gained {result.gained} of {result.problems} problems "
              f"(sign test p = {format_p(result.sign_p)}); accuracy {summary.loc[label, 'accuracy']:.3f} against "
              f"{summary.loc[base, 'accuracy']:.3f}, mean NFE {summary.loc[label, 'mean_nfe']:.1f} against "
              f"{summary.loc[base, 'mean_nfe']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
