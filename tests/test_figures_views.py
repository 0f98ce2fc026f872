"""Token, volatility, Kalman, persistence, summary and refinement views on hand-made traces."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from html_styles import declarations, resolved, token_styles
from trace_factory import EOS, hand_trace, make_trace

from dllm_viz.figures import (
    candidate_runs,
    commit_order_heatmap,
    kalman_forecast_bands,
    persistence_runs_bar,
    refinement_dumbbell,
    settled_step,
    step_series,
    step_summary_strip,
    token_states,
    token_strip,
    token_strip_html,
    volatility_band_heatmap,
    volatility_profile,
    volatility_regions,
    wasted_refinement_fraction,
)
from dllm_viz.figures.tokens import STATE_COLORS
from dllm_viz.policies.extras import (
    KALMAN_FORECAST,
    KALMAN_LEVEL,
    KALMAN_LOWER,
    KALMAN_UPPER,
    VOLATILITY_REGION,
)

# Position 0 holds 3 then settles on 4 (committed at step 4); position 1 goes 5 -> 6 and commits
# at step 2; position 2 flips 7 -> 8 -> 7 and commits at 3; position 3 never commits.
CANDIDATES = [[3, 5, 7, 9], [3, 6, 8, 9], [4, 6, 7, 9], [4, 7, 7, 10], [4, 7, 7, 10]]
COMMITS = [4, 2, 3, -1]


@pytest.fixture
def known():
    return hand_trace(CANDIDATES, COMMITS)


def test_candidate_runs_known_answer(known) -> None:
    runs = candidate_runs(known)
    got = list(zip(runs.position.tolist(), runs.start.tolist(), runs.length.tolist(), runs.token.tolist(),
                   strict=True))
    assert got == [(0, 0, 2, 3), (0, 2, 3, 4), (1, 0, 1, 5), (1, 1, 2, 6),
                   (2, 0, 1, 7), (2, 1, 1, 8), (2, 2, 2, 7), (3, 0, 3, 9), (3, 3, 2, 10)]


def test_candidate_runs_of_a_zero_step_trace_are_empty() -> None:
    assert len(candidate_runs(make_trace(0, 4))) == 0


def test_settled_step_and_wasted_fraction_known_answer(known) -> None:
    assert settled_step(known).tolist() == [2, 1, 2, -1]
    # (4-2) + (2-1) + (3-2) wasted over (4+1) + (2+1) + (3+1) masked token-steps.
    assert wasted_refinement_fraction(known) == pytest.approx(4 / 12)


def test_settled_step_is_minus_one_when_the_commit_differs_from_the_final_token() -> None:
    trace = make_trace(0, 3)
    assert settled_step(trace).tolist() == [-1, -1, -1]
    assert wasted_refinement_fraction(trace) == 0.0


def test_refinement_dumbbell_is_three_traces_with_the_summary(known) -> None:
    fig = refinement_dumbbell(known)
    assert [d.mode for d in fig.data] == ["lines", "markers", "markers"]
    assert list(fig.data[0].x) == [2, 4, None, 1, 2, None, 2, 3, None]
    assert list(fig.data[2].x) == [4, 2, 3]
    assert "33.3% of token-steps" in fig.layout.annotations[0].text
    assert fig.layout.xaxis.title.text == "step" and fig.layout.yaxis.title.text == "position"


def test_persistence_runs_are_one_bar_trace_plus_accepts() -> None:
    trace = hand_trace(CANDIDATES, COMMITS, reason="cora_residual")
    fig = persistence_runs_bar(trace, m=1)
    bar, accepts = fig.data
    assert bar.type == "bar" and bar.orientation == "h" and len(bar.x) == 9
    assert list(bar.base) == [s - 0.5 for s in candidate_runs(trace).start]
    assert sorted(zip(accepts.x, accepts.y, strict=True)) == [(2, 1), (3, 2), (4, 0)]
    assert "δp = 0.97, m = 1" in fig.layout.annotations[0].text
    assert bar.hovertemplate and accepts.hovertemplate


def test_persistence_runs_cap_drops_the_shortest(known) -> None:
    fig = persistence_runs_bar(known, max_runs=3)
    assert sorted(fig.data[0].x) == [2, 3, 3] and "6 shortest runs" in fig.layout.annotations[0].text


def test_token_states_follow_the_llada_colours() -> None:
    conf = [[0.2, 0.5, 0.9, 0.1]] * 3
    trace = hand_trace([[2, 3, 4, 5]] * 3, [0, 1, 1, 1], confidence=conf)
    states = token_states(trace, 1)
    assert states.state.tolist() == [4, 2, 3, 1]  # earlier, mid, high, low
    states = token_states(trace, 0)
    assert states.state.tolist() == [1, 0, 0, 0] and states.is_draft.tolist() == [False, True, True, True]
    strip = token_strip(trace, 0)
    assert np.asarray(strip.data[0].z).shape == (1, 4) and strip.data[0].colorscale[0][1] == STATE_COLORS[0]
    assert list(strip.data[1].textfont.color)[1] == "#A0A0A0"  # the draft is faint


def test_token_strip_rejects_a_step_outside_the_trace(known) -> None:
    with pytest.raises(ValueError, match="step"):
        token_strip(known, 5)
    token_strip(make_trace(0, 3), 0)  # the initial canvas of a zero-step trace


def test_token_strip_html_escapes_token_text() -> None:
    trace = hand_trace([[3, 2, 4]], [0, 0, 0])  # ids 3 = "<b>&", 2 = newline, 4 = space
    page = token_strip_html(trace, 0)
    assert "&lt;b&gt;&amp;" in page and "<b>&" not in page and "⏎" in page
    assert page.startswith("<div") and page.endswith("</div>")


def test_commit_order_heatmap_colours_final_text_by_commit_step(known) -> None:
    fig = commit_order_heatmap(known, tokens_per_row=2)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (2, 2) and z[0].tolist() == [4, 2] and z[1, 0] == 3 and np.isnan(z[1, 1])
    assert fig.data[0].colorscale[0][1] == "#00224e"  # Cividis
    assert list(fig.data[1].text) == ["␣", "w6", "w7", "[MASK]"]


def test_volatility_regions_fallback_known_answer() -> None:
    conf = [[0.9, 0.05, 0.5, 0.5], [0.9, 0.05, 0.5, 0.5]]
    trace = hand_trace([[5, 6, EOS, 7], [5, 6, EOS, 7]], [0, 1, 1, 1], confidence=conf)
    assert volatility_regions(trace).tolist() == [[1, 2, 2, 1], [0, 2, 2, 1]]
    assert volatility_regions(trace, floor_threshold=0.0).tolist()[1] == [0, 1, 2, 1]
    with pytest.raises(ValueError, match="floor_threshold"):
        volatility_regions(trace, floor_threshold=2.0)


def test_volatility_band_heatmap_prefers_the_recorded_extra() -> None:
    recorded = make_trace(12, 8)
    fig = volatility_band_heatmap(recorded)
    assert "recorded" in fig.layout.title.text and [d.type for d in fig.data] == ["heatmap", "bar", "scatter"]
    assert fig.data[1].marker.line.color == "#000000"  # a black edge on the light regions, not a white one
    assert fig.data[2].mode == "lines" and fig.data[2].name == "block boundary"  # its legend entry is a line
    assert np.array_equal(np.asarray(fig.data[0].z), recorded.extras[VOLATILITY_REGION].astype(np.int8))
    derived = volatility_band_heatmap(make_trace(12, 8, with_extras=False))
    assert "derived" in derived.layout.title.text


def test_volatility_profile_has_one_trace_per_region(known) -> None:
    fig = volatility_profile(known, 1)
    assert [d.name for d in fig.data][1:] == ["plateau (committed)", "volatility band", "low floor"]
    assert fig.data[0].fill == "toself"


def test_kalman_bands_name_the_missing_extras() -> None:
    with pytest.raises(ValueError) as err:
        kalman_forecast_bands(make_trace(6, 4, with_extras=False))
    for name in (KALMAN_LEVEL, KALMAN_FORECAST, KALMAN_LOWER, KALMAN_UPPER):
        assert name in str(err.value)


def test_kalman_bands_draw_band_threshold_and_both_commit_steps() -> None:
    trace = make_trace(16, 8)
    base = trace.commit_step + 1
    fig = kalman_forecast_bands(trace, positions=[0, 3], base_commit_step=base)
    names = [d.name for d in fig.data]
    assert names.count("forecast upper") == 2 and names.count("base rule commit") == 2
    upper = next(d for d in fig.data if d.name == "forecast upper")
    assert upper.fill == "tonexty"
    assert next(d for d in fig.data if d.name.startswith("threshold")).y == (0.9, 0.9)
    assert fig.layout.yaxis.title.text == "confidence" and fig.layout.xaxis2.title.text == "step"
    with pytest.raises(ValueError, match="positions"):
        kalman_forecast_bands(trace, positions=[99])
    with pytest.raises(ValueError, match="base_commit_step"):
        kalman_forecast_bands(trace, base_commit_step=np.zeros(3))


def test_step_series_known_answer(known) -> None:
    series = step_series(known)
    assert series["committed"].tolist() == [0, 0, 1, 1, 1]
    assert series["masked_remaining"].tolist() == [4, 4, 3, 2, 1]
    assert series["cumulative_nfe"].tolist() == [1, 2, 3, 4, 5]
    assert np.allclose(series["mean_confidence"], 0.5)


def test_summary_strip_shares_the_step_axis(known) -> None:
    fig = step_summary_strip(known)  # saved without policy time: forward and "policy + engine" bars
    assert fig.layout.hovermode == "x unified" and fig.layout.barmode == "stack"
    assert fig.data[0].type == "bar" and len(fig.data) == 8
    assert [d.name for d in fig.data[-2:]] == ["forward pass ms", "policy + engine ms"]
    assert fig.layout.xaxis5.title.text == "step" and fig.layout.xaxis.matches == "x5"
    assert all(d.hovertemplate for d in fig.data)


def test_step_time_splits_into_forward_policy_and_engine(known) -> None:
    timed = replace(known, policy_seconds=np.full(known.num_steps, 0.0005))
    series = step_series(timed)
    np.testing.assert_allclose(series["forward_ms"] + series["policy_ms"] + series["engine_ms"],
                               1e3 * known.step_seconds)
    np.testing.assert_allclose(series["cumulative_seconds"], np.cumsum(known.step_seconds))
    assert np.isnan(step_series(known)["policy_ms"]).all()
    names = [d.name for d in step_summary_strip(timed).data[-3:]]
    assert names == ["forward pass ms", "policy ms", "engine ms"]


def test_mask_id_falls_back_to_the_initial_canvas(known) -> None:
    known = replace(known, meta=known.meta.replace(model=None))
    assert settled_step(known).tolist() == [2, 1, 2, -1]
    assert token_states(known, 0).state.tolist() == [0, 0, 0, 0]


def test_kalman_default_positions_start_with_ce_early_commits() -> None:
    trace = make_trace(30, 16, seed=3)
    early = np.flatnonzero(np.nansum(trace.extras["ce_early"], axis=0) > 0)
    fig = kalman_forecast_bands(trace, max_panels=4)
    shown = [int(a.text.split(":")[0].split()[1]) for a in fig.layout.annotations]
    assert len(shown) == 4 and shown[: min(4, early.size)] == early[:4].tolist()
    with pytest.raises(ValueError, match="1 to 12"):
        kalman_forecast_bands(trace, positions=list(range(13)))


def test_the_view_table_offers_a_view_exactly_when_the_trace_holds_its_extras() -> None:
    from dllm_viz.figures import VIEWS, views_for

    trace = make_trace(30, 16, seed=3)
    shown = {view.name for view in views_for(trace)}
    assert shown == {view.name for view in VIEWS if set(view.needs) <= set(trace.extras)}
    assert {"commit order", "Kalman bands", "persistence runs"} <= shown
    bare = replace(trace, extras={})
    assert {view.name for view in views_for(bare)} == {"commit order", "entropy", "margin", "refinement"}
    for view in views_for(trace):
        assert view.build(trace).data, view.name


def test_figures_read_policy_settings_from_the_trace_and_say_when_it_has_none() -> None:
    trace = make_trace(30, 16, seed=3)
    assert "δp = 0.97, m = 2" in persistence_runs_bar(trace).layout.annotations[0].text  # the recorded rule's
    bare = replace(trace, meta=trace.meta.replace(pipeline={}))
    with pytest.raises(ValueError, match="pass delta_p= and m="):
        persistence_runs_bar(bare)
    with pytest.raises(ValueError, match="pass threshold="):
        kalman_forecast_bands(bare)
    assert persistence_runs_bar(bare, delta_p=0.5, m=1).data


def test_candidate_history_shows_a_candidate_changing_before_its_commit() -> None:
    from dllm_viz.figures import candidate_history, most_revised_position

    # position 1's candidate goes 5 -> 6 -> 6 -> 7 while masked and commits at step 3; position 0 never changes
    trace = hand_trace([[4, 5], [4, 6], [4, 6], [4, 7]], [0, 3])
    history = candidate_history(trace, 1)
    assert [step for step, _ in history] == [0, 1, 3]
    assert history[-1][1] == trace.token_text(7)
    assert candidate_history(trace, 0) == [(0, trace.token_text(4))]
    assert most_revised_position(trace) == 1
    assert most_revised_position(hand_trace([[4, 5]] * 2, [0, 1])) is None


def test_kalman_bands_tick_whole_steps_on_a_short_trace() -> None:
    from dllm_viz.figures import kalman_forecast_bands

    trace = make_trace(5, 16, seed=2)  # synthetic Kalman extras on every position
    fig = kalman_forecast_bands(trace, positions=[1, 2])
    assert fig.layout.xaxis.dtick == 1 and fig.layout.xaxis2.dtick == 1


# ---- the HTML strip: shared style in one <style> block, each token looking as its inline style made it --
def _inline_style(state: int, draft: bool, edited_now: bool) -> dict[str, str]:
    """The style each strip token carried inline before the <style> block (the look to keep)."""
    from dllm_viz.figures._layout import EDIT_COLOR
    from dllm_viz.figures.tokens import text_color

    style = (f"background:{STATE_COLORS[state]};color:{text_color(state, draft)};padding:1px 3px;margin:1px;"
             "border-radius:3px;white-space:pre;display:inline-block"
             + (";font-style:italic;opacity:0.75" if draft else "")
             + (f";outline:2px solid {EDIT_COLOR}" if edited_now else ""))
    return declarations(style)


@pytest.mark.parametrize("case", ["edited", "remasked", "plain"])
def test_the_strip_html_draws_every_token_as_its_inline_style_did(case: str) -> None:
    """Every token, struck token, legend key and the strip itself resolve to the style it had inline."""
    from trace_factory import MASK, edited_trace, step_trace

    from dllm_viz.figures.tokens import EARLIER, STATE_NAMES

    trace = {"edited": lambda: edited_trace(40, 24, edit_rate=0.5, seed=2),
             "remasked": lambda: step_trace([({0: 10, 1: 11}, {}), ({}, {0: MASK}), ({0: 12}, {1: 13})], 2),
             "plain": lambda: make_trace(12, 20, seed=4)}[case]()
    edits = bool(trace.edited.any())
    for step in sorted({0, trace.num_steps // 2, trace.num_steps - 2, trace.num_steps - 1}):
        states = token_states(trace, step)
        page = token_strip_html(trace, step)
        expected = [_inline_style(int(k), bool(d), bool(e))
                    for k, d, e in zip(states.state, states.is_draft, states.edited_now, strict=True)]
        expected += [_inline_style(k, False, False) for k in range(len(STATE_NAMES))]
        expected += [_inline_style(EARLIER, False, False), _inline_style(EARLIER, False, True)] if edits else []
        assert token_styles(page) == expected
        elements = resolved(page)
        assert elements[0][1] == {"font-family": "monospace", "line-height": "1.8"}  # the strip
        assert [style for tag, style, _ in elements if tag == "div"][1] == {"margin-top": "4px", "font-size": "0.8em"}
        assert all(style == {"opacity": "0.7"} for tag, style, _ in elements if tag == "s")
    assert case != "remasked" or token_states(trace, 1).is_draft[0]  # a draft over a committed-earlier cell


def test_the_strip_html_states_its_shared_style_once() -> None:
    """Before: ~125 characters of inline style on every token, ~210 bytes a token, 0.46 MB at 2048
    positions on every Decode scrub; now one <style> block inside the strip's <div> (where a sanitizer
    that moves a leading <style> to the document head leaves it in place)."""
    trace = make_trace(20, 1024, seed=1)
    for step in (0, 10, 19):
        page = token_strip_html(trace, step)
        assert page.startswith('<div class="dllm-token-strip"><style>') and page.count("<style>") == 1
        assert ' style="' not in page
        assert len(page.encode()) < 100 * trace.gen_length, step
