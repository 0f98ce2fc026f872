"""The LLaDA2Pipeline harness records sane steps, and our engine reproduces it token for token.

Two levels (issue #22): fed the pipeline's own candidates and confidences, `BlockRefinementRule`
makes the same commits and edits and ends every block on the same pass (`replay`); and the
engine (`decode` with `block_refinement` over `aligned` blocks on our block-diffusion adapter,
loaded by `load`) gives the same answer, NFE and per-pass commits and edits as the pipeline's
callback_on_step_end reports, on every setting and attention kind; its exact prefix cache
changes only the cost.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest
import torch
from checkpoints import build_block_llama
from llada2_reference import SETTINGS, AttentionWrapper, ReferenceRun, run_reference

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models import block_diffusion as bd
from dllm_viz.models import load
from dllm_viz.models.block_adapter import BlockDiffusionAdapter
from dllm_viz.policies.aligned_blocks import AlignedBlocks, AlignedCanvas
from dllm_viz.policies.block_refinement import (
    BlockInputs,
    BlockRefinementRule,
    RefinementState,
    eos_finishes,
)
from dllm_viz.policies.eos_stop import FirstEosStop
from dllm_viz.policies.pipeline import Pipeline

PROMPT = [10, 11, 12, 13, 14]  # 5 prompt tokens: the first block (B = 8) holds 3 generated positions
GEN, BLOCK, STEPS = 24, 8, 8


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, int, int, BlockDiffusionAdapter]:
    """The harness model: a peaky random block-causal Llama checkpoint, loaded by `load` as a user would."""
    directory, _ = build_block_llama(tmp_path_factory.mktemp("llada2_ref") / "m", block_length=BLOCK, head_scale=60.0)
    cfg = json.loads((Path(directory) / "config.json").read_text())
    spec = bd.detect(cfg)
    adapter = load(str(directory), device="cpu", dtype="float32")
    assert isinstance(adapter, BlockDiffusionAdapter) and adapter.info.block_length == BLOCK
    return adapter.model, int(spec.mask_token_id), int(cfg["eos_token_id"]), adapter


def reference(setup, attention: str, setting: str, seed: int = 0) -> ReferenceRun:
    model, mask_id, eos_id, _ = setup
    return run_reference(AttentionWrapper(model, attention, BLOCK), PROMPT, gen_length=GEN, block_length=BLOCK,
                         mask_token_id=mask_id, eos_token_id=eos_id, steps=STEPS, seed=seed, **SETTINGS[setting])


OUR_NAMES = {"threshold": "commit_threshold"}  # the pipeline's keyword -> our knob (one name, one meaning)


def rule_for(setting: str) -> BlockRefinementRule:
    """Our rule for one of the pipeline's settings (its sampling and stop keywords go elsewhere)."""
    names = {f.name for f in fields(BlockRefinementRule)}
    options = {OUR_NAMES.get(k, k): v for k, v in SETTINGS[setting].items()}
    return BlockRefinementRule(block_steps=STEPS, **{k: v for k, v in options.items() if k in names})


