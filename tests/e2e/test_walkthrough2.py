"""Browser regressions for what a second walk through the app found that only a browser shows.

Runs `streamlit run app.py` on a random tiny checkpoint (conftest.py) and drives it with headless
Debian Chromium, like test_walkthrough.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_app_browser import open_page

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("width", [1024, 1400])
def test_tunes_commit_rule_picker_shows_every_rule_whole(browser: Any, app_url: str, width: int) -> None:
    """In a half-width column the picker scrolled its rule names sideways: 'ra' for 'cora' at
    1400 px, '…ed_steps' for 'fixed_steps' at 1024 px."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_page(page, f"{app_url}/tune?tune_gen=32", "tune_rule")
        picker = page.locator(".st-key-tune_rule").first
        box = picker.bounding_box()
        buttons = picker.locator("button")
        assert buttons.count() >= 5
        for i in range(buttons.count()):
            button = buttons.nth(i).bounding_box()
            assert box["x"] - 1 <= button["x"] and button["x"] + button["width"] <= box["x"] + box["width"] + 1, (
                buttons.nth(i).inner_text())
    finally:
        context.close()
