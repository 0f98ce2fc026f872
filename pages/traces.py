"""Traces: a library of recorded decodes on disk — save, upload, load, delete, export and share.

Files are dllm_viz .npz traces (arrays + JSON metadata, never pickle) in the trace library
($DLLM_VIZ_TRACE_DIR or ~/.dllm_viz/traces by default) or in a subfolder of it typed here.
Exports are built only when their download button is clicked. Saving never overwrites a file;
deleting asks first.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import streamlit as st

from app_ui.autosave import autosave_name_problem, library_count
from app_ui.branch import saved_trace_branch_panel
from app_ui.common import current_model, file_name_problem, require_app_frame, set_trace, share_query, trace_dir
from app_ui.export import npz_bytes, png_available, png_bytes, session_traces, uploaded_trace
from app_ui.trace_panel import trace_panel
from app_ui.upload_note import upload_message
from dllm_viz import figures
from dllm_viz.roots import OutsideRootError, inside, redact, relative_name
from dllm_viz.trace import Trace, TraceFileError, TraceSaveError, load_trace
from dllm_viz.trace_files import trace_files

require_app_frame()
st.title("Traces")
typed_folder = st.text_input("Trace folder", "", key="traces_dir", placeholder="the trace library itself",
                             help="a subfolder of the app's trace library (set DLLM_VIZ_TRACE_DIR when starting "
                                  "the app to move the library); leave empty for the library itself")
try:
    folder = inside(trace_dir(), typed_folder, what="trace folder", folder="trace library")
except OutsideRootError as exc:
    st.error(f"{exc}; showing the trace library itself.")
    folder = trace_dir()
# The library itself was shown as "." ("Library: 3 traces in .", "Saved x.npz in .").
shown_folder = "the trace library" if (relative := relative_name(folder, trace_dir())) == "." else relative

with st.expander("Save a trace from this session", expanded=True):
    current = session_traces(st.session_state)
    if not current:
        st.caption("Nothing recorded in this session yet: decode on the Decode, Compare or Tune page first.")
    else:
        left, right = st.columns([2, 1], vertical_alignment="bottom")
        label = left.selectbox("Trace", list(current), key="traces_pick")
        name = right.text_input("File name", key="traces_name", placeholder="e.g. threshold-0.9")
        if st.button("Save", key="traces_save", type="primary"):
            stem = (name or "").strip().removesuffix(".npz")
            target = folder / f"{stem}.npz"
            if (problem := file_name_problem(stem) or autosave_name_problem(stem)) is not None:
                st.error(f"Not saved: {problem}.")
            else:
                try:
                    st.success(f"Saved {current[label].save(target, overwrite=False).name} in {shown_folder}")
                except TraceSaveError as exc:  # exists already, folder is a file, disk full, ...
                    st.error(f"Not saved: {redact(str(exc), {'trace folder': trace_dir()})}")

with st.expander("Open a trace file from your computer"):
    upload = st.file_uploader("A .npz trace", type=["npz"], key="traces_upload")
    # A file the uploader rejects itself (wrong extension, too large) reruns nothing: the message
    # about the previous file hides in the browser instead of staying under the new one's error.
    message = upload_message("traces_upload")
    if upload is not None and st.session_state.get("traces_upload_id") != upload.file_id:
        st.session_state["traces_upload_id"] = upload.file_id
        try:
            set_trace(uploaded_trace(upload.getvalue(), upload.name), key="traces_loaded")
            message.success(f"Loaded {upload.name}; it is shown below.")
        except TraceFileError as exc:
            message.error(f"Could not read the uploaded file: {exc}")

files = trace_files(folder)
st.subheader(f"Library: {library_count(files)} in {shown_folder}")  # the list below holds both kinds
linked = st.query_params.get("file")
if linked and linked != "(none)" and linked not in files and "file" not in st.session_state:
    # The picker drops a value it does not offer; say so rather than show the library silently.
    st.warning(f"The link names the trace {linked!r}, which is not in this library; pick one below.")
elif (picked := st.session_state.get("file")) not in (None, "(none)", *files):
    # Picked from this page's list, then deleted (another tab's Delete, the autosave pruning) before
    # it opened: the picker would fall back to "(none)" without a word.
    st.warning(f"The trace {picked!r} is no longer in this library (deleted in another tab or session); "
               "pick another one below.")
chosen = st.selectbox("Open", ["(none)", *files], key="file", bind="query-params",
                      help="the file name goes into the address bar, so a link reopens this trace")
if chosen not in (None, "(none)") and st.session_state.get("traces_opened") != chosen:
    try:
        set_trace(load_trace(folder / str(chosen)), key="traces_loaded")
        st.session_state["traces_opened"] = chosen
    except TraceFileError as exc:
        st.error(f"Could not open {chosen}: {redact(str(exc), {'trace folder': trace_dir()})}")
        st.session_state.pop("traces_loaded", None)
        st.session_state["traces_opened"] = chosen

def delete(path: Path) -> None:
    """Remove the file and forget it (a callback, so the picker can be reset)."""
    path.unlink(missing_ok=True)
    for key in ("traces_loaded", "traces_opened"):
        st.session_state.pop(key, None)
    st.session_state["file"] = "(none)"


def open_on_decode(trace: Trace, query: dict[str, str]) -> None:
    """Hand `trace` to the Decode page; a callback, so the sidebar's seed can still be set."""
    set_trace(trace)
    st.session_state["seed"] = int(query["seed"])


