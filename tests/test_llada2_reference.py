"""The LLaDA2Pipeline harness records sane steps, and our pieces reproduce it token for token.

Two levels, the contract for issue #22's engine: fed the pipeline's own candidates and
confidences, `BlockRefinementRule` makes the same commits and edits and ends every block on the
same pass (`replay`); and a loop built only from our pieces (`our_loop`: aligned windows,
prefix-only passes, our sampler, our rule) gives the same answer, NFE and per-pass commits and
edits on every setting and attention kind. The engine has to become that loop.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import torch
from checkpoints import build_block_llama
from llada2_reference import SETTINGS, AttentionWrapper, ReferenceRun, run_reference

from dllm_viz.models import block_diffusion as bd
from dllm_viz.policies.aligned_blocks import AlignedCanvas
from dllm_viz.policies.block_refinement import (
    BlockInputs,
    BlockRefinementRule,
    RefinementState,
    eos_finishes,
)
from dllm_viz.sampling import multinomial_candidates

PROMPT = [10, 11, 12, 13, 14]  # 5 prompt tokens: the first block (B = 8) holds 3 generated positions
GEN, BLOCK, STEPS = 24, 8, 8


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, int, int]:
    """The harness model: a peaky random block-causal Llama checkpoint, loaded as issue #22's engine will."""
    directory, _ = build_block_llama(tmp_path_factory.mktemp("llada2_ref") / "m", block_length=BLOCK, head_scale=60.0)
    cfg = json.loads((Path(directory) / "config.json").read_text())
    spec = bd.detect(cfg)
    model = bd.load_model(directory, cfg, spec, device=torch.device("cpu"), dtype=torch.float32)
    return model, int(spec.mask_token_id), int(cfg["eos_token_id"])


def reference(setup, attention: str, setting: str, seed: int = 0) -> ReferenceRun:
    model, mask_id, eos_id = setup
    return run_reference(AttentionWrapper(model, attention, BLOCK), PROMPT, gen_length=GEN, block_length=BLOCK,
                         mask_token_id=mask_id, eos_token_id=eos_id, steps=STEPS, seed=seed, **SETTINGS[setting])


def rule_for(setting: str) -> BlockRefinementRule:
    names = {f.name for f in fields(BlockRefinementRule)}
    return BlockRefinementRule(steps=STEPS, **{k: v for k, v in SETTINGS[setting].items() if k in names})


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
    _, mask_id, eos_id = setup
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
    _, mask_id, _ = setup
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
    _, mask_id, eos_id = setup
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


def our_loop(setup, attention: str, setting: str, seed: int = 0) -> tuple[list[int], int, list[tuple[dict, dict]]]:
    """The decode issue #22's engine must run, written with our pieces only: AlignedCanvas windows,
    prefix-only passes under the 4-D mask, `multinomial_candidates` over the whole block from one
    generator, `BlockRefinementRule` and `eos_finishes`. Returns (answer, NFE, per-pass commits/edits)."""
    model, mask_id, eos_id = setup
    rule, eos_stop = rule_for(setting), SETTINGS[setting].get("eos_early_stop", False)
    geometry = AlignedCanvas(len(PROMPT), GEN, BLOCK)
    x = torch.full((geometry.total_length,), mask_id)
    x[: len(PROMPT)] = torch.tensor(PROMPT)
    real = (torch.arange(geometry.total_length) < len(PROMPT) + GEN).long()[None]
    masks = AttentionWrapper(model, attention, BLOCK)
    generator, nfe, passes, finished = torch.Generator().manual_seed(seed), 0, [], False
    for lo, hi in geometry.windows:
        state = RefinementState()
        while True:
            with torch.no_grad():
                logits = model(input_ids=x[None, :hi], attention_mask=masks.four_d_mask(real[:, :hi]),
                               position_ids=torch.arange(hi)[None], use_cache=False).logits[0, lo:hi]
            nfe += 1
            candidate, confidence = multinomial_candidates(logits, temperature=rule.temperature, top_k=rule.top_k,
                                                           top_p=rule.top_p, generator=generator)
            tokens = x[lo:hi].numpy().copy()
            inputs = BlockInputs(confidence=confidence.numpy(), candidate=candidate.numpy(), tokens=tokens,
                                 is_masked=tokens == mask_id, is_prompt=np.arange(lo, hi) < len(PROMPT))
            had_masks = bool(inputs.is_masked.any())
            decision, state = rule.decide(inputs, state, block_length=BLOCK, gen_length=GEN)
            x[lo:hi] = torch.from_numpy(decision.new_tokens)
            passes.append(({lo + int(p): int(candidate[p]) for p in np.flatnonzero(decision.commit)},
                           {lo + int(p): (int(tokens[p]), int(candidate[p])) for p in np.flatnonzero(decision.edit)}))
            changed = decision.commit | decision.edit
            prefix = x[:hi].numpy()
            finished = eos_stop and eos_finishes(prefix == eos_id, prefix == mask_id, len(PROMPT),
                                                 bool((inputs.candidate[changed] == eos_id).any()))
            if not rule.should_continue(state, had_masks=had_masks, edited=bool(decision.edit.any()),
                                        finished=finished, gen_length=GEN):
                break
        if finished:
            break
    return x[len(PROMPT) : len(PROMPT) + GEN].tolist(), nfe, passes


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_loop_of_our_pieces_equals_the_pipeline_token_for_token(setup, attention: str, setting: str) -> None:
    run = reference(setup, attention, setting, seed=3)
    answer, nfe, passes = our_loop(setup, attention, setting, seed=3)
    assert nfe == run.nfe
    assert passes == [(step.commits, step.edits) for step in run.steps]
    assert answer == run.sequence
