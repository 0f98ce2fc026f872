"""AppTest of the Decode page on a small random checkpoint (no browser, no weights download)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def app(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("DLLM_VIZ_MODEL", str(tiny_dir))
    monkeypatch.chdir(ROOT)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def test_decode_page_runs_and_shows_matching_nfe(app: AppTest) -> None:
    app.session_state["gen"] = 32
    app.session_state["blk"] = 8
    app.run()
    app.button(key="run").click().run()
    assert not app.exception, app.exception
    trace = app.session_state["trace"]
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["NFE"] == str(trace.nfe)
    assert trace.gen_length == 32 and trace.meta["pipeline"]["block"]["block_length"] == 8
    chart = json.loads(app.get("plotly_chart")[0].proto.spec)
    assert chart["data"][0]["type"] == "heatmap"


def test_fixed_steps_setting_reaches_the_decoder(app: AppTest) -> None:
    app.session_state["gen"] = 32
    app.session_state["blk"] = 16
    app.session_state["rule"] = "fixed_steps"
    app.run()
    app.number_input(key="steps").set_value(16).run()
    app.button(key="run").click().run()
    assert not app.exception, app.exception
    trace = app.session_state["trace"]
    assert trace.nfe == 16 and trace.tokens_per_step.tolist() == [2] * 16


def test_bad_model_path_shows_an_error_and_the_page_survives(app: AppTest) -> None:
    app.sidebar.text_input(key="model").set_value("/no/such/model").run()
    assert not app.exception
    assert any("Could not load the model" in e.value for e in app.error)
