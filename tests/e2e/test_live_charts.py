"""The live charts (app_ui/live_chart.py) in a real browser: mounted once, redrawn in place,
a playhead that follows the scrubber, a chart below the fold drawn when scrolled to, and a
heatmap click that picks a Kalman position and moves the scrubber."""

from __future__ import annotations

from typing import Any

import pytest
from test_app_browser import FAST, PANEL, metric, open_page, press, settle, step, wait_step

pytestmark = pytest.mark.slow

LIVE = ".dllm-live-chart"
# Marks each chart's element, so a remount (a new element) is told apart from a redraw.
MARK = "() => document.querySelectorAll('.dllm-live-chart').forEach((c) => { c.__mark = 'kept'; })"
MARKED = "(sel) => document.querySelector(sel)?.__mark === 'kept'"


def where(name: str) -> str:
    """The CSS selector of the trace panel's chart `name` (heatmap, summary, profile, view)."""
    return f"{PANEL} .dv-chart-{name} {LIVE}"


def chart(page: Any, name: str) -> Any:
    return page.locator(where(name)).first


def drawn(page: Any, name: str) -> None:
    """Wait until the panel's chart `name` has finished a draw of its current figure."""
    page.wait_for_function("(sel) => { const c = document.querySelector(sel); "
                           "return c && c.dataset.drawnAt && c.dataset.pending !== '1'; }", arg=where(name))


def hover_cell(page: Any, name: str, column: int, row: int, tries: int = 10) -> tuple[str, int, list[float]]:
    """Hover the chart `name` near the centre of cell (`column`, `row`) and return the cell plotly
    reports under the pointer (its hover event) and the pointer's page coordinates, where it stays.

    The coordinates come from plotly's own axis maps, read afresh on every try: a redraw that
    lands between reading them and moving the pointer (the run's last figure, the chart coming
    into view) shifts the axes, so the pointer leaves the chart and comes back until plotly
    answers."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(tries):
        drawn(page, name)
        x, y = page.evaluate("""([sel, col, row]) => { const c = document.querySelector(sel); const fl = c._fullLayout;
            const area = c.querySelector('.nsewdrag').getBoundingClientRect();
            window.__hovered = null;
            if (!c.__hoverWired) {
                c.__hoverWired = true;
                c.on('plotly_hover', (e) => {
                    window.__hovered = [String(e.points[0].x), Math.round(e.points[0].y)]; });
            }
            return [area.left + fl.xaxis.l2p(col), area.top + fl.yaxis.l2p(row)]; }""",
                             [where(name), column, row])
        page.mouse.move(0, 0)
        page.mouse.move(x, y, steps=4)
        try:
            page.wait_for_function("() => window.__hovered", timeout=3_000)
        except PlaywrightTimeout:  # the axes moved under the pointer: read them again
            continue
        hovered, at = page.evaluate("window.__hovered")
        return str(hovered), int(at), [x, y]
    raise AssertionError(f"plotly never reported a hover over cell ({column}, {row}) of the {name} chart")


def test_a_step_redraws_the_charts_in_place_and_the_playhead_follows_the_scrubber(page: Any, app_url: str) -> None:
    from playwright.sync_api import expect

    open_page(page, f"{app_url}/?{FAST}", "run")
    step(page)
    step(page)
    expect(metric(page, "NFE")).to_have_text("2")
    drawn(page, "heatmap")
    before = chart(page, "heatmap").get_attribute("data-digest")
    page.evaluate(MARK)
    step(page)
    expect(metric(page, "NFE")).to_have_text("3")
    page.wait_for_function("([sel, old]) => document.querySelector(sel)?.dataset.digest !== old",
                           arg=[where("heatmap"), before])
    for name in ("heatmap", "summary"):  # the same elements, redrawn: never remounted
        assert page.evaluate(MARKED, where(name)), name
    assert page.locator(f"{where('heatmap')}.js-plotly-plot, {where('heatmap')} .js-plotly-plot").count()
    wait_step(page, "2")
    expect(chart(page, "summary")).to_have_attribute("data-playhead", "2")
    page.get_by_role("heading", name="Decode").click()
    page.keyboard.press("ArrowLeft")  # scrub back: only the playhead moves, the figure stays
    settle(page)
    wait_step(page, "1")
    expect(chart(page, "summary")).to_have_attribute("data-playhead", "1")
    strip = page.locator(f"{PANEL} .dllm-token-strip").first
    expect(strip).to_be_visible()
    assert page.evaluate(MARKED, where("summary"))


def test_a_chart_below_the_fold_draws_when_scrolled_to(page: Any, app_url: str) -> None:
    from playwright.sync_api import expect

    page.set_viewport_size({"width": 1280, "height": 600})  # the chosen view lies below the fold
    open_page(page, f"{app_url}/?{FAST}&view=refinement", "run")
    for _ in range(2):
        step(page)
    view = chart(page, "view")
    view.scroll_into_view_if_needed()
    drawn(page, "view")
    shown = view.get_attribute("data-digest")
    page.evaluate("() => window.scrollTo(0, 0)")
    page.wait_for_timeout(300)
    step(page)
    expect(metric(page, "NFE")).to_have_text("3")
    expect(view).to_have_attribute("data-pending", "1")  # out of sight: it keeps the newest figure, undrawn
    assert view.get_attribute("data-digest") == shown
    view.scroll_into_view_if_needed()
    drawn(page, "view")
    assert view.get_attribute("data-digest") != shown  # scrolled to: the newest figure, drawn


def test_clicking_a_heatmap_column_picks_it_for_the_kalman_bands(page: Any, app_url: str) -> None:
    from playwright.sync_api import expect

    open_page(page, f"{app_url}/?rule=threshold&ce=true&{FAST}", "run")
    press(page, "run")
    drawn(page, "heatmap")
    heat = chart(page, "heatmap")
    heat.scroll_into_view_if_needed()
    # Near the centre of column 5, row 0: the cell under the pointer is read from plotly's hover
    # event, and that one must be picked.
    hovered, row, (x, y) = hover_cell(page, "heatmap", 5, 0)
    page.mouse.click(x, y)
    settle(page, 800)
    picked = page.locator(f"{PANEL} .dv-kalman")
    expect(picked).to_be_visible(timeout=30_000)
    expect(picked.locator("button")).to_contain_text([hovered])  # its chip, removable
    wait_step(page, str(row))  # the scrubber moved to the clicked row
    expect(page.locator(f"{PANEL} .dv-views button[aria-pressed='true']")).to_have_text("Kalman bands")
    picked.locator("button").first.click()  # drop it again
    settle(page)
    expect(picked.locator("button")).to_have_count(0)
