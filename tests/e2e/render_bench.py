"""Benchmark (not a test): browser timings of the heatmap and of the app's interactions.

`python tests/e2e/render_bench.py` times confidence heatmaps of 64^2 to 1024^2 in headless
Chromium; `--thread-probe` times a bundled-model pass with 1 and 2 torch threads; `--builds`
times, in this process, the figure builders a Decode Step calls, on a bundled-model decode;
`python tests/e2e/render_bench.py --app [--threads N]` serves the app on the bundled
model and times, from the click to the finished rerun as the browser sees it: Run to heatmap
(threshold, gen 128; also for a new visitor, in a fresh browser context), a Step beyond its
forward pass, each Learn chapter's first visit on a fresh server, Compare on one prompt with
four policies, and a Tune slider move; for Step and Tune also until the last chart the rerun
redrew has finished drawing (Plotly draws after the rerun ends). `--threads N` sets
DLLM_VIZ_THREADS (default: the app's thread policy). Results go in BENCHMARKS.md with `uptime`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "e2e"), str(ROOT / "tests"), str(ROOT)]

from playwright.sync_api import sync_playwright  # noqa: E402
from trace_factory import make_trace  # noqa: E402

from dllm_viz.figures import confidence_heatmap, figure_html  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def heatmaps() -> None:
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


# Records every change of the app's script state with the browser's clock, so a rerun's end is
# timed exactly (no polling interval) and a rerun too brief to see still counts.
WATCH = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  window.__states = [];
  new MutationObserver((records) => records.forEach((r) => window.__states.push([r.oldValue, performance.now()])))
    .observe(app, {attributes: true, attributeOldValue: true, attributeFilter: ['data-test-script-state']});
  for (const kind of ['pointerdown', 'keydown']) {
    document.addEventListener(kind, () => { window.__input = performance.now(); }, true);
  }
  window.__drawn = [];  // when a Plotly chart's DOM last changed: a draw (the rerun's end does not wait for them)
  const inPlot = (node) => (node.nodeType === 1 ? node : node.parentElement)?.closest('.js-plotly-plot');
  new MutationObserver((records) => {
    if (records.some((r) => inPlot(r.target))) window.__drawn.push(performance.now());
  }).observe(document.body, {subtree: true, childList: true});
}"""
# Installed before the app loads: when each message from the server was handled. A fragment rerun
# of ~20 ms can start and finish within one React render, so the script state never reads
# 'running'; its end is then its last message (the server's "script finished").
MESSAGES = """() => { window.__messages = []; const Socket = window.WebSocket;
  window.WebSocket = function (...args) { const ws = new Socket(...args);
    ws.addEventListener('message', () => window.__messages.push(performance.now())); return ws; };
  window.WebSocket.prototype = Socket.prototype; Object.assign(window.WebSocket, Socket); }"""
# Each entry is [the state a change left, when]: leaving 'running' is the end of a rerun; a rerun
# never seen running is over once its messages have stopped for QUIET ms.
QUIET = 300
# Both count only what follows the action's own input event (an earlier rerun ending after `t0`
# once gave a negative time).
RERUN_DONE = "(t0) => { const app = document.querySelector('[data-testid=stApp]'); " \
             "if (app.getAttribute('data-test-script-state') !== 'notRunning') return false; " \
             "t0 = Math.max(t0, window.__input || 0); " \
             "if (window.__states.some(([left, t]) => t >= t0 && left === 'running')) return true; " \
             "const m = window.__messages.filter((t) => t >= t0); " \
             f"return m.length > 0 && performance.now() - m[m.length - 1] > {QUIET}; }}"
RERUN_END = "(t0) => { t0 = Math.max(t0, window.__input || 0); " \
            "const s = window.__states.filter(([left, t]) => t >= t0 && left === 'running'); " \
            "if (s.length) return s[s.length - 1][1]; const m = window.__messages.filter((t) => t >= t0); " \
            "return m[m.length - 1]; }"
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"


