"""Browser end-to-end fixtures: a real `streamlit run app.py` server and headless Debian Chromium.

The server runs on a free local port with DLLM_VIZ_MODEL pointing at a small random
checkpoint; Playwright drives the system Chromium (`apt-get install chromium`), never a
downloaded browser. Screenshots and downloads go to test-artifacts/e2e/ (gitignored).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
BOOT_SECONDS = 60


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the browser tests, saying why, where the system Chromium is not installed."""
    if CHROMIUM.is_file():
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} not found: install it with `apt-get install -y chromium` "
                                   "(CI's .ci/run does)")
    for item in items:
        if "e2e" in Path(str(item.fspath)).parts:
            item.add_marker(skip)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + BOOT_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with status {proc.returncode} before it was healthy")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().decode() == "ok":
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"streamlit did not answer {url}/_stcore/health within {BOOT_SECONDS} s")


@pytest.fixture(scope="session")
def app_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Empty trace and controller directories for the server."""
    base = tmp_path_factory.mktemp("e2e")
    return {"traces": base / "traces", "controllers": base / "controllers"}


@contextmanager
def serve_app(env: dict[str, str], log_name: str = "streamlit.log", script: str = "app.py") -> Iterator[str]:
    """A fresh `streamlit run <script>` (app.py) on a free local port, run from the repository root
    (its .streamlit/config.toml applies); yields its URL, stops it after."""
    port = _free_port()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = (ARTIFACTS / log_name).open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def app_env(tiny_dir: Path, app_dirs: dict[str, Path]) -> dict[str, str]:
    """The server's environment: the small random checkpoint and empty trace/controller dirs."""
    return {**os.environ, "DLLM_VIZ_MODEL": str(tiny_dir), "DLLM_VIZ_TRACE_DIR": str(app_dirs["traces"]),
            "DLLM_VIZ_CONTROLLER_DIR": str(app_dirs["controllers"]), "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="session")
def app_url(app_env: dict[str, str]) -> Iterator[str]:
    """URL of a running `streamlit run app.py` on the random tiny checkpoint."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} not found")
    with serve_app(app_env) as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Headless Debian Chromium through Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    """A fresh browser tab (1400x1000, downloads allowed)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)  # type: ignore[attr-defined]
    page = context.new_page()
    page.set_default_timeout(30_000)
    from playwright.sync_api import expect

    # expect() assertions have their own 5 s default; a cold first run (torch import, model
    # load) on a busy 2-core machine can take longer than that.
    expect.set_options(timeout=30_000)
    yield page
    context.close()
