"""One trace, shown as ONE in-page component: Step, the step scrubber, the heatmap, the output,
the per-step summary, the numbers, the token strip and the policy views.

Why one component: a Decode Step reruns the panel's fragment, and Streamlit re-renders every
element in it. With ~20 Streamlit elements (buttons, scrubber, metrics, view selector) around
the live charts a Step cost 0.15-0.23 s beyond its forward pass; a probe with the same charts
in one component measured 0.12 s (tests/e2e/one_component_probe.py, BENCHMARKS.md, issue #23).
So the panel sends one payload per run (plain data, built here) and static/trace_panel.js lays
it out and keeps every part mounted: charts are redrawn in place (static/chart_core.js), text
and HTML are set only when they change. The payload comes in two parts, each its own element:
`panel_payload` (controls, heatmap, numbers, output, token strip, view buttons) and then
`panel_rest` (the per-step summary, the profile and the view chart, carried by an element that
shows nothing itself), so the browser draws the heatmap while the server builds the rest; both
carry the run's number, and the browser joins only parts of the same run.

The browser reports what the user did as triggers, each turned into session state by a
callback before the run that follows (so that run shows its effect): `step` (the Step button
or →), `scrub` (the slider, ◀ ▶ or ←: a step index), `view` (a view's name), `cell` (a heatmap
click: the scrubber jumps to its row and, where Kalman bands are on offer, its column is
picked for them), `unpick` / `pick` (a Kalman position removed / added). Session state keys
keep their old names (`t`, `view`, `kalman_pos`, with the page's prefix), so links and other
pages read them as before; Decode's view also stays in the address bar (`?view=`).

Without a served plotly.js (no writable cache folder) the charts are drawn by st.plotly_chart
below the panel, so nothing is lost.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import asdict
from functools import cache, partial
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from app_ui.common import answer_mark, cached_figure, cut_off_message, edits_note, metric_cards
from app_ui.live_chart import chart_data, chart_spec, fallback_chart, parse_click
from app_ui.static_component import page_script
from app_ui.views import follow_click, remembered_step, toggle_kalman
from dllm_viz import figures
from dllm_viz.figures.forecast import MAX_PANELS
from dllm_viz.figures.views import KALMAN_VIEW, VIEWS
from dllm_viz.trace import Trace

# Figures drawn by st.plotly_chart below the panel: (key, figure, playhead).
Fallbacks = list[tuple[str, go.Figure, int | None]]
HEAT_HINT = "Click a cell: the step scrubber jumps to its row"
KALMAN_HINT = "; its column joins the Kalman bands (click again to drop it)."


@cache
def _component() -> Any:
    return st.components.v2.component("dllm_viz.trace_panel", js=page_script("chart_core.js", "trace_panel.js"),
                                      isolate_styles=False)


@cache
def _rest_component() -> Any:
    """The carrier of the panel's second part: an element that shows nothing itself."""
    return st.components.v2.component("dllm_viz.trace_panel_rest", js=page_script("trace_panel_rest.js"),
                                      isolate_styles=False)


def chosen_view(names: list[str], prefix: str) -> str:
    """The view the user picked (on Decode, also read from `?view=`), else the last on offer."""
    key = f"{prefix}view"
    picked = st.session_state.get(key)
    if picked is None and not prefix:
        picked = st.query_params.get("view")
    if picked not in names:
        picked = names[-1]
    st.session_state[key] = picked
    return picked


def unavailable_view(names: list[str], shown: str, prefix: str) -> str | None:
    """On Decode, what to say when the address bar's `?view=` names a view this trace has no data
    for (a link's Kalman bands on a decode without CE): which view is shown and which are on offer."""
    asked = None if prefix else st.query_params.get("view")
    if asked is None or asked == shown or asked in names or asked not in {view.name for view in VIEWS}:
        return None  # a name no view has is named by the link warning (app_ui.url_params)
    return (f"This trace has no data for the view {asked!r} the address bar asks for (its policy records none), "
            f"so it shows {shown!r}. Views of this trace: {', '.join(names)}.")


def picked_positions(trace: Trace, prefix: str) -> list[int]:
    """The Kalman positions the user picked that this trace has (a pick made on a longer decode,
    or sent by a tampered page, is dropped here rather than failing a figure)."""
    key = f"{prefix}kalman_pos"
    kept = [p for p in st.session_state.get(key, []) if isinstance(p, int) and 0 <= p < trace.gen_length]
    st.session_state[key] = kept[-MAX_PANELS:]
    return st.session_state[key]