# When the chart at CSS selector `sel` is drawn (0 until then): a live chart's finished draw
# (app_ui/live_chart.py; epoch time less the page's time origin), or a plain Plotly chart.
HEATMAP = ".st-key-panel .dv-chart-heatmap"  # Decode's heatmap, in its trace panel (app_ui/trace_panel.py)
CHART_READY = "(sel) => { const box = document.querySelector(sel); if (!box) return 0; " \
              "const live = box.querySelector('.dllm-live-chart'); " \
              "if (live) return live.dataset.drawnAt ? Number(live.dataset.drawnAt) - performance.timeOrigin : 0; " \
              "return box.querySelector('.js-plotly-plot') ? performance.now() : 0; }"


def timed(page: Any, action: Any, ready: str | None = None) -> float:
    """Seconds from the input event of `action()` (pointer down or key down, on the browser's clock)
    to the end of the rerun it caused, or to the chart at selector `ready` being drawn if that is later;
    that chart must not be on the page before the action."""
    page.wait_for_timeout(300)
    start = page.evaluate("performance.now()")
    action()
    page.wait_for_function(RERUN_DONE, arg=start, timeout=120_000)
    t0 = page.evaluate("window.__input")
    end = page.evaluate(RERUN_END, start)
    if ready is not None:
        seen = page.wait_for_function(CHART_READY, arg=ready, polling="raf", timeout=120_000)
        end = max(end, float(seen.json_value()))
    return (end - t0) / 1000


# The newest finished draw of every live chart (app_ui/live_chart.py), on the page's clock.
LIVE_DRAWS = "() => [...document.querySelectorAll('.dllm-live-chart')].filter((c) => c.dataset.drawnAt)" \
             ".map((c) => Number(c.dataset.drawnAt) - performance.timeOrigin)"


def drawn_after(page: Any, settle_ms: int = 1000) -> float:
    """Seconds from the last input to the last change inside a chart after it (0.0 if no chart
    was redrawn), once `settle_ms` have passed with the page idle: a Plotly chart's DOM on the
    page, or a live chart's finished draw."""
    page.wait_for_timeout(settle_ms)
    t0 = page.evaluate("window.__input")
    later = [t for t in page.evaluate("window.__drawn") + page.evaluate(LIVE_DRAWS) if t >= t0]
    return (max(later) - t0) / 1000 if later else 0.0


def open_app(page: Any, url: str, ready_key: str) -> None:
    page.goto(url)
    page.locator(f".st-key-{ready_key}").first.wait_for(timeout=120_000)
    page.locator(IDLE).wait_for(state="attached", timeout=120_000)
    page.evaluate(WATCH)


def click(page: Any, key: str) -> Any:
    return lambda: page.locator(f".st-key-{key} button:visible").first.click()


def decode_seconds(page: Any) -> float:
    """The Decode panel's forward-pass seconds so far, unrounded (0.0 before its first step)."""
    return float(page.evaluate("document.querySelector('.dv-panel')?.dataset.seconds || '0'"))


class Report(dict):  # type: ignore[type-arg]
    """Prints every timing as soon as it is set (a failure later keeps the earlier lines)."""

    def __setitem__(self, name: str, value: Any) -> None:
        super().__setitem__(name, value)
        if isinstance(value, list):
            print(f"{name}: median {statistics.median(value):.2f} s, max {max(value):.2f} "
                  f"[{', '.join(f'{v:.2f}' for v in value)}]", flush=True)
        else:
            print(f"{name}: {value:.2f} s", flush=True)


