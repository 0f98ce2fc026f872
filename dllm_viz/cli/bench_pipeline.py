"""`python -m dllm_viz bench-pipeline`: our engine against diffusers' LLaDA2Pipeline, wall-time ratios.

A subcommand of its own rather than a `bench` flag: `bench` compares policies on scored prompt
sets, and none of its task, policy, cache or sweep options would apply here.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `bench-pipeline` subcommand."""
    parser = subparsers.add_parser(
        "bench-pipeline", help="time our engine against diffusers' LLaDA2Pipeline on one block-causal model",
        description="Decode the same prompts with diffusers' LLaDA2Pipeline and with our engine (block_refinement "
                    "over aligned blocks, without and with the exact prefix cache), interleaved and repeated in one "
                    "process, check that every run gives the pipeline's tokens, and print per configuration the "
                    "median wall seconds, their spread, NFE, rows fed to the model and the ratio against the "
                    "pipeline (> 1: faster). Needs diffusers.")
    parser.add_argument("--model", default="random",
                        help="'random' (default: a seeded ~20M-parameter random block-causal Llama, built on the fly) "
                             "or a block-causal checkpoint directory (e.g. one written by --save-model)")
    parser.add_argument("--save-model", type=Path, default=None,
                        help="with --model random: write the random checkpoint here (an empty or new directory) "
                             "instead of a temporary one, to reuse it with --model DIR")
    parser.add_argument("--seed", type=int, default=0, help="weights seed of the random model (default 0)")
    parser.add_argument("--gen-length", type=int, default=256, help="generated positions per prompt (default 256)")
    parser.add_argument("--block-length", type=int, default=None,
                        help="block length B (default: the model's; 32 for the random model)")
    parser.add_argument("--steps", type=int, default=32,
                        help="refinement steps per block, the pipeline's num_inference_steps (default 32)")
    parser.add_argument("--n", type=int, default=2, help="prompts (default 2)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed runs of each configuration per prompt (default 3)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    parser.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                        help="weights dtype (default: float32 on CPU, bf16 on CUDA)")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write every timed run (configuration, prompt, repeat, wall and CPU seconds, NFE, "
                             "rows fed, same tokens) to this CSV (never replaces an existing file)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's own choice); BENCHMARKS.md's CPU rows use 1")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Benchmark and print the table; returns 0, or 1 when some run's tokens differ from the pipeline's."""
    import torch

    from dllm_viz.bench_pipeline import PipelineBenchSettings
    from dllm_viz.random_block_model import SHAPE_20M

    _check_args(args)
    random_model = args.model == "random"
    block_length = args.block_length if args.block_length is not None else (
        SHAPE_20M.block_length if random_model else None)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if block_length is not None:  # bad numbers fail before any model is built or loaded
        PipelineBenchSettings(gen_length=args.gen_length, block_length=block_length, steps=args.steps,
                              repeats=args.repeats)
    if not random_model:
        return _bench(args, args.model, block_length)
    if args.save_model is not None:
        return _bench(args, str(_build(args, args.save_model, block_length)), block_length)
    with tempfile.TemporaryDirectory(prefix="dllm_viz_bench_") as scratch:
        return _bench(args, str(_build(args, Path(scratch) / "model", block_length)), block_length)


def _check_args(args: argparse.Namespace) -> None:
    """Refuse bad values before anything heavy is imported or built."""
    for flag in ("n", "repeats", "gen_length", "steps"):
        value = getattr(args, flag)
        if value < 1:
            raise ValueError(f"`--{flag.replace('_', '-')}` must be >= 1, got {value}")
    if args.block_length is not None and args.block_length < 1:
        raise ValueError(f"`--block-length` must be >= 1, got {args.block_length}")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"`--threads` must be >= 1, got {args.threads}; omit it for torch's default")
    if args.out is not None:
        from dllm_viz.writable import check_writable

        if args.out.exists():
            raise ValueError(f"--out {str(args.out)!r} already exists; choose a new file name")
        check_writable(args.out, "--out")
    if args.model != "random":
        if args.save_model is not None:
            raise ValueError("--save-model writes the random model; drop it, or use --model random")
        if not Path(args.model).is_dir():
            raise ValueError(f"--model {args.model!r} is neither 'random' nor a checkpoint directory; check the "
                             "path or omit --model")


def _build(args: argparse.Namespace, directory: Path, block_length: int) -> Path:
    from dataclasses import replace

    from dllm_viz.random_block_model import SHAPE_20M, build_random_block_model

    shape = replace(SHAPE_20M, block_length=block_length, seed=args.seed,
                    max_positions=max(SHAPE_20M.max_positions, 2 * (args.gen_length + 128)))
    print(f"building the random block-causal model in {directory}", file=sys.stderr, flush=True)
    return build_random_block_model(directory, shape)


def _bench(args: argparse.Namespace, model: str, block_length: int | None) -> int:
    import torch

    from dllm_viz.bench_pipeline import (
        PipelineBenchSettings,
        bench_prompts,
        check_model,
        run_pipeline_bench,
        summarize_pipeline_bench,
    )
    from dllm_viz.models import load

    adapter = load(model, device=args.device, dtype=args.dtype)
    block_length = block_length or adapter.info.block_length or 1
    check_model(adapter, block_length)  # before the settings: a model without blocks is the error to name
    settings = PipelineBenchSettings(gen_length=args.gen_length, steps=args.steps, repeats=args.repeats,
                                     block_length=block_length)
    prompts = bench_prompts(adapter, args.n)
    total = 3 * len(prompts) * settings.repeats
    done = 0

    def progress(row: dict) -> None:
        nonlocal done
        done += 1
        print(f"[{done}/{total}] {row['config']} prompt {row['prompt']} repeat {row['repeat']}: "
              f"{row['seconds']:.2f}s nfe={row['nfe']}", file=sys.stderr, flush=True)

    load_before = _load_average()
    rows = run_pipeline_bench(adapter, prompts, settings, on_row=progress)
    summary = summarize_pipeline_bench(rows)
    if args.out is not None:
        rows.to_csv(args.out, index=False)
    params = sum(p.numel() for p in adapter.model.parameters())
    threads = torch.get_num_threads() if adapter.device.type == "cpu" else "n/a"
    print(f"model={args.model} ({params / 1e6:.1f}M parameters) device={adapter.device} dtype={adapter.info.dtype} "
          f"threads={threads} gen_length={settings.gen_length} block_length={settings.block_length} "
          f"steps={settings.steps} n={len(prompts)} prompt_tokens={[len(p) for p in prompts]} "
          f"repeats={settings.repeats} load_avg={load_before}->{_load_average()}")
    print(summary.to_string(float_format=lambda v: f"{v:.3f}"))
    differ = summary[summary["same_tokens"] < 1.0]
    if not differ.empty:
        print(f"tokens differ from the pipeline's in {', '.join(map(str, differ.index))}: the timings compare "
              "different decodes", file=sys.stderr)
        return 1
    print("every run produced the pipeline's tokens")
    return 0


def _load_average() -> str:
    """The 1-minute load average (the machine is shared: a ratio is read against it)."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"