def _view_chart(trace: Trace, version: int, prefix: str, name: str,
                build: Callable[[], go.Figure]) -> tuple[go.Figure | None, str | None]:
    """The chosen view's figure (built once per trace version and positions picked), or why not."""
    key = f"{prefix}view:{name}"
    if name == KALMAN_VIEW:
        picked = picked_positions(trace, prefix)
        build, key = (lambda: figures.kalman_forecast_bands(trace, positions=picked or None)), f"{key}:{picked}"
    try:
        return cached_figure(key, version, build), None
    except ValueError as exc:  # e.g. no position was tracked by CE yet in a partial trace
        return None, f"The {name} view has nothing to show yet: {exc}"


def _chart(charts: dict[str, Any], fallbacks: Fallbacks, prefix: str, version: int, name: str, fig_key: str,
           build: Callable[[], go.Figure], *, playhead: int | None = None, clickable: bool = False,
           per_version: bool = True) -> None:
    """Add chart `name` to `charts` (its JSON built once per trace version unless `per_version` is
    off), or to `fallbacks` when the browser cannot draw it as a live chart."""
    fig = cached_figure(fig_key, version, build) if per_version else build()
    spec = cached_figure(f"{fig_key}:spec", version, lambda: chart_spec(fig)) if per_version else chart_spec(fig)
    if spec is None:
        fallbacks.append((f"{prefix}{name}", fig, playhead))
    else:
        charts[name] = chart_data(spec, playhead=playhead, clickable=clickable)


def panel_payload(trace: Trace | None, version: int, prefix: str = "", *, stepping: bool = False,
                  can_step: bool = True,
                  notices: list[dict[str, str]] | None = None) -> tuple[dict[str, Any], Fallbacks]:
    """The component's data for this run, first part: everything but the charts `panel_rest`
    sends (so the browser draws the heatmap while the server builds those), and the figures it
    cannot draw (for st.plotly_chart).

    Everything is plain data: texts, numbers, escaped HTML built by dllm_viz.figures, and each
    chart's JSON (built once per trace version; the playhead is sent apart, so scrubbing does
    not resend a changed figure).
    """
    payload: dict[str, Any] = {"key": f"{prefix}panel", "stepping": stepping, "can_step": can_step,
                               "notices": list(notices or []), "trace": None}
    fallbacks: Fallbacks = []
    if trace is None:
        return payload, fallbacks
    if not trace.is_complete:
        payload["notices"].append({"kind": "warning", "text": (
            f"Partial trace ({trace.meta.stop_reason}): {trace.nfe} forward passes recorded, "
            f"{int((trace.commit_step < 0).sum())} positions still masked (▒ in the output).")})
    step = remembered_step(trace, version, prefix)
    charts: dict[str, Any] = {}
    views = [view.name for view in figures.views_for(trace)]
    body: dict[str, Any] = {
        "label": trace.meta.label + answer_mark(trace, " · "), "output": figures.output_text(trace),
        "cut_off": cut_off_message(trace),
        "metrics": [asdict(card) for card in metric_cards(trace)], "edits": edits_note(trace),
        "step": step, "steps": trace.num_steps, "nfe": trace.nfe, "seconds": trace.summary()["seconds"],
        "heat_hint": HEAT_HINT + (KALMAN_HINT if KALMAN_VIEW in views else "."),
        "views": views, "view": None, "kalman": None, "charts": charts,
    }
    payload["trace"] = body
    if trace.num_steps == 0:
        return payload, fallbacks
    body["strip"] = figures.token_strip_html(trace, step)
    _chart(charts, fallbacks, prefix, version, "heatmap", f"{prefix}heatmap", lambda: figures.confidence_heatmap(trace),
           clickable=True)
    body["view"] = name = chosen_view(views, prefix)
    if (note := unavailable_view(views, name, prefix)) is not None:
        payload["notices"].append({"kind": "info", "text": note})
    if name == KALMAN_VIEW:
        labels = [html.unescape(label) for label in figures.position_labels(trace)]
        body["kalman"] = {"picked": [[p, labels[p]] for p in picked_positions(trace, prefix)],
                          "labels": labels, "limit": MAX_PANELS}
    return payload, fallbacks


