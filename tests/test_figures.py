"""Heatmap builders, pooling and overlays: shapes, axes, single-trace overlays, payload, purity."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from trace_factory import MASK, hand_trace, make_trace

from dllm_viz.figures import (
    confidence_heatmap,
    entropy_heatmap,
    margin_heatmap,
    pool_grid,
    position_labels,
    tspd_gate_heatmap,
)
from dllm_viz.figures._pooling import QUANT_NO_DATA
from dllm_viz.policies.extras import TSPD_GATE, VOLATILITY_REGION

HEATMAPS = (confidence_heatmap, entropy_heatmap, margin_heatmap)


def by_name(fig, name: str) -> list:
    return [d for d in fig.data if d.name == name]


def test_figures_package_imports_without_torch_streamlit_or_any_policy() -> None:
    """Figures read the extras' names only: no rule module, no controller weights code (threadpoolctl)."""
    code = ("import sys, dllm_viz.figures; bad = [m for m in sys.modules if m in ('torch', 'streamlit', "
            "'threadpoolctl') or (m.startswith('dllm_viz.policies.') and m != 'dllm_viz.policies.extras')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


@pytest.mark.parametrize("builder", HEATMAPS)
def test_heatmap_z_is_steps_by_positions_with_titled_axes(builder) -> None:
    trace = make_trace(20, 16)
    fig = builder(trace)
    heat = fig.data[0]
    assert heat.type == "heatmap"
    assert np.asarray(heat.z).shape == (20, 16)
    assert list(heat.x) == position_labels(trace)
    assert fig.layout.xaxis.title.text == "position" and fig.layout.yaxis.title.text == "step"
    assert fig.layout.xaxis.type == "category"
    assert all(d.hovertemplate for d in fig.data)


def test_confidence_uses_explicit_colourblind_scale_and_blanks_committed_cells() -> None:
    trace = make_trace(12, 8, block_length=4)
    heat = confidence_heatmap(trace, quantize=False).data[0]
    assert heat.colorscale[0][1] == "#440154"  # Viridis, resolved explicitly
    z = np.asarray(heat.z)
    masked = trace.tokens[:-1] == MASK
    assert np.isnan(z[~masked]).all()
    assert np.allclose(z[masked], trace.confidence[masked])


def test_each_overlay_is_one_trace() -> None:
    fig = confidence_heatmap(make_trace(40, 32, block_length=8))
    assert [d.type for d in fig.data] == ["heatmap", "bar", "bar", "scatter", "scatter", "scatter"]
    for name in ("block boundary", "volatility band edge"):  # drawn once; the legend shows a line, not a square
        drawn, legend = by_name(fig, name)
        assert drawn.type == "bar" and drawn.showlegend is False
        assert legend.mode == "lines" and legend.legendgroup == drawn.legendgroup and legend.showlegend is not False
    assert len(by_name(fig, "commit")) == 1


def test_overlays_can_be_switched_off() -> None:
    fig = confidence_heatmap(make_trace(10, 8), show_commits=False, show_blocks=False, show_bands=False)
    assert len(fig.data) == 1


def test_band_edges_need_the_recorded_extra() -> None:
    fig = confidence_heatmap(make_trace(10, 8, with_extras=False))
    assert not by_name(fig, "volatility band edge")


def test_block_boundaries_sit_on_window_edges() -> None:
    trace = hand_trace([[2, 3, 4, 5]] * 3, [0, 0, 2, 2], window=[(0, 2), (0, 2), (2, 4)])
    bars = by_name(confidence_heatmap(trace), "block boundary")[0]
    labels = position_labels(trace)
    # window [0, 2) on steps 0-1, then [2, 4) on step 2: four edges, consecutive steps merged.
    columns = np.array([labels.index(x) for x in bars.x])
    centre = columns + np.asarray(bars.offset) + np.asarray(bars.width) / 2
    assert np.allclose(centre, [-0.5, 1.5, 1.5, 3.5])  # edge e lies between columns e - 1 and e
    assert list(bars.base) == [-0.5, -0.5, 1.5, 1.5] and list(bars.y) == [2, 2, 1, 1]


def test_commit_markers_mark_every_commit_cell() -> None:
    trace = make_trace(15, 12)
    marks = by_name(confidence_heatmap(trace), "commit")[0]
    steps, positions = np.nonzero(trace.committed)
    labels = position_labels(trace)
    expected = sorted((labels[p], float(s)) for s, p in zip(steps, positions, strict=True))
    assert sorted(zip(marks.x, marks.y, strict=True)) == expected


def test_pooling_bounds_rows_and_columns() -> None:
    trace = make_trace(50, 40)
    fig = confidence_heatmap(trace, max_steps=16, max_positions=8)
    assert np.asarray(fig.data[0].z).shape == (13, 8)  # 50 steps in bins of 4, 40 positions in bins of 5
    assert len(fig.data[0].x) == 8 and fig.data[0].dy == 4
    assert "pooled" in fig.layout.yaxis.title.text and "pooled" in fig.layout.xaxis.title.text


def test_min_and_max_pooling_known_answer() -> None:
    z = np.array([[0.5, np.nan, 0.2, 0.9], [0.1, np.nan, 0.3, np.nan], [0.7, 0.8, np.nan, np.nan]])
    low = pool_grid(z, max_rows=2, max_cols=2, how="min")
    assert (low.row_factor, low.col_factor) == (2, 2)
    assert np.allclose(low.z, [[0.1, 0.2], [0.7, np.nan]], equal_nan=True)
    assert np.allclose(pool_grid(z, max_rows=2, max_cols=2, how="max").z, [[0.5, 0.9], [0.8, np.nan]],
                       equal_nan=True)
    assert np.allclose(pool_grid(z, max_rows=2, max_cols=2, how="mean").z, [[0.3, 0.466666], [0.75, np.nan]],
                       equal_nan=True, atol=1e-5)
    events = np.zeros((3, 4), bool)
    events[1, 3] = True
    assert pool_grid(events, max_rows=2, max_cols=2, how="any").z.tolist() == [[False, True], [False, False]]


def test_pool_grid_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="how"):
        pool_grid(np.zeros((2, 2)), how="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 1"):
        pool_grid(np.zeros((2, 2)), max_rows=0)


