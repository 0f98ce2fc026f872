"""A block of generated HTML (the token strip) that stays mounted across reruns.

st.html sanitises and re-renders its HTML through React on every rerun: on a Step of a gen-128
decode that was 60-80 ms of the browser's main thread (of ~220 ms for the whole fragment),
measured with Chromium's profiler (BENCHMARKS.md, issue #23). This in-page component sets the
new HTML in place, only when it changed. It takes only HTML that dllm_viz builds with every
text escaped (figures.token_strip_html).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import streamlit as st

from app_ui.static_component import page_script


@cache
def _component() -> Any:
    return st.components.v2.component("dllm_viz.live_html", js=page_script("live_html.js"), isolate_styles=False)


def live_html(markup: str, *, key: str) -> None:
    """Show `markup` (escaped, generated HTML only) in the block kept under `key`."""
    _component()(data={"html": markup}, key=key)
