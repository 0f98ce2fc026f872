"""`python -m dllm_viz bench`: compare configurations against the dense baseline in one run."""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from dllm_viz.bench_columns import SUMMARY_COLUMNS
from dllm_viz.cache_modes import APPROXIMATE
from dllm_viz.cli.options import (
    add_decode_options,
    add_model_options,
    add_refresh_option,
    add_results_options,
    add_scoring_options,
    check_options_apply,
    check_pipelines,
    check_resume,
    check_scoring,
    data_setting,
    decode_config,
    load_model,
    model_block_defaults,
    model_settings,
    note_short_set,
    policy_fields,
    recorded_pipeline,
    task_list,
    warn_scoring,
)
from dllm_viz.cli.results import ResultsFile
from dllm_viz.writable import check_new_file

if TYPE_CHECKING:  # pandas loads only when a command needs it
    import pandas as pd

    from dllm_viz.sweep import Sweep


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `bench` subcommand."""
    parser = subparsers.add_parser(
        "bench", help="compare policies against the dense baseline on a prompt set",
        description="Run every configuration over the same prompts in one process and print, per configuration, "
                    "accuracy paired with dense's, NFE, speedups, TPF and AUP, agreement and overheads (the "
                    "columns are listed below).")
    parser.add_argument("--tasks", default="arith",
                        help="comma-separated tasks: arith,code (easy), hard or its families hard/chain, "
                             "hard/breadth, parallelbench/<op> (docs/TESTBED.md), gsm8k,humaneval (default: arith)")
    parser.add_argument("--data", type=Path, action="append", default=None,
                        help="data file (or 'hub') for gsm8k / humaneval (repeat for both; matched by task order)")
    parser.add_argument("--n", type=int, default=20, help="problems per task (default: 20)")
    parser.add_argument("--skip", type=int, default=0,
                        help="leave out the first K problems of each task or prompt file (default 0)")
    parser.add_argument("--prompts", type=Path, default=None,
                        help="a jsonl prompt set (as sample_prompts/ or `eval --prompts`) instead of --tasks; "
                             "its first --n problems, each scored by its own task")
    parser.add_argument("--policies", default="dense,threshold",
                        help="comma-separated configurations, components joined by '+', e.g. "
                             "dense,threshold,adablock+threshold,cora+kalman,threshold+dual; a component may "
                             "carry its own options, which win over the flags below: "
                             "'cora(delta_p=0.99,m=3)+kalman(tau_ce=0.95)' (quote it in the shell)")
    parser.add_argument("--caches", default=None,
                        help="comma-separated cache modes (none,prefix,dual) to cross with every configuration "
                             "that names none; e.g. --caches none,dual")
    parser.add_argument("--sweep", default=None,
                        help="one configuration with one knob over a range, name=lo:hi:count, e.g. "
                             "'threshold(threshold=0.5:0.99:8)': its points run beside --policies and the "
                             "summary adds the knob's NFE-accuracy frontier, its AUP, and where every other "
                             "configuration sits against it (above / on / below)")
    parser.add_argument("--plot", type=Path, default=None,
                        help="write the NFE-vs-accuracy chart of every configuration (sweep frontier "
                             "included) to this .html file")
    add_results_options(parser, record="one CSV row per (configuration, problem)", unit="rows")
    add_scoring_options(parser)
    add_model_options(parser)
    # Components come from --policies / --caches: --rule, --cache and the like would be ignored, so
    # bench does not take them (argparse names such a flag); --refresh-every applies to its caches.
    add_decode_options(parser, components=False)
    add_refresh_option(parser)
    parser.epilog = f"{parser.epilog}\n{summary_columns_epilog()}"
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Benchmark and print the summary table; returns the exit status."""
    import pandas as pd

    from dllm_viz.bench import ROW_COLUMNS, run_bench
    from dllm_viz.sweep import parse_sweep

    if args.n < 1:
        raise ValueError(f"`--n` must be >= 1, got {args.n}")
    check_resume(args)
    sweep = parse_sweep(args.sweep) if args.sweep is not None else None  # '' is an error, not "no sweep"
    if args.plot is not None and args.plot.suffix != ".html":
        raise ValueError(f"`--plot` writes an .html chart, got {str(args.plot)!r}; name it e.g. frontier.html")
    if args.plot is not None:
        check_new_file(args.plot, "--plot")  # before the run: the chart is written only once it is done
    configs = _configs(args, list(sweep.labels) if sweep else [])
    config = decode_config(args)
    check_pipelines(configs.values(), config.gen_length)
    problems = problem_set(args, args.skip, args.n)
    check_scoring(args, problems)  # before --out is created and the model loaded
    settings = {"command": "bench", **model_settings(args), "data": data_setting(args),
                "problems": [p.problem_id for p in problems],
                "configs": {label: recorded_pipeline(pipe, args) for label, pipe in configs.items()},
                "decode": config.to_dict()}
    out = ResultsFile(args.out, settings, resume=args.resume, columns=ROW_COLUMNS) if args.out is not None else None
    finished = typed_rows(pd.DataFrame(out.rows, columns=list(ROW_COLUMNS))) if out is not None and out.rows else None
    total = len(problems) * len(configs)
    done = 0 if finished is None else len(finished)
    if done:
        print(f"resuming {args.out}: {done} of {total} rows already done", file=sys.stderr)

    def progress(row: dict) -> None:
        nonlocal done
        done += 1
        if out is not None:
            out.append(row)
        print(f"[{done}/{total}] {row['config']} {row['problem_id']} nfe={row['nfe']} correct={row['correct']}",
              file=sys.stderr, flush=True)

    try:
        adapter = load_model(args) if done < total else None
        rows = run_bench(adapter, problems, configs, config, on_row=progress, finished=finished,  # type: ignore[arg-type]
                         unsafe_exec=args.unsafe_exec)
    finally:
        if out is not None:
            out.close()
    warn_scoring(args, problems)
    source = f"prompts={args.prompts}" if args.prompts is not None else f"tasks={args.tasks}"
    summary = print_report(rows, sweep, f"model={args.model} {source} n={len(problems)} gen_length={config.gen_length}")
    if args.plot is not None:
        from dllm_viz.figures.compare import nfe_accuracy_scatter

        records = [(label, row["mean_nfe"], row["accuracy"]) for label, row in summary.iterrows()]
        with args.plot.open("x", encoding="utf-8") as handle:  # never replaces a chart written meanwhile
            nfe_accuracy_scatter(records, title=f"NFE vs accuracy, n={len(problems)}").write_html(handle)
        print(f"wrote {args.plot}")
    return 0


