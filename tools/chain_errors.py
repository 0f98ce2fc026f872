"""Where wrong chain answers first go wrong, per configuration of `bench --out` files.

Why: "AdaBlock loses 25 points on the long chains" says nothing of why. A worked chain (arith,
hard/chain, hard/long: problem ids that list the solution's lines) breaks first at one number, and
which one names the failure: an operator or operand read from the prompt at the wrong place ("op",
"operand"), the line above's result carried wrong ("carry"), a computed number ("result",
"final"), or a line that is not a worked line at all ("format": two lines run together, the answer
cut short or running on; `dllm_viz.tasks.arith.first_wrong_number`). This counts them over each
configuration's wrong answers, with how far into the solution the first error lies (0 = its first
line, 1 = its `####` answer line):

    python tools/chain_errors.py runs/item5_long.csv

Rows of other tasks (breadth, lists, code) are left out; their ids do not list a solution.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_files import bench_frame  # tools/ is not a package: found through sys.path

from dllm_viz.tasks.arith import SOLUTION_ROLES, first_wrong_number, worked_target

KINDS: tuple[str, ...] = (*SOLUTION_ROLES, "format")


def first_error(target: str, completion: str) -> tuple[str, float] | None:
    """(role of the first wrong number, its line's place in the solution from 0 to 1), or None."""
    found = first_wrong_number(target, completion)
    if found is None:
        return None
    role, line = found
    last = len(target.split("\n")) - 1
    return role, min(line, last) / max(last, 1)


def error_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (file order): chain problems, wrong answers, each first-error role
    of the wrong ones, and the mean place of their first error."""
    table = []
    for config, group in rows.groupby("config", sort=False):
        counts: Counter[str] = Counter()
        places = []
        chains = wrong = 0
        for problem_id, completion, correct in zip(group["problem_id"], group["completion"], group["correct"],
                                                   strict=True):
            target = worked_target(str(problem_id))
            if target is None:
                continue
            chains += 1
            if correct:
                continue
            wrong += 1
            found = first_error(target, "" if pd.isna(completion) else str(completion))
            role, place = found if found is not None else ("final", 1.0)  # same lines, another verdict
            counts[role] += 1
            places.append(place)
        table.append({"config": config, "chains": chains, "wrong": wrong,
                      **{kind: counts[kind] for kind in KINDS},
                      "mean_place": sum(places) / len(places) if places else float("nan")})
    return pd.DataFrame(table).set_index("config")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+", help="`bench --out` csv files")
    args = parser.parse_args(argv)
    rows = pd.concat([bench_frame(path) for path in args.files], ignore_index=True)
    table = error_table(rows)
    if table.empty or not table["chains"].any():
        raise SystemExit(f"{', '.join(map(str, args.files))}: no rows of a worked-chain task (arith, hard/chain, "
                         "hard/long), whose ids list the solution; nothing to classify")
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(table.to_string(float_format=lambda v: f"{v:.2f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
