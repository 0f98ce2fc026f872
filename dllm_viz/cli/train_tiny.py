"""`python -m dllm_viz train-tiny`: train or resume the bundled tiny dLLM from the command line.

Argument parsing and progress printing only; the work is `dllm_viz.train.tiny.train`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields, replace
from pathlib import Path

from dllm_viz.train.config import LOSS_WEIGHTINGS, PRECISIONS, DataConfig, ModelConfig, TrainConfig


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the `train-tiny` subcommand."""
    parser = subparsers.add_parser(
        "train-tiny",
        help="train (or --resume) the bundled tiny masked-diffusion model on CPU",
        description="Train the tiny dLLM on synthetic arithmetic + code tasks; the best "
        "checkpoint (held-out answer-token accuracy) is exported to --export-dir as it improves.",
    )
    _add_arguments(parser)
    parser.set_defaults(func=run)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    d_train, d_data, d_model = TrainConfig(), DataConfig(), ModelConfig()
    parser.add_argument(
        "--minutes", type=float, default=d_train.minutes, help="wall-clock budget of this session"
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=d_train.max_steps,
        help="stop at this global step (0: none)",
    )
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    parser.add_argument(
        "--init-from", type=Path, default=None,
        help="without a checkpoint in OUT, warm-start from an exported model directory "
        "(e.g. dllm_viz/assets/tiny): its weights, tokenizer, sizes and step counter",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("runs/tiny"), help="checkpoint/log directory"
    )
    parser.add_argument(
        "--export-dir",
        type=Path,
        default=None,
        help="where the best model is exported (default: the bundled dllm_viz/assets/tiny)",
    )
    parser.add_argument("--no-export", action="store_true", help="do not export the best model")
    parser.add_argument("--lr", type=float, default=d_train.lr, help="peak AdamW learning rate")
    parser.add_argument("--warmup-steps", type=int, default=d_train.warmup_steps)
    parser.add_argument(
        "--loss-weighting",
        choices=LOSS_WEIGHTINGS,
        default=d_train.loss_weighting,
        help="'none' (default: measured fastest), LLaDA's 'inv_t', or 'inv_t_clipped'",
    )
    parser.add_argument("--eval-every", type=int, default=d_train.eval_every)
    parser.add_argument(
        "--snapshot-every", type=int, default=d_train.snapshot_every,
        help="also export the model every this many steps (at the next evaluation) into "
        "OUT/snapshots/step_N, to pick a stage's model by a bench rather than the held-out score (0: never)",
    )
    parser.add_argument("--log-every", type=int, default=d_train.log_every)
    parser.add_argument("--batch-size", type=int, default=d_data.batch_size)
    parser.add_argument("--code-fraction", type=float, default=d_data.code_fraction)
    parser.add_argument(
        "--hard-fraction", type=float, default=d_data.hard_fraction,
        help="share of rows from the hard split's families (depth chains, breadth, ParallelBench); "
        "the rest after code is easy arithmetic",
    )  # fmt: skip
    parser.add_argument(
        "--focus-fraction", type=float, default=d_data.focus_fraction,
        help="share of rows with focus masking (a decoded prefix, every computed number after it "
        "masked); 0 = plain LLaDA SFT masking",
    )  # fmt: skip
    parser.add_argument(
        "--focus-last-fraction", type=float, default=d_data.focus_last_fraction,
        help="share of the focus rows cut at the last worked line, so it is computed with the answer "
        "line masked too (a one-line window's state at a chain's end; 0 = a uniform cut for all)",
    )  # fmt: skip
    parser.add_argument(
        "--focus-last-families", type=_families, default=d_data.focus_last_families, metavar="FAMILY,...",
        help="only these families' focus rows take --focus-last-fraction and --focus-window-fraction (e.g. "
        "hard/long); default: every family",
    )  # fmt: skip
    parser.add_argument(
        "--focus-window-fraction", type=float, default=d_data.focus_window_fraction,
        help="share of the focus rows with everything after the cut line masked (later lines, the answer line, "
        "the EOS tail): a one-line window's state; 0 = the rest keeps its i.i.d. masking",
    )  # fmt: skip
    parser.add_argument(
        "--drill-every", type=int, default=d_data.drill_every,
        help="every Nth step is a batch of bare-expression drills (0 = never)",
    )  # fmt: skip
    parser.add_argument("--drill-batch-size", type=int, default=d_data.drill_batch_size)
    parser.add_argument(
        "--drill-max-ops", type=int, default=d_data.drill_max_ops,
        help="operations per drill, 1..N evaluated left to right (1 = one-operation drills)",
    )  # fmt: skip
    parser.add_argument(
        "--list-drill-every", type=int, default=d_data.list_drill_every,
        help="every Nth step (not an arithmetic drill step) is a batch of ParallelBench problems only "
        "(0 = never): the list operations need copying from the prompt, which a few rows a batch did not teach",
    )  # fmt: skip
    parser.add_argument("--list-drill-batch-size", type=int, default=d_data.list_drill_batch_size)
    parser.add_argument(
        "--hard-weight", type=_family_weight, action="append", default=[], metavar="FAMILY=WEIGHT",
        help="train on this hard family at this weight instead of its held-out mix weight (repeatable; "
        "e.g. hard/chain=0.6 where the mix gives chains 0.3 of 1.0); held-out sets and scores keep the mix",
    )  # fmt: skip
    parser.add_argument("--hidden-size", type=int, default=d_model.hidden_size)
    parser.add_argument("--num-layers", type=int, default=d_model.num_layers)
    parser.add_argument("--num-heads", type=int, default=d_model.num_heads)
    parser.add_argument("--intermediate-size", type=int, default=d_model.intermediate_size)
    parser.add_argument("--seed", type=int, default=d_train.seed)
    parser.add_argument(
        "--threads", type=int, default=d_train.num_threads, help="max torch threads"
    )
    parser.add_argument(
        "--fixed-threads",
        action="store_true",
        help="always use --threads (default: measure 1 vs --threads and use the faster)",
    )
    parser.add_argument(
        "--device", default=d_train.device,
        help="cpu (default), cuda, cuda:N or mps; on a GPU raise --batch-size (e.g. 256)",
    )
    parser.add_argument(
        "--data-workers", type=int, default=d_train.data_workers,
        help="processes building batches ahead (0: inline, right on 2 cores; on a GPU, e.g. 12)",
    )  # fmt: skip
    parser.add_argument(
        "--compile", action="store_true", help="torch.compile the model (slower on 2 cores)"
    )
    parser.add_argument(
        "--precision", choices=PRECISIONS, default=d_train.precision,
        help="bf16: the training forward/backward under bfloat16 autocast (about 2x faster on a CPU "
        "with AVX512-BF16 or AMX, and on a GPU); weights and evaluation stay fp32",
    )  # fmt: skip
    parser.add_argument(
        "--name-tokens", action="store_true",
        help="a new run or warm start gives each ParallelBench name a token of its own (a name is ~4 tokens "
        "in the bundled tokenizer); the new embedding rows start as the mean of the rows that spelled it",
    )  # fmt: skip
    parser.add_argument(
        "--grow-layers", type=int, default=0,
        help="with --init-from: insert this many layers among the exported model's, spread evenly, each "
        "starting as the identity (zero output projections), so training resumes from exactly the "
        "export's function with more depth (a 6-layer model: up to 12; dllm_viz/train/grow.py)",
    )  # fmt: skip