def summary_columns_epilog() -> str:
    """The summary's columns and what each measures (bench_columns.SUMMARY_COLUMNS), for --help."""
    lines = ["summary columns (one row per configuration):"]
    for name, text in SUMMARY_COLUMNS.items():
        lines += textwrap.wrap(f"{name}: {text}", 96, initial_indent="  ", subsequent_indent="    ",
                               break_on_hyphens=False)
    return "\n".join(lines).replace("%", "%%")


def table_text(table: pd.DataFrame) -> str:
    """A summary-like table as printed text: numbers to three decimals, a sign test's p (`sign_p`)
    by `metrics.format_p`."""
    from dllm_viz.metrics import format_p

    formatters = {"sign_p": format_p} if "sign_p" in table.columns else None
    return table.to_string(float_format=lambda v: f"{v:.3f}", formatters=formatters)


def print_report(rows: pd.DataFrame, sweep: Sweep | None, header: str) -> pd.DataFrame:
    """Print the summary of `rows` under `header`: per configuration, per task, and the sweep's
    frontier, AUP and where every other configuration sits against it; returns the summary.
    (Also what tools/bench_summary.py prints for the finished rows of unfinished runs.)"""
    from dllm_viz.bench import accuracy_by_task, summarize_bench, summarize_sweep

    summary = summarize_bench(rows)
    print(header)
    print(table_text(summary))
    if (by_task := accuracy_by_task(rows)) is not None:
        print("correct per task:")
        print(by_task.to_string())
    if sweep is not None:
        table, area, positions = summarize_sweep(summary, sweep)
        print(f"sweep {sweep.spec}: frontier of {sweep.knob}")
        print(table.to_string(float_format=lambda v: f"{v:.3f}"))
        dropped = f" ({area.dropped} points over 5 below the slowest left out)" if area.dropped else ""
        print(f"sweep AUP={area.value:.1f}{dropped}")
        for label, where in positions.items():
            print(f"{label}: {where} the {sweep.knob} frontier")
    return summary


