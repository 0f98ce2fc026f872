"""Shared CLI options: model loading, decode settings, and policy fields from the registries.

Policy options are generated from the dataclass fields of every registered component, so a
new policy's knobs appear in `--help` without touching the CLI. An option applies to
whichever chosen component has a field of that name.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dllm_viz.cache_modes import APPROXIMATE, CACHE_MODES
from dllm_viz.config import DecodeConfig
from dllm_viz.explain import cache_help, component_help, knob_help
from dllm_viz.policies import BLOCKS, EXTRAPOLATORS, RULES, STOPS, Pipeline
from dllm_viz.policies.defaults import BIDIRECTIONAL, policy_defaults
from dllm_viz.policies.knobs import Knob, knobs, parse_text

if TYPE_CHECKING:  # torch loads only when a command loads a model
    from dllm_viz.models.base import ModelAdapter

BLOCK_CAUSAL = policy_defaults(32)  # its names, for --help (the block length is the model's)


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """--model, --device, --dtype, --trust-remote-code, --threads (see load_model)."""
    group = parser.add_argument_group("model")
    group.add_argument("--model", default="tiny",
                       help="'tiny' (bundled), a local checkpoint directory, or a hub id (default: tiny)")
    group.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, cuda:N, mps")
    group.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                       help="weights dtype (default: bf16 on CUDA, fp16 on MPS, fp32 on CPU)")
    group.add_argument("--trust-remote-code", action="store_true",
                       help="allow model families dllm_viz does not support natively, through their own code")
    group.add_argument("--threads", type=int, default=None,
                       help="CPU threads for the model's passes (default: $DLLM_VIZ_THREADS, else 1 for models "
                            "under 100M parameters, which run fastest on one thread, and torch's default above)")


def load_model(args: argparse.Namespace) -> ModelAdapter:
    """Load --model as a ModelAdapter and apply the CPU thread policy to it (dllm_viz/threads.py):
    --threads, else $DLLM_VIZ_THREADS, else the policy's count for its size. Says the choice on
    stderr, since wall-clock columns depend on it.

    Raises:
        ModelLoadError: see dllm_viz.models.load.
        ValueError: --threads below 1 or $DLLM_VIZ_THREADS not a thread count.
    """
    from dllm_viz.models import load
    from dllm_viz.threads import apply_inference_threads, requested_threads

    override = requested_threads(args.threads)  # a bad value fails before loading
    adapter = load(args.model, device=args.device, dtype=args.dtype, trust_remote_code=args.trust_remote_code)
    choice = apply_inference_threads(adapter.model, adapter.info.device, override=override)
    print(f"note: CPU threads: {choice.reason}", file=sys.stderr)
    return adapter


def add_results_options(parser: argparse.ArgumentParser, *, record: str, unit: str, flag: str = "--out") -> None:
    """`flag` / `--resume` of the commands that write results as they finish (eval, bench, calibrate).

    Args:
        record: what one written record is, e.g. "one JSON line per problem".
        unit: what --resume skips, e.g. "problems".
        flag: the file's option (calibrate's --out is its report, its rows go to --rows).
    """
    parser.add_argument(flag, type=Path, default=None,
                        help=f"write {record} here, each as soon as it is finished (never replaces an existing file)")
    parser.add_argument("--resume", action="store_true",
                        help=f"continue an interrupted {flag} file: skip the {unit} it already holds (same settings "
                             "required)")


def model_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The model part of a results file's settings: its name and its files' fingerprint, so
    --resume refuses rows of a model that was retrained under the same name (e.g. "tiny")."""
    from dllm_viz.models.loading import weights_fingerprint

    return {"model": args.model, "model_weights": weights_fingerprint(args.model)}


def recorded_pipeline(pipe: Pipeline, args: argparse.Namespace) -> dict[str, Any]:
    """A configuration as a results file's settings keep it: with the family-calibrated knobs
    left unset filled for --model's family (read from its config.json, before any load), so a
    file says the values its rows were decoded with, and --resume refuses rows decoded at another
    family point (a recalibrated default) as other settings."""
    from dllm_viz.models import family_of

    return pipe.calibrated(family_of(args.model)).to_dict()


def data_setting(args: argparse.Namespace) -> list[str] | None:
    """The --data files of a run as its results file keeps them: gsm8k's and humaneval's problem ids
    are positions in the file, so rows of another file must not be taken for this one's."""
    return None if args.data is None else [str(path) for path in args.data]


