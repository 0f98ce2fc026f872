"""Property: every single-trace builder renders any valid Trace, including S = 0 and L = 1."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
from hypothesis import example, given, settings
from hypothesis import strategies as st
from trace_factory import make_trace

from dllm_viz import figures as F
from dllm_viz.trace import Trace

ALWAYS = (
    F.confidence_heatmap, F.entropy_heatmap, F.margin_heatmap, F.commit_order_heatmap, F.token_strip,
    F.volatility_band_heatmap, F.volatility_profile, F.persistence_runs_bar, F.step_summary_strip,
    F.refinement_dumbbell, F.replay_figure,
)
NEED_EXTRAS = (F.kalman_forecast_bands, F.tspd_gate_heatmap)


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    gen_length = draw(st.integers(1, 10))
    return make_trace(draw(st.integers(0, 10)), gen_length, block_length=draw(st.integers(1, gen_length)),
                      seed=draw(st.integers(0, 2**16)), with_extras=draw(st.booleans()))


@settings(max_examples=12, deadline=None)
@given(trace=traces())
@example(trace=make_trace(0, 1))
@example(trace=make_trace(0, 4, with_extras=False))
@example(trace=make_trace(1, 1))
@example(trace=make_trace(7, 1, block_length=1))
def test_every_single_trace_builder_renders(trace: Trace) -> None:
    builders = ALWAYS + (NEED_EXTRAS if trace.extras else ())
    for builder in builders:
        fig = builder(trace)
        assert fig.data, builder.__name__
        fig.to_json()
    F.token_strip_html(trace)
    assert 0.0 <= F.wasted_refinement_fraction(trace) < 1.0


@settings(max_examples=25, deadline=None)
@given(trace=traces(), max_steps=st.integers(1, 6), max_positions=st.integers(1, 6))
def test_pooled_heatmap_shape_matches_the_limits(trace: Trace, max_steps: int, max_positions: int) -> None:
    fig = F.confidence_heatmap(trace, max_steps=max_steps, max_positions=max_positions)
    rows, cols = np.asarray(fig.data[0].z).shape
    assert rows <= max_steps and cols <= max_positions and cols == len(fig.data[0].x)
    assert rows == -(-trace.num_steps // -(-trace.num_steps // max_steps)) if trace.num_steps else rows == 0


@settings(max_examples=40, deadline=None)
@given(trace=traces())
def test_runs_cover_every_masked_cell_once(trace: Trace) -> None:
    runs = F.candidate_runs(trace)
    masked = trace.tokens[:-1] == trace.tokens[0, 0]
    assert int(runs.length.sum()) == int(masked.sum())
    settled = F.settled_step(trace)
    committed = trace.commit_step >= 0
    assert ((settled <= trace.commit_step) | ~committed).all() and (settled[~committed] == -1).all()


def _all_figures(trace: Trace) -> list[go.Figure]:
    """Every builder's figure of `trace`, the multi-trace ones included."""
    return [builder(trace) for builder in ALWAYS + NEED_EXTRAS] + [
        F.step_series_lines([trace, trace]), F.nfe_bar([trace]), F.nfe_accuracy_scatter([("a", 3, 0.5), ("b", 4, 0.7)])]


def test_every_figure_passes_plotlys_validation() -> None:
    """The figures are built without plotly's figure-level validation (speed, _layout.figure): a
    figure rebuilt from its JSON with validation on must take every property as it is."""
    for fig in _all_figures(make_trace(9, 7)):
        spec = json.loads(fig.to_json(validate=False))
        assert json.loads(go.Figure(spec).to_json()) == spec, fig.layout.title.text


def test_every_trace_of_every_builder_has_hover_or_opts_out() -> None:
    for fig in _all_figures(make_trace(9, 7)):
        for item in fig.data:
            assert item.hovertemplate or item.hoverinfo == "skip", (fig.layout.title.text, item.name)
