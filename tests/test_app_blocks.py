"""Block-diffusion models in the app: chosen in the sidebar, decoded with their own defaults.

A small random block-causal checkpoint (a Llama config with block_size 4, tests/checkpoints.py)
sits in a temporary models folder; the app starts on the random bidirectional model of
test_app.py and the sidebar switches to it, as a user would.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from checkpoints import build_block_llama
from test_app import click, errors, open_app, widget
from test_app import dirs as dirs  # the fixture

from app_ui.common import share_query
from dllm_viz.cache_modes import PASS_KINDS
from dllm_viz.policies import RULES
from dllm_viz.policies.knobs import knobs

GEN = {"gen": "16", "sample": "arith-1"}  # a prompt on which LLaDA2's default editing edits this random model


@pytest.fixture(scope="module")
def models_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder holding one block-causal checkpoint, `block` (block length 4)."""
    root = tmp_path_factory.mktemp("models")
    build_block_llama(root / "block", block_length=4, head_scale=60.0)
    return root


@pytest.fixture
def block_app(dirs: dict[str, Path], models_root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("DLLM_VIZ_MODELS_DIR", str(models_root))
    return dirs


def choose_block_model(at):  # type: ignore[no-untyped-def]
    at.sidebar.text_input(key="model").set_value("block").run()
    assert not at.exception, at.exception
    return at


def captions(at) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(c.value for c in at.sidebar.caption) + "\n" + "\n".join(c.value for c in at.caption)


def test_a_block_model_from_the_models_folder_decodes_with_its_defaults(block_app: dict[str, Path]) -> None:
    at = open_app(query=GEN)
    assert at.session_state["rule"] == "threshold" and at.session_state["block"] == "fixed"
    choose_block_model(at)
    assert "block-causal attention, block length 4" in captions(at)
    assert at.session_state["rule"] == "block_refinement" and at.session_state["block"] == "aligned"
    assert at.number_input(key="block_length").value == 4
    assert "adablock" not in widget(at, "block").options
    assert "exact" in widget(at, "cache").options and not {"prefix", "dual"} & set(widget(at, "cache").options)
    assert "adablock" in captions(at) and "Not offered" in captions(at)
    for spec in knobs(RULES["block_refinement"]):  # every knob of the rule has its widget, from knobs.py
        assert widget(at, spec.name) is not None, spec.name
    trace = click(at, "run").session_state["trace"]
    assert not errors(at), errors(at)
    assert trace.meta.model.attention == "block_causal" and trace.meta.model.block_length == 4
    assert trace.meta.pipeline["rule"]["name"] == "block_refinement"
    assert trace.meta.pipeline["block"] == {"name": "aligned", "block_length": 4}
    assert trace.edited.any()  # LLaDA2's default editing threshold edits on this model

    at.session_state["block"] = "fixed"
    at.run()
    at.number_input(key="block_length").set_value(8).run()
    at.sidebar.text_input(key="model").set_value("no-such-model").run()  # a typo keeps the form as it was
    at.sidebar.text_input(key="model").set_value("block").run()
    assert at.session_state["block"] == "fixed" and at.number_input(key="block_length").value == 8
    at.sidebar.text_input(key="model").set_value(os.environ["DLLM_VIZ_MODEL"]).run()  # back to a bidirectional one
    assert at.session_state["rule"] == "threshold" and at.session_state["block"] == "fixed"
    assert "cache" not in at.session_state or at.session_state["cache"] in widget(at, "cache").options


def test_family_calibrated_knobs_follow_the_loaded_models_family(block_app: dict[str, Path]) -> None:
    """CORA's delta_p / m and AdaBlock's tau_D start at the loaded family's point (the tiny family's
    calibrated one on the bidirectional model) and move to the published values on a model whose
    family states none (a block-diffusion checkpoint), and back."""
    from dllm_viz.models.families import calibrated_points

    tiny = calibrated_points("tiny")
    start = open_app(query={**GEN, "rule": "cora"})
    assert widget(start, "delta_p").value == tiny["cora"]["delta_p"]
    assert start.number_input(key="m").value == tiny["cora"]["m"]
    at = choose_block_model(start)
    assert (at.session_state["delta_p"], at.session_state["m"], at.session_state["delimiter_threshold"]) == (
        0.97, 2, 0.3)  # no row for block diffusion: the papers' values
    at.sidebar.text_input(key="model").set_value(os.environ["DLLM_VIZ_MODEL"]).run()
    at.session_state["rule"] = "cora"
    at.run()
    assert widget(at, "delta_p").value == tiny["cora"]["delta_p"]
    assert at.number_input(key="m").value == tiny["cora"]["m"]


def test_the_block_refinement_widgets_change_the_pipeline(block_app: dict[str, Path]) -> None:
    at = choose_block_model(open_app(query=GEN))
    at.number_input(key="editing_threshold").set_value(0.0).run()
    at.number_input(key="block_steps").set_value(2).run()
    plain = click(at, "run").session_state["trace"]
    rule = plain.meta.pipeline["rule"]
    assert rule["editing_threshold"] == 0.0 and rule["block_steps"] == 2
    assert not plain.edited.any()  # editing off: no token is replaced after its commit
    at.session_state["cache"] = "exact"
    at.run()
    cached = click(at, "run").session_state["trace"]
    assert cached.meta.pipeline["cache"] == "exact" and not errors(at)
    assert "exact_cached" in {PASS_KINDS[int(k)] for k in cached.pass_kind}
    np.testing.assert_array_equal(cached.tokens, plain.tokens)  # the exact cache changes no token
    assert cached.query_len.sum() < plain.query_len.sum()


def test_a_shared_link_carries_the_block_settings(block_app: dict[str, Path], models_root: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLLM_VIZ_MODEL", str(models_root / "block"))  # the model the app was started with
    at = open_app(query=GEN)
    at.session_state["cache"] = "exact"
    at.session_state["eos"] = True
    at.run()
    assert at.session_state["stop_rule"] == "eos_first"  # LLaDA2's stop, first for a block model
    at.number_input(key="commit_threshold").set_value(0.5).run()
    trace = click(at, "run").session_state["trace"]
    query = share_query(trace)
    assert {"rule": "block_refinement", "block": "aligned", "cache": "exact", "stop_rule": "eos_first",
            "block_length": "4", "commit_threshold": "0.5"}.items() <= query.items()
    again = click(open_app(query=query), "run")
    assert again.session_state["trace"].meta.pipeline == trace.meta.pipeline


def test_a_link_asking_a_block_model_for_adablock_says_why_not(block_app: dict[str, Path]) -> None:
    at = choose_block_model(open_app(query={**GEN, "block": "adablock", "cache": "dual"}))
    warnings = " ".join(w.value for w in at.warning)
    assert "block=adablock is not available for this model" in warnings and "cache=dual" in warnings
    assert at.session_state["block"] in widget(at, "block").options


def test_the_learn_chapter_on_block_diffusion_shows_the_edits_of_a_live_trace(
        block_app: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLLM_VIZ_MODEL", "tiny")  # the bundled model: its confident guesses do get edited
    at = open_app("learn", {"chapter": "6 Block diffusion"})
    shown = {m.label: m.value for m in at.metric}
    edits = int(shown["Token edits"])
    assert edits > 0 and int(shown["Post-steps"]) > 0
    table = at.dataframe[0].value
    assert len(table) == edits and (table["from"] != table["to"]).all()
    first = int(table["step"].iloc[0])
    assert at.slider(key="learn_edit_step").value == first  # the slider opens on the first edit
    step_text = next(m.value for m in at.markdown if m.value.startswith(f"**Step {first}**"))
    assert f"position {int(table['position'].iloc[0])} {table['from'].iloc[0]!r} → {table['to'].iloc[0]!r}" in step_text
    assert "a block-causal model would feed only" in step_text
    assert any(m.value.startswith("**Edits, seen:**") for m in at.markdown)
    assert any(m.value.startswith("**Output, editing off** (NFE") for m in at.markdown)  # the contrast, side by side
    link = next(lk for lk in at.get("page_link") if "block_refinement" in lk.proto.query_string)
    assert "block=aligned" in link.proto.query_string and "gen=64" in link.proto.query_string
    assert "sample=arith-5" in link.proto.query_string  # the Decode page opens on the chapter's own example
    at.toggle(key="learn_editing").set_value(False).run()  # editing off: the same rule commits only
    assert not at.exception and {m.label: m.value for m in at.metric}["Token edits"] == "0"
    assert not any(m.value.startswith("**Edits, seen:**") for m in at.markdown)


def test_tune_offers_only_rules_it_can_replay(block_app: dict[str, Path]) -> None:
    at = open_app("tune", {"tune_gen": "16", "tune_block": "16", "tune_rule": "block_refinement"})
    assert "block_refinement" not in widget(at, "tune_rule").options  # it draws its own candidates
    assert at.session_state["tune_rule"] == "threshold" and not at.exception


def test_compare_on_a_block_model_starts_every_slot_on_its_blocks(block_app: dict[str, Path], models_root: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLLM_VIZ_MODEL", str(models_root / "block"))
    at = open_app("compare", {"cmp_gen": "16"})
    assert at.session_state["c1_rule"] == "block_refinement" and at.session_state["c2_rule"] == "cora"
    assert at.session_state["c1_block"] == at.session_state["c2_block"] == "aligned"
    results = click(at, "cmp_run").session_state["cmp_results"]
    assert not errors(at), errors(at)
    assert [t.meta.pipeline["block"] for t in results[1:]] == [{"name": "aligned", "block_length": 4}] * 2


def test_a_link_with_bad_block_settings_names_each_dropped_value(block_app: dict[str, Path]) -> None:
    at = open_app(query={**GEN, "rule": "block_refinement", "stop_rule": "nope", "block_steps": "0",
                         "editing_threshold": "2", "top_p": "0.9", "eos": "true"})
    text = " ".join(w.value for w in at.warning)
    assert "stop_rule='nope' (one of eos, eos_first)" in text
    assert "block_steps='0'" in text and "editing_threshold='2'" in text and "top_p" not in text
    assert at.session_state["rule"] == "block_refinement" and at.number_input(key="top_p").value == 0.9


def test_the_sidebar_temperature_makes_top_k_and_top_p_count(block_app: dict[str, Path]) -> None:
    at = choose_block_model(open_app(query=GEN))
    greedy = click(at, "run").session_state["trace"]
    at.sidebar.number_input(key="temperature").set_value(1.0).run()
    sampled = click(at, "run").session_state["trace"]
    at.number_input(key="top_k").set_value(1).run()
    top1 = click(at, "run").session_state["trace"]
    assert sampled.meta.decode_config.temperature == 1.0 and top1.meta.pipeline["rule"]["top_k"] == 1
    assert not np.array_equal(sampled.tokens, greedy.tokens)  # drawn, not the argmax
    computed = np.isfinite(top1.confidence)
    assert computed.any() and (top1.confidence[computed] == 1.0).all()  # one token left to draw: probability 1
    assert (sampled.confidence[np.isfinite(sampled.confidence)] < 1.0).any()
    assert share_query(top1)["temperature"] == "1.0"


def test_tune_starts_on_a_block_models_own_block_length(block_app: dict[str, Path], models_root: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert open_app("tune", {"tune_gen": "64"}).number_input(key="tune_block").value == 32  # the tiny model
    monkeypatch.setenv("DLLM_VIZ_MODEL", str(models_root / "block"))
    at = open_app("tune", {"tune_gen": "64"})
    assert at.number_input(key="tune_block").value == 4