def replay(run: ReferenceRun, setting: str, mask_id: int, eos_id: int) -> np.ndarray:
    """Re-decide every recorded pass with our rule; assert equality; return the final canvas."""
    rule, eos_stop = rule_for(setting), SETTINGS[setting].get("eos_early_stop", False)
    total = -(-(run.prompt_length + GEN) // BLOCK) * BLOCK
    canvas = np.full(total, mask_id)
    canvas[: run.prompt_length] = PROMPT
    is_prompt = np.arange(total) < run.prompt_length
    state, window = RefinementState(), None
    for i, step in enumerate(run.steps):
        if step.window != window:
            assert window is None or step.window[0] == window[1], "blocks run in order, none skipped"
            state, window = RefinementState(), step.window
        lo, hi = window
        tokens = canvas[lo:hi].copy()
        inputs = BlockInputs(confidence=np.asarray(step.sampled_probs, dtype=np.float32),
                             candidate=np.asarray(step.sampled_tokens), tokens=tokens, is_masked=tokens == mask_id,
                             is_prompt=is_prompt[lo:hi])
        had_masks = bool(inputs.is_masked.any())
        assert step.is_post_step == (not had_masks)
        decision, state = rule.decide(inputs, state, block_length=BLOCK, gen_length=GEN)
        assert {lo + int(p): int(inputs.candidate[p]) for p in np.flatnonzero(decision.commit)} == step.commits
        assert {lo + int(p): (int(tokens[p]), int(inputs.candidate[p])) for p in np.flatnonzero(decision.edit)} \
            == step.edits
        canvas[lo:hi] = decision.new_tokens
        changed = decision.commit | decision.edit
        finished = eos_stop and eos_finishes(canvas[:hi] == eos_id, canvas[:hi] == mask_id, run.prompt_length,
                                             bool((inputs.candidate[changed] == eos_id).any()))
        more = rule.should_continue(state, had_masks=had_masks, edited=bool(decision.edit.any()),
                                    finished=finished, gen_length=GEN)
        is_last_of_block = i + 1 == len(run.steps) or run.steps[i + 1].window != window
        assert more == (not is_last_of_block), f"pass {i}: block continues={more}, the pipeline's did not"
        if finished:
            assert i + 1 == len(run.steps), "an EOS stop ends the run"
    return canvas


ATTENTIONS = ["bidirectional", "token_causal", "block_causal"]


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_our_rule_replays_every_pipeline_pass(setup, attention: str, setting: str) -> None:
    _, mask_id, eos_id, _ = setup
    run = reference(setup, attention, setting)
    assert run.nfe == len(run.steps) == run.steps[-1].global_step + 1
    assert [s.global_step for s in run.steps] == list(range(run.nfe))
    canvas = replay(run, setting, mask_id, eos_id)
    assert canvas[run.prompt_length : run.prompt_length + GEN].tolist() == run.sequence
    windows = tuple(dict.fromkeys(step.window for step in run.steps))
    expected = AlignedCanvas(len(PROMPT), GEN, BLOCK).windows
    assert windows == expected[: len(windows)] and (setting == "eos_early_stop" or windows == expected)


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_recorded_steps_are_sane(setup, attention: str, setting: str) -> None:
    _, mask_id, _, _ = setup
    run = reference(setup, attention, setting)
    rule = rule_for(setting)
    current: dict[int, int] = {}  # generated position -> token, as the steps leave it
    for step in run.steps:
        lo, hi = step.window
        assert lo % BLOCK == 0 and hi - lo == BLOCK and hi > run.prompt_length  # absolute-aligned blocks
        for position in (*step.commits, *step.edits):
            assert lo <= position < hi and position >= run.prompt_length  # never the prompt
        for position, (old, new) in step.edits.items():
            assert old != new and old != mask_id and current[position] == old
        for position in step.commits:
            # committed from mask only; a second commit happens only after the mask id itself was
            # committed or edited in (the reference never suppresses the mask token as a candidate)
            assert current.get(position, mask_id) == mask_id
        block_has_mask = any(current.get(p, mask_id) == mask_id for p in range(max(lo, run.prompt_length), hi))
        # a post-step is a pass over a full block; masks come back only when an edit wrote the mask id
        assert step.is_post_step == (not block_has_mask)
        assert not step.is_post_step or not step.commits
        current |= step.commits | {p: new for p, (_, new) in step.edits.items()}
    per_block: dict[tuple[int, int], list[bool]] = {}
    for step in run.steps:
        per_block.setdefault(step.window, []).append(step.is_post_step)
    for posts in per_block.values():
        assert posts[0] is False  # every block opens with masks
        assert len(posts) - sum(posts) <= rule.steps_per_block(GEN)
        assert sum(posts) <= (rule.max_post_steps + 1 if rule.editing_enabled else 1)
    if not rule.editing_enabled:
        assert run.num_edits == 0


def test_the_settings_exercise_what_they_name(setup) -> None:
    _, mask_id, eos_id, _ = setup
    runs = {name: reference(setup, "block_causal", name) for name in SETTINGS}
    assert runs["defaults"].num_edits > 0 and any(s.is_post_step for s in runs["defaults"].steps)
    assert runs["no_editing"].num_edits == 0
    assert runs["high_threshold"].nfe > runs["defaults"].nfe
    capped = max(s.step_idx for s in runs["minimal_topk"].steps)
    assert capped <= rule_for("minimal_topk").steps_per_block(GEN) < STEPS
    eos = runs["eos_early_stop"]
    first_eos = eos.sequence.index(eos_id)
    assert mask_id not in eos.sequence[:first_eos] and mask_id in eos.sequence  # stopped with masks left
    assert eos.nfe < reference(setup, "block_causal", "defaults").nfe
    assert runs["temperature_1"].sequence != runs["defaults"].sequence


def test_sampled_runs_repeat_with_a_seed_and_change_without(setup) -> None:
    a = reference(setup, "block_causal", "temperature_1", seed=1)
    b = reference(setup, "block_causal", "temperature_1", seed=1)
    assert a.sequence == b.sequence and a.steps == b.steps
    assert reference(setup, "block_causal", "temperature_1", seed=2).sequence != a.sequence


def test_attention_kinds_give_different_runs(setup) -> None:
    sequences = {attention: tuple(reference(setup, attention, "no_editing").sequence) for attention in ATTENTIONS}
    assert len(set(sequences.values())) == 3


def engine_adapter(setup, attention: str) -> BlockDiffusionAdapter:
    """The harness model behind our block-diffusion adapter, attending as `attention` says."""
    adapter = setup[3]
    return BlockDiffusionAdapter(adapter.model, adapter.tokenizer, replace(adapter.info, attention=attention))


def engine_pipeline(setting: str, cache: str = "none") -> tuple[Pipeline, DecodeConfig]:
    """Our pipeline and decode config for one of the reference's settings."""
    settings = SETTINGS[setting]
    rule = rule_for(setting)
    stop = FirstEosStop() if settings.get("eos_early_stop") else None
    pipeline = Pipeline(rule=rule, block=AlignedBlocks(BLOCK), stop=stop, cache=cache)  # type: ignore[arg-type]
    return pipeline, DecodeConfig(gen_length=GEN, temperature=settings.get("temperature", 0.0), seed=3)


def engine_passes(trace) -> list[tuple[dict, dict]]:
    """Per pass: {row: token} committed and {row: (old, new)} edited, in row positions (prompt
    included) as the reference records them."""
    p = len(PROMPT)
    out = []
    for s in range(trace.num_steps):
        before, after = trace.tokens[s], trace.tokens[s + 1]
        out.append(({p + int(i): int(after[i]) for i in np.flatnonzero(trace.committed[s])},
                    {p + int(i): (int(before[i]), int(after[i])) for i in np.flatnonzero(trace.edited[s])}))
    return out


def answer_rows(run: ReferenceRun, mask_id: int) -> list[tuple[dict, dict]]:
    """The reference's passes as our trace records them: answer rows only (padding is decoded but
    not recorded), and no commit of the mask token itself (it changes nothing; the position stays
    open in both)."""
    end = run.prompt_length + run.gen_length
    return [({k: v for k, v in s.commits.items() if k < end and v != mask_id},
             {k: v for k, v in s.edits.items() if k < end}) for s in run.steps]


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_the_engine_equals_the_pipeline_token_for_token(setup, attention: str, setting: str) -> None:
    run = reference(setup, attention, setting, seed=3)
    trace = decode(engine_adapter(setup, attention), PROMPT, *engine_pipeline(setting))
    assert trace.nfe == run.nfe
    assert trace.final_tokens.tolist() == run.sequence
    assert engine_passes(trace) == answer_rows(run, mask_id=setup[1])
    # the windows, in generated positions: the reference's blocks less their prompt rows
    windows = [(max(lo, len(PROMPT)) - len(PROMPT), min(hi, len(PROMPT) + GEN) - len(PROMPT))
               for lo, hi in (s.window for s in run.steps)]
    assert [tuple(w) for w in trace.window.tolist()] == windows
    assert trace.meta.stop_reason == ("eos" if setting == "eos_early_stop" else trace.meta.stop_reason)


@pytest.mark.parametrize("setting", ["defaults", "no_editing", "temperature_1", "eos_early_stop"])
@pytest.mark.parametrize("attention", ["block_causal", "token_causal"])
def test_the_exact_prefix_cache_changes_nothing_but_the_cost(setup, attention: str, setting: str) -> None:
    adapter = engine_adapter(setup, attention)
    plain = decode(adapter, PROMPT, *engine_pipeline(setting))
    cached = decode(adapter, PROMPT, *engine_pipeline(setting, cache="exact"))
    assert cached.final_tokens.tolist() == plain.final_tokens.tolist()
    assert cached.nfe == plain.nfe
    assert np.array_equal(cached.committed, plain.committed) and np.array_equal(cached.edited, plain.edited)
    np.testing.assert_allclose(cached.confidence, plain.confidence, rtol=1e-4, atol=1e-5)
    # cheaper as soon as a second block is decoded (an early EOS may end the run in the first)
    assert cached.query_len.sum() <= plain.query_len.sum()
    assert (cached.query_len.sum() < plain.query_len.sum()) == (plain.block_index.max() > 0)
    assert set(cached.meta.pass_kind_names[k] for k in cached.pass_kind) == {"exact_cached"}


def test_the_exact_cache_is_refused_where_it_would_not_be_exact(setup) -> None:
    with pytest.raises(ValueError, match="with bidirectional attention"):
        decode(engine_adapter(setup, "bidirectional"), PROMPT, *engine_pipeline("defaults", cache="exact"))
