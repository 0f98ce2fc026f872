"""Shared look and trace facts for every figure: colours, axis dicts, titles, token labels, masks.

Knows the colour vocabulary (colour-blind-safe scales, the LLaDA demo's token-state colours,
the Okabe-Ito palette for overlays) and how to read display facts out of a Trace. Knows nothing
about any particular chart, and never mutates plotly's global templates.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.basedatatypes import BaseTraceType

from dllm_viz.dynamics import mask_token_id as mask_token_id  # re-exported for the figure modules
from dllm_viz.dynamics import masked_before as masked_before
from dllm_viz.trace import Trace

# Sequential scales, always passed explicitly so Streamlit's theme cannot swap them.
CONFIDENCE_SCALE = "Viridis"
STEP_SCALE = "Cividis"

# Okabe-Ito: distinguishable under the common colour-vision deficiencies.
OKABE_ITO: tuple[str, ...] = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
)
COMMIT_COLOR = "#D55E00"  # vermillion: visible on every Viridis colour
BAND_EDGE_COLOR = "#E69F00"
NO_DATA_COLOR = "#D9D9D9"  # committed / undefined cells
EDIT_COLOR = "#CC79A7"  # reddish purple: token edits (block refinement), apart from commits' vermillion
FLAG_COLOR = "#000000"  # cells an analysis calls out (a commit another decode did not make): black rings

# Token-state colours of the LLaDA Gradio demo (docs/UX.md §1.1).
MASKED_COLOR = "#444444"
LOW_COLOR = "#FF6666"  # committed this step, confidence < 0.3
MID_COLOR = "#FFAA33"  # committed this step, confidence < 0.7
HIGH_COLOR = "#66CC66"  # committed this step, confidence >= 0.7
EARLIER_COLOR = "#6699CC"  # committed at an earlier step
DRAFT_TEXT_COLOR = "#A0A0A0"  # a masked position's current candidate, shown faintly
LOW_CONFIDENCE, MID_CONFIDENCE = 0.3, 0.7

_DISPLAY_ESCAPES = {"\n": "⏎", "\r": "␍", "\t": "⇥"}
# Unicode bidi controls: an override (U+202E) in a token or label reverses the rest of its line in
# a hover or title ("… · NFE 3" read backwards), and escaping does not touch it; shown as their
# code point instead. Letters of right-to-left scripts are left alone.
_BIDI_CONTROLS = {chr(c): f"[U+{c:04X}]" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                                    *range(0x2066, 0x206A))}
_GRID = "#EBF0F8"
# A small explicit template (the look of plotly_white): figures look the same whatever
# pio.templates.default is, and a short template is ~10x cheaper to attach than the full one.
TEMPLATE = go.layout.Template(layout={
    "font": {"color": "#2a3f5f"}, "paper_bgcolor": "#FFFFFF", "plot_bgcolor": "#FFFFFF",
    "colorway": list(OKABE_ITO), "hoverlabel": {"align": "left"},
    "xaxis": {"gridcolor": _GRID, "linecolor": _GRID, "zerolinecolor": _GRID, "automargin": True},
    "yaxis": {"gridcolor": _GRID, "linecolor": _GRID, "zerolinecolor": _GRID, "automargin": True},
})


def display_text(text: str) -> str:
    """Token text made visible on one line: newlines/tabs as symbols, bidi controls as their code point,
    blank as '␣' (not escaped)."""
    for raw, shown in _DISPLAY_ESCAPES.items():
        text = text.replace(raw, shown)
    if any(c in _BIDI_CONTROLS for c in text):
        text = "".join(_BIDI_CONTROLS.get(c, c) for c in text)
    return text if text.strip() else text.replace(" ", "␣") or "∅"


def plotly_text(text: str) -> str:
    """Text made literal for plotly's pseudo-HTML (labels, hover, annotations): & < > escaped.

    Quotes are left alone: plotly decodes &amp; &lt; &gt; but not &quot;.
    """
    return html.escape(text, quote=False)


def token_texts(trace: Trace, ids: np.ndarray) -> list[str]:
    """Display text of each token id in `ids` (1-D), not escaped."""
    return [display_text(trace.token_text(int(t))) for t in np.asarray(ids).ravel()]


def position_labels(trace: Trace) -> list[str]:
    """One axis label per generated position: `index:final token` (⏎ for newlines, escaped for plotly)."""
    return [f"{i}:{plotly_text(t)}" for i, t in enumerate(token_texts(trace, trace.final_tokens))]


def trace_label(trace: Trace) -> str:
    """Name of a trace for titles and legends: meta.label (else 'trace'), one line, escaped."""
    return plotly_text(display_text(trace.meta.label or "trace"))


def stop_token_ids(trace: Trace) -> np.ndarray:
    """EOS/EoT ids of the recorded model (empty if unknown)."""
    return np.asarray(trace.stop_token_ids, dtype=np.int64)


def reason_names(trace: Trace) -> tuple[str, ...]:
    """Commit-reason names for the trace's int8 codes (meta.reason_names, else the current list)."""
    if trace.meta.reason_names:
        return trace.meta.reason_names
    from dllm_viz.policies.base import COMMIT_REASONS  # numpy-only module; imported lazily

    return COMMIT_REASONS


