"""ParallelBench's closed-form accuracy of parallel decoding, for comparison with a measured curve.

The paper (ParallelBench, ICLR 2026, section 4) takes an ideal model that knows every position's
marginal exactly and reveals k of n list items per step, each drawn independently from its
marginal given what is already revealed. Then (docs/TESTBED.md):

- copy (and replace at a given index): the answer is one fixed list, every marginal is a point
  mass, so accuracy is 1 for every k;
- shuffle: any order but the original. With r items left, revealing k of them independently is
  right only when they are distinct: P(r, k) / r^k, so Acc(k) = prod_i P(r_i, k_i) / r_i^k_i over
  the steps (r_i items left, k_i = min(k, r_i) revealed); k = n gives n!/n^n, k = 1 gives 1;
- replace with any one person (greedy decoding): every position keeps its input name with
  probability (r-1)/r, so greedy keeps names until the last step; with r_last positions in it,
  the answer is right for r_last = 1, a coin flip for r_last = 2 (a tie), wrong for r_last > 2.

Where k does not divide n we let the last step reveal the remainder (the paper states k | n).
"""

from __future__ import annotations

import argparse
import math
import sys

from dllm_viz.tasks.parallelbench import LENGTH_CAP

THEORY_OPS: tuple[str, ...] = ("copy", "replace_index", "shuffle", "replace_random")


def closed_form_accuracy(op: str, n: int, k: int) -> float:
    """The ideal model's accuracy on `op` over n items with k items revealed per step.

    Raises:
        ValueError: an operation without a closed form, or n, k < 1.
    """
    if op not in THEORY_OPS:
        raise ValueError(f"ParallelBench derives a closed form for {THEORY_OPS}, not {op!r}")
    if n < 1 or k < 1:
        raise ValueError(f"need n >= 1 items and k >= 1 items per step, got n={n}, k={k}")
    if op in ("copy", "replace_index"):
        return 1.0
    if op == "shuffle":
        accuracy, left = 1.0, n
        while left > 0:
            step = min(k, left)
            accuracy *= math.perm(left, step) / left**step
            left -= step
        return accuracy
    last = (n - 1) % k + 1  # positions revealed in the final step
    return {1: 1.0, 2: 0.5}.get(last, 0.0)


def main(argv: list[str] | None = None) -> int:
    """Print the closed-form curve of one operation for k = 1..n; with --model, measured beside it."""
    parser = argparse.ArgumentParser(prog="python -m dllm_viz.tasks.parallelbench_theory", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", choices=THEORY_OPS, default="shuffle")
    parser.add_argument("--n", type=int, default=5, help=f"list length (items), 2-{LENGTH_CAP}")
    parser.add_argument("--model", default=None,
                        help="also measure the curve on this model (dllm_viz/parallelism_curve.py): only the "
                             "answer's tokens open, the end-of-text tail given, fixed_steps with ceil(n/k) steps, "
                             "and first one token a pass (k=token); beside it (by_items) windows of k items left to "
                             "right, a token of each item a pass: the closed form's protocol")
    parser.add_argument("--problems", type=int, default=30, help="held-out problems per k (with --model)")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    if not 2 <= args.n <= LENGTH_CAP:
        parser.error(f"--n must be 2-{LENGTH_CAP} (ParallelBench's list lengths), got {args.n}")
    if args.problems < 1:
        parser.error(f"--problems must be >= 1, got {args.problems}")
    print(f"op={args.op} n={args.n}")
    if args.model is None:
        for k in range(1, args.n + 1):
            print(f"k={k} accuracy={closed_form_accuracy(args.op, args.n, k):.4f}")
        return 0
    from dllm_viz.models import ModelLoadError, load
    from dllm_viz.parallelism_curve import curve_problems, measure_curve

    try:
        adapter = load(args.model, device=args.device)
        points = measure_curve(adapter, curve_problems(args.op, args.n, args.problems), args.op, args.n)
    except (ModelLoadError, ValueError) as exc:
        print(f"parallelbench_theory: error: {exc}", file=sys.stderr)
        return 2
    print(f"model={args.model} problems={args.problems}")
    for p in points:
        k = "token" if p.k is None else p.k  # one token a pass: the sequential end of the curve
        items = "" if p.item_accuracy is None else f" by_items={p.item_accuracy:.4f} ({p.item_passes:.1f} passes)"
        print(f"k={k} steps={p.steps} tokens/step={p.tokens_per_step:.1f} measured={p.accuracy:.4f}{items} "
              f"closed_form={p.closed_form:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