def test_quantised_heatmap_keeps_committed_cells_apart() -> None:
    trace = make_trace(10, 8)
    heat = confidence_heatmap(trace, quantize=True).data[0]
    z = np.asarray(heat.z)
    assert z.dtype == np.uint8 and heat.zmax == QUANT_NO_DATA
    masked = trace.tokens[:-1] == MASK
    assert (z[~masked] == QUANT_NO_DATA).all() and (z[masked] <= 100).all()
    assert np.allclose(z[masked], np.rint(trace.confidence[masked] * 100))


def test_large_trace_is_pooled_and_quantised_under_the_payload_budget() -> None:
    trace = make_trace(1024, 1024, block_length=32)
    fig = confidence_heatmap(trace)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (512, 1024) and z.dtype == np.uint8
    assert len(fig.to_json()) < 1_500_000


def test_zero_step_trace_renders_an_empty_heatmap_with_axes() -> None:
    trace = make_trace(0, 6)
    for builder in HEATMAPS:
        fig = builder(trace)
        assert np.asarray(fig.data[0].z).shape == (0, 6)
        assert len(fig.data[0].x) == 6 and fig.layout.yaxis.title.text == "step"
        fig.to_json()


def test_title_keyword_is_used() -> None:
    assert confidence_heatmap(make_trace(3, 3), title="mine").layout.title.text == "mine"


def test_builders_are_pure_and_deterministic() -> None:
    trace = make_trace(12, 10)
    before = {k: v.copy() for k, v in trace.extras.items()}
    assert json.loads(confidence_heatmap(trace).to_json()) == json.loads(confidence_heatmap(trace).to_json())
    assert all(np.array_equal(before[k], trace.extras[k], equal_nan=True) for k in before)


def test_tspd_gate_heatmap_names_the_missing_extra() -> None:
    with pytest.raises(ValueError, match=TSPD_GATE):
        tspd_gate_heatmap(make_trace(5, 5, with_extras=False))
    fig = tspd_gate_heatmap(make_trace(5, 5))
    assert np.asarray(fig.data[0].z).shape == (5, 5)


def test_entropy_range_follows_the_data() -> None:
    trace = make_trace(10, 10)
    heat = entropy_heatmap(trace, quantize=False).data[0]
    masked = trace.tokens[:-1] == MASK
    assert heat.zmax == pytest.approx(float(trace.entropy[masked].max()))
    assert heat.reversescale is True and VOLATILITY_REGION in trace.extras


def test_token_text_is_escaped_once_per_column_label() -> None:
    trace = hand_trace([[3, 2, 4]], [0, 0, 0])  # ids 3 = "<b>&", 2 = newline, 4 = space
    assert position_labels(trace) == ["0:&lt;b&gt;&amp;", "1:⏎", "2:␣"]
    heat = confidence_heatmap(trace).data[0]
    assert heat.text is None and heat.customdata is None  # no per-cell strings


def test_pooled_labels_name_the_position_range() -> None:
    fig = confidence_heatmap(make_trace(4, 10), max_positions=4)
    assert [x.split(":")[0] for x in fig.data[0].x] == ["0-2", "3-5", "6-8", "9-9"]


def test_short_traces_tick_whole_steps_and_titles_keep_the_label_on_a_second_line() -> None:
    """A 3-pass trace got ticks at 0, 0.5, 1, ...; half-width titles clipped the label and NFE."""
    from dllm_viz.figures import refinement_dumbbell, step_summary_strip

    trace = make_trace(3, 6)
    heat = confidence_heatmap(trace)
    assert heat.layout.yaxis.dtick == 1
    assert step_summary_strip(trace).layout.xaxis5.dtick == 1 and refinement_dumbbell(trace).layout.xaxis.dtick == 1
    first, second = heat.layout.title.text.split("<br>")
    assert first == "Confidence per position over steps" and f"NFE {trace.nfe}" in second
    assert confidence_heatmap(make_trace(40, 6)).layout.yaxis.dtick is None  # plotly's own ticks


