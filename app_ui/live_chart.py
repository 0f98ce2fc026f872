"""A Plotly chart that stays mounted across reruns, moves a playhead, and reports clicks.

Why not st.plotly_chart: Streamlit 1.67 derives a chart's identity from its figure, so every
Step (one more heatmap row) remounted each chart and Plotly drew it from scratch, twice, which
alone cost the browser more than a Step's 150 ms budget (BENCHMARKS.md, issue #23). This
in-page component (Streamlit's components v2: no iframe) keeps one chart per key and calls
`Plotly.react` with the new figure (one diffed draw); a playhead-only change is a
`Plotly.relayout` of one shape; a chart scrolled out of sight draws when it comes back into
view; a click on a cell is reported back (heatmaps report clicks, not selections). One
plotly.js serves every chart of the page (app_ui.static_component serves the file: plotly's
cartesian bundle). Without it, or for a figure with a trace type that bundle does not draw, the
chart falls back to st.plotly_chart, so nothing is lost.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

from app_ui.static_component import asset_url, bundle_trace_types, page_script

DEFAULT_HEIGHT = 450
PLAYHEAD_COLOR = "#D55E00"


@dataclass(frozen=True)
class Click:
    """A click on a chart: the x value of the clicked cell or point (a category label on heatmaps)."""

    x: str
    y: float | None


@cache
def _component() -> Any:
    """The chart component's mount command."""
    return st.components.v2.component("dllm_viz.live_chart", js=page_script("chart_core.js", "live_chart.js"),
                                      isolate_styles=False)


def preload_charts() -> None:
    """Start loading plotly.js in the browser now (an element that draws nothing), so the first
    chart of a Run does not wait for it (the sidebar calls this on every page)."""
    if (src := asset_url("plotly.min.js")) is not None:
        _component()(data={"spec": None, "src": src}, key="live_chart_preload")


def figure_height(fig: go.Figure) -> int:
    """The figure's own height, else plotly's default."""
    return int(fig.layout.height or DEFAULT_HEIGHT)


def playhead_shape(step: int) -> dict[str, Any]:
    """A dotted vertical line at `step` through every panel of a step-axis figure.

    One paper-height shape on the shared step axis: add_vline drew one per panel and cost
    twice as much on every Step and scrub.
    """
    return {"type": "line", "xref": "x", "yref": "paper", "x0": step, "x1": step, "y0": 0, "y1": 1,
            "line": {"dash": "dot", "color": PLAYHEAD_COLOR, "width": 2}}


def with_playhead(fig: go.Figure, step: int) -> go.Figure:
    """A copy of `fig` with the playhead at `step` (the fallback chart's playhead)."""
    return go.Figure(fig).update_layout(shapes=[*fig.layout.shapes, playhead_shape(step)])


def chart_spec(fig: go.Figure) -> dict[str, Any] | None:
    """What the browser needs to draw `fig` in a live chart (its JSON, a digest of it, its height and
    where plotly.js is), or None when it must fall back to st.plotly_chart (no plotly.js served,
    or a trace type the served bundle lacks). Without a playhead: that changes per run, the
    figure per trace version, so callers may keep this per version."""
    src = asset_url("plotly.min.js")
    if src is None or not {trace.type for trace in fig.data} <= bundle_trace_types():
        return None
    spec = pio.to_json(fig, validate=False)
    digest = hashlib.blake2b(spec.encode(), digest_size=12).hexdigest()
    return {"spec": spec, "digest": digest, "height": figure_height(fig), "src": src}


def chart_data(spec: dict[str, Any], *, playhead: int | None = None, clickable: bool = False) -> dict[str, Any]:
    """`chart_spec`'s output with this run's playhead and click reporting (the element's data)."""
    return {**spec, "playhead": None if playhead is None else playhead_shape(playhead), "clickable": clickable}


def fallback_chart(fig: go.Figure, *, key: str, playhead: int | None = None) -> None:
    """The figure drawn by st.plotly_chart, with its playhead drawn in (no live chart possible)."""
    st.plotly_chart(fig if playhead is None else with_playhead(fig, playhead), key=key, theme=None)


def parse_click(value: Any) -> Click | None:
    """A click reported by the browser ({"x", "y"}), or None if the value is not one."""
    if not isinstance(value, dict):
        return None
    y = value.get("y")
    return Click(x=str(value.get("x")), y=float(y) if isinstance(y, int | float) else None)


def live_chart(fig: go.Figure, *, key: str, playhead: int | None = None, clickable: bool = False) -> Click | None:
    """Draw `fig` in the chart kept under `key`; returns a click made since the last run, if any.

    `playhead` draws a dotted vertical line at that x (a step) without redrawing the figure;
    `clickable` reports clicks (each click once: a trigger, gone on the next run).
    """
    spec = chart_spec(fig)
    if spec is None:
        fallback_chart(fig, key=key, playhead=playhead)
        return None
    result = _component()(data=chart_data(spec, playhead=playhead, clickable=clickable), key=key,
                          on_click_change=lambda: None)
    return parse_click(getattr(result, "click", None)) if clickable else None
