"""Passes a 32-token block takes under a policy, answer blocks and end-of-text-only blocks apart.

Why: issue #19 asks threshold 0.9 for >= 24 passes at gen 256, "3 per 32-token block, end-of-text
blocks included". A block whose positions are all end-of-text commits in one pass once the model
knows the answer ended (the physical minimum), so the total depends on how many of the 8 blocks the
answer fills as much as on how hard each answer block is. This prints both, and redundant
refinement over all positions (with the part the end-of-text tail alone makes, a floor no better
answer lowers) and over the answer's (`dllm_viz.dynamics`), on held-out problems of the hard
split's depth and breadth families:

    python tools/block_passes.py --model tiny --policy 'threshold(threshold=0.9)' --n 100

A block's passes are the distinct steps at which its positions committed (semi-autoregressive
blocks: one block is open at a time).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_arg import load_or_exit  # tools/ is not a package: found through sys.path

from dllm_viz.bench import parse_config
from dllm_viz.cli.options import task_list
from dllm_viz.config import DecodeConfig
from dllm_viz.dynamics import tail_redundant_share, wasted_refinement_fraction
from dllm_viz.evaluation import heldout_problems, run_problem
from dllm_viz.policies import Pipeline
from dllm_viz.tasks import Problem
from dllm_viz.trace import Trace


def block_passes(trace: Trace, block_length: int) -> tuple[list[int], list[int]]:
    """Passes of each block holding answer text, and of each block of end-of-text only."""
    commit = trace.commit_step
    tail = trace.is_end_of_text
    answer, eos = [], []
    for start in range(0, trace.gen_length, block_length):
        steps = commit[start : start + block_length]
        passes = len(set(steps[steps >= 0].tolist()))
        (eos if tail[start : start + block_length].all() else answer).append(passes)
    return answer, eos


def main(argv: list[str] | None = None) -> int:
    """Print the per-block passes and redundant refinement shares of one policy."""
    args, pipeline, config, problems = parse_checked(argv, __doc__, policy="threshold(threshold=0.9)",
                                                     policy_help="a bench configuration", n=100,
                                                     tasks="hard/chain,hard/breadth")
    torch.set_num_threads(1)  # one process a core, as the bench's `--threads 1`
    adapter = load_or_exit(args.model)
    answer, eos, redundant, redundant_answer, tail, correct, nfe, tokens = [], [], [], [], [], [], [], []
    for problem in problems:
        result, trace = run_problem(adapter, problem, pipeline, config)
        a, e = block_passes(trace, args.block_length)
        answer += a
        eos += e
        redundant.append(wasted_refinement_fraction(trace))
        redundant_answer.append(wasted_refinement_fraction(trace, answer_only=True))
        tail.append(tail_redundant_share(trace))
        correct.append(result.correct)
        nfe.append(result.nfe)
        tokens.append(result.tokens)  # answer tokens, end-of-text left out (Trace.summary)
    count = len(problems)
    print(f"{args.model} {args.policy} on {args.tasks}, n={count}: accuracy {np.mean(correct):.3f}, "
          f"mean passes {np.mean(nfe):.2f}, answer tokens {np.mean(tokens):.1f}")
    print(f"passes per answer block {np.mean(answer):.2f} ({len(answer) / count:.2f} blocks a problem); "
          f"per end-of-text-only block {np.mean(eos) if eos else float('nan'):.2f} ({len(eos) / count:.2f} a problem)")
    print(f"redundant refinement: all positions {np.mean(redundant):.3f} (of which the end-of-text tail "
          f"{np.mean(tail):.3f}), answer positions {np.mean(redundant_answer):.3f}")
    return 0


def add_decode_options(parser: argparse.ArgumentParser, *, policy: str, policy_help: str, n: int, tasks: str) -> None:
    """The options `checked` reads (the model, one configuration, held-out problems, the canvas)."""
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--policy", default=policy, help=policy_help)
    parser.add_argument("--n", type=int, default=n, help=f"held-out problems per task (default {n})")
    parser.add_argument("--tasks", default=tasks)
    parser.add_argument("--gen-length", type=int, default=256)
    parser.add_argument("--block-length", type=int, default=32)


def parse_checked(argv: list[str] | None, doc: str | None, *, policy: str, policy_help: str, n: int,
                  tasks: str) -> tuple[argparse.Namespace, Pipeline, DecodeConfig, list[Problem]]:
    """A decoding tool's options (`add_decode_options`, described by the first paragraph of `doc`),
    parsed and `checked`: what every such tool's `main` starts with."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    add_decode_options(parser, policy=policy, policy_help=policy_help, n=n, tasks=tasks)
    args = parser.parse_args(argv)
    return args, *checked(args)


def checked(args: argparse.Namespace) -> tuple[Pipeline, DecodeConfig, list[Problem]]:
    """The policy, decode settings and problems the options name, refused before the model loads
    (a typo used to end in a traceback, after minutes of loading a large model; --n 0 in a
    ZeroDivisionError after it).

    Raises:
        SystemExit: one line naming the bad option and the fix.
    """
    if args.n < 1:
        raise SystemExit(f"error: --n must be >= 1 (problems per family), got {args.n}")
    try:  # the library's messages name the option (`gen_length`, `block_length`, the policy's part)
        config = DecodeConfig(gen_length=args.gen_length)
        pipeline = parse_config(args.policy, {"block_length": args.block_length})
        pipeline.validate(config.gen_length)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    try:
        tasks = task_list(args.tasks)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    try:
        problems = [p for task in tasks for p in heldout_problems(task, args.n)]
    except ValueError as exc:
        raise SystemExit(f"error: --tasks {args.tasks!r}: {exc}") from None
    return pipeline, config, problems



if __name__ == "__main__":
    raise SystemExit(main())
