"""Several browser sessions on one server at once, as in a teacher's demo to a class.

Every session is a thread of one Streamlit process sharing the cached model (behind one lock):
steps and runs of two tabs interleave, and each tab must end with exactly the decode it would
get alone. The races found between sessions (trace files, autosaves, Train, thread counts,
the served plotly.js) are reproduced without a browser in tests/test_concurrency.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_app_browser import PANEL, metric, open_page, settle

pytestmark = pytest.mark.slow

# Two different decodes: greedy on one sample, sampled (temperature, its own seed) on another.
TABS = ("?sample=arith-1&gen=32&block_length=32&rule=fixed_steps&steps=32",
        "?sample=arith-2&gen=32&block_length=32&rule=fixed_steps&steps=32&seed=3&temperature=0.7")


def shown(page: Any) -> tuple[str, str]:
    """The decode a tab shows: its NFE and its output text."""
    return metric(page, "NFE").inner_text(), page.locator(f"{PANEL} .dv-output").first.inner_text()


def click_only(page: Any, selector: str) -> None:
    """Click without waiting for the run it starts (so the other tab's run overlaps it)."""
    page.locator(selector).first.click()


def test_two_tabs_stepping_and_running_at_once_each_get_their_own_decode(browser: Any, app_url: str) -> None:
    contexts = [browser.new_context(viewport={"width": 1400, "height": 1000}) for _ in TABS]
    try:
        pages = [context.new_page() for context in contexts]
        for page, query in zip(pages, TABS, strict=True):
            page.set_default_timeout(60_000)
            open_page(page, f"{app_url}/{query}", "run")
        for _ in range(3):  # Steps of both tabs interleave on the one model
            for page in pages:
                click_only(page, f"{PANEL} .dv-step")
            for page in pages:
                settle(page)
        for page in pages:  # then both run to the end at once
            click_only(page, ".st-key-run button:visible")
        for page in pages:
            settle(page, 1000)
        together = [shown(page) for page in pages]
        alone = []
        for page in pages:  # each decode again, with no other tab working
            click_only(page, ".st-key-reset button:visible")
            settle(page)
            click_only(page, ".st-key-run button:visible")
            settle(page, 1000)
            alone.append(shown(page))
        assert together == alone and together[0] != together[1], (together, alone)
        assert all(page.get_by_test_id("stException").count() == 0 for page in pages)
    finally:
        for context in contexts:
            context.close()