def check_pipelines(pipelines: Iterable[Pipeline], gen_length: int) -> None:
    """Refuse a configuration that cannot decode `gen_length` positions (Pipeline.validate), before
    the model loads, and say once on stderr which ask for more `steps` than there are positions.

    Every pass commits at least one position (DecodeConfig.max_steps), so a rule on a step budget
    (fixed_steps, CORA, Learn2PD, Dream) runs at most `gen_length` passes: its trailing steps would
    commit nothing and are skipped (policies/fixed_steps.py; the tokens are LLaDA's generate's). That
    is the rule, not an error, but a user who asked for 100 passes should not have to find NFE=16 in
    the table to learn it.

    Raises:
        ValueError: from Pipeline.validate (the message names the value and the fix).
    """
    over = []
    for pipe in pipelines:
        pipe.validate(gen_length)
        steps = getattr(pipe.rule, "steps", None)
        if steps is not None and steps > gen_length:
            over.append(f"{pipe.rule.name} steps={steps}")
    if over:
        print(f"note: {', '.join(dict.fromkeys(over))} asks for more steps than --gen-length {gen_length}: every "
              f"pass commits at least one position, so at most {gen_length} passes run (steps left with nothing "
              "to commit are skipped)", file=sys.stderr)


def task_list(text: str) -> list[str]:
    """The task names of a `--tasks` value, in order, blanks dropped (bench, calibrate, train-controller
    and tools/block_passes.py read it alike; each checks the names its own way).

    Raises:
        ValueError: the value names no task.
    """
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ValueError(f"--tasks {text!r} names no task; give e.g. arith,code or hard")
    return names


def note_short_set(source: str, skip: int, n: int, got: int) -> None:
    """Say on stderr that a problem set holds fewer than --n problems after --skip, so `got` run.

    Not an error: the set's problems are a result worth having. But a user who asked for 1000 and
    reads a table of 500 should be told why, not left to count rows. (`take` already refuses a
    --skip that leaves no problem.)
    """
    if got < n:
        skipped = f"--skip {skip} " if skip else ""
        print(f"note: {source} has {skip + got} problems, so {skipped}--n {n} runs {got}", file=sys.stderr)


def check_resume(args: argparse.Namespace, flag: str = "--out") -> None:
    """Refuse --resume without the results file it continues."""
    if args.resume and getattr(args, flag.removeprefix("--").replace("-", "_")) is None:
        raise ValueError(f"--resume continues the {flag} file of an interrupted run; pass {flag} PATH as well")


def add_scoring_options(parser: argparse.ArgumentParser) -> None:
    """--unsafe-exec: the opt-in to score code where the bubblewrap sandbox cannot run."""
    parser.add_argument("--unsafe-exec", action="store_true",
                        help="score code tasks WITHOUT the bubblewrap sandbox (own process group, rlimits and "
                             "bounded output only: the code can reach the network and your files); only for "
                             "machines where bwrap cannot run")


def check_scoring(args: argparse.Namespace, problems: list[Any]) -> None:
    """Refuse before loading the model when code can't be sandboxed; warn when it runs unsafe."""
    from dllm_viz.evaluation import require_code_sandbox

    require_code_sandbox(problems, unsafe=args.unsafe_exec)
    warn_scoring(args, problems)


def warn_scoring(args: argparse.Namespace, problems: list[Any]) -> None:
    """Say on stderr what scoring code here leaves uncontained: everything under --unsafe-exec (said
    at the start, and again by the summary), and the memory of a program's processes together where
    no memory cgroup can be made (each process is then bounded alone)."""
    from dllm_viz.evaluation import runs_code
    from dllm_viz.tasks import memory_cgroup
    from dllm_viz.tasks.sandbox import UNSAFE_NOTE, memory_bound

    if not runs_code(problems):
        return
    if args.unsafe_exec:
        print(f"warning: {UNSAFE_NOTE}", file=sys.stderr)
    if memory_cgroup.unavailable_reason() is not None:
        print(f"note: scored code is held to {memory_bound()}", file=sys.stderr)


def add_decode_options(parser: argparse.ArgumentParser, *, components: bool = True) -> None:
    """Decode settings and every policy field; with `components`, also the flags that choose the
    components (--rule/--policy, --block, --extrapolate, --stop, --cache, --refresh-every), which
    a command that names its configurations as bench does (`calibrate --policy cora`) leaves out."""
    group = parser.add_argument_group("decoding")
    if components:
        _add_component_options(group)
    _add_decode_settings(group)
    parser.epilog = components_epilog()
    add_policy_options(parser)


