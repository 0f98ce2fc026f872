"""Large traces, as a real model records them (gen 1024-2048, up to ~2000 steps, ~100k token edits).

What matters there is what reaches the browser and that the shortcuts that made the views fast
still draw what the slow way drew, so these tests check payload sizes, marker counts and
equality with simple references, never time (docs/DESIGN.md §7). Measured numbers are in the
change's report.
"""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
from trace_factory import edited_trace, make_trace

from dllm_viz import figures as F
from dllm_viz.figures._edits import capped, edit_text, token_display
from dllm_viz.figures._grid import step_grid
from dllm_viz.figures._layout import plotly_text
from dllm_viz.figures._pooling import bin_starts, group_cells, pool_axis
from dllm_viz.figures.overlays import MAX_COMMIT_MARKERS, MAX_EDIT_MARKERS, commit_markers
from dllm_viz.figures.refinement import MAX_EDIT_POINTS
from dllm_viz.figures.views import VIEWS
from dllm_viz.figures.volatility import step_regions, trace_regions
from dllm_viz.policies.extras import KALMAN_FORECAST, KALMAN_LEVEL, KALMAN_LOWER, KALMAN_UPPER, VOLATILITY_REGION
from dllm_viz.trace import Trace

MB = 1_000_000


def _named(fig, prefix: str):
    found = [d for d in fig.data if d.name is not None and d.name.split(" (")[0] == prefix]
    assert len(found) == 1, [d.name for d in fig.data]
    return found[0]


@pytest.fixture(scope="module")
def huge() -> Trace:
    """1024 positions, 2000 steps, one window over the whole canvas, ~100k edits (an untrained
    model under block refinement)."""
    trace = edited_trace(2000, 1024, edit_rate=0.1, block_length=1024, seed=3)
    assert trace.edited.sum() > 50_000
    return trace


# ---- payloads ----------------------------------------------------------------------------------
def test_every_view_of_a_1024_by_2000_trace_stays_a_small_payload(huge: Trace) -> None:
    """Before: the heatmaps sent ~8 MB each (one hover-texted marker per edited cell) and the
    refinement view one marker per edit (4.4 MB, ~100k SVG markers)."""
    built = {view.name: view.build(huge) for view in VIEWS if view.fits(huge)}
    built |= {"confidence": F.confidence_heatmap(huge), "summary": F.step_summary_strip(huge),
              "profile": F.volatility_profile(huge, 1000), "strip": F.token_strip(huge, 1000),
              "Kalman, 12 panels": F.kalman_forecast_bands(huge, max_panels=12)}
    assert {"entropy", "refinement", "Kalman bands", "persistence runs", "TSPD gate"} <= set(built)
    sizes = {name: len(pio.to_json(fig, validate=False)) for name, fig in built.items()}
    assert max(sizes.values()) < 2 * MB, sizes
    assert len(F.token_strip_html(huge, 1000)) < MB
    for fig in built.values():  # no marker trace draws more SVG markers than its cap
        for data in fig.data:
            if data.type == "scatter" and data.mode == "markers" and data.x is not None:
                assert len(data.x) <= max(MAX_COMMIT_MARKERS, huge.gen_length), data.name


# ---- edit markers: capped, and what they say adds up -------------------------------------------
def test_heatmap_edit_marks_are_thinned_and_still_count_every_edit(huge: Trace) -> None:
    fig = F.confidence_heatmap(huge)
    marks = _named(fig, "edit")
    assert len(marks.x) <= MAX_EDIT_MARKERS and "one mark per" in marks.name
    counted = [int(text.split(" edits at positions", 1)[0]) for text in marks.text]
    assert sum(counted) == int(huge.edited.sum())  # every edit in exactly one mark
    grid = step_grid(huge, huge.confidence, how="min", max_steps=512, max_positions=1024)
    edited = grid.pool(huge.edited, "any")
    for x, y in zip(marks.x, marks.y, strict=True):  # each mark sits on a heatmap cell that holds an edit
        assert edited[int(np.flatnonzero(np.isclose(grid.row_centers, y))[0]), grid.labels.index(x)]
    assert all(len(text.split("<br>")) <= 2 + 4 for text in marks.text)  # count, "… earlier", 4 edits


