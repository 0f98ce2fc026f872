"""AppTest regressions for layout faults a browser walk through the app found (the rest, which
only a browser shows, are in tests/e2e/test_layout_walk.py)."""

from __future__ import annotations

import json
from pathlib import Path

from test_app import dirs as dirs  # the fixture
from test_app import open_app, train_small
from trace_factory import make_trace


def test_a_one_epoch_training_run_draws_its_point_on_whole_epoch_ticks(dirs: dict[str, Path]) -> None:
    """st.line_chart drew a 1-epoch run's single point as a line with no marker (an empty chart)
    over an x-axis labelled "1.000000"."""
    at = train_small(epochs=1)
    assert "train_result" in at.session_state
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    curves = next(c for c in charts if c["layout"]["title"]["text"].startswith("Training"))
    assert {line["name"] for line in curves["data"]} == {"train loss", "val loss", "val precision", "val recall"}
    assert all("markers" in line["mode"] and len(line["x"]) == 1 for line in curves["data"])
    xaxis = curves["layout"]["xaxis"]
    assert xaxis["dtick"] == 1 and xaxis["tickformat"] == "d" and xaxis["title"]["text"] == "epoch"
    assert not at.get("arrow_vega_lite_chart")


def test_compares_prompt_set_mode_puts_gen_length_beside_the_configuration_count(dirs: dict[str, Path]) -> None:
    """With no prompt, the Gen length slider sat alone in a right-hand column beside an empty one."""
    at = open_app("compare")
    at.segmented_control(key="cmp_mode").set_value("a prompt set").run()
    assert not at.exception and at.selectbox(key="cmp_task") is not None
    row = next(block for block in at.main.children.values() if block.type == "flex_container"
               and any(getattr(e, "key", None) == "cmp_gen" for column in block.children.values()
                       for e in column.get("select_slider")))
    columns = list(row.children.values())
    assert all(column.type == "column" and column.children for column in columns), columns  # none empty
    assert len(columns) == 2 and columns[0].weight == columns[1].weight
    assert [e.key for e in columns[0].get("select_slider")] == ["cmp_gen"]
    assert [e.key for e in columns[1].get("button_group")] == ["cmp_n"]  # the Configurations picker beside it
    # One prompt mode keeps the prompt with both beside it.
    at.segmented_control(key="cmp_mode").set_value("one prompt").run()
    assert not at.exception


def test_heatmap_legends_sit_under_the_axis_title_and_the_colour_bar_is_slim() -> None:
    """The legend at paper y=-0.15 covered "position" (1400 px, Decode and Traces); in Tune's
    half column the colour bar's top title took the room the position labels needed."""
    from dllm_viz.figures import confidence_heatmap, step_series_lines

    trace = make_trace(16, 64, seed=1)
    heat = confidence_heatmap(trace).to_dict()["layout"]
    assert heat["legend"]["yref"] == "container" and heat["legend"]["yanchor"] == "bottom"
    assert heat["legend"]["y"] == 0
    bar = confidence_heatmap(trace).data[0].colorbar
    assert bar.title.side == "right" and bar.thickness < 30
    lines = step_series_lines([trace, make_trace(8, 64, seed=2)], series="committed_fraction").to_dict()["layout"]
    assert lines["legend"]["yref"] == "container" and lines["legend"]["y"] == 0  # no -0.25 left over
