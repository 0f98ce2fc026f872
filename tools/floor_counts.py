"""The counts behind tests/test_bundled_model.py's floors, measured on a model (the bundled one by default).

Why: each swap of the bundled model (tools/swap_model.sh) has to restate the floors' comments from
measured counts: threshold 0.9 at gen 128 on the first 20 held-out arithmetic and code problems,
the prefix and dual caches' agreement with the uncached decode on the arithmetic ones, and passes a
32-token block on the first four hard problems; and the model card's code row (the first 40 code
problems, whose first 20 are the floor's slice, so they are decoded once). Sessions 22-23 measured
them with a throwaway script; this is that script, kept, so the numbers in the comments come from
one command:

    python tools/floor_counts.py               # the bundled model
    python tools/floor_counts.py --model runs/s24_export

Prints one line a count; compare with the constants in tests/test_bundled_model.py (a floor is the
measured count less one problem of slack, or the issue's bar where it is stated). The slices are
declared here once: the tests decode them through these functions, so a count printed here is the
count those tests assert on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from block_passes import block_passes  # tools/ is not a package: found through sys.path
from model_arg import load_or_exit

from dllm_viz.cache_modes import CacheMode
from dllm_viz.config import DecodeConfig
from dllm_viz.evaluation import ProblemResult, heldout_problems, run_problem
from dllm_viz.models import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.tasks.base import Problem
from dllm_viz.trace import Trace

SLICE = 20
GEN_LENGTH = 128
BLOCK = 32
# The hard prompts of the passes floor, by id, found among their family's held-out problems (the hard set
# draws each family's first ones): the first four of the held-out hard set until session 48, every earlier
# model's slice; hard/long's joining the mix re-drew that set, whose first four now hold two
# ParallelBench list edits (remove_index, replace_index) that any model may commit in one pass: one answer,
# copied, which is ParallelBench's point about them, not the depth or breadth this floor is about.
HARD_SLICE = (
    "hard/breadth|2x3;2x5;16 + 9 = 25;25 + 3 = 28;28 / 2 = 14",
    "hard/chain|2 * 3 = 6;6 + 7 = 13;13 - 6 = 7;7 + 5 = 12;12 / 3 = 4;4 / 2 = 2;2 * 3 = 6",
    "hard/chain|4 - 2 = 2;2 - 1 = 1;1 * 3 = 3;3 - 2 = 1;1 + 5 = 6;6 - 5 = 1;1 + 8 = 9;9 * 3 = 27;27 / 3 = 9;9 / 3 = 3",
    "hard/breadth|3x3;4x3;21 - 6 = 15;15 + 5 = 20;20 - 3 = 17",
)
CARD_CODE = 40  # the model card's code row: the first CARD_CODE held-out code problems
CACHES: tuple[CacheMode, ...] = ("prefix", "dual")


def _decoded(model: ModelAdapter, family: str, n: int, cache: CacheMode = "none") -> list[tuple[ProblemResult, Trace]]:
    """Threshold 0.9 (seed 0, gen GEN_LENGTH, blocks of BLOCK) on the first `n` held-out problems of
    `family`: each problem's result and trace."""
    return _threshold_traces(model, heldout_problems(family, n), cache)


def _threshold_traces(model: ModelAdapter, problems: list[Problem],
                      cache: CacheMode = "none") -> list[tuple[ProblemResult, Trace]]:
    """Threshold 0.9 (seed 0, gen GEN_LENGTH, blocks of BLOCK) on `problems`: each one's result and trace."""
    pipeline = Pipeline.from_names("threshold", block_length=BLOCK, cache=cache)
    config = DecodeConfig(gen_length=GEN_LENGTH, seed=0)
    return [run_problem(model, problem, pipeline, config) for problem in problems]


def threshold_slice(model: ModelAdapter, family: str, n: int = SLICE,
                    cache: CacheMode = "none") -> list[ProblemResult]:
    """The results of threshold 0.9 on the first `n` held-out problems of `family` (the floors' slice)."""
    return [result for result, _ in _decoded(model, family, n, cache)]


def cache_agreement(model: ModelAdapter, cache: CacheMode, uncached: list[ProblemResult]) -> list[bool]:
    """Whether each arithmetic completion with `cache` equals the uncached one in `uncached`."""
    cached = threshold_slice(model, "arith", len(uncached), cache=cache)
    return [with_cache.completion == plain.completion for with_cache, plain in zip(cached, uncached, strict=True)]


def hard_passes(model: ModelAdapter) -> tuple[list[float], list[float]]:
    """Passes a block threshold 0.9 takes on each held-out hard problem of HARD_SLICE: over all the
    canvas's blocks, and over the blocks holding answer text (tools/block_passes.py: an end-of-text-only
    block commits in one pass once the answer has ended, so the first mean falls as the answers get
    shorter or the model surer of where they end, the second does not).

    Raises:
        KeyError: an id of HARD_SLICE not among its family's held-out problems (re-pick the slice, saying why).
    """
    families = {problem_id.split("|")[0] for problem_id in HARD_SLICE}  # an id starts with its family's name
    by_id = {problem.problem_id: problem for family in families for problem in heldout_problems(family)}
    traces = [trace for _, trace in _threshold_traces(model, [by_id[problem_id] for problem_id in HARD_SLICE])]
    answer_blocks = [block_passes(trace, BLOCK)[0] for trace in traces]
    per_answer_block = [sum(a) / len(a) if a else float("nan") for a in answer_blocks]  # nan: no answer text at all
    return [trace.nfe / (GEN_LENGTH // BLOCK) for trace in traces], per_answer_block


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="a model name or export directory (default: the bundled one)")
    args = parser.parse_args(argv)
    model = load_or_exit(args.model, device="cpu")  # a mistyped export directory: one line
    arith = threshold_slice(model, "arith")
    print(f"arith: {sum(r.correct for r in arith)}/{SLICE} correct (threshold 0.9, gen {GEN_LENGTH})")
    code = _decoded(model, "code", max(SLICE, CARD_CODE))
    print(f"code: {sum(r.correct for r, _ in code[:SLICE])}/{SLICE} correct (threshold 0.9, gen {GEN_LENGTH})")
    card_passes = sum(trace.nfe for _, trace in code) / len(code)
    print(f"code, the card's row: {sum(r.correct for r, _ in code)}/{len(code)} correct, {card_passes:.2f} passes "
          f"(threshold 0.9, gen {GEN_LENGTH}, first {len(code)})")
    for cache in CACHES:
        same = cache_agreement(model, cache, arith)
        print(f"{cache} cache: {sum(same)}/{SLICE} arithmetic completions equal the uncached ones")
    passes, answer_passes = hard_passes(model)
    print(f"hard: {', '.join(f'{p:g}' for p in passes)} passes a {BLOCK}-token block (threshold 0.9, "
          f"the {len(HARD_SLICE)} problems of HARD_SLICE); {', '.join(f'{p:.3g}' for p in answer_passes)} "
          "a block holding answer text")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
