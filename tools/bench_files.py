"""Reading `bench --out` files and their settings for the scripts of tools/, refusing what is not one.

Why: researchers point tools/bench_summary.py, tools/merge_bench.py and tools/compare_models.py at
files that are still being written, were cut short by a kill, come from older versions, were saved
again by another program, or are of another kind altogether (an `eval --out` file, a settings
file). The library reads the whole rows of such a file (`dllm_viz.cli.results.read_rows`) but
checks no value; a bad one ended in a pandas traceback deep in a summary, and a column an older
version did not write came out as 0.000 in the report instead of "unknown". Every check here stops
the script with one line naming the file, the bad value and the fix (`SystemExit`, as the tools do).
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dllm_viz.bench import ROW_COLUMNS, ROW_KINDS
from dllm_viz.cli.bench import typed_rows
from dllm_viz.cli.results import differing_settings, read_rows, read_settings, settings_path

# Columns added to `bench --out` after its first version: an older file lacks them, and the
# summary reports what they measure as NaN (unknown) when they are absent.
LATER_COLUMNS = frozenset({"tokens", "cut_off", "candidate_flips", "redundant_refinement",
                           "redundant_answer_refinement"})
# The columns the first version wrote already (an older file has them too), less the free texts.
REQUIRED_COLUMNS = tuple(c for c in ROW_COLUMNS if c not in LATER_COLUMNS)
_FREE_TEXTS = frozenset(c for c, kind in ROW_KINDS.items() if kind == "text") - {"config", "problem_id"}
_BOOL_TEXTS = frozenset({"True", "False"})


def whole_rows(path: Path) -> tuple[list[dict[str, Any]], bool, set[str]]:
    """The whole rows of `bench --out` file `path` (checked, as written: csv values are text),
    whether a row cut short follows them, and the columns the file holds.

    Raises:
        SystemExit: `path` is no file, is not a results file, or holds a value bench cannot have
            written (the message names the file, the value and the fix).
    """
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise SystemExit(f"{path}: {what}; give `bench --out` csv files")
    try:
        rows, cut_short = read_rows(path, ROW_COLUMNS)
    except ValueError as exc:
        raise SystemExit(f"{path}: {exc}") from None
    if not rows and cut_short:
        _refuse_other_line_ends(path)
    columns = _columns(path, rows)
    check_rows(path, rows, columns)
    return rows, cut_short, columns


def bench_frame(path: Path) -> pd.DataFrame:
    """The whole rows of one `bench --out` file, typed as bench's own; the columns an older version
    did not write are left out, so the summary reports them as unknown (NaN), not as 0."""
    rows, _, columns = whole_rows(path)
    frame = typed_rows(pd.DataFrame(rows, columns=list(ROW_COLUMNS)))
    return frame.drop(columns=[c for c in LATER_COLUMNS if c not in columns]) if rows else frame


def check_rows(path: Path, rows: list[dict[str, Any]], columns: set[str]) -> None:
    """Refuse rows `bench --out` cannot have written: a column every bench file has missing, a value
    of a number or true/false column that is not one, an empty key, or a row given twice.

    Raises:
        SystemExit: the first such value, named with its row.
    """
    if not rows:
        return  # a file just started (header only, or empty): nothing to check yet
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise SystemExit(f"{path}: it has no {missing[0]!r} column, which every `bench --out` file has; "
                         "give a file written by `bench --out` (not e.g. `eval --out`)")
    seen: set[tuple[Any, Any]] = set()
    for number, row in enumerate(rows, start=1):
        where = f"row {number} (config {row.get('config')!r}, problem {row.get('problem_id')!r})"
        for column, kind in ROW_KINDS.items():
            if column not in columns or column in _FREE_TEXTS:
                continue
            value = row.get(column)
            if _empty(value):
                if kind == "number" and column in LATER_COLUMNS:
                    continue  # parts of an older and a newer run merged: unknown for the older rows
                raise SystemExit(f"{path}: {where} has no {column!r}; a bench killed mid-write leaves a "
                                 "cut row only at the end, so repair or remove this row")
            if kind != "text" and not _readable(value, kind):
                wanted = "a number" if kind == "number" else "True or False"
                raise SystemExit(f"{path}: {where} holds {value!r} in {column!r}, not {wanted}; repair or "
                                 "remove this row (was the file edited by hand, or two files joined with "
                                 "their headers?)")
        key = (row["config"], row["problem_id"])
        if key in seen:
            raise SystemExit(f"{path}: {where} is in the file twice; remove one (a file holds each "
                             "configuration's row of a problem once)")
        seen.add(key)


def _empty(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def _readable(value: Any, kind: str) -> bool:
    """Whether typed_rows reads `value` as a `kind` ("number" or "bool") value."""
    if kind == "bool":
        return isinstance(value, bool) or value in _BOOL_TEXTS
    if isinstance(value, bool):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _columns(path: Path, rows: list[dict[str, Any]]) -> set[str]:
    """The columns the file holds: a csv's header (read_rows fills the absent ones with ''), a
    jsonl's keys."""
    if path.suffix.lower() != ".csv":
        return {key for row in rows for key in row}
    with path.open(encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle), [])
    return set(header)


