"""`python -m dllm_viz eval`: decode a held-out prompt set and print its accuracy.

The last line is `accuracy=<fraction> n=<count> mean_nfe=<x>`, so scripts can parse it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dllm_viz.cli.options import add_decode_options, add_model_options, decode_config, pipeline
from dllm_viz.tasks import TASKS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `eval` subcommand."""
    parser = subparsers.add_parser(
        "eval", help="accuracy of a policy on a held-out prompt set",
        description="Decode a prompt set with one policy and score every completion.")
    parser.add_argument("--task", choices=sorted(TASKS), default="arith", metavar="TASK",
                        help="task (default: arith): the easy split arith / code, the hard split 'hard' or one of "
                             "its families (hard/chain, hard/breadth, parallelbench/<op>: docs/TESTBED.md), or "
                             "gsm8k / humaneval, which need --data (a file, or 'hub')")
    parser.add_argument("--data", type=Path, default=None,
                        help="GSM8K jsonl or HumanEval jsonl(.gz) file for --task gsm8k / humaneval, or 'hub' to fetch "
                             "the test split from the Hugging Face hub")
    parser.add_argument("--split", choices=["heldout"], default="heldout",
                        help="which bundled set: heldout (sample_prompts/<task>_heldout.jsonl)")
    parser.add_argument("--prompts", type=Path, default=None, help="a jsonl prompt set instead of the bundled one")
    parser.add_argument("--n", type=int, default=None, help="evaluate only the first N problems")
    parser.add_argument("--skip", type=int, default=0,
                        help="leave out the first K problems (with --n: problems K+1..K+N, e.g. a validation "
                             "slice after a calibration one; default 0)")
    parser.add_argument("--out", type=Path, default=None, help="write one JSON line per problem here")
    parser.add_argument("--quiet", action="store_true", help="no per-problem progress on stderr")
    add_model_options(parser)
    add_decode_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate and print the summary line; returns the exit status."""
    from dllm_viz.evaluation import evaluate, summarize, take, task_problems
    from dllm_viz.models import load
    from dllm_viz.tasks import load_problems

    if args.n is not None and args.n < 1:
        raise ValueError(f"`--n` must be >= 1, got {args.n}")
    pipe, config = pipeline(args), decode_config(args)
    pipe.validate(config.gen_length)
    wanted = None if args.n is None else args.skip + args.n
    problems = take(load_problems(args.prompts) if args.prompts else task_problems(args.task, wanted, args.data),
                    args.skip, args.n)
    adapter = load(args.model, device=args.device, dtype=args.dtype, trust_remote_code=args.trust_remote_code)
    correct = 0

    def progress(index: int, result) -> None:  # type: ignore[no-untyped-def]
        nonlocal correct
        correct += result.correct
        if not args.quiet:
            print(f"[{index + 1}/{len(problems)}] correct={correct} nfe={result.nfe}", file=sys.stderr, flush=True)

    results = evaluate(adapter, problems, pipe, config, on_result=progress)
    if args.out is not None:
        args.out.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in results))
    summary = summarize(results)
    if (warning := summary.warning()) is not None:
        print(f"warning: {warning} (--gen-length)", file=sys.stderr)
    print(f"policy={pipe.label} task={args.task} gen_length={config.gen_length}")
    print(summary.line())
    return 0