def panel_rest(trace: Trace | None, version: int, prefix: str, body: dict[str, Any] | None) -> tuple[
        dict[str, Any], Fallbacks]:
    """The component's data for this run, second part: the per-step summary (with its playhead),
    the volatility profile and the chosen view's chart (or why it has nothing to show), sent
    after the first part, at the step and view its `body` (`panel_payload`'s "trace") settled."""
    rest: dict[str, Any] = {"panel": f"{prefix}panel", "charts": {}, "view_note": None}
    fallbacks: Fallbacks = []
    if trace is None or body is None or trace.num_steps == 0:
        return rest, fallbacks
    step, name, charts = body["step"], body["view"], rest["charts"]
    _chart(charts, fallbacks, prefix, version, "summary", f"{prefix}summary", lambda: figures.step_summary_strip(trace),
           playhead=step)
    if all(name in trace.extras for name in figures.VOLATILITY_NEEDS):
        _chart(charts, fallbacks, prefix, version, "profile", f"{prefix}profile",
               lambda: figures.volatility_profile(trace, step), per_version=False)
    view = next(view for view in figures.views_for(trace) if view.name == name)
    fig, rest["view_note"] = _view_chart(trace, version, prefix, name, partial(view.build, trace))
    if fig is not None:
        _chart(charts, fallbacks, prefix, version, "view", f"{prefix}view_chart", lambda: fig, per_version=False)
    return rest, fallbacks


def _on(prefix: str, event: str, apply: Callable[[Any], None]) -> Callable[[], None]:
    """A trigger callback: reads the event's value from the component's state and applies it."""
    def callback() -> None:
        value = (st.session_state.get(f"{prefix}panel") or {}).get(event)
        if value is not None:
            apply(value)
    return callback


def _scrub(prefix: str, value: Any) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        st.session_state[f"{prefix}t"] = int(value)


def _view(prefix: str, names: list[str], value: Any) -> None:
    if value in names:
        st.session_state[f"{prefix}view"] = value
        if not prefix:
            st.query_params["view"] = value


def _pick(prefix: str, length: int, value: Any) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < length:
        toggle_kalman(prefix, value)


def trace_panel(trace: Trace | None, version: int, *, prefix: str = "", on_step: Callable[[], None] | None = None,
                can_step: bool = True, notices: list[dict[str, str]] | None = None) -> None:
    """Show `trace` (None: nothing decoded yet) in the panel kept under `{prefix}panel`.

    `on_step` offers the Step button (and →) and is called on a click, before the run that
    follows; `prefix` keeps each page's state apart (Decode: none, Traces: `lib_`).
    """
    payload, fallbacks = panel_payload(trace, version, prefix, stepping=on_step is not None, can_step=can_step,
                                       notices=notices)
    views = [] if payload["trace"] is None else payload["trace"]["views"]
    length = 0 if trace is None else trace.gen_length

    def cell(value: Any) -> None:
        if trace is not None:
            follow_click(parse_click(value), trace, prefix, KALMAN_VIEW in views)
            _view(prefix, views, st.session_state.get(f"{prefix}view"))  # the address bar follows

    # Every event always has its callback, so the component's events are the same on every run.
    callbacks: dict[str, Callable[[], None]] = {
        "on_step_change": _on(prefix, "step", lambda _value: on_step() if on_step is not None else None),
        "on_scrub_change": _on(prefix, "scrub", partial(_scrub, prefix)),
        "on_view_change": _on(prefix, "view", partial(_view, prefix, views)),
        "on_cell_change": _on(prefix, "cell", cell),
        "on_unpick_change": _on(prefix, "unpick", partial(_pick, prefix, length)),
        "on_pick_change": _on(prefix, "pick", partial(_pick, prefix, length)),
    }
    # Both parts carry this run's number, so the browser never draws one run's summary under
    # another run's heatmap.
    run = payload["run"] = st.session_state[f"{prefix}panel_run"] = st.session_state.get(f"{prefix}panel_run", 0) + 1
    _component()(data=payload, key=f"{prefix}panel", **callbacks)
    rest, more = panel_rest(trace, version, prefix, payload["trace"])
    rest["run"] = run
    _rest_component()(data=rest, key=f"{prefix}panel_rest")
    for key, fig, playhead in fallbacks + more:
        fallback_chart(fig, key=key, playhead=playhead)
