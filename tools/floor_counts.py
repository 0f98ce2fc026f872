"""The counts behind tests/test_bundled_model.py's floors, measured on a model (the bundled one by default).

Why: each swap of the bundled model (tools/swap_model.sh) has to restate the floors' comments from
measured counts: threshold 0.9 at gen 128 on the first 20 held-out arithmetic and code problems,
the prefix and dual caches' agreement with the uncached decode on the arithmetic ones, and passes a
32-token block on the first four hard problems. Sessions 22-23 measured them with a throwaway
script; this is that script, kept, so the numbers in the comments come from one command:

    python tools/floor_counts.py               # the bundled model
    python tools/floor_counts.py --model runs/s24_export

Prints one line a count; compare with the constants in tests/test_bundled_model.py (a floor is the
measured count less one problem of slack, or the issue's bar where it is stated).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dllm_viz.config import DecodeConfig
from dllm_viz.evaluation import heldout_problems, run_problem
from dllm_viz.models import load
from dllm_viz.policies import Pipeline

SLICE = 20
GEN_LENGTH = 128
BLOCK = 32
HARD_PROMPTS = 4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="a model name or export directory (default: the bundled one)")
    args = parser.parse_args(argv)
    model = load(args.model, device="cpu")
    config = DecodeConfig(gen_length=GEN_LENGTH, seed=0)
    plain = Pipeline.from_names("threshold", block_length=BLOCK)
    arith = heldout_problems("arith", SLICE)
    uncached = [run_problem(model, problem, plain, config)[0] for problem in arith]
    print(f"arith: {sum(r.correct for r in uncached)}/{SLICE} correct (threshold 0.9, gen {GEN_LENGTH})")
    code = [run_problem(model, problem, plain, config)[0] for problem in heldout_problems("code", SLICE)]
    print(f"code: {sum(r.correct for r in code)}/{SLICE} correct (threshold 0.9, gen {GEN_LENGTH})")
    for cache in ("prefix", "dual"):
        cached = Pipeline.from_names("threshold", block_length=BLOCK, cache=cache)
        same = sum(run_problem(model, problem, cached, config)[0].completion == result.completion
                   for problem, result in zip(arith, uncached, strict=True))
        print(f"{cache} cache: {same}/{SLICE} arithmetic completions equal the uncached ones")
    blocks = GEN_LENGTH // BLOCK
    passes = [run_problem(model, problem, plain, config)[1].nfe / blocks
              for problem in heldout_problems("hard", HARD_PROMPTS)]
    print(f"hard: {', '.join(f'{p:g}' for p in passes)} passes a {BLOCK}-token block (threshold 0.9, "
          f"first {HARD_PROMPTS} problems)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
