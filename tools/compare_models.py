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

from bench_summary import bench_rows  # tools/ is not a package: found through sys.path

from dllm_viz.bench import paired
from dllm_viz.cli.bench import table_text


def compare(base: pd.DataFrame, candidate: pd.DataFrame, names: tuple[str, str]) -> pd.DataFrame:
    """Per configuration in both runs: accuracy and mean NFE of each, the candidate's lost / gained
    against the base, the sign test's p and the number of problems paired, all over the problems both
    ran (runs of different --n would otherwise set one run's accuracy on its own problems beside a
    pairing of the shared ones: session 21's 50 and 100 breadth problems read 56% against 63%, where
    the candidate's 63% was over 100 and its figure on the shared 50 is 70%).

    Raises:
        ValueError: the runs share no configuration, or no problem.
    """
    shared = [c for c in base["config"].drop_duplicates() if c in set(candidate["config"])]
    if not shared:
        raise ValueError(f"the runs share no configuration ({sorted(set(base['config']))} against "
                         f"{sorted(set(candidate['config']))})")
    problems = set(base["problem_id"]) & set(candidate["problem_id"])
    if not problems:
        raise ValueError("the runs share no problem: bench both models on the same --tasks, --n and --skip")
    base, candidate = base[base["problem_id"].isin(problems)], candidate[candidate["problem_id"].isin(problems)]
    rows = pd.concat([base.assign(config=names[0] + ":" + base["config"]),
                      candidate.assign(config=names[1] + ":" + candidate["config"])], ignore_index=True)
    means = [run.groupby("config")[["correct", "nfe"]].mean() for run in (base, candidate)]
    out = {}
    for config in shared:
        result = paired(rows, f"{names[1]}:{config}", f"{names[0]}:{config}")
        out[config] = {
            f"{names[0]}_accuracy": means[0].loc[config, "correct"],
            f"{names[1]}_accuracy": means[1].loc[config, "correct"],
            f"{names[0]}_nfe": means[0].loc[config, "nfe"],
            f"{names[1]}_nfe": means[1].loc[config, "nfe"],
            "lost": result.lost, "gained": result.gained, "sign_p": result.sign_p, "problems": result.problems,
        }
    return pd.DataFrame.from_dict(out, orient="index")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="`bench --out` csv of the model in use (e.g. the bundled one)")
    parser.add_argument("candidate", type=Path, help="`bench --out` csv of the candidate on the same problems")
    parser.add_argument("--names", nargs=2, default=("base", "candidate"), metavar=("BASE", "CANDIDATE"),
                        help="what to call the two models in the table (default: base candidate)")
    args = parser.parse_args(argv)
    try:
        table = compare(bench_rows(args.base), bench_rows(args.candidate), tuple(args.names))
    except ValueError as exc:
        raise SystemExit(f"compare_models: {exc}") from exc
    print(f"{args.names[1]} ({args.candidate}) against {args.names[0]} ({args.base}), paired by problem:")
    print(table_text(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
