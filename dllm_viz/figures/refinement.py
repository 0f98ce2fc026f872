"""Redundant refinement: steps a position stayed masked after its answer had already settled.

The settled step of a position is the first step from which its top-1 candidate equalled its
final token and never changed again while it was masked. Every step between settling and
committing is a forward pass that refined an answer that was already right: the waste that
early-commit rules (Fast-dLLM, CORA, CE) try to remove. Token edits (block refinement) are the
opposite case: a committed answer that was not settled and changed after its commit; the chart
draws them from commit to last edit. Knows nothing about policies.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from dllm_viz.dynamics import candidate_history, most_revised_position, settled_step, wasted_refinement_fraction
from dllm_viz.figures._edits import edit_text
from dllm_viz.figures._layout import (
    COMMIT_COLOR,
    EDIT_COLOR,
    OKABE_ITO,
    axis,
    figure,
    plotly_text,
    step_ticks,
    titled,
    token_texts,
    trace_label,
)
from dllm_viz.trace import Trace

__all__ = ["candidate_history", "most_revised_position", "refinement_dumbbell", "settled_step",
           "wasted_refinement_fraction"]


def refinement_dumbbell(trace: Trace, *, title: str | None = None) -> go.Figure:
    """Settled step against commit step for every position, as a dumbbell chart.

    Args:
        trace: the decode to draw.
        title: figure title; the default states the wasted-refinement percentage.

    Returns:
        Three traces: one line scatter of all settled-to-commit segments (None-separated), the
        settled-step markers, and the commit-step markers (y = position, x = step); an
        annotation states `wasted_refinement_fraction` as a percentage, over every position and over
        the answer's (end-of-text left out). A trace with token edits
        adds two more: a dotted line from each edited position's commit to its last edit, and
        one marker per edit (hover "edited: 'old' → 'new' at step s"); the annotation counts them.
    """
    commit, settled = trace.commit_step, settled_step(trace)
    positions = np.arange(trace.gen_length)
    texts = np.array([plotly_text(t) for t in token_texts(trace, trace.final_tokens)], dtype=object)
    waiting = np.flatnonzero((settled >= 0) & (settled < commit))
    seg_x = np.full(3 * waiting.size, None, dtype=object)
    seg_y = np.full(3 * waiting.size, None, dtype=object)
    seg_x[0::3], seg_x[1::3] = settled[waiting], commit[waiting]
    seg_y[0::3] = seg_y[1::3] = waiting
    has_settled, has_commit = settled >= 0, commit >= 0
    traces = [
        go.Scatter(x=seg_x.tolist(), y=seg_y.tolist(), mode="lines", name="settled, still masked",
                   line={"color": OKABE_ITO[1], "width": 3}, hoverinfo="skip"),
        go.Scatter(x=settled[has_settled], y=positions[has_settled], text=texts[has_settled].tolist(),
                   mode="markers", name="settled step", marker={"color": OKABE_ITO[0], "size": 7},
                   hovertemplate="position %{y}: %{text}<br>settled at step %{x}<extra></extra>"),
        go.Scatter(x=commit[has_commit], y=positions[has_commit], text=texts[has_commit].tolist(), mode="markers",
                   name="commit step", marker={"color": COMMIT_COLOR, "size": 7, "symbol": "diamond"},
                   hovertemplate="position %{y}: %{text}<br>committed at step %{x}<extra></extra>"),
    ]
    events = trace.edit_events
    if events:
        traces += _edit_traces(trace)
    share, answer = wasted_refinement_fraction(trace), wasted_refinement_fraction(trace, answer_only=True)
    edited = f"; {len(events)} edits changed {int((trace.edits_per_position > 0).sum())} committed positions"
    note = {"text": f"{share:.1%} of token-steps were spent on positions whose answer was already "
                    f"settled ({answer:.1%} on the answer, end-of-text left out){edited if events else ''}",
            "xref": "paper", "yref": "paper", "x": 0, "y": 1.0,
            "yanchor": "bottom", "showarrow": False, "font": {"size": 12}}
    default = titled("Redundant refinement", trace_label(trace), f"NFE {trace.nfe}")
    return figure(traces, title=title or default, height=max(320, min(1200, 60 + 6 * trace.gen_length)),
                  xaxis=axis("step", range=[-0.5, max(trace.num_steps, 1) - 0.5], **step_ticks(trace.num_steps)),
                  yaxis=axis("position", autorange="reversed"), annotations=[note])


def _edit_traces(trace: Trace) -> list[go.Scatter]:
    """A dotted commit-to-last-edit segment per edited position (None-separated) and a marker per edit."""
    events = trace.edit_events
    last: dict[int, int] = {}
    for event in events:
        last[event.position] = event.step
    seg_x: list[int | None] = []
    seg_y: list[int | None] = []
    for position, step in last.items():
        # The first commit of the position: an edit to the mask and a recommit may come later.
        commits = np.flatnonzero(trace.committed[:, position])
        first = int(commits[0]) if commits.size else step
        seg_x += [first, step, None]
        seg_y += [position, position, None]
    return [
        go.Scatter(x=seg_x, y=seg_y, mode="lines", name="committed, later edited", hoverinfo="skip",
                   line={"color": EDIT_COLOR, "width": 2, "dash": "dot"}),
        go.Scatter(x=[e.step for e in events], y=[e.position for e in events], mode="markers", name="edit",
                   text=[plotly_text(edit_text(trace, e)) for e in events],
                   marker={"color": EDIT_COLOR, "size": 8, "symbol": "x", "line": {"color": "#FFFFFF", "width": 1}},
                   hovertemplate="position %{y}: %{text}<extra></extra>"),
    ]
