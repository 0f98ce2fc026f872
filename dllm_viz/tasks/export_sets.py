"""Write the project's prompt sets (sample_prompts/*.jsonl) from the held-out split.

`python -m dllm_viz.tasks.export_sets` regenerates them deterministically; the files are
committed so the app and benchmarks need no generation step.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dllm_viz.tasks import TASKS, Problem, dump_problems

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_prompts"
HELDOUT_SEED = 2024
NUM_ARITH = 500
NUM_CODE = 120
NUM_HARD = 500
NUM_DEMO_ARITH = 6
NUM_DEMO_CODE = 4
# The demo's hard prompts, by id: two depth chains, a breadth problem, a ParallelBench shuffle and copy.
# Until session 48 they were the first of each family in the held-out hard set (chains of <= 7 lines);
# hard/long's joining the mix re-drew that set, so they are named here to keep the demo (and links that
# name a sample by index) where it was.
DEMO_HARD = (
    "hard/chain|2 * 3 = 6;6 + 7 = 13;13 - 6 = 7;7 + 5 = 12;12 / 3 = 4;4 / 2 = 2;2 * 3 = 6",
    "hard/chain|3 * 3 = 9;9 + 6 = 15;15 - 4 = 11;11 + 9 = 20;20 / 2 = 10",
    "hard/breadth|2x3;2x5;16 + 9 = 25;25 + 3 = 28;28 / 2 = 14",
    "parallelbench/shuffle|Iris King;Ivy Nash;Emma Nash;Maya Wells;Lily Hart||",
    "parallelbench/copy|Owen Shaw;Eli Lowe;Emma Frost||",
)
# A second breadth problem (session 44, appended so the earlier indices stay): the app's first sample
# (app_ui.common.DEFAULT_SAMPLE), picked by id from the held-out hard set because the bundled model
# answers it right under the Decode page's defaults in several passes a block and wrong at lower
# thresholds, which the first breadth sample stopped doing with the step-103000 model.
DEMO_BREADTH_2 = "hard/breadth|2x2;4x3;16 / 2 = 8;8 + 6 = 14"
# A third (session 48, appended the same way): the app's first sample since the step-109000 model, which
# gets DEMO_BREADTH_2 wrong at threshold 0.9 and dense. Picked as the first of the held-out hard set's
# breadth and chain problems short enough for gen 64 (in the set's order) that this model answers right
# dense (gen 64) and at threshold 0.9 in >= 8 passes, and wrong at 0.7 and 0.5: 9 passes at 0.9, and
# dense writes `4 * 3` for the reference's `3 * 4`.
DEMO_BREADTH_3 = "hard/breadth|2x3;3x4"


def heldout_sets() -> dict[str, list[Problem]]:
    """The held-out arith (2-4 operations), code and hard sets, plus a small demo mix.

    The demo keeps its first ten (easy) prompts where they were, so links that name a sample by
    index still open the same prompt, and appends hard ones: two depth chains, a breadth problem,
    a ParallelBench shuffle and (session 18, appended so the earlier indices stay) a ParallelBench
    copy: the pair ParallelBench contrasts, one answer (safe to commit all at once) against many; then
    (session 44) a second breadth problem, DEMO_BREADTH_2, and (session 48) a third, DEMO_BREADTH_3.
    """
    arith = TASKS["arith"].generate(
        NUM_ARITH, seed=HELDOUT_SEED, split="heldout", min_ops=2, max_ops=4
    )
    code = TASKS["code"].generate(NUM_CODE, seed=HELDOUT_SEED, split="heldout")
    hard = TASKS["hard"].generate(NUM_HARD, seed=HELDOUT_SEED, split="heldout")
    # Demo: short, readable items first (2-3 step arithmetic, multi-line code bodies).
    demo_arith = [p for p in arith if 2 <= p.target.count("\n") <= 3][:NUM_DEMO_ARITH]
    demo_code = sorted(code, key=lambda p: -p.target.count("\n"))[:NUM_DEMO_CODE]
    by_id = {problem.problem_id: problem for problem in hard}
    demo_hard = [by_id[problem_id] for problem_id in (*DEMO_HARD, DEMO_BREADTH_2, DEMO_BREADTH_3)]
    return {"arith_heldout": arith, "code_heldout": code, "hard_heldout": hard,
            "demo": demo_arith + demo_code + demo_hard}


def write_sets(out_dir: Path = SAMPLE_DIR) -> list[Path]:
    """Write every set to `out_dir/<name>.jsonl` and return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, problems in heldout_sets().items():
        path = out_dir / f"{name}.jsonl"
        dump_problems(problems, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    # argparse, not sys.argv[1]: `--help` used to be taken as the output folder and created.
    parser = argparse.ArgumentParser(prog="python -m dllm_viz.tasks.export_sets", description=__doc__)
    parser.add_argument("out_dir", nargs="?", type=Path, default=SAMPLE_DIR,
                        help="where to write the .jsonl sets (default: sample_prompts/)")
    for written in write_sets(parser.parse_args().out_dir):
        print(written)
