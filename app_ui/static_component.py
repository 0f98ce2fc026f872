"""Files our in-page components load, served by Streamlit from a cache folder (no build step).

The live chart needs plotly.js in the page. Streamlit serves a (v1) component's folder at
`<base>/component/<name>/`, and only files under it, so the folder is a cache holding copies
of the files, named by their contents: a new plotly is a new folder. Without a writable folder
or the file, `asset_url` says None and the callers fall back to plain Streamlit elements, so
nothing is lost.

The plotly.js served is plotly's own *cartesian* bundle (npm `plotly.js-cartesian-dist-min`,
MIT, licence in static/PLOTLY_LICENSE), of the same plotly.js version as the full bundle the
plotly package ships: 1.5 MB instead of 4.6 MB, and on this project's 2-core machine it loads
and runs in 0.45-0.7 s where the full one took 1.3-1.6 s, which was most of a cold Run's wait
for its first heatmap (BENCHMARKS.md, issue #23). It draws the trace types our figures use
(scatter, bar, heatmap, and a few more); `bundle_trace_types` reads which from the file, and a
figure with any other type is drawn by st.plotly_chart instead.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import uuid
from functools import cache
from pathlib import Path

import plotly
import streamlit as st
import streamlit.components.v1 as components

STATIC = Path(__file__).resolve().parent / "static"
CACHE_ENV = "DLLM_VIZ_CACHE_DIR"
PLOTLY_JS = STATIC / "plotly-cartesian.min.js"
# The full bundle the plotly package ships: the vendored one must be the same plotly.js version.
PACKAGE_PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
ASSETS = {"plotly.min.js": PLOTLY_JS}
_TRACE_MODULE = re.compile(r'moduleType:"trace",name:"([a-z0-9]+)"')
_VERSION = re.compile(r"plotly\.js(?: \([a-z -]+\))? v(\d+\.\d+\.\d+)")


def plotly_js_version(path: Path) -> str | None:
    """The plotly.js version a bundle's header names (`* plotly.js (cartesian - minified) v4.1.1`)."""
    with path.open(encoding="utf-8") as handle:
        match = _VERSION.search(handle.read(400))
    return match.group(1) if match else None


@cache
def bundle_trace_types() -> frozenset[str]:
    """The trace types the served plotly.js registers (its trace modules); empty if it is missing."""
    path = ASSETS["plotly.min.js"]
    return frozenset(_TRACE_MODULE.findall(path.read_text(encoding="utf-8"))) if path.is_file() else frozenset()


def _folder(assets: dict[str, Path]) -> Path | None:
    """A cache folder holding `assets` ({served name: source}), or None if none can be written."""
    digest = hashlib.sha256()
    for served, source in sorted(assets.items()):
        digest.update(f"{served}:{source.stat().st_size}:{source.stat().st_mtime_ns}".encode())
    root = Path(os.environ.get(CACHE_ENV, "~/.cache/dllm_viz")).expanduser()
    for base in (root, Path(tempfile.gettempdir()) / f"dllm_viz-{os.getuid()}"):
        folder = base / "components" / f"assets-{digest.hexdigest()[:12]}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for served, source in assets.items():
                if not (folder / served).is_file():
                    # A part file of this call's own: every session's first run comes here, and a class's
                    # first visits arrive together. With one shared `.part` name, one copy truncated another's
                    # and one rename took the file from under the next, whose call then fell back to the temp
                    # folder or to None (no live charts), and `_served` cached whichever came last.
                    part = folder / f".{served}.{uuid.uuid4().hex}.part"
                    try:
                        shutil.copyfile(source, part)
                        os.replace(part, folder / served)
                    finally:
                        part.unlink(missing_ok=True)
            (folder / "index.html").write_text("<!doctype html><title>dllm-viz assets</title>\n")
        except OSError:
            continue  # an unwritable cache: try the next place
        return folder
    return None


@cache
def _served() -> str | None:
    """The URL path the assets are served under, once registered with Streamlit; None if not."""
    if not all(path.is_file() for path in ASSETS.values()) or (folder := _folder(ASSETS)) is None:
        return None
    component = components.declare_component("assets", path=str(folder))
    base = str(st.get_option("server.baseUrlPath") or "").strip("/")
    return "/" + "/".join(part for part in (base, "component", component.name) if part)


def asset_url(name: str) -> str | None:
    """The URL of asset `name` (a key of ASSETS) as the browser fetches it, or None."""
    served = _served()
    return None if served is None else f"{served}/{name}"


def page_script(*names: str) -> str:
    """Our component scripts in app_ui/static, joined in order (sent inline with the element): a
    shared part (chart_core.js) first, then the one that exports the component's function."""
    return "\n".join((STATIC / name).read_text(encoding="utf-8") for name in names)
