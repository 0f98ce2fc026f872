"""Comparison figures, the Pareto helper and the HTML exports."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from trace_factory import make_trace

from dllm_viz.figures import (
    compare,
    confidence_heatmap,
    figure_html,
    nfe_accuracy_scatter,
    nfe_bar,
    pareto_front,
    replay_figure,
    replay_html,
    step_series_lines,
)
from dllm_viz.figures.compare import resample_progress


def test_pareto_front_known_answer() -> None:
    points = [(10, 0.5), (5, 0.4), (20, 0.6), (30, 0.55), (5, 0.4), (np.nan, 1.0), (8, 0.3)]
    assert pareto_front(points).tolist() == [1, 4, 0, 2]  # duplicates kept, NaN and dominated dropped


def test_pareto_front_edge_cases() -> None:
    assert pareto_front([]).tolist() == []
    assert pareto_front([[3, 0.1]]).tolist() == [0]
    assert pareto_front([(5, 0.5), (5, 0.6)]).tolist() == [1]  # same NFE, higher accuracy wins
    with pytest.raises(ValueError, match="N x 2"):
        pareto_front([1, 2, 3])


def test_nfe_accuracy_scatter_accepts_records_and_dataframes() -> None:
    records = [("tau=0.9", 40, 0.8), ("tau=0.7", 25, 0.78), ("tau=0.5", 30, 0.7)]
    fig = nfe_accuracy_scatter(records)
    assert [d.name for d in fig.data] == ["run", "Pareto front"]
    assert list(fig.data[1].text) == ["tau=0.7", "tau=0.9"] and fig.data[1].line.shape == "hv"
    frame = pd.DataFrame(records, columns=["label", "nfe", "accuracy"])
    assert nfe_accuracy_scatter(frame).to_dict()["data"] == fig.to_dict()["data"]
    with pytest.raises(ValueError, match="accuracy"):
        nfe_accuracy_scatter(frame.drop(columns="accuracy"))
    assert fig.layout.xaxis.title.text.startswith("NFE") and fig.layout.yaxis.title.text == "accuracy"


def _label_boxes(fig) -> list[tuple[float, float, float, float]]:
    """Each visible label's box in plot-normalised units, estimated from its text and font size.

    Independent of the placement code: a glyph is taken as 0.6 font sizes wide and a line as
    1.2 font sizes tall, over the nominal plot area the figure module declares.
    """
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    width, height = compare.PLOT_PX
    boxes = []
    for note in fig.layout.annotations:
        assert note.xanchor == "center" and note.yanchor == "middle"
        cx = (note.x - x0) / (x1 - x0) + (note.xshift or 0) / width
        cy = (note.y - y0) / (y1 - y0) + (note.yshift or 0) / height
        w, h = len(note.text) * 0.6 * note.font.size / width, 1.2 * note.font.size / height
        boxes.append((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    return boxes


def test_scatter_labels_of_a_dense_cluster_never_overlap() -> None:
    labels = [f"threshold tau={0.50 + 0.05 * i:.2f}" for i in range(10)]
    records = [(label, 10 + 0.3 * i, 0.60 + 0.01 * ((i * 7) % 10)) for i, label in enumerate(labels)]
    fig = nfe_accuracy_scatter(records)
    boxes = _label_boxes(fig)
    assert 0 < len(boxes) < 10  # some labels fit, the rest are left to the hover
    for i, a in enumerate(boxes):
        assert a[0] >= 0 and a[2] <= 1 and a[1] >= 0 and a[3] <= 1, fig.layout.annotations[i].text
        for j in range(i):
            b = boxes[j]
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (
                fig.layout.annotations[i].text, fig.layout.annotations[j].text)
    shown = {note.text for note in fig.layout.annotations}
    front = pareto_front([r[1:] for r in records])
    assert labels[front[0]] in shown  # the front is labelled first: its cheapest run always fits
    assert "crowded labels on hover" in fig.layout.title.text
    run = fig.data[0]
    assert "%{text}" in run.hovertemplate and list(run.text) == labels and run.mode == "markers"


def test_scatter_labels_all_fit_when_points_are_apart() -> None:
    records = [("a", 5, 0.2), ("b", 40, 0.5), ("c", 80, 0.9)]
    fig = nfe_accuracy_scatter(records)
    assert sorted(n.text for n in fig.layout.annotations) == ["a", "b", "c"]
    assert "hover" not in fig.layout.title.text
    assert not nfe_accuracy_scatter(records, show_labels=False).layout.annotations


def test_resample_progress_known_answer() -> None:
    grid, values = resample_progress(np.array([1.0, 3.0]), 5)
    assert grid.tolist() == [0, 0.25, 0.5, 0.75, 1.0]
    assert values.tolist() == [1.0, 1.0, 1.0, 2.0, 3.0]  # steps sit at progress 0.5 and 1.0
    assert resample_progress(np.zeros(0), 5)[1].size == 0


def test_series_lines_share_one_axis_when_step_counts_differ() -> None:
    traces = [make_trace(8, 16, label="fast"), make_trace(30, 16, label="slow"),
              make_trace(0, 16, label="none")]
    fig = step_series_lines(traces, num_points=11)
    assert [len(d.x) for d in fig.data] == [11, 11, 0]
    assert fig.data[0].y[-1] == pytest.approx(1.0) and fig.data[1].y[-1] == pytest.approx(1.0)
    assert fig.data[0].name.startswith("fast") and fig.layout.hovermode == "x unified"
    raw = step_series_lines(traces, x="step", series="committed")
    assert [len(d.x) for d in raw.data] == [8, 30, 0]


def test_series_lines_reject_mixed_lengths_and_unknown_series() -> None:
    with pytest.raises(ValueError, match="gen_length"):
        step_series_lines([make_trace(4, 8), make_trace(4, 9)])
    with pytest.raises(ValueError, match="series"):
        step_series_lines([make_trace(4, 8)], series="nope")
    with pytest.raises(ValueError, match="at least one"):
        step_series_lines([])


def test_nfe_bar_labels_come_from_meta() -> None:
    fig = nfe_bar([make_trace(8, 8, label="a"), make_trace(5, 8, label="b"), make_trace(3, 8, label="a")])
    assert list(fig.data[0].x) == ["a", "b", "a #2"] and list(fig.data[0].y) == [8, 5, 3]
    assert fig.data[0].hovertemplate


def test_figure_html_inline_or_cdn() -> None:
    fig = confidence_heatmap(make_trace(4, 4))
    inline, cdn = figure_html(fig), figure_html(fig, plotlyjs="cdn")
    assert inline.lower().startswith("<!doctype html>") and "dllm-viz-figure" in inline
    assert "cdn.plot.ly" in cdn and len(inline) > len(cdn) + 1_000_000
    assert figure_html(fig, plotlyjs="cdn") == cdn  # deterministic
    with pytest.raises(ValueError, match="plotlyjs"):
        figure_html(fig, plotlyjs="none")  # type: ignore[arg-type]


def test_replay_is_downsampled_with_play_pause_and_slider() -> None:
    trace = make_trace(100, 300)
    fig = replay_figure(trace, max_frames=10, max_positions=64)
    assert len(fig.frames) == 10 and fig.frames[-1].name == "99" and fig.frames[0].name == "0"
    assert len(fig.layout.sliders[0].steps) == 10
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["▶ play", "❚❚ pause"]
    cells = np.isfinite(np.asarray(fig.frames[0].data[0].z)).sum()
    assert cells == 60  # 300 positions pooled by 5


def test_replay_of_a_zero_step_trace_is_one_frame() -> None:
    fig = replay_figure(make_trace(0, 5))
    assert [f.name for f in fig.frames] == ["initial"]
    page = replay_html(make_trace(3, 5), plotlyjs="cdn")
    assert "addFrames" in page and page.lower().startswith("<!doctype html>")


def test_scatter_keeps_accuracy_on_a_fraction_axis() -> None:
    """Labels of neighbouring points overprinted and the axis autoranged to 1.6 around the text."""
    from dllm_viz.figures import nfe_accuracy_scatter

    fig = nfe_accuracy_scatter([("dense", 64.0, 0.8), ("threshold", 2.8, 0.8), ("cora", 6.2, 0.8)])
    assert tuple(fig.layout.yaxis.range) == (-0.08, 1.12)
    assert sorted(n.text for n in fig.layout.annotations) == ["cora", "dense", "threshold"]
    assert _label_boxes(fig) and all(b[1] >= 0 and b[3] <= 1 for b in _label_boxes(fig))  # inside the axis
