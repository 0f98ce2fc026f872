"""Turning traces into bytes for download, and finding the traces a session holds.

Plain helpers for the Traces page: .npz bytes (through `Trace.save`, no pickle), PNG through
kaleido (only where a Chromium is installed), and reading an uploaded file.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from dllm_viz.trace import Trace, load_trace

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def npz_bytes(trace: Trace) -> bytes:
    """The trace as the bytes of a .npz file written by `Trace.save`."""
    with tempfile.TemporaryDirectory() as tmp:
        return trace.save(Path(tmp) / "trace.npz").read_bytes()


def uploaded_trace(data: bytes, name: str) -> Trace:
    """Read an uploaded .npz trace; raises TraceFileError (naming `name`) if it is not one."""
    with tempfile.TemporaryDirectory() as tmp:
        # The browser's file name, where the disk takes it (errors name it); else a plain one: a name
        # of 86+ CJK characters (over 255 bytes) raised ENAMETOOLONG, an empty one IsADirectoryError.
        base = Path(name).name
        path = Path(tmp) / (base if base not in ("", ".", "..") and len(base.encode()) <= 200 else "upload.npz")
        path.write_bytes(data)
        return load_trace(path)


def chromium_path() -> str | None:
    """A Chromium/Chrome executable kaleido can drive, if one is installed."""
    found = os.environ.get("BROWSER_PATH") or next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
    return found if found and Path(found).is_file() else None


def png_available() -> bool:
    """True when kaleido is importable and a Chromium is installed."""
    return importlib.util.find_spec("kaleido") is not None and chromium_path() is not None


def png_bytes(fig: go.Figure) -> bytes:
    """The figure as PNG bytes (kaleido drives the installed Chromium; about 3 s the first time)."""
    os.environ.setdefault("BROWSER_PATH", chromium_path() or "")
    return bytes(fig.to_image(format="png", width=1200, height=800))


def session_traces(state: Any) -> dict[str, Trace]:
    """Label -> trace of everything this session recorded (Decode, Tune, Compare, Traces)."""
    out: dict[str, Trace] = {}
    for key, where in (("trace", "Decode"), ("tune_dense", "Tune (dense)"), ("traces_loaded", "Traces")):
        if isinstance(state.get(key), Trace):
            out[f"{where}: {state[key].meta.label} (NFE {state[key].nfe})"] = state[key]
    for trace in state.get("cmp_results") or []:
        out[f"Compare: {trace.meta.label} (NFE {trace.nfe})"] = trace
    return out
