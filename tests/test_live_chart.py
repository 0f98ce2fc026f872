"""The live chart's plain parts: which cell a click names, picking positions, serving plotly.js.

The browser behaviour (mounted once, redrawn in place, lazy draws, a real click) is in
tests/e2e/test_live_charts.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from trace_factory import make_trace

import app_ui.static_component as static_component
from app_ui.live_chart import Click, playhead_shape, with_playhead
from app_ui.views import clicked_cell, toggled
from dllm_viz import figures
from dllm_viz.trace import Trace


@pytest.fixture(scope="module")
def trace() -> Trace:
    return make_trace(6, 20, seed=0)


def test_a_click_names_the_position_of_its_column_and_the_step_of_its_row(trace: Trace) -> None:
    label = figures.position_labels(trace)[7]
    assert clicked_cell(Click(x=label, y=3.2), trace) == (7, 3)
    assert clicked_cell(Click(x="12-15:abc", y=0.0), trace) == (12, 0)  # a pooled bin: its first position
    assert clicked_cell(Click(x="99:x", y=99.0), trace) == (trace.gen_length - 1, trace.num_steps - 1)  # clamped
    assert clicked_cell(Click(x="3:x", y=-4.0), trace) == (3, 0)


@pytest.mark.parametrize("x, y", [("legend", 1.0), (":x", 1.0), ("4:x", None), ("-3:x", 1.0)])
def test_a_click_off_the_cells_names_none(trace: Trace, x: str, y: float | None) -> None:
    assert clicked_cell(Click(x=x, y=y), trace) is None


def test_a_click_adds_a_position_and_a_second_click_removes_it() -> None:
    assert toggled([], 5) == [5]
    assert toggled([5, 2], 5) == [2]
    assert toggled([1, 2, 3], 4, limit=3) == [2, 3, 4]  # past the limit the oldest goes


def test_the_fallback_playhead_is_one_paper_high_line_at_the_step(trace: Trace) -> None:
    fig = figures.step_summary_strip(trace)
    shown = with_playhead(fig, 4)
    assert len(shown.layout.shapes) == len(fig.layout.shapes) + 1
    line = shown.layout.shapes[-1]
    assert (line.x0, line.x1, line.yref, line.y0, line.y1) == (4, 4, "paper", 0, 1)
    assert playhead_shape(4)["x0"] == 4 and not fig.layout.shapes  # the cached figure is left alone


def test_the_assets_folder_holds_a_copy_of_plotly_js_and_falls_back_when_unwritable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(static_component.CACHE_ENV, str(tmp_path / "cache"))
    folder = static_component._folder(static_component.ASSETS)
    assert folder is not None and folder.is_relative_to(tmp_path / "cache")
    copied = folder / "plotly.min.js"
    assert copied.read_bytes()[:200] == static_component.PLOTLY_JS.read_bytes()[:200]
    assert copied.stat().st_size == static_component.PLOTLY_JS.stat().st_size
    assert static_component._folder(static_component.ASSETS) == folder  # the same contents, the same folder
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")
    monkeypatch.setenv(static_component.CACHE_ENV, str(blocked))
    monkeypatch.setattr(static_component.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    fallback = static_component._folder(static_component.ASSETS)
    assert fallback is not None and fallback.is_relative_to(tmp_path / "tmp") and (fallback / "plotly.min.js").is_file()
    assert f"dllm_viz-{os.getuid()}" in str(fallback)


def test_the_served_plotly_js_is_the_packages_version_and_draws_every_trace_type_our_figures_use() -> None:
    """The vendored cartesian bundle must match the plotly.js the plotly package targets, and every
    trace class dllm_viz.figures constructs must be one it registers (else those charts would
    quietly fall back to st.plotly_chart)."""
    import re

    import plotly.graph_objects as go

    version = static_component.plotly_js_version(static_component.PLOTLY_JS)
    assert version is not None and version == static_component.plotly_js_version(static_component.PACKAGE_PLOTLY_JS)
    source = "\n".join(path.read_text() for path in Path(figures.__file__).parent.glob("*.py"))
    used = {getattr(go, name)().type for name in re.findall(r"go\.([A-Z][A-Za-z]+)\(", source)
            if name not in ("Figure", "Frame", "Layout")}
    assert {"heatmap", "scatter", "bar"} <= used <= static_component.bundle_trace_types()
    assert static_component.PLOTLY_JS.stat().st_size < 2_000_000  # the point of the cartesian bundle


def _sunburst_script() -> None:
    import plotly.graph_objects as go

    from app_ui.live_chart import live_chart

    live_chart(go.Figure(go.Sunburst(labels=["a", "b"], parents=["", "a"])), key="sun")


@pytest.mark.usefixtures("keep_main")
def test_a_trace_type_the_bundle_lacks_is_drawn_by_st_plotly_chart() -> None:
    from streamlit.testing.v1 import AppTest

    assert "sunburst" not in static_component.bundle_trace_types()
    at = AppTest.from_function(_sunburst_script).run()
    assert not at.exception and len(at.get("plotly_chart")) == 1 and not at.get("bidi_component")


def test_without_plotly_js_no_asset_is_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(static_component, "ASSETS", {"plotly.min.js": tmp_path / "missing.js"})
    static_component._served.cache_clear()
    try:
        assert static_component.asset_url("plotly.min.js") is None  # the charts fall back to st.plotly_chart
    finally:
        static_component._served.cache_clear()


def test_the_component_scripts_exist_and_export_their_render_function() -> None:
    for name in ("live_chart.js", "trace_panel.js"):
        text = static_component.page_script(name)
        assert "export default function" in text, name


@pytest.fixture
def keep_main(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest replaces sys.modules['__main__'] with its script and leaves it there; a later test
    that spawns processes (the trainer's data workers) would then re-run that script in each."""
    import sys

    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])


def _chart_script() -> None:
    import plotly.graph_objects as go

    from app_ui.live_chart import live_chart

    live_chart(go.Figure(go.Bar(y=[1, 2, 3])).update_layout(height=321), key="bars", playhead=2)


@pytest.mark.usefixtures("keep_main")
def test_the_chart_goes_out_as_a_live_element_with_its_figure_digest_and_playhead() -> None:
    import json

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_chart_script).run()
    assert not at.exception
    elements = at.get("bidi_component")
    assert len(elements) == 1 and not at.get("plotly_chart")
    data = json.loads(elements[0].proto.json)
    figure = json.loads(data["spec"])
    assert figure["data"][0]["type"] == "bar" and data["height"] == 321
    assert data["playhead"]["x0"] == 2 and data["playhead"]["yref"] == "paper"
    assert data["src"].endswith("/plotly.min.js") and len(data["digest"]) == 24
    again = AppTest.from_function(_chart_script).run()
    assert json.loads(again.get("bidi_component")[0].proto.json)["digest"] == data["digest"]  # same figure, same digest


@pytest.mark.usefixtures("keep_main")
def test_without_plotly_js_the_chart_falls_back_to_st_plotly_chart(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from streamlit.testing.v1 import AppTest

    monkeypatch.setattr(static_component, "ASSETS", {"plotly.min.js": tmp_path / "missing.js"})
    static_component._served.cache_clear()
    try:
        at = AppTest.from_function(_chart_script).run()
    finally:
        static_component._served.cache_clear()
    assert not at.exception and not at.get("bidi_component")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["type"] == "bar" and spec["layout"]["shapes"][-1]["x0"] == 2  # the playhead drawn in
