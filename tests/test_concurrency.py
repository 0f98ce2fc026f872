"""Several users on one app server (a teacher's demo to a class, each student in a tab).

Streamlit runs every browser session as threads of one process: the model, torch's and BLAS's
thread counts, the served plotly.js and the trace and controller folders are shared. Each test
here plays one race between sessions with threads (or a lock held by the test) and checks that
no session crashes, loses what it made, or slows another down.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import streamlit as st
import torch
from toy import ToyAdapter

import app_ui.common as common
from app_ui import autosave, static_component, stepping
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.stepper import Stepper
from dllm_viz.threads import ThreadChoice
from dllm_viz.trace import Trace, TraceFileError, load_trace


def in_thread(work: Callable[[], Any]) -> None:
    """Run `work` in a new thread (as Streamlit runs each script run) and wait for it."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=300)
    assert not thread.is_alive()
    if errors:
        raise errors[0]


@pytest.fixture
def trace() -> Trace:
    return decode(ToyAdapter(), [3, 4, 5], Pipeline.from_names("threshold", threshold=0.6, block_length=8),
                  DecodeConfig(gen_length=24), prompt_text="toy prompt")


# ---- Traces: a file another session deletes or replaces while this one opens it ------------

def test_a_trace_deleted_while_it_is_opened_is_a_trace_file_error(trace: Trace, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Another session's Delete (or the autosave pruning) right after this one's existence check
    raised FileNotFoundError, which the Traces page does not catch."""
    path = trace.save(tmp_path / "shared.npz")
    is_file = Path.is_file

    def deleted_after_the_check(self: Path) -> bool:
        found = is_file(self)
        if self == path:
            path.unlink()
        return found

    monkeypatch.setattr(Path, "is_file", deleted_after_the_check)
    with pytest.raises(TraceFileError, match=r"'shared\.npz' does not exist"):
        load_trace(path)


def test_a_trace_replaced_while_it_is_opened_loads_the_version_that_was_checked(
        trace: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's autosave replaces its file every 8 passes; one opening it meanwhile had its
    sizes checked in one version and its arrays read from the next, which no check had seen."""
    import dllm_viz.trace as trace_module

    path = trace.save(tmp_path / "autosave-x.npz")
    longer = decode(ToyAdapter(), [3, 4, 5], Pipeline.dense(gen_length=24), DecodeConfig(gen_length=24))
    check_archive = trace_module.check_archive

    def replaced_after_the_check(source: Any, cap: int | None = None) -> Any:
        declared = check_archive(source, cap)
        longer.save(path)  # atomically replaced, as Trace.save does
        return declared

    monkeypatch.setattr(trace_module, "check_archive", replaced_after_the_check)
    loaded = load_trace(path)
    assert loaded.nfe == trace.nfe != longer.nfe
    np.testing.assert_array_equal(loaded.tokens, trace.tokens)


# ---- Autosaves of many sessions in one trace folder ------------------------------------------
# These need a change to app_ui/autosave.py's `_prune` (another helper's file at the time of
# writing): strict, so that they fail once it lands and the markers must go.

def _autosaves(folder: Path, count: int, trace: Trace) -> list[Path]:
    """`count` autosaves of other sessions, oldest first, one second apart."""
    paths = []
    for i in range(count):
        path = trace.save(folder / f"{autosave.PREFIX}other-{i}.npz")
        os.utime(path, (path.stat().st_atime, path.stat().st_mtime - count + i))
        paths.append(path)
    return paths


def test_sessions_pruning_autosaves_at_once_never_crash(trace: Trace, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another session's prune removed a file this one had just listed: its stat raised
    FileNotFoundError, which stopped this session's Run (reproduced with 4 threads autosaving)."""
    _autosaves(tmp_path, autosave.KEEP + 2, trace)
    gone = tmp_path / f"{autosave.PREFIX}pruned-by-another-session.npz"
    glob = Path.glob
    monkeypatch.setattr(Path, "glob", lambda self, pattern: [*glob(self, pattern), gone])
    autosave._prune(tmp_path)


def test_other_sessions_autosaves_leave_a_recent_one_in_place(trace: Trace, tmp_path: Path) -> None:
    """The newest KEEP autosaves of the whole server were kept: in a class, six students' decodes
    deleted the first student's autosave minutes after it was written, so a reload lost it."""
    mine = trace.save(tmp_path / f"{autosave.PREFIX}mine.npz")
    os.utime(mine, (mine.stat().st_atime, mine.stat().st_mtime - 60))  # a minute ago
    _autosaves(tmp_path, autosave.KEEP, trace)
    autosave._prune(tmp_path)
    assert mine.is_file()


# ---- Thread pools shared by every session ----------------------------------------------------

@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A plain dict standing in for one session's st.session_state (autosaves into tmp_path)."""
    state: dict[str, Any] = {}
    monkeypatch.setattr(st, "session_state", state)
    monkeypatch.setenv(common.TRACE_DIR_ENV, str(tmp_path / "traces"))
    yield state


def test_a_step_runs_at_this_sessions_thread_count_whatever_another_session_set(
        tiny_adapter: ModelAdapter, session: dict[str, Any]) -> None:
    """A Step or a Play tick runs in a fragment's run, a new thread that skips current_model(): it
    ran at the count any session set last (2 here, torch's default for a model on a GPU) instead
    of this session's 1 for its tiny CPU model, which BENCHMARKS.md measured 10x slower."""
    session["threads"] = ThreadChoice(1, "1 (a small model)")
    stepper = Stepper.start(tiny_adapter, "What is 3 + 4?", Pipeline.dense(gen_length=8), DecodeConfig(gen_length=8),
                            ())
    session["stepper"] = stepper
    seen: list[int] = []
    hook = tiny_adapter.model.register_forward_pre_hook(lambda module, args: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    try:
        in_thread(lambda: torch.set_num_threads(2))  # another session's run
        in_thread(lambda: stepping.advance(stepper))  # this session's Step
    finally:
        hook.remove()
        torch.set_num_threads(before)
    assert seen == [1] and stepper.nfe == 1 and session["trace"].nfe == 1


# ---- The served plotly.js: every session's first run asks for it at once ---------------------

def test_first_visits_at_once_all_get_the_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One shared `.part` file: a copy truncated another's and a rename took the file from under
    the next, whose call fell back to the temp folder or to None (cached by `_served` for the
    server's life: no session got live charts)."""
    monkeypatch.setenv(static_component.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(static_component.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    copyfile, start = static_component.shutil.copyfile, threading.Barrier(3)

    def slow_copy(source: Any, target: Any) -> Any:  # the copy of 1.5 MB on a busy machine
        out = copyfile(source, target)
        threading.Event().wait(0.2)
        return out

    monkeypatch.setattr(static_component.shutil, "copyfile", slow_copy)
    folders: list[Path | None] = []

    def visit() -> None:
        start.wait(30)
        folders.append(static_component._folder(static_component.ASSETS))

    threads = [threading.Thread(target=visit) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(folders) == 3 and len(set(folders)) == 1 and folders[0] is not None
    assert folders[0].is_relative_to(tmp_path / "cache")
    assert (folders[0] / "plotly.min.js").stat().st_size == static_component.PLOTLY_JS.stat().st_size
    assert sorted(p.name for p in folders[0].iterdir()) == ["index.html", "plotly.min.js"]  # no part file left


# ---- shared folders and the shared model cache --------------------------------------------

def test_sessions_checking_one_target_at_once_all_find_it_writable(tmp_path: Path) -> None:
    """One probe name for every caller: one session's removal took another's probe, which then
    failed to remove it and called a writable folder "not writable"."""
    from dllm_viz.writable import check_writable

    target, failures = tmp_path / "controllers" / "shared.safetensors", []
    start = threading.Barrier(8)

    def check_many() -> None:
        start.wait()
        for _ in range(150):
            try:
                check_writable(target, "Save as")
            except ValueError as exc:
                failures.append(str(exc))

    threads = [threading.Thread(target=check_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    assert list(target.parent.iterdir()) == [], "a probe was left behind"


def test_the_shared_model_cache_keeps_the_most_recent_models_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model any session picked stayed loaded for the server's life."""
    loads: list[str] = []
    monkeypatch.setattr(common, "load", lambda name, device: loads.append(name) or name)
    common.cached_model.clear()
    try:
        for name in ("a", "b", "c", "c", "a"):
            common.cached_model(name, "cpu")
    finally:
        common.cached_model.clear()
    assert common.MODELS_KEPT == 2 and loads == ["a", "b", "c", "a"]
