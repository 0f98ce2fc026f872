"""Running configurations over a prompt set with live progress (Compare and Tune share it).

`run_sweep` wraps `dllm_viz.bench.run_bench`: a progress bar per finished (config, problem)
row, the model lock held throughout, and the rows finished before an interruption kept in
st.session_state. The value parsing and grid building are plain Python.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from app_ui.common import model_turn, other_model
from dllm_viz.bench import ROW_COLUMNS, SUMMARY_COLUMNS, cut_off_warning, run_bench
from dllm_viz.config import DecodeConfig
from dllm_viz.evaluation import require_code_sandbox, runs_code
from dllm_viz.models import ModelAdapter
from dllm_viz.policies import RULES, Pipeline
from dllm_viz.policies.knobs import Knob, knobs
from dllm_viz.replay import replayable
from dllm_viz.tasks import Problem, memory_cgroup
from dllm_viz.tasks.sandbox import SandboxUnavailableError, memory_bound

MAX_GRID = 25
# Tune's commit rules (those a dense trace can replay), the one it opens on, and the second sweep
# field's "no second field" choice: here so app_ui.url_params names what a bad link value should be.
TUNE_RULES = tuple(sorted(name for name, cls in RULES.items() if replayable(cls)))
TUNE_DEFAULT_RULE = "threshold"
NO_SECOND_FIELD = "(none)"


def sweepable(rule: str) -> list[Knob]:
    """The fields of commit rule `rule` a sweep can vary: the numeric ones without fixed choices."""
    return [s for s in knobs(RULES[rule]) if s.kind in (int, float) and s.choices is None]


def parse_values(name: str, text: str, specs: Sequence[Knob]) -> list[Any]:
    """Comma-separated values of field `name`, converted to its type; ValueError names the bad one."""
    kind = next(s.kind for s in specs if s.name == name)
    values = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            values.append(kind(part) if kind is float else int(part))
        except ValueError:
            raise ValueError(f"could not read {part!r} as {'an integer' if kind is int else 'a number'} for "
                             f"{name}; write comma-separated values such as 0.5, 0.7, 0.9") from None
    if not values:
        raise ValueError(f"no values given for {name}; write comma-separated values such as 0.5, 0.7, 0.9")
    # A repeated value would name one grid point twice, and the second run would silently replace the first.
    if repeated := sorted({v for v in values if values.count(v) > 1}):
        raise ValueError(f"{name} lists {', '.join(map(str, repeated))} more than once; give each value once")
    return values


def sweep_configs(rule: str, extrapolate: str | None, block_length: int, gen_length: int,
                  grid: Mapping[str, Sequence[Any]], *, block: str = "fixed",
                  dense: Pipeline | None = None) -> dict[str, Pipeline]:
    """`dense` plus one pipeline per point of the grid over `block` blocks, labelled by its values;
    invalid points raise. `dense`: the baseline (default LLaDA's, `Pipeline.dense`; a block-diffusion
    model's runs over its aligned blocks, policies.defaults.dense_baseline)."""
    points = list(itertools.product(*grid.values()))
    if len(points) > MAX_GRID:
        raise ValueError(f"the grid has {len(points)} points; use at most {MAX_GRID} (fewer values per field)")
    configs = {"dense": dense if dense is not None else Pipeline.dense(gen_length=gen_length)}
    for point in points:
        values = dict(zip(grid, point, strict=True))
        pipe = Pipeline.from_names(rule, block, extrapolate, block_length=block_length, **values)
        pipe.validate(gen_length)
        configs[", ".join(f"{k}={v}" for k, v in values.items())] = pipe
    return configs


def run_sweep(adapter: ModelAdapter, problems: Sequence[Problem], configs: Mapping[str, Pipeline],
              config: DecodeConfig, *, key: str) -> None:
    """Benchmark `configs` (must include 'dense'); rows accumulate in st.session_state[key].

    The row list is stored before the first decode and filled in place, so a click that stops
    the run (Streamlit then refuses further session-state writes from it) keeps every row so far.
    The same run started again after an interruption (a page switch, a click) resumes: the kept
    rows are not decoded again (`run_bench`'s `finished`). It used to start over from the first
    problem.
    """
    try:
        require_code_sandbox(problems)  # the app never offers the unsafe fallback
    except SandboxUnavailableError:
        st.error("Scoring code needs the bubblewrap sandbox, which is missing or cannot start on this server: "
                 "install bubblewrap there (apt-get install bubblewrap) and restart the app.")
        return
    if runs_code(problems) and memory_cgroup.unavailable_reason() is not None:
        st.caption(f"Scored code is held to {memory_bound()}.")  # what `eval` / `bench` say on stderr
    total = max(len(problems) * len(configs), 1)
    plan = repr((sorted((label, pipe.label) for label, pipe in configs.items()),
                 [p.problem_id for p in problems], config, adapter.info))
    kept = st.session_state.get(key) or []
    same = st.session_state.get(f"{key}_plan") == plan and 0 < len(kept) < total
    rows: list[dict[str, Any]] = list(kept) if same else []
    st.session_state[key] = rows
    st.session_state[f"{key}_plan"] = plan
    st.session_state[f"{key}_total"] = total
    st.session_state[f"{key}_configs"] = len(configs)
    st.session_state[f"{key}_model"] = adapter.info.name_or_path  # `sweep_rows` says when the sidebar's changed
    if same:
        st.info(f"Resuming the interrupted run: {len(rows)} of {total} runs were kept and are not decoded again.")
    bar = st.progress(len(rows) / total, text="starting")

    def on_row(row: dict[str, Any]) -> None:
        rows.append(row)
        bar.progress(len(rows) / total, text=f"{len(rows)}/{total}: {row['config']}")  # a yield point

    with model_turn():
        run_bench(adapter, problems, configs, config, on_row=on_row,
                  finished=pd.DataFrame(rows, columns=list(ROW_COLUMNS)) if rows else None)
    bar.empty()


def sweep_rows(key: str, adapter: ModelAdapter | None = None) -> pd.DataFrame | None:
    """The rows stored under `key` as bench's DataFrame, or None if there is no dense row yet.

    With the loaded model's `adapter`, rows another model decoded (the sidebar changed since) are
    said to be that model's.

    After an interruption only the problems every configuration finished are kept, under a warning
    that says so: the summary of a stopped run read as if over the whole prompt set, and compared
    configurations over different problems.
    """
    rows = st.session_state.get(key)
    if not rows or not any(r["config"] == "dense" for r in rows):
        return None
    if (models := other_model(st.session_state.get(f"{key}_model"), adapter)) is not None:
        st.info(f"These results were decoded with the model {models[0]!r}, not the loaded {models[1]!r}; run "
                "again to decode them on it.")
    frame = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    total = st.session_state.get(f"{key}_total", len(rows))
    if len(rows) < total:
        configs = int(st.session_state.get(f"{key}_configs", frame["config"].nunique()))
        counts = frame.groupby("problem_id", sort=False)["config"].nunique()
        whole = [p for p, n in counts.items() if n == configs]
        problems = total // max(configs, 1)
        st.warning(f"Interrupted: {len(rows)} of {total} runs finished. The table and chart cover the {len(whole)} "
                   f"of {problems} problems every configuration finished; run again to resume.")
        frame = frame[frame["problem_id"].isin(whole)]
        if frame.empty:
            return None
    return frame


def summary_table(summary: pd.DataFrame, key: str) -> None:
    """`summarize_bench`'s table with each column's meaning as its header's help (the app's users
    meet sign_p, AUP and TPF here first), then the cut-off warning if any answer ran out of canvas."""
    st.dataframe(summary, key=key,
                 column_config={name: st.column_config.Column(help=text) for name, text in SUMMARY_COLUMNS.items()})
    if (cut := cut_off_warning(summary)) is not None:
        st.warning(cut)
