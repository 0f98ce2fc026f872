"""`python -m dllm_viz eval`: decode a held-out prompt set and print its accuracy.

The last line is `accuracy=<fraction> n=<count> mean_nfe=<x>`, so scripts can parse it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dllm_viz.cli.options import (
    add_decode_options,
    add_model_options,
    add_results_options,
    add_scoring_options,
    check_pipelines,
    check_resume,
    check_scoring,
    decode_config,
    load_model,
    model_settings,
    note_short_set,
    pipeline,
    recorded_pipeline,
    warn_scoring,
)
from dllm_viz.cli.results import ResultsFile
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
    add_results_options(parser, record="one JSON line per problem", unit="problems")
    parser.add_argument("--quiet", action="store_true", help="no per-problem progress on stderr")
    add_scoring_options(parser)
    add_model_options(parser)
    add_decode_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate and print the summary line; returns the exit status."""
    from dllm_viz.evaluation import ProblemResult, evaluate, summarize, take, task_problems
    from dllm_viz.tasks import load_problems

    if args.n is not None and args.n < 1:
        raise ValueError(f"`--n` must be >= 1, got {args.n}")
    check_resume(args)
    pipe, config = pipeline(args), decode_config(args)
    check_pipelines([pipe], config.gen_length)
    wanted = None if args.n is None else args.skip + args.n
    problems = take(load_problems(args.prompts) if args.prompts else task_problems(args.task, wanted, args.data),
                    args.skip, args.n)
    if not problems:
        source = args.prompts if args.prompts else f"task {args.task}"
        raise ValueError(f"{str(source)!r} has no problems to evaluate; pass a prompt set with at least one line")
    if args.n is not None:
        note_short_set(f"--prompts {str(args.prompts)!r}" if args.prompts else f"task {args.task!r}", args.skip,
                       args.n, len(problems))
    check_scoring(args, problems)  # before --out is created and the model loaded
    task = ",".join(sorted({p.task for p in problems}))  # what was scored, not the --task default
    settings = {"command": "eval", **model_settings(args), "task": task, "prompts": args.prompts, "data": args.data,
                "n": args.n, "skip": args.skip, "pipeline": recorded_pipeline(pipe, args), "decode": config.to_dict()}
    out = ResultsFile(args.out, settings, resume=args.resume) if args.out is not None else None
    finished = {str(row.get("problem_id")) for row in out.rows} if out is not None else set()
    todo = [p for p in problems if p.problem_id not in finished]
    if finished:
        print(f"resuming {args.out}: {len(problems) - len(todo)} of {len(problems)} problems already done",
              file=sys.stderr)
    correct = sum(bool(row.get("correct")) for row in out.rows) if out is not None else 0

    def progress(index: int, result: ProblemResult) -> None:
        nonlocal correct
        correct += result.correct
        if out is not None:
            out.append(result.to_dict())
        if not args.quiet:
            print(f"[{len(problems) - len(todo) + index + 1}/{len(problems)}] correct={correct} nfe={result.nfe}",
                  file=sys.stderr, flush=True)

    try:
        if todo:
            adapter = load_model(args)
            results = evaluate(adapter, todo, pipe, config, on_result=progress, unsafe_exec=args.unsafe_exec)
        else:
            results = []
    finally:
        if out is not None:
            out.close()
    if out is not None:
        results = [ProblemResult(**row) for row in out.rows]
    summary = summarize(results)
    warn_scoring(args, problems)
    if (warning := summary.warning()) is not None:
        print(f"warning: {warning} (--gen-length)", file=sys.stderr)
    print(f"policy={pipe.label} task={task} gen_length={config.gen_length}")
    print(summary.line())
    return 0
