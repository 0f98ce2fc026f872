"""Is the model's confidence earned? A reliability table of the cells a confidence rule chooses among.

Why: issue #19 asks threshold 0.9 for >= 24 passes at gen 256, and the bundled model takes ~15. A
model could be that fast for two reasons: it is sure and right (its confidence is earned: nothing
to fix in the model, the task lets it be sure), or it is sure and often wrong (overconfident: a
calibration fault a temperature would fix, and the threshold rule's errors would say so). This
decodes held-out problems with one configuration (dense by default: one token a step, so every
state is the careful decoder's) and bins every answer cell that was masked and inside its step's
window by confidence, printing each bin's cells, mean confidence and the share whose candidate
then was the token the decode committed there, with the expected calibration error (ECE) and the
share of cells at >= 0.999 (`dllm_viz.dynamics.reliability_cells`, `reliability`):

    python tools/confidence_reliability.py --model tiny --n 20

On another configuration's trace a cell committed at its own step agrees by construction, so read
its table for the cells left masked, not as the careful decoder's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from block_passes import parse_checked  # tools/ is not a package: found through sys.path
from model_arg import load_or_exit

from dllm_viz.dynamics import reliability, reliability_cells
from dllm_viz.evaluation import run_problem

SURE = 0.999


def table(label: str, confidence: np.ndarray, agrees: np.ndarray) -> list[str]:
    """The printed reliability table of one set of cells."""
    rows, ece = reliability(confidence, agrees)
    sure = confidence >= SURE
    lines = [f"{label}: {confidence.size} cells, ECE {ece:.4f}; at >= {SURE}: {sure.mean() if sure.size else 0:.1%} "
             f"of cells, {agrees[sure].mean() if sure.any() else float('nan'):.2%} of them right"]
    lines += [f"  [{low:.3f}, {high:.3f}{']' if high == 1.0 else ')'}  cells {count:7d}  mean confidence "
              f"{mean:.4f}  right {right:.4f}" for low, high, count, mean, right in rows]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the reliability table per task and over all of them."""
    args, pipeline, config, problems = parse_checked(argv, __doc__, policy="dense", n=20,
                                                     policy_help="a bench configuration (default dense)",
                                                     tasks="hard/chain,hard/breadth,hard/long")
    torch.set_num_threads(1)  # one process a core, as the bench's `--threads 1`
    adapter = load_or_exit(args.model)
    cells: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    correct: dict[str, list[bool]] = {}
    for problem in problems:
        result, trace = run_problem(adapter, problem, pipeline, config)
        cells.setdefault(problem.task, []).append(reliability_cells(trace))
        correct.setdefault(problem.task, []).append(result.correct)
    print(f"{args.model} {args.policy}, gen {args.gen_length}, blocks of {args.block_length}, n={args.n} a task")
    everything = [pair for pairs in cells.values() for pair in pairs]
    for label, pairs in [*cells.items(), ("all", everything)]:
        right = correct[label] if label in correct else [c for values in correct.values() for c in values]
        lines = table(f"{label} (accuracy {np.mean(right):.1%})", np.concatenate([c for c, _ in pairs]),
                      np.concatenate([a for _, a in pairs]))
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