def _families(text: str) -> tuple[str, ...]:
    """`FAMILY,FAMILY` of `--focus-last-families` (the names are checked by the config)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _family_weight(text: str) -> tuple[str, float]:
    """`FAMILY=WEIGHT` of `--hard-weight` (the family's name is checked by the config)."""
    name, sep, weight = text.partition("=")
    try:
        value = float(weight)
    except ValueError:
        value = None
    if not sep or not name or value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not FAMILY=WEIGHT; write e.g. hard/chain=0.6")
    return name, value


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """TrainConfig for parsed arguments (on --resume, model/data come from the checkpoint).

    Raises:
        ValueError: a bad value (the configs' own checks), or --hard-weight where no row would
            follow it: the weights pick among the hard rows and list drills, and with
            --hard-fraction 0 and --list-drill-every 0 (the defaults) there are none, so the flag
            was silently a no-op. Not on --resume, where the data mix is the checkpoint's
            (check_kept_settings compares the flag with it).
    """
    if args.hard_weight and not args.hard_fraction and not args.list_drill_every and not args.resume:
        shown = " ".join(f"--hard-weight {name}={weight:g}" for name, weight in args.hard_weight)
        raise ValueError(f"{shown} weighs the hard rows, but --hard-fraction 0 and --list-drill-every 0 train on "
                         "none; pass e.g. --hard-fraction 0.6 (or --list-drill-every 3), or drop --hard-weight")
    data = replace(
        DataConfig(), batch_size=args.batch_size, code_fraction=args.code_fraction, hard_fraction=args.hard_fraction,
        focus_fraction=args.focus_fraction, focus_last_fraction=args.focus_last_fraction,
        focus_last_families=args.focus_last_families, focus_window_fraction=args.focus_window_fraction,
        drill_every=args.drill_every,
        drill_batch_size=args.drill_batch_size, drill_max_ops=args.drill_max_ops,
        list_drill_every=args.list_drill_every, list_drill_batch_size=args.list_drill_batch_size,
        hard_weights=tuple(args.hard_weight),
    )  # fmt: skip
    model = ModelConfig(
        hidden_size=args.hidden_size,
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        intermediate_size=args.intermediate_size,
    )
    return TrainConfig(
        minutes=args.minutes,
        max_steps=args.max_steps,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        loss_weighting=args.loss_weighting,
        eval_every=args.eval_every,
        snapshot_every=args.snapshot_every,
        log_every=args.log_every,
        seed=args.seed,
        num_threads=args.threads,
        adaptive_threads=not args.fixed_threads,
        use_compile=args.compile,
        device=args.device,
        data_workers=args.data_workers,
        precision=args.precision,
        name_tokens=args.name_tokens,
        grow_layers=args.grow_layers,
        data=data,
        model=model,
    )


def _print(line: str) -> None:
    print(line, flush=True)


def run(args: argparse.Namespace) -> int:
    """Run training for parsed `args`; returns the process exit status."""
    # Imported here so `python -m dllm_viz --help` does not pay for torch and transformers.
    from dllm_viz.train.export import ASSETS_DIR
    from dllm_viz.train.tiny import train

    export_dir = None if args.no_export else (args.export_dir or ASSETS_DIR)
    try:
        config = config_from_args(args)
        resume = args.resume and (Path(args.out) / "checkpoint.pt").is_file() if args.init_from else args.resume
        check_kept_settings(args, config, resume)
        if not resume and args.init_from is None and export_dir is not None:
            check_fresh_export(Path(export_dir), explicit=args.export_dir is not None)
        summary = train(
            args.out, config, resume=resume, export_dir=export_dir, progress=_print,
            init_from=args.init_from,
        )
    except (ValueError, FileNotFoundError, FileExistsError) as exc:
        print(f"train-tiny: error: {exc}", file=sys.stderr)
        return 2
    _print(
        f"done: step {summary['step']}, {summary['minutes']:.1f} min, "
        f"best step {summary['best_step']} score {summary['best_score']:.4f}"
    )
    return 0


def _flag(field_name: str) -> str:
    """The command-line flag that sets a ModelConfig / DataConfig field (its name, dashed)."""
    return "--hard-weight" if field_name == "hard_weights" else "--" + field_name.replace("_", "-")


def _passed(config: TrainConfig) -> dict[str, tuple[str, object]]:
    """Model / data / seed fields of `config` set away from the defaults (so given on the command
    line): field -> (flag, value). Each section is keyed by its own name ("model.hidden_size")."""
    default = TrainConfig()
    passed: dict[str, tuple[str, object]] = {}
    for section in ("model", "data"):  # a field no flag sets always holds its default: never listed
        mine, base = getattr(config, section), getattr(default, section)
        for name in (f.name for f in fields(mine)):
            if getattr(mine, name) != getattr(base, name):
                passed[f"{section}.{name}"] = (_flag(name), getattr(mine, name))
    if config.seed != default.seed:
        passed["seed"] = ("--seed", config.seed)
    return passed


def _value_of(config: TrainConfig, key: str) -> object:
    section, _, name = key.rpartition(".")
    return getattr(getattr(config, section) if section else config, name)


def _shown(flag: str, value: object) -> str:
    if flag == "--hard-weight":
        return " ".join(f"{flag} {name}={weight:g}" for name, weight in value) or "no --hard-weight"  # type: ignore[attr-defined]
    if flag == "--focus-last-families":
        return f"{flag} {','.join(value) or '(every family)'}"  # type: ignore[call-overload]
    return f"{flag} {value}"


def check_kept_settings(args: argparse.Namespace, config: TrainConfig, resume: bool) -> None:
    """Refuse a flag that the run would silently ignore: resuming keeps the checkpoint's model,
    data mix and seed, and a warm start takes the model's sizes from the export, so e.g.
    `--resume --batch-size 64` trained on at the checkpoint's 32 without a word. A flag that
    repeats the kept value (the same command line run again) is fine.

    Raises:
        ValueError: naming each differing flag, the kept value and the fix.
        FileNotFoundError: --resume without a checkpoint (train's own message).
    """
    passed = _passed(config)
    if resume and passed:
        from dllm_viz.train.checkpoint import CHECKPOINT_NAME, load_checkpoint
        from dllm_viz.train.config import config_from_dict

        path = Path(args.out) / CHECKPOINT_NAME
        try:
            kept = config_from_dict(load_checkpoint(path, mapped=True)["config"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"--resume: the configuration in {path} cannot be read ({type(exc).__name__}: {exc}); "
                             "start a new run with another --out") from None
        differ = [(flag, value, _value_of(kept, key)) for key, (flag, value) in passed.items()
                  if value != _value_of(kept, key)]
        if differ:
            said = "; ".join(f"{_shown(flag, value)} is not its {_shown(flag, old)}" for flag, value, old in differ)
            raise ValueError(f"--resume continues {path} with its own model, data mix and seed, but {said}; drop "
                             f"{'that flag' if len(differ) == 1 else 'those flags'} to continue the run, or start a "
                             "new run with another --out")
    elif args.init_from is not None and not resume and any(key.startswith("model.") for key in passed):
        from dllm_viz.train.tiny import read_export_config

        raw, _ = read_export_config(Path(args.init_from))
        export = {"model.hidden_size": raw["hidden_size"], "model.num_heads": raw["num_attention_heads"],
                  "model.num_layers": raw["num_hidden_layers"] + config.grow_layers,
                  "model.intermediate_size": raw["intermediate_size"]}
        differ = [(passed[key][0], passed[key][1], size) for key, size in export.items()
                  if key in passed and passed[key][1] != size]
        if differ:
            said = "; ".join(f"{flag} {value} is not its {size}" for flag, value, size in differ)
            raise ValueError(f"--init-from {str(args.init_from)!r} sets the model's sizes, but {said}; drop "
                             f"{'that flag' if len(differ) == 1 else 'those flags'} (--grow-layers adds layers to an "
                             "export), or train a new model without --init-from")


def check_fresh_export(export_dir: Path, *, explicit: bool) -> None:
    """Refuse a new run (no checkpoint, no --init-from) exporting where a model already is: a
    new run's best score starts at nothing, so its first evaluation replaced that model whatever
    either scored; by default that is the bundled dllm_viz/assets/tiny, so a 3-step trial run
    destroyed the shipped model.

    Raises:
        ValueError: naming the folder, what it holds and the ways out.
    """
    config = export_dir / "config.json"
    if not config.is_file():
        return
    held = "an exported model"
    try:
        section = json.loads(config.read_text(encoding="utf-8")).get("dllm_viz") or {}
        held += f" (step {int(section['trained_steps'])}, score {float(section['best_score']):.4f})"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    where = "--export-dir" if explicit else "the default export folder (the bundled model; no --export-dir given)"
    raise ValueError(f"{where} {str(export_dir)!r} already holds {held}, which a new run would replace at its first "
                     "evaluation whatever it scores; pass --export-dir NEW_FOLDER or --no-export, or --init-from "
                     f"{str(export_dir)!r} to continue training that model")


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m dllm_viz.cli.train_tiny")
    _add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
