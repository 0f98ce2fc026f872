"""What a web user can reach: only the app's model, trace and controller folders, and no server paths.

Drives the app with AppTest (the same fixtures as test_app.py) and tries the paths issue 20 found
open: any server path as the model, as the trace folder (then save and delete there) and as the
controller weights, typed or in a shared link.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_app import FAST, click, errors, open_app
from test_app import dirs as dirs  # the fixture


def shown(at, typed: str = "") -> str:  # type: ignore[no-untyped-def]
    """The text the page sent (errors, successes, markdown, captions, subheaders), less the user's own input."""
    parts = [e.value for e in at.error] + [s.value for s in at.success] + [m.value for m in at.markdown]
    parts += [c.value for c in at.caption] + [s.value for s in at.subheader]
    return "\n".join(parts).replace(repr(typed), "")


def test_a_model_outside_the_models_folder_is_refused(dirs: dict[str, Path], tmp_path: Path) -> None:
    at = open_app()
    for typed in ("/etc", "../../..", "someone/not-downloaded"):
        at.sidebar.text_input(key="model").set_value(typed).run()
        assert not at.exception
        assert any("Could not load the model" in e for e in errors(at)), typed
        assert str(tmp_path) not in shown(at, typed) and str(Path.home()) + "/" not in shown(at, typed), shown(at)
        assert at.button(key="run").disabled


def test_the_trace_folder_stays_inside_the_library(dirs: dict[str, Path], tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    at = click(open_app(query=FAST), "run")
    at.switch_page("pages/traces.py").run()
    at.text_input(key="traces_dir").set_value(str(outside)).run()
    assert any("outside the app's trace library" in e for e in errors(at)), errors(at)
    at.text_input(key="traces_name").set_value("mine").run()
    click(at, "traces_save")
    assert not list(outside.iterdir()) and (dirs["traces"] / "mine.npz").is_file()
    assert str(tmp_path) not in shown(at, str(outside)), shown(at, str(outside))
    (dirs["traces"] / "sub").mkdir()
    at.text_input(key="traces_dir").set_value("sub").run()
    click(at, "traces_save")
    assert (dirs["traces"] / "sub" / "mine.npz").is_file()
    assert "Library: 1 trace in sub" in shown(at) and str(tmp_path) not in shown(at), shown(at)


@pytest.mark.parametrize("weights", ["/etc/passwd", "../../outside.safetensors", "none.safetensors"])
def test_controller_weights_from_a_shared_link_stay_in_the_controller_folder(dirs: dict[str, Path], tmp_path: Path,
                                                                            weights: str) -> None:
    at = click(open_app(query={**FAST, "rule": "tspd", "controller_weights": weights}), "run")
    assert any("controller weights" in e for e in errors(at)), errors(at)
    assert "trace" not in at.session_state
    assert str(tmp_path) not in shown(at, weights), shown(at, weights)


def test_the_server_listens_on_localhost_by_default() -> None:
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "localhost"


def test_code_scoring_without_bwrap_refuses_in_the_app(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from dllm_viz.tasks import bwrap, sandbox

    monkeypatch.setattr(bwrap, "BWRAP", "dllm-viz-no-such-bwrap")
    sandbox.unavailable_reason.cache_clear()
    try:
        at = open_app("compare", {"cmp_mode": "a prompt set", "cmp_task": "code", "cmp_gen": "16", "cmp_count": "1",
                                  "c1_block_length": "16", "c2_block_length": "16"})
        click(at, "cmp_bench_run")
        assert any("bubblewrap" in e and "apt-get install bubblewrap" in e for e in errors(at)), errors(at)
        assert "unsafe" not in "".join(errors(at))  # the app never offers the unsandboxed fallback
        assert "cmp_bench" not in at.session_state  # nothing was decoded or scored
    finally:
        sandbox.unavailable_reason.cache_clear()


def test_code_scored_without_a_memory_cgroup_says_the_bound_is_per_process(
        dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from dllm_viz.tasks import memory_cgroup

    monkeypatch.setattr(memory_cgroup, "_layout", lambda: "this machine has no memory cgroup controller mounted")
    at = open_app("compare", {"cmp_mode": "a prompt set", "cmp_task": "code", "cmp_gen": "16", "cmp_count": "1",
                              "c1_block_length": "16", "c2_block_length": "16"})
    click(at, "cmp_bench_run")
    notes = [c.value for c in at.caption if "Scored code is held to" in c.value]
    assert notes and "1 GiB per process only" in notes[0] and "no memory cgroup controller" in notes[0], notes
    assert not errors(at)