def recorded_number(trace: Trace, part: str, key: str, *, integer: bool = False) -> float | int | None:
    """A number the trace's recorded pipeline part holds (None when it records none).

    Why checked: a saved trace's pipeline is JSON that load_trace checks only for component
    names, so an older or hand-edited file can hold "0.9" or null-like text where a figure does
    arithmetic and formatting; that surfaced as a bare TypeError from deep inside a builder.

    Raises:
        ValueError: the recorded value is not a finite number (or not a whole one, `integer`);
            the message names it and says which argument to pass instead.
    """
    value = trace.meta.component(part).get(key)
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not number or (integer and not float(value).is_integer()):
        kind = "a whole number" if integer else "a finite number"
        raise ValueError(f"the trace's pipeline records {part}.{key} = {value!r}, not {kind}; pass {key}= "
                         "to the figure")
    return int(value) if integer else float(value)


def axis(title: str, **options: Any) -> dict[str, Any]:
    """An axis dict with a title and any extra plotly axis options."""
    return {"title": {"text": title}, **options}


def step_ticks(num_steps: int) -> dict[str, Any]:
    """Axis options that keep a step axis on whole steps.

    Plotly picks half-step ticks (0, 0.5, 1, ...) for ranges of a few steps, which a fast policy's
    3-pass trace has; one tick a step up to 10 steps, plotly's own (whole) ticks beyond.
    """
    return {"dtick": 1} if num_steps <= 10 else {}


def titled(what: str, *details: str) -> str:
    """A figure title: what the chart shows, then the trace's details on a smaller second line.

    Half-width charts (two to a row in the app) clipped one-line titles after ~45 characters,
    cutting off the policy label and NFE, which are the part a reader compares.
    """
    shown = [d for d in details if d]
    return f"{what}<br><sup>{' · '.join(shown)}</sup>" if shown else what


# The legend sits at the bottom of the whole figure (container coordinates), under the x-axis
# title: plotly pushes the bottom margin to fit both. A legend at paper y=-0.15 was placed a fixed
# fraction of the plot's height below it, and covered the axis title ("position" behind "commit"
# at 1400 px, worse in a narrow column).
BOTTOM_LEGEND: dict[str, Any] = {"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "x": 0}


def finish_options(title: str, height: int | None = None) -> dict[str, Any]:
    """The shared look of every figure: margins, title, legend placement and the white template."""
    return {"title": {"text": title, "x": 0.01, "xanchor": "left"}, "template": TEMPLATE,
            "margin": {"l": 60, "r": 20, "t": 80 if "<br>" in title else 60, "b": 60},
            "legend": BOTTOM_LEGEND, "height": height}


def merged(base: dict[str, Any], *updates: dict[str, Any]) -> dict[str, Any]:
    """`base` with each update merged in, nested dicts key by key (as plotly's update_layout does)."""
    out = dict(base)
    for update in updates:
        for key, value in update.items():
            out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def figure(traces: Iterable[BaseTraceType], *, title: str, height: int | None = None,
           **layout: Any) -> go.Figure:
    """A finished figure built in one step from its traces and its whole layout.

    Plotly validates every `add_trace` / `update_layout` call through its property paths, which
    made each Step of the Decode page rebuild its charts in 25-50 ms; one constructor call with
    plain dicts validates the same properties in ~5 ms (BENCHMARKS.md, figure builds). The traces
    are validated when they are made; the figure's own pass over them and the layout
    (`_validate=False`, as plotly.io does for its templates) was half of what remained: a Decode
    Step's heatmap 14 -> 7 ms, its summary 25 -> 15 ms on a slow CPU, the same JSON. The tests
    rebuild every figure with validation on (tests/test_figures_properties.py), so a bad layout
    key still fails there.
    """
    return go.Figure(data=list(traces), layout=merged(finish_options(title, height), layout), _validate=False)


def finish_layout(fig: go.Figure, *, title: str, height: int | None = None, **options: Any) -> go.Figure:
    """Apply `finish_options` to a figure built piece by piece (subplot grids); returns `fig`."""
    fig.update_layout(**finish_options(title, height), **options)
    return fig


def nanstat(values: np.ndarray, mask: np.ndarray, how: str) -> np.ndarray:
    """Row-wise mean/min/max of `values` where `mask`, NaN for rows with nothing selected.

    Avoids numpy's all-NaN RuntimeWarnings; `how` is 'mean', 'min' or 'max'.
    """
    keep = mask & np.isfinite(values)
    count = keep.sum(axis=1)
    if how == "mean":
        total = np.where(keep, values, 0.0).sum(axis=1)
        out = total / np.maximum(count, 1)
    else:
        fill = np.inf if how == "min" else -np.inf
        picked = np.where(keep, values, fill)
        out = picked.min(axis=1, initial=np.inf) if how == "min" else picked.max(axis=1, initial=-np.inf)
    return np.where(count > 0, out, np.nan).astype(np.float64)