def _add_component_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--rule", "--policy", dest="rule", default=None, choices=sorted(RULES),
                       help=f"commit rule (default: {BIDIRECTIONAL.rule}; {BLOCK_CAUSAL.rule} for a block-causal "
                            "model)")
    group.add_argument("--block", default=None, choices=sorted(BLOCKS),
                       help=f"block sizer (default: {BIDIRECTIONAL.block}; {BLOCK_CAUSAL.block} blocks of the model's "
                            "own length for a block-causal model)")
    group.add_argument("--extrapolate", default=None, choices=sorted(EXTRAPOLATORS),
                       help="look-ahead plug-in over the rule (Confidence Extrapolation); default none")
    group.add_argument("--stop", default=None, choices=sorted(STOPS),
                       help="end-of-text stop: eos cuts the canvas after a confident EOS, eos_first halts at "
                            "the answer's first EOS (LLaDA2); default none")
    group.add_argument("--cache", default="none", choices=list(CACHE_MODES),
                       help="KV cache: Fast-dLLM's prefix / dual (bidirectional models, refreshed at each "
                            "block start) or exact (block-causal models: finished blocks reused); default none")
    add_refresh_option(group)


def add_refresh_option(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    """--refresh-every: decode's and eval's with --cache, bench's for every configuration with a
    prefix or dual cache (bench names its caches in --policies / --caches, not with --cache)."""
    group.add_argument("--refresh-every", type=int, default=None,
                       help="also refresh the KV cache (prefix or dual) every N steps inside a block")


def _add_decode_settings(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--gen-length", type=int, default=128, help="generated positions (default: 128)")
    group.add_argument("--temperature", type=float, default=0.0, help="Gumbel sampling temperature (default: 0)")
    group.add_argument("--max-steps", type=int, default=None, help="hard cap on forward passes")
    group.add_argument("--seed", type=int, default=0, help="RNG seed (default: 0)")
    group.add_argument("--softmax-dtype", default="float64", choices=["float64", "float32"],
                       help="precision of confidences (default: float64)")
    group.add_argument("--suppress-eos", action="store_true", help="LLaDA logits_eos_inf: never propose EOS")
    group.add_argument("--deprioritize-eos", action="store_true",
                       help="LLaDA confidence_eos_eot_inf: EOS/EoT candidates get confidence 0")


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    """Every policy field as a flag (--delta-p, --block-length, ...), read by the knobs' own parser."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # keep the epilog's paragraphs
    policy = parser.add_argument_group("policy options (each applies to the chosen component that has it)")
    for name, (spec, owners) in policy_fields().items():
        flag = "--" + name.replace("_", "-")
        text = f"{knob_help(name, spec.describe())} [{', '.join(owners)}]".replace("%", "%%")
        if spec.kind is bool:
            policy.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            policy.add_argument(flag, dest=name, type=partial(_read_knob, spec), default=None, help=text,
                                metavar=_metavar(spec))


def components_epilog() -> str:
    """Every rule, block sizer and plug-in explained (dllm_viz.explain), for the end of --help."""
    lines = ["components (--rule, --block, --extrapolate, --stop):"]
    for registry in (RULES, BLOCKS, EXTRAPOLATORS, STOPS):
        for name in sorted(registry):
            lines += [f"  {name}", *textwrap.wrap(component_help(name), 96, initial_indent="    ",
                                                  subsequent_indent="    ")]
    lines.append("cache modes (--cache):")
    for mode in CACHE_MODES:
        lines += textwrap.wrap(cache_help(mode), 96, initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines).replace("%", "%%")


def policy_fields() -> dict[str, tuple[Knob, list[str]]]:
    """Every knob of every registered component: name -> (its declaration, the components that have it).

    A name shared by several components has one declaration (tests/test_knobs.py checks it), so
    one flag serves them all.
    """
    out: dict[str, tuple[Knob, list[str]]] = {}
    for registry in (RULES, BLOCKS, EXTRAPOLATORS, STOPS):
        for comp_name, cls in sorted(registry.items()):
            for spec in knobs(cls):
                out.setdefault(spec.name, (spec, []))[1].append(comp_name)
    return out


def _read_knob(spec: Knob, text: str) -> Any:
    """argparse type of a knob flag: the knobs' own text reader, so the CLI accepts what the bench does."""
    try:
        return parse_text(spec, text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _metavar(spec: Knob) -> str:
    if spec.choices is not None:
        return "{" + ",".join(map(str, spec.choices)) + "}"
    return spec.name.upper()


def decode_config(args: argparse.Namespace) -> DecodeConfig:
    """DecodeConfig from parsed arguments."""
    return DecodeConfig(gen_length=args.gen_length, temperature=args.temperature, max_steps=args.max_steps,
                        softmax_dtype=args.softmax_dtype, suppress_eos=args.suppress_eos,
                        deprioritize_eos=args.deprioritize_eos, seed=args.seed)


def fill_model_defaults(args: argparse.Namespace) -> str | None:
    """Fill an unset --rule / --block (and --block-length) with the model's defaults (policies.defaults).

    A block-causal checkpoint (block diffusion) gets block refinement over aligned blocks of its
    own length, read from its config.json before any weights load; explicit flags always win.
    Returns a note saying what was chosen for a block-causal model, None otherwise. A model that
    cannot be read now (a bad path, a hub id not downloaded) gets the usual defaults: `load`
    reports it later, after the other checks (the sandbox's among them), and nothing downloads
    before them.
    """
    if args.rule is not None and args.block is not None and getattr(args, "block_length", None) is not None:
        return None
    from dllm_viz.models import block_length_of

    block_length = block_length_of(args.model) if hasattr(args, "model") else None
    chosen = policy_defaults(block_length)
    picked = []
    for name in ("rule", "block"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(chosen, name))
            picked.append(f"--{name} {getattr(chosen, name)}")
    fields_of_block = {spec.name for spec in knobs(BLOCKS[args.block])}
    for name, value in chosen.options.items():
        if getattr(args, name, None) is None and name in fields_of_block:
            setattr(args, name, value)
            picked.append(f"--{name.replace('_', '-')} {value}")
    if block_length is None or not picked:
        return None
    return (f"{args.model} is a block-causal model with block length {block_length}: decoding with "
            f"{' '.join(picked)} (pass them to choose otherwise)")


def model_block_defaults(args: argparse.Namespace, options: dict[str, Any]) -> str:
    """The block sizer a configuration that names none runs with, for commands that name their
    configurations (bench): the model's own, as `fill_model_defaults` gives decode and eval.

    A block-causal checkpoint's is aligned blocks of its length (an unset --block-length in `options`
    takes it, said on stderr); a bench on one used fixed blocks of 32 for every configuration, the
    dense baseline included, where decode and the app run its aligned blocks.
    """
    from dllm_viz.models import block_length_of

    block_length = block_length_of(args.model) if hasattr(args, "model") else None
    if block_length is None:
        return "fixed"
    chosen = policy_defaults(block_length)
    if options.get("block_length") is None:
        options["block_length"] = chosen.options["block_length"]
        print(f"note: {args.model} is a block-causal model with block length {block_length}: configurations that "
              f"name no block sizer run on {chosen.block} blocks of {block_length} (name one, e.g. dense+fixed, or "
              "pass --block-length, to choose otherwise)", file=sys.stderr)
    return chosen.block


def pipeline(args: argparse.Namespace) -> Pipeline:
    """Pipeline from parsed arguments (policy fields left unset keep their defaults; an unset
    --rule / --block takes the model's, see `fill_model_defaults`, which says so on stderr).

    Raises:
        ValueError: an option that none of the chosen components has (see `check_options_apply`).
        ModelLoadError: the model named for the defaults cannot be found.
    """
    if (note := fill_model_defaults(args)) is not None:
        print(f"note: {note}", file=sys.stderr)
    options = {name: getattr(args, name, None) for name in policy_fields()}
    built = Pipeline.from_names(args.rule, args.block, args.extrapolate, args.stop, cache=args.cache,
                                refresh_every=args.refresh_every, **options)
    check_options_apply(args, [built])
    return built


def passed_options(args: argparse.Namespace) -> list[str]:
    """Policy fields the user actually gave (every policy flag defaults to None, meaning "not given")."""
    return [name for name in policy_fields() if getattr(args, name, None) is not None]


def check_options_apply(args: argparse.Namespace, pipelines: list[Pipeline]) -> None:
    """Refuse a policy option that no chosen component of any pipeline has, instead of ignoring it.

    `--delta-p 0.9` with the threshold rule used to run threshold and say nothing, so a result
    looked like CORA's; now the message names the component that has the option.

    Raises:
        ValueError: naming the flag, the components that take it and what was chosen.
    """
    chosen = [c for pipe in pipelines for c in (pipe.rule, pipe.block, pipe.extrapolate, pipe.stop) if c is not None]
    have = {f.name for c in chosen for f in fields(c)}
    owners = policy_fields()
    for name in passed_options(args):
        if name not in have:
            flag = "--" + name.replace("_", "-")
            names = sorted({type(c).name for c in chosen})  # type: ignore[attr-defined]
            raise ValueError(f"{flag} applies to {', '.join(owners[name][1])}, which this run does not use (it uses "
                             f"{', '.join(names)}); drop {flag} or choose a component that has it")
    if getattr(args, "refresh_every", None) is not None and all(p.cache not in APPROXIMATE for p in pipelines):
        raise ValueError("--refresh-every applies only to a prefix or dual KV cache; add one (--cache dual, or "
                         "threshold+dual in bench's --policies), or drop --refresh-every")
