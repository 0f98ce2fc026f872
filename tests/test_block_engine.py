"""Block diffusion in the one engine: what composes with it, what is refused, what a trace records.

Faithfulness to diffusers' LLaDA2Pipeline is tests/test_llada2_reference.py; here the existing
rules run on a block-causal model over aligned blocks, CE and the EOS stop compose with block
refinement, the combinations that cannot be exact are refused naming the fix, and a trace of
a padded, edited decode saves, loads and forks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from checkpoints import build_block_llama

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models import load
from dllm_viz.models.block_adapter import BlockDiffusionAdapter
from dllm_viz.policies import AlignedBlocks, BlockRefinementRule, Pipeline
from dllm_viz.trace import load_trace

BLOCK = 8
PROMPT = [10, 11, 12, 13, 14]


@pytest.fixture(scope="module")
def block_model(tmp_path_factory: pytest.TempPathFactory) -> BlockDiffusionAdapter:
    directory, _ = build_block_llama(tmp_path_factory.mktemp("block_engine") / "m", block_length=BLOCK,
                                     head_scale=60.0)
    adapter = load(str(directory), device="cpu", dtype="float32")
    assert isinstance(adapter, BlockDiffusionAdapter)
    return adapter


@pytest.mark.parametrize("rule", ["threshold", "fixed_steps", "cora", "factor"])
def test_the_masked_diffusion_rules_run_on_a_block_causal_model_and_the_exact_cache_agrees(
        block_model: BlockDiffusionAdapter, rule: str) -> None:
    traces = [decode(block_model, PROMPT, Pipeline.from_names(rule, "aligned", cache=cache, block_length=BLOCK),
                     DecodeConfig(gen_length=27))
              for cache in ("none", "exact")]
    plain, cached = traces
    assert plain.is_complete and plain.gen_length == 27  # padding (5 + 27 -> 40 rows) is not recorded
    assert plain.final_tokens.tolist() == cached.final_tokens.tolist() and plain.nfe == cached.nfe
    assert cached.query_len.sum() < plain.query_len.sum()
    # windows: [0, 3) (the prompt's block), then whole blocks, the last clipped to the answer
    assert sorted({tuple(w) for w in plain.window.tolist()}) == [(0, 3), (3, 11), (11, 19), (19, 27)]
    # prefix-only passes: nothing after the window is ever computed
    for s in range(plain.num_steps):
        assert np.isnan(plain.confidence[s, plain.window[s, 1]:]).all()


def test_ce_and_the_eos_stop_compose_with_block_refinement(block_model: BlockDiffusionAdapter) -> None:
    base = decode(block_model, PROMPT, Pipeline(rule=BlockRefinementRule(block_steps=4), block=AlignedBlocks(BLOCK)),
                  DecodeConfig(gen_length=24))
    assert base.edited.any()
    ce = decode(block_model, PROMPT, Pipeline.from_names("block_refinement", "aligned", "kalman", block_steps=16,
                                                         block_length=BLOCK, tau_ce=0.3),
                DecodeConfig(gen_length=24))
    assert ce.edited.any(), "the extrapolator keeps the rule's edits"
    names = ce.meta.reason_names
    assert "ce_lookahead" in {names[c] for c in ce.reason[ce.committed]}
    stopped = decode(block_model, PROMPT, Pipeline.from_names("block_refinement", "aligned", stop="eos",
                                                              block_steps=4, block_length=BLOCK, eos_confidence=0.0),
                     DecodeConfig(gen_length=24))
    assert stopped.meta.stop_reason in ("complete", "eos") and stopped.nfe <= base.nfe


@pytest.mark.parametrize(("options", "message"), [
    ({"rule": "threshold", "block": "adablock"}, "block='aligned'"),
    ({"rule": "threshold", "block": "fixed", "cache": "prefix"}, "cache='none' or 'exact'"),
    ({"rule": "block_refinement", "block": "adablock"}, "block='aligned'"),
])
def test_what_a_block_causal_model_cannot_run_is_refused_naming_the_fix(block_model: BlockDiffusionAdapter,
                                                                       options: dict, message: str) -> None:
    cache = options.pop("cache", "none")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        decode(block_model, PROMPT, Pipeline.from_names(**options, cache=cache, block_length=BLOCK),
               DecodeConfig(gen_length=16))


def test_the_exact_cache_block_sampling_and_variable_windows_are_refused_for_what_needs_them(tiny_adapter) -> None:
    prompt = tiny_adapter.encode_prompt("Tom has 3 apples.")
    with pytest.raises(ValueError, match="cache='exact' needs a block-causal model"):
        decode(tiny_adapter, prompt, Pipeline.from_names("threshold", cache="exact"), DecodeConfig(gen_length=32))
    with pytest.raises(ValueError, match="samples over whole blocks"):
        decode(tiny_adapter, prompt, Pipeline.from_names("block_refinement", "aligned", cache="dual"),
               DecodeConfig(gen_length=32))
    with pytest.raises(ValueError, match="needs windows of one fixed length"):
        decode(tiny_adapter, prompt, Pipeline.from_names("block_refinement", "adablock"), DecodeConfig(gen_length=32))


def test_block_refinement_on_a_bidirectional_model_pads_samples_and_records_edits(tiny_adapter, tmp_path: Path) -> None:
    """LLaDA2's geometry on a whole-canvas model: every pass sees the canvas, padding hidden."""
    prompt = tiny_adapter.encode_prompt("Tom has 3 apples. He buys 5 more.")
    pipeline = Pipeline(rule=BlockRefinementRule(block_steps=8, commit_threshold=0.5, editing_threshold=0.2),
                        block=AlignedBlocks(16))
    trace = decode(tiny_adapter, prompt, pipeline, DecodeConfig(gen_length=40, temperature=0.8, seed=1))
    assert trace.gen_length == 40
    first = trace.window[0].tolist()
    assert first == [0, 16 - len(prompt) % 16]
    loaded = load_trace(trace.save(tmp_path / "t.npz"))
    assert np.array_equal(loaded.edited, trace.edited) and np.array_equal(loaded.reason, trace.reason)
    names = trace.meta.reason_names
    assert all(names[c] == "edit" for c in trace.reason[trace.edited])
    # an edit changes a committed token: the canvas before it was filled and differs after it
    steps, positions = np.nonzero(trace.edited)
    assert (trace.tokens[steps, positions] != trace.meta.model.mask_token_id).all()
    assert (trace.tokens[steps, positions] != trace.tokens[steps + 1, positions]).all()