_BOOLS = {"True": True, "False": False}


def typed_rows(rows):  # type: ignore[no-untyped-def]
    """Rows read back from --out with run_bench's types: from a csv all are strings, from jsonl they
    keep JSON's (a bool stays a bool); texts stay texts ("11" is not 11)."""
    import pandas as pd

    from dllm_viz.bench import ROW_KINDS

    for column, kind in ROW_KINDS.items():
        if kind == "bool":
            rows[column] = rows[column].map(lambda v: v if isinstance(v, bool) else _BOOLS.get(v, v))
        elif kind == "number":
            rows[column] = pd.to_numeric(rows[column])
    return rows


def _configs(args: argparse.Namespace, swept: list[str]) -> dict:  # type: ignore[type-arg]
    """Label -> Pipeline of every configuration (and `swept` point) crossed with every cache; refuses
    flags none of them uses."""
    from dllm_viz.bench import parse_config, split_configs, uncached_label

    options = {name: getattr(args, name, None) for name in policy_fields()}
    default_block = model_block_defaults(args, options)
    names = split_configs(args.policies)
    names += [label for label in swept if label not in names]
    if not names:
        raise ValueError(f"--policies {args.policies!r} names no configuration; give e.g. dense,threshold")
    if "dense" not in names:
        names.insert(0, "dense")  # the baseline every ratio is measured against
    caches = [None]
    if args.caches is not None:
        caches = [c.strip() for c in args.caches.split(",") if c.strip()]
        if not caches:
            raise ValueError(f"--caches {args.caches!r} names no cache mode; give e.g. none,dual")
    configs = {}
    for name in names:
        for cache in caches:
            label = name if cache in (None, "none") or uncached_label(name) is not None else f"{name}+{cache}"
            configs[label] = parse_config(label, options, default_block=default_block)
            if args.refresh_every is not None and configs[label].cache in APPROXIMATE:
                configs[label] = replace(configs[label], refresh_every=args.refresh_every)
    if "dense" not in configs:  # --caches without none: the baseline still runs uncached (every ratio's base)
        configs = {"dense": parse_config("dense", options, default_block=default_block), **configs}
    check_options_apply(args, list(configs.values()))
    return configs


def problem_set(args: argparse.Namespace, skip: int, n: int, *, note_short: bool = True) -> list:  # type: ignore[type-arg]
    """Problems skip .. skip + n - 1 of the prompt file (--prompts) or of each of --tasks (with
    --data); an empty set is an error, not an empty table, and a set with fewer than n after skip
    is said on stderr (`note_short`; `calibrate`, which takes its two disjoint slices through it,
    refuses a short slice instead)."""
    from dllm_viz.evaluation import take, task_problems
    from dllm_viz.tasks import BENCHMARK_TASKS, load_problems

    if args.prompts is not None:
        problems = take(load_problems(args.prompts), skip, n)
        if not problems:
            raise ValueError(f"--prompts {str(args.prompts)!r} has no problems; give a jsonl file with at least one")
        if note_short:
            note_short_set(f"--prompts {str(args.prompts)!r}", skip, n, len(problems))
        return problems
    tasks = task_list(args.tasks)
    files = iter(args.data or [])
    problems = []
    for task in tasks:
        part = take(task_problems(task, skip + n, next(files, None) if task in BENCHMARK_TASKS else None),
                    skip, n)
        if note_short:
            note_short_set(f"task {task!r}", skip, n, len(part))
        problems += part
    if not problems:
        raise ValueError(f"--tasks {args.tasks!r} gave no problems; check --n, --skip and --data")
    ids = [p.problem_id for p in problems]
    if len(set(ids)) < len(ids):  # e.g. arith,arith or hard,hard/chain: a problem would count twice
        twice = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"--tasks {args.tasks!r} holds problem {twice!r} twice (a task named twice, or a mix and "
                         "one of its families); name each task once")
    return problems
