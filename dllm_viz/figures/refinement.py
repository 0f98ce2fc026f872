"""Redundant refinement: steps a position stayed masked after its answer had already settled.

The settled step of a position is the first step from which its top-1 candidate equalled its
final token and never changed again while it was masked. Every step between settling and
committing is a forward pass that refined an answer that was already right: the waste that
early-commit rules (Fast-dLLM, CORA, CE) try to remove. Knows nothing about policies.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from dllm_viz.figures._layout import (
    COMMIT_COLOR,
    OKABE_ITO,
    axis,
    finish_layout,
    masked_before,
    plotly_text,
    step_ticks,
    titled,
    token_texts,
    trace_label,
)
from dllm_viz.trace import Trace


def settled_step(trace: Trace) -> np.ndarray:
    """Per position, the step from which its candidate was its final token until it committed.

    Only steps where the position was still masked (up to and including its commit step) are
    considered.

    Args:
        trace: the decode to analyse.

    Returns:
        [L] int32 steps; -1 where the position never committed or its candidate at the commit
        step was not its final token.
    """
    commit = trace.commit_step.astype(np.int64)
    steps = np.arange(trace.num_steps)[:, None]
    considered = (steps <= commit[None, :]) & masked_before(trace)
    good = trace.candidate == trace.final_tokens[None, :]
    last_bad = np.where(considered & ~good, steps, -1).max(axis=0, initial=-1)
    settled = last_bad + 1
    return np.where((commit >= 0) & (settled <= commit), settled, -1).astype(np.int32)


def wasted_refinement_fraction(trace: Trace) -> float:
    """Share of masked token-steps spent on positions whose answer had already settled.

    Defined as  sum_p (commit_step_p - settled_step_p) / sum_p (commit_step_p + 1)  over
    committed positions: a position committed at step c was masked for c + 1 steps, and the
    c - t of them after it settled at step t refined nothing. Positions that never settled
    add 0 to the numerator.

    Args:
        trace: the decode to analyse.

    Returns:
        A fraction in [0, 1); 0.0 when nothing was committed.
    """
    commit = trace.commit_step.astype(np.int64)
    settled = settled_step(trace).astype(np.int64)
    committed = commit >= 0
    spent = int((commit[committed] + 1).sum())
    wasted = int((commit - settled)[committed & (settled >= 0)].sum())
    return wasted / spent if spent else 0.0


def refinement_dumbbell(trace: Trace, *, title: str | None = None) -> go.Figure:
    """Settled step against commit step for every position, as a dumbbell chart.

    Args:
        trace: the decode to draw.
        title: figure title; the default states the wasted-refinement percentage.

    Returns:
        Three traces: one line scatter of all settled-to-commit segments (None-separated), the
        settled-step markers, and the commit-step markers (y = position, x = step); an
        annotation states `wasted_refinement_fraction` as a percentage.
    """
    commit, settled = trace.commit_step, settled_step(trace)
    positions = np.arange(trace.gen_length)
    texts = np.array([plotly_text(t) for t in token_texts(trace, trace.final_tokens)], dtype=object)
    waiting = np.flatnonzero((settled >= 0) & (settled < commit))
    seg_x = np.full(3 * waiting.size, None, dtype=object)
    seg_y = np.full(3 * waiting.size, None, dtype=object)
    seg_x[0::3], seg_x[1::3] = settled[waiting], commit[waiting]
    seg_y[0::3] = seg_y[1::3] = waiting
    fig = go.Figure(go.Scatter(x=seg_x.tolist(), y=seg_y.tolist(), mode="lines", name="settled, still masked",
                               line={"color": OKABE_ITO[1], "width": 3}, hoverinfo="skip"))
    has_settled, has_commit = settled >= 0, commit >= 0
    fig.add_trace(go.Scatter(
        x=settled[has_settled], y=positions[has_settled], text=texts[has_settled].tolist(), mode="markers",
        name="settled step", marker={"color": OKABE_ITO[0], "size": 7},
        hovertemplate="position %{y}: %{text}<br>settled at step %{x}<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=commit[has_commit], y=positions[has_commit], text=texts[has_commit].tolist(), mode="markers",
        name="commit step", marker={"color": COMMIT_COLOR, "size": 7, "symbol": "diamond"},
        hovertemplate="position %{y}: %{text}<br>committed at step %{x}<extra></extra>"))
    fig.update_layout(xaxis=axis("step", range=[-0.5, max(trace.num_steps, 1) - 0.5], **step_ticks(trace.num_steps)),
                      yaxis=axis("position", autorange="reversed"))
    share = wasted_refinement_fraction(trace)
    fig.add_annotation(text=f"{share:.1%} of token-steps were spent on positions whose answer was already "
                            "settled", xref="paper", yref="paper", x=0, y=1.0, yanchor="bottom",
                       showarrow=False, font={"size": 12})
    default = titled("Redundant refinement", trace_label(trace), f"NFE {trace.nfe}")
    return finish_layout(fig, title=title or default, height=max(320, min(1200, 60 + 6 * trace.gen_length)))


def candidate_history(trace: Trace, position: int) -> list[tuple[int, str]]:
    """The candidates a position went through while masked: (step, token text) at each change.

    The last entry is the candidate at its commit step (or the latest step if never committed),
    so a history of two or more entries is remasking made visible: the model proposed one token,
    left the position masked, and proposed another with more context.
    """
    commit = int(trace.commit_step[position])
    last = commit if commit >= 0 else trace.num_steps - 1
    masked = masked_before(trace)[: last + 1, position]
    history: list[tuple[int, str]] = []
    for step in np.flatnonzero(masked).tolist():
        token = trace.token_text(int(trace.candidate[step, position]))
        if not history or history[-1][1] != token:
            history.append((int(step), token))
    return history


def most_revised_position(trace: Trace) -> int | None:
    """The committed position whose candidate changed most often before its commit (None if none changed)."""
    counts = [len(candidate_history(trace, p)) - 1 if trace.commit_step[p] >= 0 else 0
              for p in range(trace.gen_length)]
    best = int(np.argmax(counts)) if counts else 0
    return best if counts and counts[best] > 0 else None