def test_a_short_trace_on_a_long_shared_step_axis_gets_the_long_axis_ticks() -> None:
    """Compare puts a 5-step heatmap on dense's 128-step axis: one tick a step drew 128 labels."""
    from dllm_viz.figures import share_step_axis

    fig = share_step_axis(confidence_heatmap(make_trace(4, 6)), 128)
    assert tuple(fig.layout.yaxis.range) == (127.5, -0.5) and fig.layout.yaxis.dtick is None
    assert share_step_axis(confidence_heatmap(make_trace(4, 6)), 6).layout.yaxis.dtick == 1


def test_a_stopped_decode_shows_its_masked_positions_as_masks(tiny_adapter: Any) -> None:
    from dllm_viz.config import DecodeConfig
    from dllm_viz.figures.tokens import MASK_GLYPH, output_text
    from dllm_viz.policies import Pipeline
    from dllm_viz.stepper import Stepper

    stepper = Stepper.start(tiny_adapter, "What is 2 + 7?", Pipeline.from_names("fixed_steps", block_length=8),
                            DecodeConfig(gen_length=16), ())
    for _ in range(3):
        stepper.step()
    partial = stepper.trace()
    stops = set(partial.stop_token_ids)
    final = partial.final_tokens.tolist()
    end = next((i for i, t in enumerate(final) if t in stops), len(final))
    masked = sum(partial.commit_step[:end] < 0)
    assert masked > 0 and output_text(partial).count(MASK_GLYPH) == masked
    while stepper.step() is not None:
        pass
    done = stepper.trace()
    assert done.is_complete and output_text(done) == done.meta.answer_text


def test_the_gif_has_one_frame_per_sampled_step_and_shows_the_canvas() -> None:
    from PIL import Image

    from dllm_viz.figures import decode_gif
    from dllm_viz.figures.export import frame_steps

    trace = make_trace(12, 40, seed=1)
    data = decode_gif(trace, max_frames=8, tokens_per_row=10)
    image = Image.open(io.BytesIO(data))
    assert data.startswith(b"GIF89a") and image.n_frames == len(frame_steps(12, 8))
    assert image.size[0] > 10 * 40 and image.info["loop"] == 0
    image.seek(0)
    first = image.convert("RGB").getcolors(1 << 16)
    image.seek(image.n_frames - 1)
    last = image.convert("RGB").getcolors(1 << 16)
    assert first != last  # the canvas changes between the first and the last frame
    with pytest.raises(ValueError, match="tokens_per_row"):
        decode_gif(trace, tokens_per_row=0)


def test_position_ticks_are_every_kth_index_and_hover_keeps_the_token() -> None:
    from dllm_viz.figures import confidence_heatmap

    trace = make_trace(10, 200, seed=3)
    xaxis = confidence_heatmap(trace).to_dict()["layout"]["xaxis"]
    assert len(xaxis["tickvals"]) <= 8 and xaxis["tickangle"] == 0
    assert all(text.isdigit() for text in xaxis["ticktext"])
    assert xaxis["ticktext"][:3] == ["0", "25", "50"]  # a round step: 200 positions, every 25th
    assert confidence_heatmap(make_trace(4, 128, seed=3)).to_dict()["layout"]["xaxis"]["ticktext"][:3] == [
        "0", "16", "32"]
    assert all(":" in value for value in xaxis["tickvals"])  # the categories still carry index:token


def test_a_short_commit_order_is_tall_enough_for_its_colour_bar() -> None:
    from dllm_viz.figures import commit_order_heatmap
    from dllm_viz.figures.tokens import MIN_GRID_HEIGHT

    short, long = make_trace(8, 64, seed=4), make_trace(8, 640, seed=4)
    assert commit_order_heatmap(short).layout.height == MIN_GRID_HEIGHT  # 2 rows of 32
    assert commit_order_heatmap(long).layout.height == 110 + 34 * 20  # rows get 34 px each


def test_a_comparison_replays_on_one_step_axis_and_finished_runs_hold_their_canvas() -> None:
    from dllm_viz.figures import comparison_replay_figure, comparison_replay_html

    fast, slow = make_trace(4, 32, seed=5, label="fast"), make_trace(12, 32, seed=6, label="slow")
    fig = comparison_replay_figure([fast, slow], max_frames=64)
    assert [f.name for f in fig.frames] == [str(s) for s in range(12)]
    per_trace = len(fig.frames[0].data) // 2
    last = fig.frames[-1].data
    held = comparison_replay_figure([fast], max_frames=64).frames[-1].data  # fast's own last frame
    np.testing.assert_array_equal(np.asarray(last[0].z), np.asarray(held[0].z))
    assert {d.yaxis for d in last[per_trace:]} == {"y2"} and "NFE 12" in fig.layout.annotations[1].text
    assert "<script" in comparison_replay_html([fast, slow], plotlyjs="cdn")
    with pytest.raises(ValueError, match="one gen length"):
        comparison_replay_figure([fast, make_trace(4, 16)])
