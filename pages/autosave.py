"""Autosave of the decode in progress, so a page reload (a new session) does not lose its steps.

Session state dies with a reload; the trace folder does not. Every AUTOSAVE_EVERY forward passes
(and when the decode ends or is stopped) the partial trace is written, replacing this session's
previous autosave, as `autosave-<time>-<id>.npz` in the trace folder, where the Traces page lists
it. Only the newest KEEP autosaves are kept, so the folder does not fill up.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import streamlit as st

from dllm_viz.trace import Trace, TraceSaveError
from pages.common import trace_dir

AUTOSAVE_EVERY = 8
KEEP = 5
PREFIX = "autosave-"


def autosave(trace: Trace, *, force: bool = False) -> Path | None:
    """Write `trace` as this session's autosave every AUTOSAVE_EVERY passes (or when `force`)."""
    if not trace.nfe or (not force and trace.nfe % AUTOSAVE_EVERY):
        return None
    name = st.session_state.setdefault("_autosave_name",
                                       f"{PREFIX}{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.npz")
    folder = trace_dir()
    try:
        path = trace.save(folder / name)
    except TraceSaveError as exc:
        if not st.session_state.get("_autosave_warned"):
            st.session_state["_autosave_warned"] = True
            st.toast(f"Autosave is off for this session: {exc}")
        return None
    _prune(folder)
    return path


def _prune(folder: Path) -> None:
    saves = sorted(folder.glob(f"{PREFIX}*.npz"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in saves[KEEP:]:
        old.unlink(missing_ok=True)
