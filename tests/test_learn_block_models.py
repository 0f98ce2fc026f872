"""The Learn page's chapters 1-5 on a block-diffusion model, and unchanged on the bundled one.

A block-causal checkpoint (LLaDA2.x, SDAR, Fast-dLLM v2) is trained to decode over aligned blocks of
its own length; chapters 1-5 decoded their examples in fixed windows (one window of the whole canvas,
a slider of 4-32) on every model and linked the Decode page to those, windows such a model never
runs. Each test records the pipelines the page's examples decode with (the page looks up
`dllm_viz.engine.decode` and `Stepper.start` on every run, so a recorder patched in sees them; the
example cache is emptied first so nothing is served from another test's visit).

Small random checkpoints: dllm_viz.random_block_model's generic layout (block 8, and the odd lengths 5
and 128) and SDAR's (block 4).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import streamlit as st
from checkpoints import build_sdar
from streamlit.testing.v1 import AppTest
from test_app import dirs as dirs  # the fixture
from test_app import errors, open_app

from dllm_viz import engine
from dllm_viz.config import DecodeConfig
from dllm_viz.policies import Pipeline
from dllm_viz.policies.defaults import dense_baseline
from dllm_viz.random_block_model import SHAPE_TINY, build_random_block_model
from dllm_viz.stepper import Stepper

GEN = 64  # the chapters' canvas (pages/learn.py)
BLOCKS = {"random_block": 8, "sdar": 4, "block5": 5, "block128": 128}  # each checkpoint's own block length
CHAPTERS = ("1 Masking", "2 Confidence", "3 Remasking", "4 Blocks", "5 NFE")


@dataclass(frozen=True)
class Decoded:
    """One example decode the page started: its pipeline and canvas."""

    pipeline: Pipeline
    gen_length: int


@pytest.fixture(scope="module")
def models_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("learn_block_models")
    build_random_block_model(root / "random_block", SHAPE_TINY)
    build_sdar(root / "sdar", block_size=BLOCKS["sdar"])
    for name in ("block5", "block128"):
        build_random_block_model(root / name, dataclasses.replace(SHAPE_TINY, block_length=BLOCKS[name]))
    return root


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Decoded]]:
    """Every decode the Learn page starts from now on, in order (the example cache emptied first)."""
    seen: list[Decoded] = []
    run_to_end = engine.decode
    start = Stepper.start.__func__  # type: ignore[attr-defined]

    def record_decode(adapter: Any, prompt_ids: Any, pipeline: Pipeline, config: DecodeConfig,
                      *args: Any, **kwargs: Any) -> Any:
        seen.append(Decoded(pipeline, config.gen_length))
        return run_to_end(adapter, prompt_ids, pipeline, config, *args, **kwargs)

    def record_start(cls: type[Stepper], adapter: Any, prompt: Any, pipeline: Pipeline, config: DecodeConfig,
                     *args: Any, **kwargs: Any) -> Stepper:
        seen.append(Decoded(pipeline, config.gen_length))
        return start(cls, adapter, prompt, pipeline, config, *args, **kwargs)

    monkeypatch.setattr(engine, "decode", record_decode)
    monkeypatch.setattr(Stepper, "start", classmethod(record_start))
    st.cache_resource.clear()
    yield seen
    st.cache_resource.clear()  # nothing decoded through the recorder outlives the test


def learn(chapter: str, model: str, monkeypatch: pytest.MonkeyPatch, decoded: list[Decoded]) -> AppTest:
    """The Learn page opened on `chapter` with `model` loaded; `decoded` then holds that chapter's decodes."""
    monkeypatch.setenv("DLLM_VIZ_MODEL", model)
    at = open_app("learn", {"chapter": chapter})
    assert at.session_state["chapter"] == chapter
    assert not at.exception and not errors(at), (at.exception, errors(at))
    return at


def links(at: AppTest) -> list[dict[str, str]]:
    """The query of every Try-it link on the page, one value per key."""
    return [{k: v[-1] for k, v in parse_qs(link.proto.query_string).items()} for link in at.get("page_link")
            if link.proto.label.startswith("Try it")]


def query_strings(at: AppTest) -> list[str]:
    return [link.proto.query_string for link in at.get("page_link") if link.proto.label.startswith("Try it")]


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def aligned(rule: str, block: int, **options: Any) -> Pipeline:
    return Pipeline.from_names(rule, "aligned", block_length=block, **options)


