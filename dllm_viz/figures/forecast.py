"""Confidence Extrapolation (CE, docs/ALGORITHMS.md §6.2): Kalman forecast bands per position.

For a few positions, one panel each over steps: observed confidence while masked, the filtered
level, the forecast mean with its [lower, upper] band (filled between), the CE threshold, and
the step where the position was committed (early by CE or not) against an optional step where
the base rule alone would have committed it. Forecasts are drawn at the step they were made;
the horizon h* is in the hover. Reads extras only; knows nothing about how they were computed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dllm_viz.figures._layout import (
    OKABE_ITO,
    axis,
    finish_layout,
    plotly_text,
    recorded_number,
    step_ticks,
    titled,
    token_texts,
    trace_label,
)
from dllm_viz.figures.heatmaps import require_extras
from dllm_viz.policies.extras import (
    CE_EARLY,
    KALMAN_FORECAST,
    KALMAN_HORIZON,
    KALMAN_LEVEL,
    KALMAN_LOWER,
    KALMAN_UPPER,
)
from dllm_viz.trace import Trace

REQUIRED: tuple[str, ...] = (KALMAN_LEVEL, KALMAN_FORECAST, KALMAN_LOWER, KALMAN_UPPER)
BAND_FILL = "rgba(86,180,233,0.25)"  # Okabe-Ito sky blue, translucent
MAX_PANELS = 12


def ce_threshold(trace: Trace) -> float:
    """tau_ce of the trace's recorded extrapolator.

    Raises:
        ValueError: the trace's pipeline records none, or not a number (pass `threshold=` to the figure).
    """
    try:
        tau = recorded_number(trace, "extrapolate", "tau_ce")
    except ValueError as exc:
        raise ValueError(str(exc).replace("pass tau_ce=", "pass threshold=")) from None
    if tau is None:
        raise ValueError("the trace records no CE extrapolator (tau_ce); pass threshold=")
    return tau


def ce_early_step(trace: Trace) -> np.ndarray:
    """[L] step at which CE committed each position early (extras['ce_early'] == 1), -1 if never."""
    out = np.full(trace.gen_length, -1, dtype=np.int64)
    if CE_EARLY not in trace.extras:
        return out
    steps, positions = np.nonzero(np.nan_to_num(trace.extras[CE_EARLY]) >= 0.5)
    out[positions] = steps
    return out


def default_positions(trace: Trace, count: int) -> list[int]:
    """Positions CE committed early first, then tracked positions spread evenly over commit order."""
    if count < 1:
        raise ValueError(f"`max_panels` must be >= 1, got {count}")
    early = [int(p) for p in np.flatnonzero(ce_early_step(trace) >= 0)][:count]
    tracked = np.flatnonzero(np.isfinite(trace.extras[KALMAN_LEVEL]).sum(axis=0) >= 2)
    pool = [int(p) for p in tracked[np.argsort(trace.commit_step[tracked], kind="stable")] if p not in early]
    if not pool and not early:
        pool = list(range(trace.gen_length))
    need = min(count - len(early), len(pool))
    if need <= 0:
        return early
    spread = np.unique(np.rint(np.linspace(0, len(pool) - 1, need)).astype(int))
    return early + [pool[int(i)] for i in spread]


def _check(trace: Trace, positions: list[int], base_commit_step: np.ndarray | None) -> None:
    bad = [p for p in positions if not 0 <= p < trace.gen_length]
    if bad or not 1 <= len(positions) <= MAX_PANELS:
        raise ValueError(f"`positions` must list 1 to {MAX_PANELS} ints in [0, {trace.gen_length - 1}], "
                         f"got {positions}")
    if base_commit_step is not None and np.shape(base_commit_step) != (trace.gen_length,):
        raise ValueError(f"`base_commit_step` must have shape ({trace.gen_length},) like trace.commit_step, "
                         f"got {np.shape(base_commit_step)}")


def _vertical(step: int, name: str, color: str, dash: str, row_legend: bool) -> go.Scatter:
    return go.Scatter(x=[step, step], y=[0, 1], mode="lines", name=name, legendgroup=name,
                      showlegend=row_legend, line={"color": color, "dash": dash, "width": 2},
                      hovertemplate=f"{name} at step {step}<extra></extra>")


def _panel(trace: Trace, p: int, threshold: float, steps_of: tuple[int, int, int], first: bool) -> list[go.Scatter]:
    """The traces of one position's panel (legend entries only on the first panel).

    The series are sent only over the steps where any of them has a value (the position was
    masked, or tracked by CE): outside them every point is NaN and draws nothing, and a
    2000-step trace sent ~150 kB of NaN per panel. The threshold line keeps the whole step range.
    `steps_of` is the position's (CE early commit, commit, base rule commit) step, -1 for none,
    read once for all panels (each is a scan of the whole trace).
    """
    ex = trace.extras
    column = trace.tokens[:-1, p] == trace.mask_token_id  # masked_before's column, without the rest
    series = {name: ex[name][:, p] for name in (KALMAN_LOWER, KALMAN_UPPER, KALMAN_FORECAST, KALMAN_LEVEL)}
    observed = np.where(column, trace.confidence[:, p], np.nan)
    defined = np.flatnonzero(np.isfinite(np.vstack([*series.values(), observed])).any(axis=0))
    shown = slice(int(defined[0]), int(defined[-1]) + 1) if defined.size else slice(0, 0)
    steps = np.arange(trace.num_steps)[shown]
    horizon = ex[KALMAN_HORIZON][shown, p] if KALMAN_HORIZON in ex else np.full(steps.size, np.nan)

    def line(y: np.ndarray, name: str, color: str, **extra: object) -> go.Scatter:
        return go.Scatter(x=steps, y=y[shown], mode="lines", name=name, legendgroup=name, showlegend=first,
                          line={"color": color, "width": 1.5}, customdata=horizon,
                          hovertemplate=f"step %{{x}}<br>{name} %{{y:.3f}}<br>horizon h* %{{customdata}}"
                                        "<extra></extra>", **extra)

    out = [
        line(series[KALMAN_LOWER], "forecast lower", OKABE_ITO[5]),
        line(series[KALMAN_UPPER], "forecast upper", OKABE_ITO[5], fill="tonexty", fillcolor=BAND_FILL),
        line(series[KALMAN_FORECAST], "forecast mean", OKABE_ITO[0]),
        line(series[KALMAN_LEVEL], "filtered level", OKABE_ITO[7]),
        go.Scatter(x=steps, y=observed[shown], mode="markers", name="observed confidence", legendgroup="observed",
                   showlegend=first, marker={"color": OKABE_ITO[1], "size": 6},
                   hovertemplate="step %{x}<br>observed confidence %{y:.3f}<extra></extra>"),
        go.Scatter(x=[0, max(trace.num_steps - 1, 0)], y=[threshold, threshold], mode="lines",
                   name=f"threshold {threshold:g}", legendgroup="threshold", showlegend=first,
                   line={"color": OKABE_ITO[3], "dash": "dot"},
                   hovertemplate="threshold %{y}<extra></extra>"),
    ]
    early, commit, base_step = steps_of
    if commit >= 0:
        name = "CE early commit" if early == commit else "commit"
        out.append(_vertical(commit, name, OKABE_ITO[2] if early == commit else OKABE_ITO[7], "solid", first))
    if base_step >= 0:
        out.append(_vertical(base_step, "base rule commit", OKABE_ITO[4], "dash", first))
    return out


def kalman_forecast_bands(trace: Trace, *, positions: Sequence[int] | None = None, max_panels: int = 4,
                          threshold: float | None = None, base_commit_step: np.ndarray | None = None,
                          title: str | None = None) -> go.Figure:
    """CE's Kalman view of selected positions: observed, filtered, forecast band, commits.

    Args:
        trace: a decode run with the Kalman extrapolator (extrapolate='kalman').
        positions: positions to show, one panel each (at most MAX_PANELS); default: up to
            `max_panels` positions, those CE committed early first, then tracked positions
            spread evenly over the commit order.
        max_panels: how many default positions to pick.
        threshold: the CE commit threshold line; default the recorded extrapolator's tau_ce.
        base_commit_step: [L] step at which the base rule alone committed each position (e.g.
            the `commit_step` of the same decode without CE), -1 for never; drawn as a dashed line.
        title: figure title; the default names the trace.

    Returns:
        One subplot row per position, shared step axis, each with the lower/upper band
        (fill='tonexty'), forecast mean, level, observed markers, threshold and commit lines.

    Raises:
        ValueError: the trace lacks the Kalman extras (the message names them), or `positions`
            / `base_commit_step` do not fit the trace.
    """
    require_extras(trace, REQUIRED, recorded_by="the CE Kalman extrapolator, extrapolate='kalman'")
    chosen = [int(p) for p in positions] if positions is not None else default_positions(trace, max_panels)
    _check(trace, chosen, base_commit_step)
    tau = ce_threshold(trace) if threshold is None else float(threshold)
    base = np.full(trace.gen_length, -1) if base_commit_step is None else np.asarray(base_commit_step)
    early, commit = ce_early_step(trace), trace.commit_step
    texts = token_texts(trace, trace.final_tokens[chosen])
    titles = [f"position {p}: {plotly_text(t)}" for p, t in zip(chosen, texts, strict=True)]
    fig = make_subplots(rows=len(chosen), cols=1, shared_xaxes=True, vertical_spacing=0.3 / len(chosen),
                        subplot_titles=titles)
    for row, p in enumerate(chosen, start=1):
        for item in _panel(trace, p, tau, (int(early[p]), int(commit[p]), int(base[p])), first=row == 1):
            fig.add_trace(item, row=row, col=1)
        fig.update_yaxes(axis("confidence", range=[0, 1.05]), row=row, col=1)
    fig.update_xaxes(axis("step"), row=len(chosen), col=1)
    fig.update_xaxes(**step_ticks(trace.num_steps))  # whole steps: plotly picks 0.5 ticks for a few steps
    default = titled("Kalman confidence forecasts (CE)", trace_label(trace))
    return finish_layout(fig, title=title or default, height=140 + 190 * len(chosen), hovermode="x")
