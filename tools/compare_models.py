"""Two `bench --out` runs of the same problems under two models, configuration by configuration, paired.

Why: a bundled-model swap (docs/TESTBED.md) is decided on the same held-out problems benched under
the bundled model and the candidate. Two accuracies a few points apart on a few hundred problems
are mostly noise on this model (BENCHMARKS.md, session 19), so this prints, for every configuration
both runs hold, each model's accuracy and mean NFE and how many problems the candidate lost and
gained against the bundled model, with the exact sign test (`dllm_viz.bench.paired`):

    python tools/compare_models.py bundled_chain.csv stage_chain.csv --names bundled stage

tools/gpu_stage.sh appends it to its summary for each task.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_files import bench_settings  # tools/ is not a package: found through sys.path
from bench_summary import bench_rows

from dllm_viz.bench import paired
from dllm_viz.cli.bench import table_text
from dllm_viz.cli.results import settings_path


def compare(base: pd.DataFrame, candidate: pd.DataFrame, names: tuple[str, str]) -> pd.DataFrame:
    """Per configuration in both runs: accuracy and mean NFE of each, the candidate's lost / gained
    against the base, the sign test's p and the number of problems paired, all over the problems both
    ran (runs of different --n would otherwise set one run's accuracy on its own problems beside a
    pairing of the shared ones: session 21's 50 and 100 breadth problems read 56% against 63%, where
    the candidate's 63% was over 100 and its figure on the shared 50 is 70%).

    The problems are those both ran under each configuration: a run still being written has
    finished some configurations on more problems than others, and one run's figure over problems
    the other has not reached would stand beside a pairing of fewer (threshold's NFE over 3 problems
    against the candidate's over 2).

    Raises:
        ValueError: the runs share no configuration, or no problem.
    """
    shared = [c for c in base["config"].drop_duplicates() if c in set(candidate["config"])]
    if not shared:
        raise ValueError(f"the runs share no configuration ({sorted(set(base['config']))} against "
                         f"{sorted(set(candidate['config']))})")
    out = {}
    for config in shared:
        mine = [run[run["config"] == config] for run in (base, candidate)]
        problems = set(mine[0]["problem_id"]) & set(mine[1]["problem_id"])
        if not problems:
            continue
        mine = [run[run["problem_id"].isin(problems)] for run in mine]
        rows = pd.concat([run.assign(config=f"{name}:{config}") for run, name in zip(mine, names, strict=True)],
                         ignore_index=True)
        result = paired(rows, f"{names[1]}:{config}", f"{names[0]}:{config}")
        out[config] = {
            f"{names[0]}_accuracy": mine[0]["correct"].mean(),
            f"{names[1]}_accuracy": mine[1]["correct"].mean(),
            f"{names[0]}_nfe": mine[0]["nfe"].mean(),
            f"{names[1]}_nfe": mine[1]["nfe"].mean(),
            "lost": result.lost, "gained": result.gained, "sign_p": result.sign_p, "problems": result.problems,
        }
    if not out:
        raise ValueError("the runs share no problem: bench both models on the same --tasks, --n and --skip")
    return pd.DataFrame.from_dict(out, orient="index")


def check_same_problems(base: Path, candidate: Path) -> None:
    """Refuse two runs whose problem ids name different problems: gsm8k's and humaneval's ids are
    positions in their --data file, so runs of two --data files would pair unrelated problems.
    (Files without settings, e.g. made by hand, are taken on trust.)"""
    if not all(settings_path(path).is_file() for path in (base, candidate)):
        return
    data = [bench_settings(path).get("data") for path in (base, candidate)]
    if data[0] != data[1]:
        raise SystemExit(f"compare_models: {candidate} was benched on --data {data[1]} and {base} on --data "
                         f"{data[0]}, so their problem ids name other problems; bench both on the same --data")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="`bench --out` csv of the model in use (e.g. the bundled one)")
    parser.add_argument("candidate", type=Path, help="`bench --out` csv of the candidate on the same problems")
    parser.add_argument("--names", nargs=2, default=("base", "candidate"), metavar=("BASE", "CANDIDATE"),
                        help="what to call the two models in the table (default: base candidate)")
    args = parser.parse_args(argv)
    runs = bench_rows(args.base), bench_rows(args.candidate)
    check_same_problems(args.base, args.candidate)
    try:
        table = compare(*runs, tuple(args.names))
    except ValueError as exc:
        raise SystemExit(f"compare_models: {exc}") from exc
    unpaired = [c for c in runs[0]["config"].drop_duplicates() if c in set(runs[1]["config"]) and c not in table.index]
    if unpaired:
        print(f"note: {', '.join(unpaired)} left out: the runs hold no problem both finished under it", file=sys.stderr)
    ran = [set(run["problem_id"]) for run in runs]
    if ran[0] != ran[1]:  # every figure is over the shared problems: say how many each run's own had
        print(f"note: paired over the {len(ran[0] & ran[1])} problems both runs hold; {args.base} holds "
              f"{len(ran[0])}, {args.candidate} {len(ran[1])}", file=sys.stderr)
    print(f"{args.names[1]} ({args.candidate}) against {args.names[0]} ({args.base}), paired by problem:")
    print(table_text(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