def _refuse_other_line_ends(path: Path) -> None:
    """A csv whose text holds no whole row at all because its lines end in \\n, where bench writes
    \\r\\n: saved again by pandas, a spreadsheet or an editor, every row of it reads as unfinished
    (a summary said "no 'dense' rows yet", a merge wrote 0 rows)."""
    if path.suffix.lower() != ".csv":
        return
    text = path.read_text(encoding="utf-8")
    if "\n" not in text or "\r\n" in text:
        return  # a header still being written, or a row cut short: no rows yet, rightly
    header = next(csv.reader([text.split("\n", 1)[0]]), [])
    if not set(header) <= set(ROW_COLUMNS):
        raise SystemExit(f"{path}: its columns {header} are not a `bench --out` file's; give a file written "
                         "by `bench --out`")
    raise SystemExit(f"{path}: its lines end in \\n where `bench --out` writes \\r\\n (was it saved again by "
                     "another program?), so no row of it reads as finished; write it back with \\r\\n line "
                     "ends (pandas: to_csv(..., index=False, lineterminator='\\r\\n'))")


def bench_settings(path: Path) -> dict[str, Any]:
    """The settings `bench --out` kept beside `path`, with the list of problem ids its slice holds.

    Raises:
        SystemExit: they are missing, unreadable, or not a bench run's (no list of problems).
    """
    try:
        settings = read_settings(path)
    except ValueError as exc:
        raise SystemExit(f"{path}: {exc}; use files written by `bench --out`") from None
    problems = settings.get("problems")
    if settings.get("command", "bench") != "bench" or not isinstance(problems, list) \
            or not all(isinstance(p, str) for p in problems):
        raise SystemExit(f"{path}: its settings file {settings_path(path).name!r} holds no bench run's list of "
                         "problems (it is another command's, or was edited); use files written by `bench --out`")
    return settings


def check_one_run(paths: list[Path]) -> None:
    """Refuse files that are not slices of one run: settings (model, configurations, decode
    options, data) that differ in anything but their problems. Their rows would otherwise be
    summarised as one configuration's (a threshold of 0.9 in one file and 0.5 in another read as
    one 'threshold')."""
    if len(paths) < 2:
        return
    first = bench_settings(paths[0])
    for path in paths[1:]:
        settings = bench_settings(path)
        # both ways: a key one version of bench did not write yet (results.ADDED_LATER) is no difference
        differ = sorted(set(differing_settings(first, settings, ignore=frozenset({"problems"})))
                        & set(differing_settings(settings, first, ignore=frozenset({"problems"}))))
        if differ:
            where, mine, theirs = first_difference(settings.get(differ[0]),
                                                   first.get(differ[0]), differ[0])
            raise SystemExit(f"{path}: its settings differ from {paths[0]}'s in {where} ({_short(mine)} against "
                             f"{_short(theirs)}); give only slices of one run (same options, other --skip)")


def first_difference(mine: Any, theirs: Any, where: str) -> tuple[str, Any, Any]:
    """The first place two settings values differ, as a dotted path and the two values there:
    `configs.threshold.rule.threshold`, 0.5 against 0.9, where the whole `configs` values shown side by
    side would be cut off before their first difference."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in sorted({*mine, *theirs}):
            if mine.get(key) != theirs.get(key):
                return first_difference(mine.get(key), theirs.get(key), f"{where}.{key}")
    return where, mine, theirs


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:59] + "…"
