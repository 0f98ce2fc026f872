"""`python -m dllm_viz diagnose`: one-pass token accuracy by role (copy, carry, compute) on arithmetic,
and whether list answers bind each last name to its first name."""

from __future__ import annotations

import argparse
import sys

from dllm_viz.cli.options import add_model_options, load_model

DRILL_SEED = 777  # fresh drills; training draws its drill seeds from a per-step RNG
CHAINED_DRILL_OPS = 4
LINE_TASKS = ("hard/chain", "hard/long")  # the depth families the by-line table measures


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `diagnose` subcommand."""
    parser = subparsers.add_parser(
        "diagnose", help="which arithmetic skills the model has (token accuracy by role)",
        description="Mask held-out arithmetic answers at each ratio and score the model's one-pass argmax by "
                    "token role: start / operand (copied from the prompt), carry (previous line's result), "
                    "op, result (computed), final answer, format, EOS tail; then the one-hop table: each "
                    "worked line's result from the lines above and its own operands, later lines masked "
                    "(the state a block decoder computes in), on the held-out problems (all lines, then only "
                    "the carried lines 2+), on one-operation drills (`60 + 14`, the same operation without a "
                    "story around it) and on the carried lines of chained drills (`6 + 4 * 2`); last, per "
                    "ParallelBench list operation, the last names written right with only that one masked "
                    "(elimination works) and with every last name masked, first names visible (only binding "
                    "each to its first name works).")
    parser.add_argument("--n", type=int, default=120, help="held-out arithmetic problems (default 120)")
    parser.add_argument("--ratios", default="0.15,0.5,1.0",
                        help="comma-separated masking ratios (default 0.15,0.5,1.0)")
    parser.add_argument("--seed", type=int, default=0, help="masking seed (default 0)")
    parser.add_argument("--list-n", type=int, default=30,
                        help="held-out problems per ParallelBench list operation for the binding table "
                             "(default 30; 0 leaves the table out)")
    parser.add_argument("--lines-n", type=int, default=20,
                        help="held-out problems of each of hard/chain and hard/long for the by-line table and "
                             "the last-lines table (the last 3 lines' operations with the `####` answer line "
                             "masked and visible) (default 20; 0 leaves both out)")
    add_model_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the role table; returns the exit status."""
    from dllm_viz.evaluation import heldout_problems
    from dllm_viz.train.diagnose import (
        check_ratios,
        check_seed,
        format_onehop,
        format_table,
        onehop_accuracy,
        role_accuracy,
    )

    try:
        ratios = [float(r) for r in args.ratios.split(",") if r.strip()]
    except ValueError as exc:
        raise ValueError(f"`--ratios` must be comma-separated numbers, got {args.ratios!r}") from exc
    check_ratios(ratios)  # before the model loads
    check_seed(args.seed)
    if args.n < 1:
        raise ValueError(f"`--n` must be >= 1, got {args.n}")
    if args.list_n < 0:
        raise ValueError(f"`--list-n` must be >= 0 (0: no binding table), got {args.list_n}")
    if args.lines_n < 0:
        raise ValueError(f"`--lines-n` must be >= 0 (0: no by-line table), got {args.lines_n}")
    adapter = load_model(args)
    problems = heldout_problems("arith", args.n)
    if len(problems) < args.n:  # said, as bench and eval say a short set: the tables' counts are not --n's
        print(f"note: the held-out arithmetic set has {len(problems)} problems, so its tables measure {len(problems)}, "
              f"not --n {args.n} (the drill tables generate {args.n})", file=sys.stderr)
    print(format_table(role_accuracy(adapter, problems, ratios, seed=args.seed)))
    print()
    print(format_onehop(onehop_accuracy(adapter, problems)))
    print()
    print(format_onehop(onehop_accuracy(adapter, problems, from_line=1), label="carried lines"))
    print()
    from dllm_viz.tasks.arith import ArithTask

    task = ArithTask()
    drills = task.drills(args.n, seed=DRILL_SEED)
    print(format_onehop(onehop_accuracy(adapter, drills), label="drill result"))
    print()
    chained = task.drills(args.n, seed=DRILL_SEED, max_ops=CHAINED_DRILL_OPS)
    print(format_onehop(onehop_accuracy(adapter, chained, from_line=1), label="chained drill, carried lines"))
    if args.list_n:
        from dllm_viz.tasks.parallelbench import LIST_OPS
        from dllm_viz.train.diagnose import binding_accuracy, format_binding

        lists = [p for op in LIST_OPS for p in heldout_problems(f"parallelbench/{op}", args.list_n)]
        print()
        print(format_binding(binding_accuracy(adapter, lists)))
    if args.lines_n:
        from dllm_viz.train.diagnose import format_last_lines, format_lines, last_line_accuracy, line_accuracy

        chains = [p for task in LINE_TASKS for p in heldout_problems(task, args.lines_n)]
        print()
        print(format_lines(line_accuracy(adapter, chains)))
        print()
        print(format_last_lines(last_line_accuracy(adapter, chains)))
    return 0
