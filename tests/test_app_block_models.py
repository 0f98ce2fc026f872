"""The app walked on each block-diffusion family, as a researcher would: decode, compare, tune, fork,
learn, and switch between a bidirectional model and a block-causal one in one session.

Small random checkpoints in each family's published layout (tests/checkpoints.py: LLaDA2.x MoE,
SDAR, Fast-dLLM v2; dllm_viz.random_block_model's generic layout) sit in one models folder; the
app starts on the random bidirectional model of test_app.py and the sidebar switches, as a user
would. SDAR, LLaDA2 and Fast-dLLM v2 keep their random output layers, so their confidences stay
near 1 / vocabulary: every rule commits about one position a pass, which is where the padding of
aligned blocks shows.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from checkpoints import build_fast_dllm_v2, build_llada2, build_sdar
from test_app import click, errors, open_app, panel, widget
from test_app import dirs as dirs  # the fixture

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models import ModelAdapter, load
from dllm_viz.policies import Pipeline
from dllm_viz.random_block_model import SHAPE_TINY, build_random_block_model

PROMPT = "What is 3 + 4?"  # 14 tokens with the character tokenizers: aligned blocks pad the canvas


@pytest.fixture(scope="module")
def models_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One checkpoint of each block family: llada2 (block 32), sdar (4), fast_dllm_v2 (8), random_block (8)."""
    root = tmp_path_factory.mktemp("block_models")
    build_llada2(root / "llada2")
    build_sdar(root / "sdar", block_size=4)
    build_fast_dllm_v2(root / "fast_dllm_v2", bd_size=8)
    build_random_block_model(root / "random_block", SHAPE_TINY)
    return root


@pytest.fixture(scope="module")
def adapters(models_root: Path) -> dict[str, ModelAdapter]:
    return {name: load(str(models_root / name), device="cpu") for name in ("llada2", "sdar", "fast_dllm_v2")}


