"""Browser regressions for layout faults a walk through the app at 1024 and 1400 px found.

Runs `streamlit run app.py` on a random tiny checkpoint (conftest.py) and drives it with headless
Debian Chromium, like test_walkthrough2.py: metric cards that cut their numbers, a heatmap whose
legend covered its axis title and whose position labels ran together, and an upload error that
outlived the upload.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from test_app_browser import open_page, press, settle

pytestmark = pytest.mark.slow

# Every metric card's label and value (and, where given, delta) text that does not fit its box.
CUT_CARDS = """(withDelta) => [...document.querySelectorAll('[data-testid=stMetric]')].map((card) => {
  const parts = '[data-testid=stMetricLabel] *, [data-testid=stMetricValue], [data-testid=stMetricValue] *'
                + (withDelta ? ', [data-testid=stMetricDelta] *' : '');
  const box = card.getBoundingClientRect();
  return {label: card.querySelector('[data-testid=stMetricLabel]').innerText, top: Math.round(box.top),
          cut: [...card.querySelectorAll(parts)].filter((e) => e.scrollWidth > e.clientWidth + 1)
                                                .map((e) => e.innerText)};
})"""

# Boxes of a plotly chart's parts, in page pixels.
CHART_BOXES = """(chart) => {
  const boxes = (selector) => [...chart.querySelectorAll(selector)].map((e) => {
    const b = e.getBoundingClientRect(); return {left: b.left, right: b.right, top: b.top, bottom: b.bottom}; });
  return {svg: boxes('.main-svg')[0], title: boxes('.gtitle'), xtitle: boxes('.xtitle'), legend: boxes('.legend .bg'),
          xticks: boxes('.xtick text')};
}"""


def _context(browser: Any, width: int) -> Any:
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(60_000)
    return context


def _assert_heatmap_readable(chart: Any) -> None:
    """No overlap of the legend and the x-axis title, position labels apart, the title whole."""
    chart.wait_for()
    chart.page.wait_for_timeout(500)
    parts = chart.evaluate(CHART_BOXES)
    assert parts["xtitle"] and parts["legend"], parts
    xtitle, legend = parts["xtitle"][0], parts["legend"][0]
    assert xtitle["bottom"] <= legend["top"] + 1, parts  # the legend sits under "position", not on it
    ticks = sorted(parts["xticks"], key=lambda b: b["left"])
    assert len(ticks) >= 2 and all(a["right"] < b["left"] for a, b in itertools.pairwise(ticks)), ticks
    assert all(t["right"] <= parts["svg"]["right"] + 1 for t in parts["title"]), parts  # the title is not cut


@pytest.mark.parametrize("width", [1024, 1400])
def test_tunes_metric_cards_show_their_numbers_whole(browser: Any, app_url: str, width: int) -> None:
    """At 1024 px the replay row cut "Matches the d…" and "wro…", the Verify row "0.…" (time),
    "2…" (tokens/s) and "Polic…", and then still its longest deltas, "1.00x fewer NFE th…" and
    "1.33x speedup (si…" (at 1400 px too); at 1400 px each row still fits on one line. Tune's
    narrow heatmap ran its position labels together and cut its title."""
    context = _context(browser, width)
    page = context.new_page()
    try:
        open_page(page, f"{app_url}/tune?tune_gen=64", "tune_record")
        press(page, "tune_record")
        page.locator(".st-key-tune_verify").first.wait_for()
        press(page, "tune_verify")
        page.get_by_test_id("stMetricLabel").get_by_text("Policy overhead", exact=True).wait_for()
        cards = page.evaluate(CUT_CARDS, False)
        assert len(cards) >= 8, cards  # 3-4 replay cards and the 5 of the real run
        assert all(not card["cut"] for card in cards), [c for c in cards if c["cut"]]
        replay, real = cards[:-5], cards[-5:]
        verify = page.locator(".st-key-tune_verify_cards")
        for longest in ("x fewer NFE than dense", "x speedup (single run)"):  # the Verify row's longest deltas
            assert verify.get_by_test_id("stMetricDelta").filter(has_text=longest).count() == 1
        deltas = page.evaluate(CUT_CARDS, True)  # deltas too, both rows'
        assert all(not card["cut"] for card in deltas), [c for c in deltas if c["cut"]]
        if width == 1400:  # a wide window keeps each row on one line
            assert len({card["top"] for card in replay}) == 1 and len({card["top"] for card in real}) == 1, cards
        else:  # a narrower one wraps onto more rows instead of cutting
            assert len({card["top"] for card in real}) >= 2, cards
        if width == 1024:
            _assert_heatmap_readable(page.locator(".st-key-tune_heat .js-plotly-plot").first)
    finally:
        context.close()


def test_decodes_heatmap_legend_stays_clear_of_the_position_title(browser: Any, app_url: str) -> None:
    """At 1400 px the heatmap's legend ("commit", "block boundary") covered its "position" title."""
    context = _context(browser, 1400)
    page = context.new_page()
    try:
        open_page(page, f"{app_url}/?gen=64&block_length=16", "run")
        press(page, "run")
        _assert_heatmap_readable(page.locator(".st-key-panel .dv-chart-heatmap .js-plotly-plot").first)
    finally:
        context.close()


def test_an_upload_the_uploader_rejects_hides_the_previous_uploads_error(browser: Any, app_url: str,
                                                                          tmp_path: Path) -> None:
    """A .txt dropped after an unreadable .npz: the uploader rejects it itself and nothing reruns,
    so "Could not read the uploaded file: 'bad.npz' …" stayed under the new file's own error."""
    bad, text, other = tmp_path / "bad.npz", tmp_path / "notes.txt", tmp_path / "other.npz"
    bad.write_bytes(b"not a zip")
    text.write_text("hello")
    other.write_bytes(b"not a zip either")
    context = _context(browser, 1400)
    page = context.new_page()
    try:
        open_page(page, f"{app_url}/traces", "traces_dir")
        page.get_by_text("Open a trace file from your computer").click()
        files = page.locator(".st-key-traces_upload input[type=file]")
        error = page.get_by_test_id("stAlertContentError").filter(has_text="Could not read the uploaded file")
        files.set_input_files(str(bad))
        settle(page, 1000)
        assert error.filter(has_text="bad.npz").first.is_visible()
        files.set_input_files(str(text))  # rejected by the uploader: "text/plain files are not allowed"
        settle(page, 1000)
        assert page.locator(".st-key-traces_upload").get_by_text("not allowed").first.is_visible()
        assert not any(e.is_visible() for e in error.all())
        files.set_input_files(str(other))  # a new upload the script reads: its own message shows
        settle(page, 1000)
        assert error.filter(has_text="other.npz").first.is_visible()
        assert not any(e.is_visible() for e in error.filter(has_text="bad.npz").all())
    finally:
        context.close()