def first_visit_run(browser: Any, url: str) -> float:
    """Run to heatmap in a new browser context: plotly.js and the app's code not yet in any cache,
    as for someone opening a shared link; Run is clicked as soon as the page is idle (+0.3 s)."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    page.add_init_script(f"({MESSAGES})()")
    page.set_default_timeout(60_000)
    try:
        open_app(page, f"{url}/?gen=128&rule=threshold", "run")
        return timed(page, click(page, "run"), HEATMAP)
    finally:
        context.close()


def step_timings(url: str, page: Any, out: dict[str, Any], steps: int = 6) -> None:
    """Decode Steps from a fresh decode (threshold, gen 128): click to view, the part beyond the
    forward pass (the panel's unrounded seconds before and after), and click to charts drawn."""
    open_app(page, f"{url}/?gen=128&rule=threshold", "run")
    page.locator(".st-key-reset button").first.click()
    page.locator(IDLE).wait_for(state="attached")
    latencies, beyond, heatmap, drawn, drawn_beyond = [], [], [], [], []
    for _ in range(steps):
        before = decode_seconds(page)
        latency = timed(page, lambda: page.locator(".st-key-panel .dv-step").click())
        all_drawn = drawn_after(page)
        forward = decode_seconds(page) - before
        latencies.append(latency)
        beyond.append(latency - forward)
        heatmap.append((page.evaluate(CHART_READY, HEATMAP) - page.evaluate("window.__input")) / 1000 - forward)
        drawn.append(all_drawn)
        drawn_beyond.append(all_drawn - forward)
    out["step click to view (s)"] = latencies
    out["step beyond its forward pass (s)"] = beyond
    out["step beyond its forward pass, to the heatmap drawn (s)"] = heatmap
    out["step click to its charts drawn (s)"] = drawn
    out["step beyond its forward pass, to every chart drawn (s)"] = drawn_beyond


def app_timings(url: str, page: Any, *, only_steps: bool = False) -> dict[str, Any]:
    """Every interaction of the brief, on a fresh server at `url`; seconds (lists: repeats)."""
    out: dict[str, Any] = Report()
    open_app(page, url, "run")  # the model loads here, not inside a Learn timing
    if only_steps:
        step_timings(url, page, out, steps=9)
        return out
    started = time.perf_counter()
    open_app(page, f"{url}/learn", "chapter")
    out["learn chapter 1 first visit (page load)"] = time.perf_counter() - started
    chapters = []
    for _ in range(4):
        chapters.append(timed(page, click(page, "learn_next")))
    out["learn chapters 2-5 first visit"] = chapters
    open_app(page, f"{url}/?gen=128&rule=threshold", "run")
    runs = [timed(page, click(page, "run"), HEATMAP)]
    runs += [timed(page, click(page, "run")) for _ in range(2)]  # the heatmap is there: the rerun's end
    out["run to heatmap, threshold gen 128 (first, then warm)"] = runs
    out["run to heatmap, a new visitor (fresh browser context, nothing cached)"] = [
        first_visit_run(page.context.browser, url) for _ in range(3)]
    step_timings(url, page, out)
    open_app(page, f"{url}/compare?cmp_n=4", "cmp_run")
    # The per-policy heatmaps are on the first screen; the series chart below the fold draws once scrolled to.
    out["compare one prompt, 4 policies + dense, gen 64 (to the rerun's end)"] = [
        timed(page, click(page, "cmp_run")) for _ in range(2)]
    open_app(page, f"{url}/tune", "tune_record")
    # Tune's charts lie below the fold, where live charts draw only once scrolled to: to the rerun's end.
    out["tune record dense, gen 64 (to the rerun's end)"] = timed(page, click(page, "tune_record"))
    thumb = page.locator(".st-key-tune_threshold input[type='range']").first
    moves, redrawn = [], []
    for key in ["ArrowLeft"] * 3 + ["ArrowRight"] * 3:
        thumb.focus()
        moves.append(timed(page, lambda key=key: thumb.press(key)))
        redrawn.append(drawn_after(page))
    out["tune slider move to redraw"] = moves
    out["tune slider move to its charts drawn (0: none redrawn)"] = redrawn
    return out


def app_bench(threads: int | None, *, only_steps: bool = False) -> None:
    """Serve the app on the bundled model (fresh server) and print every timing."""
    from conftest import serve_app

    env = {**os.environ, "DLLM_VIZ_MODEL": "tiny", "DLLM_VIZ_TRACE_DIR": tempfile.mkdtemp()}
    env.pop("OMP_NUM_THREADS", None)  # the app's own policy decides, as for a user
    if threads is not None:
        env["DLLM_VIZ_THREADS"] = str(threads)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(f"threads: {threads if threads is not None else 'app policy (1 for the bundled model)'}")
    with serve_app(env, "render-bench-app.log") as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.add_init_script(f"({MESSAGES})()")
        page.set_default_timeout(60_000)
        app_timings(url, page, only_steps=only_steps)
        browser.close()
    print(f"uptime: {os.popen('uptime').read().strip()}")


def thread_probe(rounds: int = 2, passes: int = 15) -> None:
    """Median and max ms of a bundled-model pass on a gen-128 canvas with 1 and 2 intra-op threads, alternated."""
    import torch

    from dllm_viz import load

    adapter = load("tiny", device="cpu")
    prompt = adapter.encode_prompt("Tom has 12 apples. He buys 7 more. How many apples does he have now?")
    canvas = torch.tensor(prompt + [adapter.info.mask_token_id] * 128)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    for threads in (1, 2) * rounds:
        torch.set_num_threads(threads)
        adapter.logits(canvas)  # warm-up
        times = []
        for _ in range(passes):
            started = time.perf_counter()
            adapter.logits(canvas)
            times.append(1000 * (time.perf_counter() - started))
        print(f"{threads} thread(s): median {statistics.median(times):.1f} ms, max {max(times):.1f} ms", flush=True)


def figure_builds(repeats: int = 9) -> None:
    """Median ms of each figure a Decode Step builds (and its JSON), on a threshold decode at gen 128."""
    import torch

    from dllm_viz import decode, figures, load
    from dllm_viz.config import DecodeConfig
    from dllm_viz.policies import FixedBlocks, Pipeline, ThresholdPolicy

    torch.set_num_threads(1)
    adapter = load("tiny", device="cpu")
    prompt = adapter.encode_prompt("Tom has 12 apples. He buys 7 more. How many apples does he have now?")
    trace = decode(adapter, prompt, Pipeline(ThresholdPolicy(0.9), FixedBlocks(32)), DecodeConfig(gen_length=128))
    builders = {"confidence heatmap": lambda: figures.confidence_heatmap(trace),
                "per-step summary": lambda: figures.step_summary_strip(trace),
                **{f"view: {view.name}": (lambda view=view: view.build(trace)) for view in figures.views_for(trace)}}
    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(f"trace: {trace.num_steps} steps x {trace.gen_length} positions ({trace.meta.label})")
    for name, build in builders.items():
        times, fig = [], build()
        for _ in range(repeats):
            started = time.perf_counter()
            fig = build()
            times.append(1000 * (time.perf_counter() - started))
        started = time.perf_counter()
        fig.to_json()
        print(f"{name}: build median {statistics.median(times):.1f} ms (max {max(times):.1f}), "
              f"JSON {1000 * (time.perf_counter() - started):.1f} ms", flush=True)


def main() -> None:
    """Heatmap render times, or with --app the app's interaction timings."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--app", action="store_true", help="time the app's interactions on the bundled model")
    parser.add_argument("--threads", type=int, default=None, help="DLLM_VIZ_THREADS for the app server")
    parser.add_argument("--thread-probe", action="store_true", help="time a model pass with 1 and 2 threads")
    parser.add_argument("--builds", action="store_true", help="time the figure builders of a Decode Step")
    parser.add_argument("--steps", action="store_true", help="with --app: time Decode Steps only (9 of them)")
    args = parser.parse_args()
    if args.thread_probe:
        thread_probe()
    elif args.builds:
        figure_builds()
    elif args.app:
        app_bench(args.threads, only_steps=args.steps)
    else:
        heatmaps()


if __name__ == "__main__":
    main()
