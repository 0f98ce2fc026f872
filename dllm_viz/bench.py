"""Run several decoding configurations over the same prompts and compare them with the dense baseline.

A configuration is named by the decode CLI's component names joined with '+' (`threshold`,
`adablock+threshold`, `cora+kalman`, `threshold+dual`, `cora+adablock+kalman+eos+prefix`);
`dense` is LLaDA's fixed_steps with one token per step, the baseline every ratio is against.
All configurations run in one process, prompt by prompt (each prompt under every config before
the next prompt), so timing drift affects them alike. Knows nothing about printing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import pandas as pd

from dllm_viz.bench_columns import SUMMARY_COLUMNS
from dllm_viz.cache_modes import CACHE_MODES
from dllm_viz.config import DecodeConfig
from dllm_viz.dynamics import candidate_flips, wasted_refinement_fraction
from dllm_viz.engine import check_pipeline
from dllm_viz.evaluation import CUT_OFF_NOTE, require_code_sandbox, run_problem
from dllm_viz.metrics import Aup, aup, frontier_position, sign_test_p
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies.knobs import parse_knob
from dllm_viz.policies.pipeline import REGISTRIES, Pipeline
from dllm_viz.policies.registry import BLOCKS, EXTRAPOLATORS, RULES, STOPS, lookup
from dllm_viz.sweep import Sweep
from dllm_viz.tasks import TASKS, Problem

BASELINE = "dense"
# Each row column and its kind ("text", "bool", "number"), in column order: what a CSV written by
# `bench --out` is read back as (`bench --resume`).
ROW_KINDS: dict[str, str] = {
    "config": "text", "problem_id": "text", "task": "text", "correct": "bool", "nfe": "number",
    "tokens": "number", "seconds": "number", "forward_seconds": "number", "policy_seconds": "number",
    "tokens_per_second": "number", "agrees_with_dense": "bool", "complete": "bool", "cut_off": "bool",
    "candidate_flips": "number", "redundant_refinement": "number", "redundant_answer_refinement": "number",
    "completion": "text",
}
ROW_COLUMNS = tuple(ROW_KINDS)


def parse_config(name: str, options: Mapping[str, Any] | None = None, *, default_block: str = "fixed") -> Pipeline:
    """Pipeline named by '+'-joined component names; `options` are field values (None = default).
    A name without a block sizer takes `default_block` (a block-diffusion model's is "aligned":
    policies.defaults.policy_defaults), the dense baseline included.

    A component may carry its own field values in parentheses, which win over `options`:
    `cora(delta_p=0.99,m=3)+kalman(tau_ce=0.95)`, so that several operating points of one
    rule can run side by side in one bench.

    Raises:
        ValueError: an unknown component or option, a bad value, two of the same kind, or no
            commit rule (the message names the part and the fix).
    """
    options = dict(options or {})
    chosen: dict[str, str] = {}
    overrides: dict[str, dict[str, Any]] = {}
    for part in _split_outside_parentheses(name, "+"):
        match = _PART.fullmatch(part.strip())
        if match is None:
            raise ValueError(f"cannot read configuration part {part.strip()!r} of {name!r}; write a component "
                             "name, optionally with options in parentheses, e.g. cora(delta_p=0.99,m=3)")
        component, arguments = match.group(1), match.group(2)
        kind = _kind_of(component)
        if kind in chosen:
            raise ValueError(f"configuration {name!r} names two {kind}s ({chosen[kind]!r} and {component!r})")
        chosen[kind] = component
        if arguments is None:
            continue
        if component == BASELINE:
            raise ValueError(f"{BASELINE!r} is fixed_steps with one token per step and takes no options; "
                             "write fixed_steps(...) for another operating point")
        if kind == "cache":
            raise ValueError(f"cache mode {component!r} takes no options; pass --refresh-every for its refresh")
        overrides[kind] = _overrides(lookup(REGISTRIES[kind], kind, component), arguments)
    rule = chosen.get("rule")
    if rule is None:
        raise ValueError(f"configuration {name!r} has no commit rule; add one of {sorted(RULES)} or 'dense'")
    is_baseline = rule == BASELINE
    if is_baseline:
        rule, options["steps"] = "fixed_steps", None
    pipe = Pipeline.from_names(rule, chosen.get("block", default_block), chosen.get("extrapolate"), chosen.get("stop"),
                               cache=chosen.get("cache", "none"), overrides=overrides, **options)
    return replace(pipe, rule=Pipeline.dense().rule) if is_baseline else pipe


_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?", re.DOTALL)


def split_configs(text: str) -> list[str]:
    """Configuration names of a comma-separated list, keeping commas inside parentheses:
    'dense,cora(delta_p=0.99,m=3)' -> ['dense', 'cora(delta_p=0.99,m=3)']."""
    return [part.strip() for part in _split_outside_parentheses(text, ",") if part.strip()]


def set_options(name: str, values: Mapping[str, str]) -> str:
    """The configuration `name` with each option written into the parentheses of the one component
    that has it: set_options('adablock+threshold', {'delimiter_threshold': '0.5'}) ->
    'adablock(delimiter_threshold=0.5)+threshold'. Values stay text; `parse_config` reads them.

    Lets a calibration grid name each of its points as a configuration the bench runs as is.

    Raises:
        ValueError: an option no component of `name` has, one that two components have, or one
            already written in `name` (the message names the option and the fix).
    """
    parts = [part.strip() for part in _split_outside_parentheses(name, "+")]
    added: dict[int, list[str]] = {}
    known: list[str] = []
    for option, text in values.items():
        owners = []
        for index, part in enumerate(parts):
            match = _PART.fullmatch(part)
            if match is None:
                continue  # parse_config names the unreadable part
            component = match.group(1)
            kind = _kind_of(component)
            if kind == "cache" or component == BASELINE:
                continue
            cls = lookup(REGISTRIES[kind], kind, component)
            names = [field.name for field in fields(cls)]
            known += [n for n in names if n not in known]
            if option in names:
                owners.append((index, component, match.group(2) or ""))
        if not owners:
            raise ValueError(f"no component of {name!r} has the option {option!r}; its options: "
                             f"{', '.join(known) or 'none'}")
        if len(owners) > 1:
            both = " and ".join(repr(component) for _, component, _ in owners)
            raise ValueError(f"option {option!r} belongs to both {both} in {name!r}; write it inside one "
                             "component's parentheses instead")
        index, component, arguments = owners[0]
        if re.search(rf"(?:^|,)\s*{re.escape(option)}\s*=", arguments):
            raise ValueError(f"option {option!r} is already set in {parts[index]!r}; remove it there to vary it")
        added.setdefault(index, []).append(f"{option}={text}")
    out = []
    for index, part in enumerate(parts):
        if index not in added:
            out.append(part)
            continue
        match = _PART.fullmatch(part)
        assert match is not None
        written = (match.group(2) or "").strip()
        inner = ",".join(([written] if written else []) + added[index])
        out.append(f"{match.group(1)}({inner})")
    return "+".join(out)


def _kind_of(part: str) -> str:
    for kind, names in (("rule", (*RULES, BASELINE)), ("block", BLOCKS), ("extrapolate", EXTRAPOLATORS),
                        ("stop", STOPS), ("cache", CACHE_MODES)):
        if part in names:
            return kind
    known = sorted({*RULES, BASELINE, *BLOCKS, *EXTRAPOLATORS, *STOPS, *CACHE_MODES})
    raise ValueError(f"unknown configuration component {part!r}; known: {known}")


def _split_outside_parentheses(text: str, separator: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            raise ValueError(f"unbalanced ')' in {text!r}")
        if char == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise ValueError(f"unbalanced '(' in {text!r}")
    return [*parts, "".join(current)]


def _overrides(cls: type, arguments: str) -> dict[str, Any]:
    """`delta_p=0.99,m=3` -> {"delta_p": 0.99, "m": 3}, typed by the component's fields.

    A comma starts a new option only before `name=`, so tuple values keep theirs
    (`adablock(delimiters=\\n,.)`). An option written twice is refused: silently keeping the
    last value would run another operating point than the label says.
    """
    values: dict[str, Any] = {}
    for item in re.split(r",(?=\s*[A-Za-z_][A-Za-z0-9_]*\s*=)", arguments):
        if not item.strip():
            continue
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"option {item.strip()!r} of {cls.name!r} needs the form name=value")  # type: ignore[attr-defined]
        if key.strip() in values:
            raise ValueError(f"option {key.strip()!r} of {cls.name!r} is given twice in ({arguments}); "  # type: ignore[attr-defined]
                             "give it once")
        values[key.strip()] = parse_knob(cls, key.strip(), text)
    return values


def run_bench(
    adapter: ModelAdapter,
    problems: Sequence[Problem],
    configs: Mapping[str, Pipeline],
    config: DecodeConfig,
    *,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    finished: pd.DataFrame | None = None,
    unsafe_exec: bool = False,
) -> pd.DataFrame:
    """One row per (configuration, problem).

    Columns: see ROW_COLUMNS. `agrees_with_dense` compares the completion text with the
    dense baseline's on the same prompt. `on_row` gets each row as soon as it is measured (the
    CLI appends it to --out); `finished` holds rows of an interrupted run (`bench --resume`),
    which are not run again and come first in the result.

    `unsafe_exec` scores code without the bubblewrap sandbox (see evaluation.evaluate).

    Raises:
        ValueError: `configs` has no "dense" entry (every ratio is against it), or a configuration
            the model cannot run at this gen_length (checked for all before the first decode, so a
            long run does not stop at its first problem's last configuration).
        SandboxUnavailableError: code problems, no usable bwrap, and `unsafe_exec` off.
    """
    if BASELINE not in configs:
        raise ValueError(f"configs must include the baseline {BASELINE!r}; got {sorted(configs)}")
    require_code_sandbox(problems, unsafe=unsafe_exec)
    finished = pd.DataFrame(columns=list(ROW_COLUMNS)) if finished is None else finished
    done = set(zip(finished["config"].astype(str), finished["problem_id"].astype(str), strict=True))
    for label, pipeline in configs.items():  # those with a problem left to decode (a resume may have none)
        if any((label, problem.problem_id) not in done for problem in problems):
            try:
                check_pipeline(adapter, pipeline.resolve(adapter.info.family, adapter.info.delimiters), config)
            except ValueError as exc:
                raise ValueError(f"configuration {label!r}: {exc}") from None
    dense_done = finished[finished["config"] == BASELINE].set_index("problem_id")["completion"]
    rows: list[dict[str, Any]] = []
    for problem in problems:
        dense_text = dense_done.get(problem.problem_id)
        dense_text = "" if dense_text is not None and pd.isna(dense_text) else dense_text
        for label in [BASELINE, *[k for k in configs if k != BASELINE]]:
            if (label, problem.problem_id) in done:
                continue
            result, trace = run_problem(adapter, problem, configs[label], config, unsafe_exec=unsafe_exec)
            if label == BASELINE:
                dense_text = result.completion
            row = {
                "config": label, "problem_id": result.problem_id, "task": result.task,
                "correct": result.correct, "nfe": result.nfe, "tokens": result.tokens, "seconds": result.seconds,
                "forward_seconds": result.forward_seconds,
                "policy_seconds": result.policy_seconds,
                "tokens_per_second": result.tokens_per_second,
                "agrees_with_dense": result.completion == dense_text, "complete": result.complete,
                "cut_off": result.cut_off, "candidate_flips": candidate_flips(trace),
                "redundant_refinement": wasted_refinement_fraction(trace),
                "redundant_answer_refinement": wasted_refinement_fraction(trace, answer_only=True),
                "completion": result.completion,
            }
            rows.append(row)
            if on_row is not None:
                on_row(row)
    new = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    if finished.empty:
        return new
    if new.empty:
        return finished[list(ROW_COLUMNS)].reset_index(drop=True)
    return pd.concat([finished[list(ROW_COLUMNS)], new], ignore_index=True)


def summarize_bench(rows: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: accuracy, mean NFE, speedups and agreement against the dense baseline.

    Columns: SUMMARY_COLUMNS, in its order (each name with what it measures). Columns computed from
    row fields that older CSVs lack are NaN for them.

    Raises:
        ValueError: rows but none of the dense baseline (every ratio is against it).
    """
    if rows.empty:
        return pd.DataFrame()
    if BASELINE not in set(rows["config"]):
        raise ValueError(f"no rows for the baseline {BASELINE!r}, which every ratio is against; the rows hold "
                         f"{sorted(set(rows['config']))}: run {BASELINE!r} on the same problems too")
    grouped = rows.groupby("config", sort=False)
    totals = grouped[["nfe", "seconds", "forward_seconds", "policy_seconds"]].sum()
    tokens = (rows["tokens_per_second"] * rows["seconds"]).groupby(rows["config"], sort=False).sum()
    dense = totals.loc[BASELINE]
    tpf = _tpf(rows, totals["nfe"])
    paired = _paired_with_dense(rows)
    columns = {
        "accuracy": grouped["correct"].mean(),
        "lost": paired["lost"],
        "gained": paired["gained"],
        "sign_p": paired["sign_p"],
        "mean_nfe": grouped["nfe"].mean(),
        "nfe_speedup": dense["nfe"] / totals["nfe"],
        "wall_speedup": dense["seconds"] / totals["seconds"],
        "tokens_per_second": tokens / totals["seconds"],
        "agreement": grouped["agrees_with_dense"].mean(),
        "overhead": totals["policy_seconds"] / totals["forward_seconds"],
        "engine_overhead": (totals["seconds"] - totals["forward_seconds"] - totals["policy_seconds"])
        / totals["forward_seconds"],
        **_same_as_uncached_columns(rows, [str(label) for label in totals.index]),
        "cut_off": (grouped["cut_off"].sum().astype(int) if "cut_off" in rows  # absent in CSVs of older runs
                    else pd.Series(0, index=totals.index)),
        "tpf": tpf,
        "aup": _aup_from_dense(grouped["correct"].mean(), tpf),
        "flip_share": _mean_of(rows, "candidate_flips", lambda c: c > 0),
        "redundant": _mean_of(rows, "redundant_refinement", lambda c: c),
        "redundant_answer": _mean_of(rows, "redundant_answer_refinement", lambda c: c),
        "n": grouped.size(),
    }
    return pd.DataFrame({name: columns[name] for name in SUMMARY_COLUMNS})


def accuracy_by_task(rows: pd.DataFrame) -> pd.DataFrame | None:
    """Correct / problems per task (rows) and configuration (columns), as "k/n" cells; None when the
    rows hold one task only. With `--tasks hard` the tasks are its families (hard/chain, hard/breadth,
    each ParallelBench operation), so depth, breadth and each list operation can be read apart."""
    if rows.empty or rows["task"].nunique() < 2:
        return None
    counts = rows.groupby(["task", "config"], sort=False)["correct"].agg(["sum", "count"])
    cells = counts["sum"].astype(int).astype(str) + "/" + counts["count"].astype(str)
    configs = list(rows["config"].drop_duplicates())
    return cells.unstack("config").reindex(columns=configs).sort_index().fillna("-")


def _mean_of(rows: pd.DataFrame, column: str, value: Callable[[pd.Series], pd.Series]) -> pd.Series:
    """Per configuration, the mean of `value(rows[column])` (NaN when the column is absent)."""
    labels = rows["config"].drop_duplicates()
    if column not in rows:
        return pd.Series(float("nan"), index=labels)
    return value(pd.to_numeric(rows[column])).astype(float).groupby(rows["config"], sort=False).mean()


@dataclass(frozen=True, slots=True)
class Paired:
    """One configuration against another on the problems both ran: `lost` (right under the other,
    wrong here), `gained` (the reverse), the sign test's p on those, and how many problems paired."""

    lost: int
    gained: int
    sign_p: float
    problems: int


def paired(rows: pd.DataFrame, label: str, base: str = BASELINE) -> Paired:
    """`label` against `base`, problem by problem (a resumed or sharded run may hold problems one of
    them has not run: those are left out). A configuration against itself is 0, 0, p = 1.

    Raises:
        ValueError: either label has no rows (the message names the configurations there are).
    """
    labels = set(rows["config"])
    for name in (label, base):
        if name not in labels:
            raise ValueError(f"no rows for configuration {name!r}; the rows hold {sorted(labels)}")
    return _pair(_correct_by_problem(rows), label, base)


def _correct_by_problem(rows: pd.DataFrame) -> pd.DataFrame:
    """Problems (index) by configurations (columns): correct or not, NaN where one did not run."""
    return rows.drop_duplicates(["config", "problem_id"], keep="last").pivot(
        index="problem_id", columns="config", values="correct")


def _pair(correct: pd.DataFrame, label: str, base: str) -> Paired:
    """`paired` on a `_correct_by_problem` table."""
    pair = pd.DataFrame({"base": correct[base], "mine": correct[label]}).dropna().astype(bool)
    lost = int((pair["base"] & ~pair["mine"]).sum())
    gained = int((pair["mine"] & ~pair["base"]).sum())
    return Paired(lost, gained, sign_test_p(lost, gained), len(pair))


def _paired_with_dense(rows: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: lost, gained and sign_p against dense (`paired`, one table for all)."""
    correct = _correct_by_problem(rows)
    out = {}
    for label in rows["config"].drop_duplicates():
        result = _pair(correct, str(label), BASELINE)
        out[label] = {"lost": result.lost, "gained": result.gained, "sign_p": result.sign_p}
    return pd.DataFrame.from_dict(out, orient="index")


def _tpf(rows: pd.DataFrame, nfe: pd.Series) -> pd.Series:
    """Answer tokens per forward pass per configuration (NaN for CSVs from before `tokens`)."""
    if "tokens" not in rows:
        return pd.Series(float("nan"), index=nfe.index)
    return rows.groupby("config", sort=False)["tokens"].sum() / nfe


def _aup_from_dense(accuracy: pd.Series, tpf: pd.Series) -> pd.Series:
    """Each configuration's AUP over the two-point curve (dense, configuration); dense's own is rho * y."""
    y_max = 100.0 * float(accuracy.max())
    dense = (float(tpf[BASELINE]), 100.0 * float(accuracy[BASELINE]))
    out = {}
    for label in accuracy.index:
        point = (float(tpf[label]), 100.0 * float(accuracy[label]))
        out[label] = _aup_or_nan([dense] if label == BASELINE else [dense, point], y_max).value
    return pd.Series(out)


def _aup_or_nan(points: list[tuple[float, float]], y_max: float) -> Aup:
    """`aup` where it is defined; NaN for a run with no correct answer or a point without TPF."""
    finite = all(np.isfinite(v) for point in points for v in point)
    return aup(points, y_max) if finite and y_max > 0 else Aup(float("nan"), 0)


def summarize_sweep(summary: pd.DataFrame, sweep: Sweep) -> tuple[pd.DataFrame, Aup, pd.Series]:
    """The sweep's frontier table, its AUP, and where each other configuration sits against it.

    Returns:
        (one row per swept value: knob value, accuracy, mean_nfe, tpf; the AUP of the sweep's
        (TPF, accuracy %) points with y_max the run's best accuracy; per configuration outside
        the sweep: "above" / "on" / "below" / "outside" the NFE-accuracy frontier).

    Raises:
        ValueError: a swept configuration has no row in `summary` (the message names it).
    """
    missing = [label for label in sweep.labels if label not in summary.index]
    if missing:
        raise ValueError(f"the summary has no row for the swept configuration {missing[0]!r}; run every point "
                         f"of {sweep.spec!r} or give the run's sweep")
    swept = summary.loc[list(sweep.labels)]
    table = pd.DataFrame({sweep.knob: sweep.values, "accuracy": swept["accuracy"].to_numpy(),
                          "mean_nfe": swept["mean_nfe"].to_numpy(), "tpf": swept["tpf"].to_numpy()},
                         index=list(sweep.labels))  # fmt: skip
    y_max = 100.0 * float(summary["accuracy"].max())
    points = [(float(r), 100.0 * float(y)) for r, y in zip(swept["tpf"], swept["accuracy"], strict=True)]
    area = _aup_or_nan(points, y_max)
    frontier = [(float(n), 100.0 * float(y)) for n, y in zip(swept["mean_nfe"], swept["accuracy"], strict=True)]
    others = [label for label in summary.index if label not in sweep.labels]
    positions = pd.Series({label: frontier_position(float(summary.loc[label, "mean_nfe"]),
                                                    100.0 * float(summary.loc[label, "accuracy"]), frontier)
                           for label in others}, dtype=object)  # fmt: skip
    return table, area, positions


def cut_off_warning(summary: pd.DataFrame) -> str | None:
    """A sentence naming the configurations whose answers ran out of canvas, or None.

    A policy that loses problems only because the canvas was too short would otherwise look
    wrong in an accuracy table; the fix is a longer gen length, not another policy.
    """
    if summary.empty or "cut_off" not in summary:
        return None
    hit = summary[summary["cut_off"] > 0]
    if hit.empty:
        return None
    parts = [f"{label} {int(row['cut_off'])} of {int(row['n'])}" for label, row in hit.iterrows()]
    return f"Answers ({', '.join(parts)}) {CUT_OFF_NOTE}: raise Gen length."


def uncached_label(label: str) -> str | None:
    """The configuration `label` names without its cache component ('dense' for 'dense+dual'),
    or None when it has none."""
    parts = _split_outside_parentheses(label, "+")
    kept = [part for part in parts if part.strip() not in CACHE_MODES]
    return "+".join(kept) if len(kept) < len(parts) else None


def _same_as_uncached_columns(rows: pd.DataFrame, labels: list[str]) -> dict[str, pd.Series]:
    """`same_as_uncached` and `same_answer_as_uncached` per configuration (final answers are read
    only when some cached configuration ran beside its uncached one)."""
    paired = any(uncached_label(label) in labels for label in labels)
    answered = rows.assign(answer=final_answers(rows)) if paired else rows
    return {"same_as_uncached": pd.Series({label: _same_as_uncached(rows, label) for label in labels}),
            "same_answer_as_uncached": pd.Series({label: _same_as_uncached(answered, label, "answer")
                                                  for label in labels})}


def _same_as_uncached(rows: pd.DataFrame, label: str, column: str = "completion") -> float:
    """Share of prompts whose cached `column` (the output, or its final answer) equals the uncached
    configuration's (NaN if that did not run)."""
    base = uncached_label(label)
    if base is None or base not in set(rows["config"]):
        return float("nan")
    cached = rows[rows["config"] == label].set_index("problem_id")[column]
    uncached = rows[rows["config"] == base].set_index("problem_id")[column]
    common = cached.index.intersection(uncached.index)
    if common.empty:
        return float("nan")
    return float((cached[common].fillna("") == uncached[common].fillna("")).mean())


def final_answers(rows: pd.DataFrame) -> pd.Series:
    """Each row's final answer, read by its task (`Task.final_answer`); a row of a task the registry
    does not know (a test's stand-in) keeps its whole completion, so it never counts as more alike."""
    completions = rows["completion"].fillna("").astype(str)
    tasks = rows["task"] if "task" in rows else pd.Series("", index=rows.index)
    readers = {name: TASKS[name].final_answer for name in tasks.unique() if name in TASKS}
    return pd.Series([readers[task](text) if task in readers else text
                      for task, text in zip(tasks, completions, strict=True)], index=rows.index, dtype=object)
