"""`python -m dllm_viz decode`: decode one prompt and print the text, NFE and time."""

from __future__ import annotations

import argparse
from pathlib import Path

from dllm_viz.cli.options import (
    add_decode_options,
    add_model_options,
    check_pipelines,
    decode_config,
    load_model,
    pipeline,
)
from dllm_viz.trace_files import unlisted_name_problem
from dllm_viz.writable import check_writable


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `decode` subcommand."""
    parser = subparsers.add_parser(
        "decode", help="decode one prompt with a policy",
        description="Decode one prompt step by step and print the output, NFE and wall time.")
    parser.add_argument("--prompt", required=True, help="the prompt text (the model's template is applied)")
    parser.add_argument("--chat", action=argparse.BooleanOptionalAction, default=None,
                        help="apply the tokenizer's chat template (default: when it has one)")
    parser.add_argument("--save", type=Path, default=None,
                        help="write the trace to this .npz file (an existing file only with --force)")
    parser.add_argument("--force", action="store_true", help="let --save replace an existing file")
    add_model_options(parser)
    add_decode_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Decode and print; returns the exit status."""
    from dllm_viz.engine import decode

    if not args.prompt.strip():  # the adapter refuses it too, but only once the weights are loaded
        raise ValueError(f"--prompt {args.prompt!r} is empty; give the text to decode, e.g. --prompt 'What is 2 + 3?'")
    pipe, config = pipeline(args), decode_config(args)
    check_pipelines([pipe], config.gen_length)  # fail on bad options before loading weights
    if args.save is not None:
        check_save_target(args.save, force=args.force)
    adapter = load_model(args)
    prompt_ids = adapter.encode_prompt(args.prompt, chat=args.chat)
    trace = decode(adapter, prompt_ids, pipe, config, prompt_text=args.prompt)
    summary = trace.summary()
    print(trace.meta.answer_text)
    print(f"policy={pipe.label} nfe={trace.nfe} time={summary['seconds']:.3f}s "
          f"tokens/s={summary['tokens_per_second']:.1f} tokens/step={summary['tokens_per_step']:.2f} "
          f"policy_overhead={100 * summary['policy_overhead']:.2f}% stop={trace.meta.stop_reason}"
          + (f" edits={summary['edits']:.0f} post_steps={summary['post_steps']:.0f}" if trace.edited.any() else ""))
    if args.save is not None:
        print(f"saved {trace.save(args.save, overwrite=args.force)}")
    return 0


def check_save_target(path: Path, *, force: bool) -> None:
    """Refuse a --save that would fail or replace a trace, before the decode runs.

    Raises:
        ValueError: the name is one Trace.save refuses (it starts with '.'), the file exists
            without --force, or its folder is not writable.
    """
    target = path if path.suffix == ".npz" else path.with_name(path.name + ".npz")
    if (problem := unlisted_name_problem(target.name)) is not None:  # refused after the decode otherwise
        raise ValueError(f"--save {str(target)!r}: {problem}")
    if target.is_file() and not force:
        raise ValueError(f"--save {str(target)!r} already exists; pass --force to replace it or choose another name")
    check_writable(target, "--save")
