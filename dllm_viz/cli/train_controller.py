"""`python -m dllm_viz train-controller`: fit the TSPD gate or the Learn2PD filter by oracle imitation."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dllm_viz.cli.options import add_model_options, load_model, model_settings, note_short_set, task_list

if TYPE_CHECKING:  # the task registry is imported when a command runs, not when the CLI starts
    from dllm_viz.tasks import Problem

# The folder the app's Train page writes to as well (pages/common.controller_dir reads the same).
CONTROLLER_DIR_ENV = "DLLM_VIZ_CONTROLLER_DIR"
SUFFIX = ".safetensors"  # the weights' format, whatever --out says
DEFAULT_TASKS = "arith,code"  # the easy split's tasks, the controllers' training set before --tasks


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `train-controller` subcommand."""
    parser = subparsers.add_parser(
        "train-controller", help="train the TSPD controller or the Learn2PD filter",
        description="Dense-decode a prompt set, label each masked position by whether its candidate is already "
                    "the final token, and fit the controller; writes weights (.safetensors) and a JSON card.")
    parser.add_argument("--kind", choices=["tspd", "learn2pd"], default="tspd", help="which controller (default tspd)")
    prompts = parser.add_mutually_exclusive_group()
    prompts.add_argument("--prompts", type=Path, default=None,
                         help="jsonl prompt set (default: freshly generated training problems of --tasks, "
                              "never the held-out sets the benchmarks score)")
    prompts.add_argument("--tasks", default=DEFAULT_TASKS,
                         help="comma-separated tasks whose training problems are generated, --n split evenly "
                              f"(default {DEFAULT_TASKS}; train on the tasks the controller will decode, e.g. hard)")
    parser.add_argument("--n", type=int, default=200, help="prompts to use (default 200)")
    parser.add_argument("--epochs", type=int, default=5, help="training epochs (default 5)")
    parser.add_argument("--gen-length", type=int, default=128, help="canvas of the dense runs (default 128)")
    parser.add_argument("--block-length", type=int, default=32, help="block of the dense runs (default 32)")
    parser.add_argument("--rollouts", type=int, default=0,
                        help="on-policy rounds after the dense fit: decode the prompts with the controller's own "
                             "hard gate, label against the dense endpoint, refit (the seed's straight-through "
                             "gate; default 0)")
    parser.add_argument("--out", type=Path, default=None,
                        help="weights path (default: $DLLM_VIZ_CONTROLLER_DIR or ~/.dllm_viz/controllers, "
                             "<kind>_<model>.safetensors; the bundled weights are replaced only when named here, "
                             "with --force)")
    parser.add_argument("--force", action="store_true", help="let --out replace existing weights")
    parser.add_argument("--resume", action="store_true",
                        help="reuse the dense trajectories an interrupted run kept beside --out")
    add_model_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Train and save; returns the exit status."""
    from dllm_viz.config import DecodeConfig
    from dllm_viz.policies import Pipeline
    from dllm_viz.tasks import load_problems
    from dllm_viz.train.controller import ControllerConfig, train_controller
    from dllm_viz.train.trajectory_store import TrajectoryStore
    from dllm_viz.writable import check_writable

    if args.n < 2:
        raise ValueError(f"`--n` must be >= 2 (one for validation), got {args.n}")
    config = ControllerConfig(kind=args.kind, gen_length=args.gen_length, block_length=args.block_length,
                              epochs=args.epochs, rollouts=args.rollouts)
    # The dense runs' own checks (train.controller.collect_trajectories decodes Pipeline.dense with
    # this DecodeConfig), made here so a bad canvas is refused before the model loads, not after.
    DecodeConfig(gen_length=args.gen_length)
    Pipeline.dense(args.block_length).validate(args.gen_length)
    out = weights_path(args)
    if out.exists() and not args.force:
        raise ValueError(f"--out {str(out)!r} already exists; pass --force to replace those weights or choose "
                         "another --out")
    check_writable(out, "--out")  # before the training, not after it
    trajectories = out.with_name(out.stem + ".trajectories")
    if args.resume and not trajectories.is_dir():
        raise ValueError(f"--resume reuses the dense trajectories an interrupted run kept in {str(trajectories)!r}, "
                         "and there is none; pass the --out (and --kind) of that run, or drop --resume")
    if args.prompts is not None:
        problems = load_problems(args.prompts)[: args.n]
        if len(problems) < 2:
            raise ValueError(f"--prompts {str(args.prompts)!r} has {len(problems)} problem(s); training needs at "
                             "least 2 (one for validation)")
        note_short_set(f"--prompts {str(args.prompts)!r}", 0, args.n, len(problems))
        check_not_heldout(args.prompts, [p.prompt for p in problems])
        tasks = None
    else:
        tasks = ",".join(names := training_tasks(args.tasks))
        problems = training_problems(names, args.n)
    prompts = [p.prompt for p in problems]
    # The model's weights fingerprint too: a --resume after `tiny` was retrained reused the old
    # model's dense trajectories, so the controller learned another model's endpoints.
    store = TrajectoryStore(trajectories, prompts,
                            {**model_settings(args), "gen_length": args.gen_length,
                             "block_length": args.block_length}, resume=args.resume)
    adapter = load_model(args)
    path, card = train_controller(adapter, prompts, config, out, store=store, tasks=tasks,
                                  on_progress=lambda progress: print(progress.message(), flush=True))
    store.remove()
    print(f"saved {path} validation={card['validation']}")
    if card.get("trivial"):
        print(f"warning: {card['trivial']}", file=sys.stderr)
    return 0


def training_tasks(text: str) -> list[str]:
    """The tasks --tasks names, each checked to exist (before the model loads).

    Raises:
        ValueError: no name, a name given twice, an unknown task (the message lists the known ones), or
            a real benchmark (tasks.BENCHMARK_TASKS: read from a data file, it has no training split).
    """
    from dllm_viz.tasks import BENCHMARK_TASKS, get_task

    names = task_list(text)
    if len(set(names)) < len(names):
        raise ValueError(f"--tasks {text!r} names a task twice; name each once (--n is split evenly among them)")
    for name in names:
        get_task(name)  # an unknown name: its ValueError lists the known tasks
        if name in BENCHMARK_TASKS:
            raise ValueError(f"--tasks {name!r}: {name} is a real benchmark, read from a data file, with no generated "
                             f"training split; give generated tasks such as {DEFAULT_TASKS} or hard, or a prompt set "
                             "of training problems as --prompts")
    return names


def training_problems(names: list[str], n: int) -> list[Problem]:
    """`n` freshly generated training problems (seed 1), split evenly among tasks `names` in order,
    the first ones taking the remainder (arith,code: arith n - n // 2, code n // 2, as before --tasks)."""
    from dllm_viz.tasks import get_task

    share, extra = divmod(n, len(names))
    return [problem for index, name in enumerate(names)
            for problem in get_task(name).generate(share + (index < extra), seed=1, split="train")]


def check_not_heldout(path: Path, prompts: list[str]) -> None:
    """Refuse a prompt set holding problems of the bundled held-out sets (sample_prompts/*_heldout.jsonl),
    which bench, eval and the training score measure: a controller trained on them is then scored on
    its own training problems, and nothing said so.

    Raises:
        ValueError: naming the set, how many of its prompts are held out, and the fix.
    """
    from dllm_viz.evaluation import SAMPLE_DIR
    from dllm_viz.tasks import load_problems

    mine = set(prompts)
    for heldout in sorted(SAMPLE_DIR.glob("*_heldout.jsonl")):
        if path.resolve() == heldout.resolve():
            shared = len(mine)
        else:
            shared = len(mine & {p.prompt for p in load_problems(heldout)})
        if shared:
            raise ValueError(f"--prompts {str(path)!r} holds {shared} problem(s) of the held-out set "
                             f"{heldout.parent.name}/{heldout.name}, which the benchmarks score; train on training "
                             "problems (omit --prompts for freshly generated ones)")


def weights_path(args: argparse.Namespace) -> Path:
    """--out with the .safetensors suffix, else the user's controller folder (never the bundled file).

    Raises:
        ValueError: --out is a folder (its suffix swap would write the weights beside it, not in it),
            or has another suffix than .safetensors (`a.txt` would silently become `a.safetensors`).
    """
    if args.out is not None:
        if args.out.is_dir():
            raise ValueError(f"--out {str(args.out)!r} is a directory; give a weights file in it, e.g. "
                             f"{str(args.out / f'{args.kind}.safetensors')!r}")
        if args.out.suffix not in ("", SUFFIX):
            raise ValueError(f"--out {str(args.out)!r} ends in {args.out.suffix!r}, but the weights are written as "
                             f"{SUFFIX} (a .json card beside them); name it e.g. "
                             f"{str(args.out.with_suffix(SUFFIX))!r}")
        return args.out.with_suffix(SUFFIX)
    folder = Path(os.environ.get(CONTROLLER_DIR_ENV, "~/.dllm_viz/controllers")).expanduser()
    model = "tiny" if args.model == "tiny" else Path(args.model.rstrip("/")).name or "model"
    return folder / f"{args.kind}_{model}{SUFFIX}"
