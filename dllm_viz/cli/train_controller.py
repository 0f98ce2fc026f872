"""`python -m dllm_viz train-controller`: fit the TSPD gate or the Learn2PD filter by oracle imitation."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dllm_viz.cli.options import add_model_options


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `train-controller` subcommand."""
    parser = subparsers.add_parser(
        "train-controller", help="train the TSPD controller or the Learn2PD filter",
        description="Dense-decode a prompt set, label each masked position by whether its candidate is already "
                    "the final token, and fit the controller; writes weights (.safetensors) and a JSON card.")
    parser.add_argument("--kind", choices=["tspd", "learn2pd"], default="tspd", help="which controller (default tspd)")
    parser.add_argument("--prompts", type=Path, default=None,
                        help="jsonl prompt set (default: freshly generated arith and code training problems, "
                             "never the held-out sets the benchmarks score)")
    parser.add_argument("--n", type=int, default=200, help="prompts to use (default 200)")
    parser.add_argument("--epochs", type=int, default=5, help="training epochs (default 5)")
    parser.add_argument("--gen-length", type=int, default=128, help="canvas of the dense runs (default 128)")
    parser.add_argument("--block-length", type=int, default=32, help="block of the dense runs (default 32)")
    parser.add_argument("--rollouts", type=int, default=0,
                        help="on-policy rounds after the dense fit: decode the prompts with the controller's own "
                             "hard gate, label against the dense endpoint, refit (the seed's straight-through "
                             "gate; default 0)")
    parser.add_argument("--out", type=Path, default=None,
                        help="weights path (default: dllm_viz/assets/controllers/<kind>_tiny.safetensors)")
    add_model_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Train and save; returns the exit status."""
    from dllm_viz.models import load
    from dllm_viz.policies.controller_weights import resolve_path
    from dllm_viz.tasks import get_task, load_problems
    from dllm_viz.train.controller import ControllerConfig, train_controller

    if args.n < 2:
        raise ValueError(f"`--n` must be >= 2 (one for validation), got {args.n}")
    config = ControllerConfig(kind=args.kind, gen_length=args.gen_length, block_length=args.block_length,
                              epochs=args.epochs, rollouts=args.rollouts)
    if args.prompts is not None:
        problems = load_problems(args.prompts)[: args.n]
    else:
        half = args.n // 2
        problems = (get_task("arith").generate(args.n - half, seed=1, split="train")
                    + get_task("code").generate(half, seed=1, split="train"))
    adapter = load(args.model, device=args.device, dtype=args.dtype, trust_remote_code=args.trust_remote_code)
    out = args.out or resolve_path("bundled", args.kind)
    path, card = train_controller(adapter, [p.prompt for p in problems], config, out,
                                  on_progress=lambda progress: print(progress.message(), flush=True))
    print(f"saved {path} validation={card['validation']}")
    if card.get("trivial"):
        print(f"warning: {card['trivial']}", file=sys.stderr)
    return 0
