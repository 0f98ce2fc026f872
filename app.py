"""dllm-viz: the Streamlit entrypoint — navigation and the shared sidebar (model, device, seed).

Run with `streamlit run app.py`. Set DLLM_VIZ_MODEL to a checkpoint directory to change the
default model (tests point it at a small random checkpoint); the default is the bundled tiny
model.
"""

from __future__ import annotations

import streamlit as st

from pages.common import sidebar


def run() -> None:
    """Configure the page, draw the sidebar and run the selected page."""
    st.set_page_config(page_title="dllm-viz", page_icon="🧩", layout="wide")
    page = st.navigation([st.Page("pages/decode.py", title="Decode", icon="▶️", default=True)])
    sidebar()
    page.run()


run()