def _slow_edit_hovers(trace: Trace, row_factor: int, col_factor: int) -> dict[tuple[int, int], str]:
    """The heatmap's edit hovers as first written: one line per EditEvent, grouped per pooled cell."""
    lines: dict[tuple[int, int], list[str]] = {}
    for event in trace.edit_events:
        cell = (event.step // row_factor, event.position // col_factor)
        lines.setdefault(cell, []).append(f"position {event.position}: {plotly_text(edit_text(trace, event))}")
    return {cell: "<br>".join(capped(cell_lines)) for cell, cell_lines in lines.items()}


@pytest.mark.parametrize(("max_steps", "max_positions"), [(512, 1024), (7, 5)])
def test_unthinned_edit_marks_equal_the_one_event_at_a_time_reference(max_steps: int, max_positions: int) -> None:
    trace = edited_trace(40, 24, edit_rate=0.5, seed=2)  # up to ~20 edits per position: hovers capped
    fig = F.confidence_heatmap(trace, max_steps=max_steps, max_positions=max_positions)
    marks = _named(fig, "edit")
    grid = step_grid(trace, trace.confidence, how="min", max_steps=max_steps, max_positions=max_positions)
    expected = _slow_edit_hovers(trace, grid.row_factor, grid.col_factor)
    assert marks.name == "edit" and len(marks.x) == len(expected)
    got = {(grid.labels.index(x), int(np.flatnonzero(np.isclose(grid.row_centers, y))[0])): text
           for x, y, text in zip(marks.x, marks.y, marks.text, strict=True)}
    assert got == {(col, row): text for (row, col), text in expected.items()}
    assert any(text.startswith("… ") for text in got.values()) == (max_positions < trace.gen_length)  # pooled: capped


def test_refinement_edit_marks_are_capped_and_count_every_edit(huge: Trace) -> None:
    marks = _named(F.refinement_dumbbell(huge), "edit")
    assert len(marks.x) <= MAX_EDIT_POINTS and "one mark per" in marks.name
    assert sum(int(t.split(" edits", 1)[0]) for t in marks.text) == int(huge.edited.sum())
    assert all(huge.edited[s, p] for s, p in zip(marks.x, marks.y, strict=True))  # each on a real edit


def test_refinement_segments_run_from_first_commit_to_last_edit() -> None:
    trace = edited_trace(40, 24, edit_rate=0.3, seed=4)
    segments = _named(F.refinement_dumbbell(trace), "committed, later edited")
    drawn = {(y0, x0, x1) for x0, x1, y0 in zip(segments.x[0::3], segments.x[1::3], segments.y[0::3], strict=True)}
    expected = set()
    for p in np.flatnonzero(trace.edits_per_position):
        edits, commits = np.flatnonzero(trace.edited[:, p]), np.flatnonzero(trace.committed[:, p])
        expected.add((int(p), int(commits[0]), int(edits[-1])))
    assert drawn == expected


def test_commit_marks_past_the_cap_sit_on_commit_cells_and_say_so() -> None:
    trace = make_trace(60, 48, seed=5)
    grid = step_grid(trace, trace.confidence, how="min", max_steps=512, max_positions=1024)
    marks = commit_markers(trace, grid, max_markers=10)
    assert 0 < len(marks.x) <= 10 and "one mark per" in marks.name and "one mark per" in marks.hovertemplate
    committed = {(grid.labels[p], float(s)) for s, p in zip(*np.nonzero(trace.committed), strict=True)}
    assert set(zip(marks.x, np.asarray(marks.y, dtype=float).tolist(), strict=True)) <= committed
    assert commit_markers(trace, grid).name == "commit"  # within the cap: one mark per commit cell


# ---- token strip: recent edits only, same text --------------------------------------------------
def test_token_states_edits_equal_the_full_history_reference() -> None:
    trace = edited_trace(40, 24, edit_rate=0.5, seed=2)
    events = trace.edit_events
    for step in (0, 5, 17, 39):
        states = F.token_states(trace, step)
        for p in range(trace.gen_length):
            history = [e for e in events if e.position == p and e.step <= step]
            assert states.edit_count[p] == len(history)
            assert states.edit_notes[p] == capped([edit_text(trace, e) for e in history])
            assert states.replaced[p] == tuple(token_display(trace, e.old) for e in history[-4:])
    assert max(trace.edits_per_position) > 4  # the cap was exercised
    last = F.token_states(trace, 39)
    shortened = sum(1 for p in range(trace.gen_length) if last.replaced[p] and last.edit_count[p] > 2)
    assert shortened and F.token_strip_html(trace, 39).count("…<s>") == shortened


# ---- per-step regions, Kalman panels, pooling ----------------------------------------------------
@pytest.mark.parametrize("recorded", [True, False])
def test_step_regions_are_the_rows_of_the_whole_classification(recorded: bool) -> None:
    trace = make_trace(30, 16, seed=6, with_extras=recorded)
    if recorded:  # partly recorded: the derived rule fills the gaps
        trace.extras[VOLATILITY_REGION][::3] = np.nan
    regions = trace_regions(trace, floor_threshold=0.3)[0]
    for step in range(trace.num_steps):
        assert step_regions(trace, step, floor_threshold=0.3).tolist() == regions[step].tolist()


def test_kalman_panels_send_only_the_steps_with_values_and_lose_none() -> None:
    trace = make_trace(300, 64, block_length=8, seed=7)
    fig = F.kalman_forecast_bands(trace, max_panels=6)
    series = dict(zip(("forecast lower", "forecast upper", "forecast mean", "filtered level"),
                      (KALMAN_LOWER, KALMAN_UPPER, KALMAN_FORECAST, KALMAN_LEVEL), strict=True))
    panels = [d for d in fig.data if d.name in series]
    assert len(panels) == 6 * 4
    titles = [a.text for a in fig.layout.annotations]
    for data in panels:
        row = int((data.yaxis or "y")[1:] or 1) - 1
        p = int(titles[row].split(":", 1)[0].split()[1])
        full = trace.extras[series[data.name]][:, p]
        x = np.asarray(data.x)
        assert x.size < trace.num_steps  # trimmed
        assert np.allclose(np.asarray(data.y, dtype=float), full[x], equal_nan=True)
        outside = np.ones(trace.num_steps, bool)
        outside[x] = False
        assert np.isnan(full[outside]).all()  # nothing drawn was dropped


def test_fast_pooling_equals_reduceat() -> None:
    rng = np.random.default_rng(8)
    values = rng.random((37, 53)).astype(np.float32)
    values[values < 0.3] = np.nan
    counts, events = rng.integers(0, 9, size=values.shape), rng.random(values.shape) < 0.2
    for factor in (1, 2, 3, 4, 7, 60):
        for axis in (0, 1):
            starts = bin_starts(values.shape[axis], factor)
            for how, grid, ufunc in (("min", values, np.fmin), ("max", values, np.fmax),
                                     ("any", events, np.logical_or), ("sum", counts, np.add)):
                expected = ufunc.reduceat(grid, starts, axis=axis)
                assert np.array_equal(pool_axis(grid, factor, axis, how), expected, equal_nan=True), (how, factor)


def test_group_cells_uses_the_smallest_power_of_two_block() -> None:
    rows, cols = np.nonzero(np.ones((20, 30), bool))
    assert group_cells(rows, cols, 600).factor == 1
    groups = group_cells(rows, cols, 100)
    assert groups.factor == 4 and groups.count == 5 * 8 <= 100
    assert group_cells(rows, cols, 150).factor == 2  # 10 x 15 blocks
    same = groups.group == groups.group[0]
    assert (rows[same] // 4 == 0).all() and (cols[same] // 4 == 0).all()
    with pytest.raises(ValueError, match=">= 1"):
        group_cells(rows, cols, 0)


def test_an_edited_trace_round_trips_through_a_file(tmp_path) -> None:
    """The factory's edits are real edits (trace_validation.check_edits), so its traces load."""
    from dllm_viz.trace import load_trace

    trace = edited_trace(60, 24, edit_rate=0.4, block_length=8, seed=9)
    loaded = load_trace(trace.save(tmp_path / "edited.npz"))
    assert loaded.edited.sum() > 24 and loaded.edit_events == trace.edit_events
    assert json.loads(pio.to_json(F.confidence_heatmap(loaded), validate=False)) == json.loads(
        pio.to_json(F.confidence_heatmap(trace), validate=False))


def test_gif_frames_pasted_from_tiles_equal_cells_drawn_one_by_one() -> None:
    """The GIF draws each distinct cell once and pastes it; the frames are the ones drawing every
    cell made (the frame code as first written is the reference)."""
    from PIL import Image, ImageDraw, ImageFont

    from dllm_viz.figures import animation
    from dllm_viz.figures.tokens import STATE_COLORS, text_color

    trace = edited_trace(30, 70, edit_rate=0.3, seed=10)
    font, per_row, tiles = ImageFont.load_default(), 16, {}
    size = (2 * animation.PAD + per_row * animation.CELL_W, 200)
    for step in (-1, 0, 12, 29):
        states = F.token_states(trace, None if step < 0 else step)
        reference = Image.new("RGB", size, "#FFFFFF")
        draw = ImageDraw.Draw(reference)
        draw.text((animation.PAD, animation.PAD), f"{trace.meta.label} - " + (
            f"after step {step + 1} of {trace.num_steps}" if step >= 0 else "empty canvas"), fill="#111111", font=font)
        for p in range(trace.gen_length):
            x = animation.PAD + (p % per_row) * animation.CELL_W
            y = animation.HEADER_H + animation.PAD + (p // per_row) * animation.CELL_H
            state = int(states.state[p])
            draw.rectangle((x, y, x + animation.CELL_W - 2, y + animation.CELL_H - 2), fill=STATE_COLORS[state])
            text = states.text[p][: animation.CELL_CHARS].encode("latin-1", "replace").decode("latin-1")
            draw.text((x + 3, y + 5), text, fill=text_color(state, bool(states.is_draft[p])), font=font)
        frame = animation._frame(trace, step, trace.gen_length, per_row, size, font, tiles)
        assert np.array_equal(np.asarray(frame), np.asarray(reference)), step
    assert len(tiles) < 4 * trace.gen_length  # cells repeat across frames: drawn once each
