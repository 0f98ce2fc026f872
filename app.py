"""dllm-viz: the Streamlit entrypoint — navigation over pages/ and the shared sidebar (model, device, seed).

Run with `streamlit run app.py`. Set DLLM_VIZ_MODEL to a checkpoint directory to change the
default model (tests point it at a small random checkpoint); the default is the bundled tiny
model. Saved traces go to $DLLM_VIZ_TRACE_DIR (default ~/.dllm_viz/traces).
"""

from __future__ import annotations

import streamlit as st

from app_ui.common import sidebar
from app_ui.url_params import remember_page_params, restore_page_params, warn_dropped_params

PAGES = (
    ("pages/decode.py", "Decode", ":material/play_arrow:"),
    ("pages/compare.py", "Compare", ":material/compare:"),
    ("pages/tune.py", "Tune", ":material/tune:"),
    ("pages/train.py", "Train", ":material/model_training:"),
    ("pages/traces.py", "Traces", ":material/folder_open:"),
    ("pages/learn.py", "Learn", ":material/school:"),
)


def run() -> None:
    """Configure the page, draw the sidebar and run the selected page."""
    st.set_page_config(page_title="dllm-viz", page_icon="🧩", layout="wide")
    pages = [st.Page(path, title=title, icon=icon, default=i == 0) for i, (path, title, icon) in enumerate(PAGES)]
    page = st.navigation(pages, position="top")
    restore_page_params(page.url_path)  # browser Back: the settings the page was left with
    warn_dropped_params(page.url_path)  # before the bound widgets drop the bad values
    sidebar()
    try:
        page.run()
    finally:  # also when the page ends its run early (st.rerun, st.stop)
        remember_page_params(page.url_path)


run()