loaded: Trace | None = st.session_state.get("traces_loaded")
if loaded is None:
    st.stop()
trace: Trace = loaded
if chosen not in (None, "(none)"):
    with st.popover("Delete this file"):
        st.write(f"Delete {chosen} for good?")
        st.button("Delete", key="traces_delete", type="primary", on_click=delete, args=(folder / str(chosen),))

st.markdown("#### Export and share")
stem = str(chosen).removesuffix(".npz") if chosen not in (None, "(none)") else "trace"
cols = st.columns(6)
cols[0].download_button("Heatmap (HTML)", lambda: figures.figure_html(figures.confidence_heatmap(trace)),
                        file_name=f"{stem}-heatmap.html", mime="text/html", key="dl_html", on_click="ignore")
cols[1].download_button("Replay (HTML)", lambda: figures.replay_html(trace), file_name=f"{stem}-replay.html",
                        mime="text/html", key="dl_replay", on_click="ignore")
cols[2].download_button("Trace (.npz)", lambda: npz_bytes(trace), file_name=f"{stem}.npz",
                        mime="application/octet-stream", key="dl_npz", on_click="ignore")
if png_available():
    cols[3].download_button("Heatmap (PNG)", lambda: png_bytes(figures.confidence_heatmap(trace)),
                            file_name=f"{stem}-heatmap.png", mime="image/png", key="dl_png", on_click="ignore")
else:
    cols[3].caption("PNG export needs kaleido and Chromium (apt-get install chromium); use HTML instead.")
cols[5].download_button("Replay (GIF)", lambda: figures.decode_gif(trace), file_name=f"{stem}-replay.gif",
                        mime="image/gif", key="dl_gif", on_click="ignore", help="an animated canvas for slides")
query = share_query(trace)
if cols[4].button("Open on Decode", key="traces_to_decode", on_click=open_on_decode, args=(trace, query)):
    # Only parameters no widget of this run is bound to can be set on a switch (Streamlit
    # refuses to clear or set bound ones, e.g. `file`); the seed went through session state.
    st.switch_page("pages/decode.py", query_params={k: v for k, v in query.items() if k != "seed"})
st.page_link("pages/decode.py", label="Decode page with these settings", query_params=query, icon=":material/link:")
st.code(f"{(st.context.url or '').rsplit('/', 1)[0]}/?{urlencode(query)}", language=None)
trace_panel(trace, st.session_state.get("traces_loaded_version", 0), prefix="lib_")
saved_trace_branch_panel(current_model(), trace, st.session_state.get("traces_loaded_version", 0))
