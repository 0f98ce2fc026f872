"""Command line: `python -m dllm_viz {decode,train-tiny,eval,...}`.

Each subcommand lives in its own module exposing `add_parser(subparsers)`, which registers the
subcommand with `set_defaults(func=run)`. Errors the user can fix exit with status 2 and one
line naming the bad value and the fix.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

# Subcommand modules, in the order `--help` lists them. A module missing from an install
# (e.g. training extras) is skipped rather than breaking the whole CLI.
_SUBCOMMANDS = ("decode", "eval", "bench", "bench_pipeline", "calibrate", "diagnose", "train_tiny", "train_controller")


class OneLineParser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are a single line, not a usage dump, and which takes no
    abbreviated flags: argparse would read a prefix as the one option it starts, so `bench --cache
    dual` silently ran as `--caches dual` (another experiment than the one typed)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every available subcommand."""
    parser = OneLineParser(prog="python -m dllm_viz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for name in _SUBCOMMANDS:
        try:
            module = importlib.import_module(f"dllm_viz.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"dllm_viz.cli.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run the chosen subcommand; returns the exit status."""
    from dllm_viz.models import ModelLoadError
    from dllm_viz.trace import TraceFileError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, ModelLoadError, TraceFileError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
