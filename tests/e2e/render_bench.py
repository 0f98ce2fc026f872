"""Benchmark (not a test): browser render time of confidence heatmaps in headless Chromium.

Run `python tests/e2e/render_bench.py` from the repository root; results go in BENCHMARKS.md.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from playwright.sync_api import sync_playwright  # noqa: E402
from trace_factory import make_trace  # noqa: E402

from dllm_viz.figures import confidence_heatmap, figure_html  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def main() -> None:
    """Print payload, build and render time for 64^2, 256^2 and 1024^2 traces."""
    tmp = Path(tempfile.mkdtemp())
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=ARGS)
        page = browser.new_page()
        for size in (64, 256, 1024):
            trace = make_trace(size, size, seed=0)
            started = time.perf_counter()
            fig = confidence_heatmap(trace)
            build = time.perf_counter() - started
            path = tmp / f"h{size}.html"
            path.write_text(figure_html(fig, plotlyjs="inline"))
            times = []
            for _ in range(3):
                started = time.perf_counter()
                page.goto(path.as_uri())
                page.locator("image").first.wait_for(state="attached", timeout=60000)
                times.append(time.perf_counter() - started)
            print(f"{size}x{size}: payload {len(fig.to_json()) / 1e6:.2f} MB, build {build:.2f} s, "
                  f"render median {sorted(times)[1]:.2f} s")
        browser.close()


if __name__ == "__main__":
    main()
