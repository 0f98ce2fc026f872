"""Autosave of the decode in progress, so a page reload (a new session) does not lose its steps.

Session state dies with a reload; the trace folder does not. Every AUTOSAVE_EVERY forward passes
(and when the decode ends or is stopped) the partial trace is written, replacing this session's
previous autosave, as `autosave-<time>-<id>.npz` in the trace folder, where the Traces page lists
it. Only the newest KEEP autosaves, and any written in the last hour (another session's), are
kept, so the folder does not fill up. The page counts them
apart from the user's own traces (`library_count`), and refuses a trace saved under their prefix
(`autosave_name_problem`), which the pruning would delete.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import streamlit as st

from app_ui.common import trace_dir
from dllm_viz.trace import Trace, TraceSaveError

AUTOSAVE_EVERY = 8
KEEP = 5
GRACE_SECONDS = 3600  # an autosave younger than this is kept past KEEP: it may be another session's live one
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
    """Delete autosaves past the newest KEEP, but none written in the last GRACE_SECONDS.

    The folder is the whole server's: with the newest KEEP alone, six students decoding at once
    deleted the first one's autosave within minutes, and a reload then lost that decode. A file
    another session's prune removed after this listing is skipped (its stat used to raise and stop
    this session's run).
    """
    saves: list[tuple[float, Path]] = []
    for path in folder.glob(f"{PREFIX}*.npz"):
        try:
            saves.append((path.stat().st_mtime, path))
        except FileNotFoundError:
            continue
    saves.sort(reverse=True)
    now = time.time()
    for mtime, old in saves[KEEP:]:
        if now - mtime > GRACE_SECONDS:
            old.unlink(missing_ok=True)


def is_autosave(name: str) -> bool:
    """Whether the trace file `name` is an autosave (written by `autosave`, pruned to KEEP)."""
    return name.startswith(PREFIX)


def library_count(files: Iterable[str]) -> str:
    """What the Traces page's list holds, by kind: '3 saved traces and 2 autosaves' ('3 traces' without
    autosaves). One total ('5 traces') counted each run's autosave as a trace the user had saved."""
    names = list(files)
    autosaves = sum(map(is_autosave, names))
    saved = len(names) - autosaves
    if not autosaves:
        return _plural(saved, "trace")
    return f"{_plural(saved, 'saved trace')} and {_plural(autosaves, 'autosave')}"


def autosave_name_problem(stem: str) -> str | None:
    """Why a trace the user saves cannot be named `stem` (no extension): the autosave prefix, whose
    files the page counts as autosaves and `_prune` deletes past the newest KEEP; None when it can."""
    if not is_autosave(stem):
        return None
    return (f"the file name {stem!r} starts with {PREFIX!r}, which the app keeps for its autosaves (only the "
            f"newest {KEEP} are kept); choose another name, e.g. {stem.removeprefix(PREFIX) or 'mine'!r}")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
