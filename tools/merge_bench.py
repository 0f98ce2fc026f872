"""Join `bench --out` files of disjoint problem slices into one, so the summary covers them all.

Why: `bench` runs one process, one torch thread; on a 2-core machine a 200-problem bench runs as
two processes (`--skip 0 --n 100` and `--skip 100 --n 100`, same other options), each writing its
own --out. This writes their rows, in the order given, to a new file whose settings are those
of the whole run (the problems of every part, in order), so that bench with the whole run's
options and `--resume` finds every row done and prints the summary, sweep frontier and
positions against it without loading the model:

    python tools/merge_bench.py rows_0.csv rows_100.csv --out rows.csv
    python -m dllm_viz bench <the same options> --skip 0 --n 200 --out rows.csv --resume

Lanes of several tasks (`--tasks a,b --skip 0 --n 50` and `--skip 50 --n 50`) list their problems
a0 b0 | a1 b1 where the whole run lists a0 a1 b0 b1; the merged file keeps the lanes' order, and
`--resume` takes it because a run's problems compare in any order (dllm_viz/cli/results.py,
ORDER_FREE: each row is one problem decoded on its own).

`--configs dense` keeps the named configurations' rows only, with settings as if bench had run
those alone, so the file resumes under `--policies dense`: how tools/swap_model.sh keeps the new
bundled model's dense rows on item 5 for candidates to be paired with (training/bundled_bench).

Refuses parts whose settings differ in anything but their problems, parts that share a problem,
a --configs name no part ran, and an --out that exists (finished results are never replaced).
Wall-clock columns of the parts were measured in different processes, so they compare within a
part's rows, not across parts.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_files import bench_settings, whole_rows  # tools/ is not a package: found through sys.path

from dllm_viz.bench import ROW_COLUMNS
from dllm_viz.cli.results import differing_settings, write_settings


def settings_of(part: Path) -> dict[str, Any]:
    """The settings `bench --out` kept beside `part` (checked to hold a bench run's problems:
    tools/bench_files.py)."""
    return bench_settings(part)


def merged_settings(parts: list[Path]) -> dict[str, Any]:
    """The first part's settings with every part's problems, in order; refuses mismatches."""
    first = settings_of(parts[0])
    problems: list[str] = []
    for part in parts:
        settings = settings_of(part)
        differ = differing_settings(first, settings, ignore=frozenset({"problems"}))
        if differ:
            raise SystemExit(f"{part}: settings differ from {parts[0]} in {', '.join(differ)}; "
                             "merge only slices of one run")
        shared = set(problems) & set(settings["problems"])
        if shared:
            raise SystemExit(f"{part}: problem {sorted(shared)[0]!r} is also in an earlier part; "
                             "merge disjoint slices (--skip)")
        problems += settings["problems"]
    return {**first, "problems": problems}


def merged_rows(parts: list[Path]) -> list[dict[str, Any]]:
    """Every part's whole rows, in order. A part whose last row was cut short by a kill loses
    that row (named on stderr): `bench --resume` on the merged file measures it again."""
    rows: list[dict[str, Any]] = []
    for part in parts:
        whole, cut_short, _ = whole_rows(part)  # values checked, so the merged file resumes
        problems = set(settings_of(part)["problems"])
        stray = next((row["problem_id"] for row in whole if row["problem_id"] not in problems), None)
        if stray is not None:  # its settings are another run's: the merged settings would not list the row
            raise SystemExit(f"{part}: its row of problem {stray!r} is not among the problems of its settings file; "
                             "the settings file beside it belongs to another run, so merge the files `bench --out` "
                             "wrote together")
        if cut_short:
            print(f"{part}: its last row was cut short and is left out; `bench --resume` on the merged "
                  "file measures it again", file=sys.stderr)
        rows += whole
    return rows


def only_configs(settings: dict[str, Any], rows: list[dict[str, Any]],
                 names: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The settings and rows of configurations `names` alone (bench's settings list each configuration
    it ran by name, so a bench of those alone has these settings).

    Raises:
        SystemExit: a name the parts did not run (the message lists those they did).
    """
    if not names:
        raise SystemExit("--configs names no configuration; give comma-separated names such as dense")
    ran = settings["configs"]
    missing = [name for name in names if name not in ran]
    if missing:
        raise SystemExit(f"--configs {','.join(missing)}: not run by these parts; they ran {', '.join(ran)}")
    kept = {name: ran[name] for name in ran if name in names}  # bench's order, as a bench of these alone
    return {**settings, "configs": kept}, [row for row in rows if row["config"] in kept]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", type=Path, nargs="+", help="`bench --out` csv files, in problem order")
    parser.add_argument("--out", type=Path, required=True, help="the merged csv (must not exist)")
    parser.add_argument("--configs", help="keep these configurations' rows only (comma-separated names, "
                                          "as bench's summary names them, e.g. dense)")
    args = parser.parse_args(argv)
    if args.out.exists():
        raise SystemExit(f"--out {str(args.out)!r} already exists; choose another path")
    settings = merged_settings(args.parts)
    rows = merged_rows(args.parts)
    if args.configs is not None:
        names = [name.strip() for name in args.configs.split(",") if name.strip()]
        settings, rows = only_configs(settings, rows, names)
    try:  # as `bench --out`: its folder is made when missing
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("x", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(ROW_COLUMNS)
            writer.writerows([row.get(column, "") for column in ROW_COLUMNS] for row in rows)  # jsonl: keys as written
        write_settings(args.out, settings)
    except OSError as exc:
        raise SystemExit(f"cannot write --out {str(args.out)!r} ({exc.strerror or type(exc).__name__}); "
                         "choose a writable path") from None
    print(f"wrote {args.out}: {len(rows)} rows of {len(settings['problems'])} problems from {len(args.parts)} parts",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