@pytest.fixture
def block_app(dirs: dict[str, Path], models_root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("DLLM_VIZ_MODELS_DIR", str(models_root))
    return dirs


def choose(at, name: str):  # type: ignore[no-untyped-def]
    """Type `name` into the sidebar's model box, as a user switches models."""
    at.sidebar.text_input(key="model").set_value(name).run()
    assert not at.exception, at.exception
    return at


def captions(at) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(c.value for c in [*at.caption, *at.sidebar.caption])


def infos(at) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(i.value for i in at.info)


@pytest.mark.parametrize("rule", ["threshold", "cora", "fixed_steps"])
@pytest.mark.parametrize("model", ["llada2", "sdar", "fast_dllm_v2"])
def test_a_rule_that_commits_every_pass_finishes_over_aligned_blocks(adapters: dict[str, ModelAdapter], model: str,
                                                                      rule: str) -> None:
    """The step cap was gen_length, but aligned blocks pad the canvas with masks a rule must commit
    too: one token a pass stopped at max_steps with answer positions still masked (SDAR 2, LLaDA2 8)."""
    adapter = adapters[model]
    pipeline = Pipeline.from_names(rule, "aligned", block_length=adapter.info.block_length)
    trace = decode(adapter, adapter.encode_prompt(PROMPT), pipeline, DecodeConfig(gen_length=32))
    assert trace.meta.stop_reason == "complete" and trace.is_complete
    padding = pipeline.block.canvas_padding(len(trace.prompt_ids), 32)
    assert padding > 0 and trace.nfe <= 32 + padding


def test_compare_on_a_block_model_measures_every_run_against_dense_on_its_own_blocks(
        block_app: dict[str, Path]) -> None:
    """Dense decoded fixed windows of 32 across SDAR's blocks of 4, and CORA stopped at the step cap
    with masks left while its NFE read '1.00x fewer than dense'."""
    at = choose(open_app("compare", {"cmp_gen": "32"}), "sdar")
    assert "dense commits one token a pass over aligned blocks of 4" in captions(at)
    results = click(at, "cmp_run").session_state["cmp_results"]
    assert not errors(at), errors(at)
    dense = results[0]
    assert dense.meta.pipeline["rule"]["name"] == "fixed_steps"
    assert [t.meta.pipeline["block"] for t in results] == [{"name": "aligned", "block_length": 4}] * 3
    assert [t.meta.stop_reason for t in results] == ["complete"] * 3
    # a random model's output has no space to break at: it ran across the next columns at 1024 px
    outputs = [h.proto.body for h in at.get("html") if "font-family:monospace" in h.proto.body]
    assert len(outputs) == 2 and all("overflow-wrap:anywhere" in body for body in outputs)
    at.segmented_control(key="cmp_mode").set_value("a prompt set").run()
    at.number_input(key="cmp_count").set_value(1).run()
    rows = click(at, "cmp_bench_run").session_state["cmp_bench"]
    assert rows[0]["config"] == "dense" and all(r["complete"] for r in rows), rows
    assert "('dense', 'aligned4+fixed_steps')" in at.session_state["cmp_bench_plan"]


def test_tune_on_a_block_model_says_why_block_refinement_is_not_offered_and_runs_on_its_blocks(
        block_app: dict[str, Path]) -> None:
    at = choose(open_app("tune", {"tune_gen": "32"}), "sdar")
    assert "block_refinement" not in widget(at, "tune_rule").options
    assert "Not offered here: block_refinement draws its own candidates over each block" in captions(at)
    assert at.number_input(key="tune_block").value == 4
    dense = click(at, "tune_record").session_state["tune_dense"]
    assert dense.meta.pipeline["block"] == {"name": "aligned", "block_length": 4} and dense.is_complete
    click(at, "tune_verify")
    assert any(m.value.startswith("**Real run:**") for m in at.markdown) and not errors(at)
    at.segmented_control(key="tune_mode").set_value("sweep").run()
    at.number_input(key="tune_n").set_value(1).run()
    click(at, "tune_sweep")
    plan = at.session_state["tune_rows_plan"]
    assert "('dense', 'aligned4+fixed_steps')" in plan and "aligned4+threshold0.5" in plan
    linked = open_app("tune", {"tune_rule": "block_refinement"})  # a link asking for it says why, not only "one of"
    warning = " ".join(w.value for w in linked.warning)
    assert "tune_rule='block_refinement' (block_refinement draws its own candidates" in warning
    assert "Decode page, or Compare" in warning


def test_learn_shows_block_diffusion_on_the_models_own_block_length(block_app: dict[str, Path]) -> None:
    """Chapter 6 decoded aligned blocks of 32 on every model and said the exact cache computes 'the block's 32'."""
    at = choose(open_app("learn", {"chapter": "6 Block diffusion"}), "sdar")
    assert "the example runs on aligned blocks of 4, its own" in captions(at)
    step_text = next(m.value for m in at.markdown if m.value.startswith("**Step "))
    assert "compute only the block's 4." in step_text
    link = next(lk for lk in at.get("page_link") if "block_refinement" in lk.proto.query_string)
    assert "block_length=4" in link.proto.query_string


def test_switching_back_to_a_bidirectional_model_restores_its_own_block_length(block_app: dict[str, Path]) -> None:
    """tiny -> SDAR -> tiny left SDAR's block length 4 in the tiny model's form: the popped value let the
    URL-bound widget read the address bar's 4 again."""
    at = open_app(query={"gen": "32"})
    assert at.number_input(key="block_length").value == 32
    choose(at, "sdar")
    assert at.number_input(key="block_length").value == 4
    choose(at, os.environ["DLLM_VIZ_MODEL"])
    assert at.session_state["block"] == "fixed" and at.number_input(key="block_length").value == 32
    compare = open_app("compare", {"cmp_gen": "32"})
    choose(choose(compare, "fast_dllm_v2"), os.environ["DLLM_VIZ_MODEL"])
    assert [compare.number_input(key=f"c{i}_block_length").value for i in (1, 2)] == [32, 32]


def test_what_another_model_decoded_is_said_to_be_its(block_app: dict[str, Path]) -> None:
    """After a switch of the sidebar's model, each page kept the previous model's results on screen,
    labelled by policy only: Decode offered a fork that could only fail, Tune replayed the tiny
    model's ids through SDAR's tokenizer and Verify compared SDAR's run to tiny's dense."""
    at = click(open_app(query={"gen": "32", "block_length": "8"}), "run")
    choose(at, "sdar")
    notes = [n["text"] for n in panel(at)["notices"]]
    assert any(n.startswith("This decode was made with the model") and "not the loaded '<models folder>/sdar'" in n
               for n in notes), notes
    assert not [w for w in at.main if getattr(w, "key", None) == "fork_run"]
    at.switch_page("pages/compare.py").run()
    click(at, "cmp_run")
    choose(at, os.environ["DLLM_VIZ_MODEL"])
    assert "These runs were decoded with the model '<models folder>/sdar'" in infos(at)
    at.switch_page("pages/tune.py").run()
    click(at, "tune_record")
    choose(at, "sdar")
    assert "The recorded dense trace was decoded with the model" in infos(at)
    assert not [w for w in at.main if getattr(w, "key", None) == "tune_verify"]


def test_fork_of_a_block_decode_keeps_its_aligned_blocks_and_offers_block_refinement(
        block_app: dict[str, Path]) -> None:
    at = click(choose(open_app(query={"gen": "32"}), "random_block"), "run")
    trace = at.session_state["trace"]
    assert trace.meta.pipeline["block"] == {"name": "aligned", "block_length": 8} and trace.edited.any()
    at.number_input(key="fork_step").set_value(3).run()
    at.selectbox(key="fork_rule").set_value("threshold").run()
    click(at, "fork_run")
    fork = at.session_state["fork_result"][1].fork
    assert not errors(at) and fork.meta.pipeline["block"] == {"name": "aligned", "block_length": 8}
    assert "block_refinement" in widget(at, "fork_rule").options
    at.selectbox(key="fork_rule").set_value("block_refinement").run()
    at.slider(key="fork_threshold").set_value(0.3).run()
    click(at, "fork_run")
    fork = at.session_state["fork_result"][1].fork
    rule = fork.meta.pipeline["rule"]
    assert not errors(at) and rule["name"] == "block_refinement" and rule["commit_threshold"] == 0.3
    assert rule["editing_threshold"] == trace.meta.pipeline["rule"]["editing_threshold"]  # the recorded rest
    assert fork.meta.pipeline["block"] == {"name": "aligned", "block_length": 8}


def test_a_block_refinement_decode_without_edits_says_why_its_passes_exceed_the_canvas(
        block_app: dict[str, Path]) -> None:
    """SDAR's random confidences never clear the editing threshold: NFE 43 for 32 positions and no word
    on what the 11 extra passes were."""
    at = click(choose(open_app(query={"gen": "32"}), "sdar"), "run")
    trace = at.session_state["trace"]
    assert not trace.edited.any() and trace.summary()["post_steps"] > 0
    note = panel(at)["trace"]["edits"]
    assert note.startswith("Block refinement edited no committed token (no committed token's candidate changed "
                           "with confidence above editing_threshold 0.5)")
    assert f"its {trace.summary()['post_steps']:.0f} post-steps" in note