def block_model_pipelines(chapter: str, block: int, gen: int) -> list[Pipeline]:
    """What each chapter decodes on a block-causal model of block length `block` (`gen`: chapter 5's canvas)."""
    return {"1 Masking": [aligned("threshold", block)],
            "2 Confidence": [aligned("threshold", block)],
            "3 Remasking": [aligned("fixed_steps", block, steps=GEN // 2)],
            "4 Blocks": [dense_baseline(block, GEN)],
            "5 NFE": [dense_baseline(block, gen), aligned("threshold", block, threshold=0.9)]}[chapter]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_chapter_decodes_and_links_on_the_block_models_own_aligned_blocks(
        dirs: dict[str, Path], models_root: Path, monkeypatch: pytest.MonkeyPatch, decoded: list[Decoded],
        chapter: str) -> None:
    """Chapters 1-5 decoded one window of 64 (chapter 4: blocks of 8 from the prompt's end) on a model
    trained on aligned blocks of 8, and their links opened Decode on those windows."""
    block = BLOCKS["random_block"]
    at = learn(chapter, str(models_root / "random_block"), monkeypatch, decoded)
    gen = decoded[0].gen_length
    assert [d.pipeline for d in decoded] == block_model_pipelines(chapter, block, gen)
    assert all(d.pipeline.block.name == "aligned" and d.pipeline.block.block_length == block for d in decoded)
    (query,) = links(at)
    assert query["block"] == "aligned" and query["block_length"] == str(block), query
    assert query["gen"] == str(gen)
    note = captions(at)
    assert f"This model is block-diffusion with block length {block}" in note, note
    assert f"aligned blocks of {block}" in note, note


def test_the_blocks_chapter_says_the_block_length_is_the_models_and_offers_no_other(
        dirs: dict[str, Path], models_root: Path, monkeypatch: pytest.MonkeyPatch, decoded: list[Decoded]) -> None:
    """Chapter 4's slider offered lengths 4-32 to SDAR, which only ever decodes aligned blocks of 4."""
    block = BLOCKS["sdar"]
    at = learn("4 Blocks", str(models_root / "sdar"), monkeypatch, decoded)
    assert "learn_block" not in [getattr(w, "key", None) for w in at.main]
    assert [d.pipeline for d in decoded] == [dense_baseline(block, GEN)]
    assert "with block length 4, and that length is its own, not a setting" in captions(at)
    (query,) = links(at)
    assert query == {"gen": str(GEN), "rule": "fixed_steps", "block_length": str(block), "block": "aligned"}


@pytest.mark.parametrize(("model", "steps"), [("block5", 36), ("block128", 32)])
def test_remasking_keeps_a_step_budget_the_models_blocks_can_split(
        dirs: dict[str, Path], models_root: Path, monkeypatch: pytest.MonkeyPatch, decoded: list[Decoded],
        model: str, steps: int) -> None:
    """LLaDA's schedule splits the steps evenly over gen_length // block_length blocks: 32 steps do not
    split over a block-5 model's 12 (36, the nearest that does, keeps about 2 tokens a step); a block
    longer than the canvas is one block, which takes every step (the check divided by zero blocks)."""
    block = BLOCKS[model]
    at = learn("3 Remasking", str(models_root / model), monkeypatch, decoded)
    assert [d.pipeline for d in decoded] == [aligned("fixed_steps", block, steps=steps)]
    (query,) = links(at)
    assert query.get("steps") == str(steps), query
    assert query["block"] == "aligned" and query["block_length"] == str(block), query
    assert f"The budget is still {steps} steps for {GEN} positions" in captions(at)


def test_on_the_bundled_model_chapters_1_to_5_decode_and_link_as_before(
        dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, decoded: list[Decoded]) -> None:
    """The bidirectional model keeps its fixed windows, texts and links; no block-model note is shown."""
    at = learn("1 Masking", "tiny", monkeypatch, decoded)
    # Chapters 1 and 2 decode one window of 64; their links opened Decode on its blocks of 32 until session 35.
    fixed = {"1 Masking": ([Pipeline.from_names("threshold", block_length=GEN)],
                           ["gen=64&rule=threshold&block_length=64"]),
             "2 Confidence": ([Pipeline.from_names("threshold", block_length=GEN)],
                              ["gen=64&rule=threshold&block_length=64"]),
             "3 Remasking": ([Pipeline.from_names("fixed_steps", steps=GEN // 2, block_length=GEN)],
                             ["gen=64&rule=fixed_steps&steps=32&block_length=64"]),
             "4 Blocks": ([Pipeline.dense(8)], ["gen=64&rule=fixed_steps&block_length=8"])}
    for chapter, (pipelines, queries) in fixed.items():
        if chapter != "1 Masking":
            decoded.clear()
            at.session_state["chapter"] = chapter
            at.run()
        assert not at.exception and not errors(at), chapter
        assert [d.pipeline for d in decoded] == pipelines, chapter
        assert query_strings(at) == queries, chapter
        assert "block-diffusion" not in captions(at), chapter
    at.select_slider(key="learn_block").set_value(16)
    decoded.clear()
    at.run()
    assert [d.pipeline for d in decoded] == [Pipeline.dense(16)]
    assert query_strings(at) == ["gen=64&rule=fixed_steps&block_length=16"]
    decoded.clear()
    at.session_state["chapter"] = "5 NFE"
    at.run()
    assert not at.exception and not errors(at)
    gen = decoded[0].gen_length
    assert gen % 32 == 0 and gen >= GEN
    assert [d.pipeline for d in decoded] == [Pipeline.dense(gen),
                                             Pipeline.from_names("threshold", threshold=0.9, block_length=gen)]
    sample = at.selectbox(key="learn_example").value
    assert query_strings(at) == [f"gen={gen}&rule=threshold&threshold=0.9&block_length={gen}&sample={sample}"]
    assert "block-diffusion" not in captions(at)
