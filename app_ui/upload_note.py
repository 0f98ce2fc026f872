"""A message about an uploaded file that goes away when the file uploader changes in the browser.

The uploader rejects a file itself (wrong extension, too large) without rerunning the script, so
the red "Could not read the uploaded file" of the previous upload stayed under a list that now
ends in another file's own error. A small in-page component (components v2, no iframe) hides
the message container when the uploader sees a change or a drop; the next run that writes a
message shows the container again.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import streamlit as st

_JS = """
export default function (component) {
  const { data } = component;
  const message = () => document.querySelectorAll(`.st-key-${data.message}`);
  message().forEach((box) => { box.style.display = ""; });  // a new run: its message shows
  const uploader = document.querySelector(`.st-key-${data.uploader}`);
  if (!uploader || uploader.dataset.dvClearsMessage === data.message) return;
  uploader.dataset.dvClearsMessage = data.message;
  const hide = () => message().forEach((box) => { box.style.display = "none"; });
  uploader.addEventListener("change", hide, true);
  uploader.addEventListener("drop", hide, true);
}
"""


@cache
def _component() -> Any:
    return st.components.v2.component("dllm_viz.upload_note", js=_JS, isolate_styles=False)


def upload_message(uploader_key: str) -> Any:
    """A container for what the script says about the file in the uploader keyed `uploader_key`
    (st.error / st.success into it); hidden in the browser as soon as that uploader changes."""
    message_key = f"{uploader_key}_message"
    runs = st.session_state[f"{message_key}_runs"] = st.session_state.get(f"{message_key}_runs", 0) + 1
    _component()(data={"uploader": uploader_key, "message": message_key, "run": runs}, key=f"{message_key}_watch")
    return st.container(key=message_key)
