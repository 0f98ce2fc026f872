"""CORA-Diff persistence (docs/ALGORITHMS.md §6.1): runs of an unchanged top-1 candidate per position.

A run is a maximal stretch of consecutive steps in which a still-masked position kept the same
candidate. CORA's residual acceptance commits when confidence >= delta_p and the persistence
count m_i (passes in a row with the same candidate, i.e. run length - 1) >= m. Runs come from
trace.candidate alone, so the view works for any policy; accept events are commits whose
reason is 'cora_residual'.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from dllm_viz.figures._layout import (
    COMMIT_COLOR,
    OKABE_ITO,
    axis,
    figure,
    masked_before,
    plotly_text,
    reason_names,
    recorded_number,
    step_ticks,
    titled,
    token_texts,
    trace_label,
)
from dllm_viz.policies.extras import PERSISTENCE
from dllm_viz.trace import Trace

CORA_REASON = "cora_residual"


@dataclass(frozen=True)
class CandidateRuns:
    """Runs of an unchanged candidate while masked, one entry per run (position-major order).

    Attributes:
        position: the position of each run.
        start: its first step.
        length: how many consecutive steps it lasted (>= 1).
        token: the candidate token id it held.
    """

    position: np.ndarray
    start: np.ndarray
    length: np.ndarray
    token: np.ndarray

    def __len__(self) -> int:
        return int(self.position.size)


def candidate_runs(trace: Trace) -> CandidateRuns:
    """Split every position's masked steps into runs of an unchanged top-1 candidate.

    A position is considered at step s when it was still masked as s began (its commit step
    included); a run ends when the candidate changes or the position is committed.

    Args:
        trace: the decode to analyse.

    Returns:
        The runs as parallel int arrays (see CandidateRuns).
    """
    num_steps = trace.num_steps
    valid = masked_before(trace).T.ravel()  # position-major: index = position * S + step
    cand = trace.candidate.T.ravel()
    step = np.tile(np.arange(num_steps), trace.gen_length)
    prev_valid = np.concatenate([[False], valid[:-1]])
    prev_cand = np.concatenate([[-1], cand[:-1]])
    starts = valid & ((step == 0) | ~prev_valid | (cand != prev_cand))
    run_id = np.cumsum(starts) - 1
    lengths = np.bincount(run_id[valid], minlength=int(starts.sum())) if valid.any() else np.zeros(0, int)
    first = np.flatnonzero(starts)
    return CandidateRuns(position=(first // max(num_steps, 1)).astype(np.int64),
                         start=(first % max(num_steps, 1)).astype(np.int64),
                         length=lengths.astype(np.int64), token=cand[first].astype(np.int64))


def cora_accepts(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(steps, positions) of commits whose reason is 'cora_residual'."""
    names = reason_names(trace)
    if CORA_REASON not in names:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    steps, positions = np.nonzero(trace.committed & (trace.reason == names.index(CORA_REASON)))
    return steps.astype(np.int64), positions.astype(np.int64)


PERSISTENCE_NEEDS: tuple[str, ...] = (PERSISTENCE,)  # recorded by CORA, whose delta_p and m it annotates


def persistence_runs_bar(trace: Trace, *, delta_p: float | None = None, m: int | None = None,
                         max_runs: int = 5_000, title: str | None = None) -> go.Figure:
    """Runs of unchanged candidates as horizontal segments, with CORA accept events.

    Args:
        trace: the decode to draw.
        delta_p: CORA's confidence bar, annotated; default the trace's recorded rule's.
        m: CORA's persistence requirement; runs of at least m + 1 steps are coloured as
            persistent enough to be accepted; default the trace's recorded rule's.
        max_runs: most segments drawn; beyond it the shortest runs are left out (noted).
        title: figure title; the default names the trace and the run count.

    Returns:
        One horizontal go.Bar (base = first step, x = length, y = position) and one marker
        scatter of accept events.

    Raises:
        ValueError: `m` is negative, `max_runs` below 1, or delta_p / m are neither given nor
            recorded in the trace's pipeline as numbers.
    """
    delta_p = recorded_number(trace, "rule", "delta_p") if delta_p is None else delta_p
    m = recorded_number(trace, "rule", "m", integer=True) if m is None else m
    if delta_p is None or m is None:
        raise ValueError("the trace records no CORA rule (delta_p, m); pass delta_p= and m=")
    if m < 0 or max_runs < 1:
        raise ValueError(f"`m` must be >= 0 and `max_runs` >= 1, got m={m}, max_runs={max_runs}")
    runs = candidate_runs(trace)
    keep = np.sort(np.argsort(-runs.length, kind="stable")[:max_runs])
    persistent = runs.length[keep] >= m + 1
    bars = go.Bar(
        y=runs.position[keep], x=runs.length[keep], base=runs.start[keep] - 0.5, orientation="h",
        name="candidate run", width=0.8,
        # Colour codes on a two-colour scale, not one colour string per bar: plotly validates
        # each string apart, which was half the build time at the 5000-run cap.
        marker={"color": persistent.astype(np.int8), "colorscale": [[0, OKABE_ITO[5]], [1, OKABE_ITO[0]]],
                "cmin": 0, "cmax": 1, "line": {"width": 0}},
        customdata=np.column_stack([runs.start[keep], runs.start[keep] + runs.length[keep] - 1,
                                    runs.length[keep]]),
        text=[plotly_text(t) for t in token_texts(trace, runs.token[keep])], textposition="none",
        hovertemplate="position %{y}: candidate %{text}<br>steps %{customdata[0]}-%{customdata[1]} "
                      "(%{customdata[2]} passes)<extra></extra>",
    )
    steps, positions = cora_accepts(trace)
    accepts = go.Scatter(x=steps, y=positions, mode="markers", name="CORA accept",
                         marker={"symbol": "diamond", "color": COMMIT_COLOR, "size": 8},
                         hovertemplate="CORA accept: position %{y} at step %{x}<extra></extra>")
    hidden = len(runs) - keep.size
    note = f"δp = {delta_p:g}, m = {m}: dark runs last ≥ {m + 1} passes (persistence ≥ m)"
    if hidden:
        note += f"; {hidden} shortest runs not drawn"
    annotation = {"text": note, "xref": "paper", "yref": "paper", "x": 0, "y": 1.0, "yanchor": "bottom",
                  "showarrow": False, "font": {"size": 11}}
    default = titled("Persistence runs of the top-1 candidate", trace_label(trace), f"{len(runs)} runs")
    return figure([bars, accepts], title=title or default, height=max(320, min(1200, 60 + 6 * trace.gen_length)),
                  xaxis=axis("step", range=[-0.5, max(trace.num_steps, 1) - 0.5], **step_ticks(trace.num_steps)),
                  yaxis=axis("position", autorange="reversed"), barmode="overlay", bargap=0.1,
                  annotations=[annotation])
