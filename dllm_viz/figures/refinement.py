"""Redundant refinement: steps a position stayed masked after its answer had already settled.

The settled step of a position is the first step from which its top-1 candidate equalled its
final token and never changed again while it was masked. Every step between settling and
committing is a forward pass that refined an answer that was already right: the waste that
early-commit rules (Fast-dLLM, CORA, CE) try to remove. Token edits (block refinement) are the
opposite case: a committed answer that was not settled and changed after its commit; the chart
draws them from commit to last edit (at most MAX_EDIT_POINTS edit markers: past that one marker
per block of steps x positions, said in the legend). Knows nothing about policies.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from dllm_viz.dynamics import candidate_history, most_revised_position, settled_step, wasted_refinement_fraction
from dllm_viz.figures._edits import MAX_HOVER_EDITS, earlier_line, edit_text
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
from dllm_viz.figures._pooling import group_cells
from dllm_viz.trace import Trace

__all__ = ["candidate_history", "most_revised_position", "refinement_dumbbell", "settled_step",
           "wasted_refinement_fraction"]

MAX_EDIT_POINTS = 2000  # edit markers drawn one per edit up to this; SVG markers stall the browser past it


NOTE_LINE = 16  # px of one 12-px line of the note above the plot


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
        Past MAX_EDIT_POINTS edits, one marker per block of steps x positions, on its latest edit,
        its hover counting the block's edits (the legend names the block size).
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
    edits = int(trace.edited.sum())
    if edits:
        traces += _edit_traces(trace)
    share, answer = wasted_refinement_fraction(trace), wasted_refinement_fraction(trace, answer_only=True)
    # One short line each: on one line (about 150 characters with edits) the note ran past the right
    # edge of a half-width chart and was cut ("... (8.5% on the a") at 1024 px.
    lines = [f"{share:.1%} of token-steps were spent on positions whose answer was already settled",
             f"({answer:.1%} on the answer, end-of-text left out)"]
    if edits:
        lines.append(f"{edits} edits changed {int((trace.edits_per_position > 0).sum())} committed positions")
    note = {"text": "<br>".join(lines), "align": "left", "xref": "paper", "yref": "paper", "x": 0, "y": 1.0,
            "xanchor": "left", "yanchor": "bottom", "showarrow": False, "font": {"size": 12}}
    default = titled("Redundant refinement", trace_label(trace), f"NFE {trace.nfe}")
    chosen = title or default
    top = (80 if "<br>" in chosen else 60) + NOTE_LINE * len(lines)  # the title, then the note's lines above the plot
    height = max(320, min(1200, 60 + 6 * trace.gen_length)) + NOTE_LINE * len(lines)
    return figure(traces, title=chosen, height=height,
                  xaxis=axis("step", range=[-0.5, max(trace.num_steps, 1) - 0.5], **step_ticks(trace.num_steps)),
                  yaxis=axis("position", autorange="reversed"), annotations=[note], margin={"t": top})


def _edit_traces(trace: Trace, max_points: int = MAX_EDIT_POINTS) -> list[go.Scatter]:
    """A dotted commit-to-last-edit segment per edited position (None-separated) and the edit markers."""
    edited = np.flatnonzero(trace.edits_per_position > 0)
    num_steps = trace.num_steps
    last = num_steps - 1 - np.argmax(trace.edited[::-1, edited], axis=0)
    # The first commit of the position: an edit to the mask and a recommit may come later.
    committed = trace.committed[:, edited]
    first = np.where(committed.any(axis=0), np.argmax(committed, axis=0), last)
    seg_x = np.full(3 * edited.size, None, dtype=object)
    seg_y = np.full(3 * edited.size, None, dtype=object)
    seg_x[0::3], seg_x[1::3] = first.tolist(), last.tolist()
    seg_y[0::3] = seg_y[1::3] = edited.tolist()
    steps, positions = np.nonzero(trace.edited)  # Trace.edit_events' order: step, then position
    groups = group_cells(steps, positions, max_points)
    name, x, y, texts = "edit", steps, positions, []
    if groups.factor == 1:
        texts = [plotly_text(edit_text(trace, trace.edit_event(s, p)))
                 for s, p in zip(steps.tolist(), positions.tolist(), strict=True)]
    else:
        name = f"edit (one mark per {groups.factor} steps x {groups.factor} positions)"
        order = np.argsort(groups.group, kind="stable")
        starts = np.flatnonzero(np.diff(groups.group[order], prepend=-1))
        ends = np.append(starts[1:], order.size)[: starts.size]
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            members = order[start:end]
            lines = [f"{end - start} edits at positions {positions[members].min()}-{positions[members].max()}, "
                     f"steps {steps[members].min()}-{steps[members].max()}"]
            if end - start > MAX_HOVER_EDITS:
                lines.append(earlier_line(end - start - MAX_HOVER_EDITS))
            lines += [f"position {p}: {plotly_text(edit_text(trace, trace.edit_event(s, p)))}"
                      for s, p in zip(steps[members[-MAX_HOVER_EDITS:]].tolist(),
                                      positions[members[-MAX_HOVER_EDITS:]].tolist(), strict=True)]
            texts.append("<br>".join(lines))
        latest = order[ends - 1]
        x, y = steps[latest], positions[latest]
    hover = "position %{y}: %{text}<extra></extra>" if groups.factor == 1 else "%{text}<extra></extra>"
    return [
        go.Scatter(x=seg_x.tolist(), y=seg_y.tolist(), mode="lines", name="committed, later edited",
                   hoverinfo="skip", line={"color": EDIT_COLOR, "width": 2, "dash": "dot"}),
        go.Scatter(x=x.tolist(), y=y.tolist(), mode="markers", name=name, text=texts,
                   marker={"color": EDIT_COLOR, "size": 8, "symbol": "x", "line": {"color": "#FFFFFF", "width": 1}},
                   hovertemplate=hover),
    ]
