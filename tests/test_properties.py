"""Properties every registered policy and every composition must satisfy (one suite, no special cases)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toy import ToyAdapter

from dllm_viz.cache_modes import CACHE_MODES
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.policies import (
    BLOCKS,
    EXTRAPOLATORS,
    RULES,
    STOPS,
    FixedStepsPolicy,
    Pipeline,
    reason_code,
    transfer_schedule,
)

ADAPTER = ToyAdapter()
GEN_LENGTHS = (8, 16, 24, 48)
# The exact cache needs a block-causal model, which the toy is not: its refusal is checked once per
# rule below instead of once per composition (test_block_engine.py runs it on a block-causal model).
COMBINATIONS = list(itertools.product(sorted(BLOCKS), [None, *sorted(EXTRAPOLATORS)], [None, *sorted(STOPS)],
                                     [m for m in CACHE_MODES if m != "exact"]))


def check_invariants(trace, config: DecodeConfig, *, edits: bool = False) -> None:
    """The engine's guarantees. `edits`: the rule may edit and take empty passes (block refinement)."""
    masked_before = trace.tokens[:-1] == ADAPTER.info.mask_token_id
    assert not (trace.committed & ~masked_before).any(), "commits only masked positions"
    assert not (trace.edited & masked_before).any(), "edits only committed positions"
    assert edits or not trace.edited.any(), "only an editing rule edits"
    for step in range(trace.num_steps):
        start, end = trace.window[step]
        chosen = np.flatnonzero((trace.committed[step] | trace.edited[step])
                                & (trace.reason[step] != reason_code("eos_stop")))
        # (a step whose only commit fell in the padding of aligned blocks says so: padding_changes)
        assert edits or chosen.size + trace.padding_changes[step] >= 1, "every step commits at least one position"
        assert ((chosen >= start) & (chosen < end)).all(), "commits and edits stay inside the window"
    assert ((trace.committed.sum(axis=0) - trace.edited.sum(axis=0)) <= 1).all(), "a position commits at most once"
    if not edits:  # one pass per canvas position suffices, the padding of aligned blocks included
        padding = Pipeline.from_dict(trace.meta.pipeline).block.canvas_padding(len(trace.prompt_ids),
                                                                                trace.gen_length)
        assert trace.num_steps <= config.step_cap + padding
        # ... so a rule that commits every pass never runs out of passes (it did with padding)
        assert config.max_steps is not None or trace.meta.stop_reason != "max_steps"
    if trace.meta.stop_reason not in ("eos", "max_steps"):
        assert trace.is_complete and not (trace.final_tokens == ADAPTER.info.mask_token_id).any()
    assert (trace.reason[trace.committed | trace.edited] >= 0).all()


def refusal(rule_name: str, block: str, cache: str) -> str | None:
    """The part of the engine's message when it must refuse this composition on the toy (a
    bidirectional whole-canvas model), else None: every other composition runs."""
    if cache == "exact":
        return "cache='exact' needs a block-causal model"
    if rule_name == "block_refinement" and cache in ("prefix", "dual"):
        return "samples over whole blocks"
    if rule_name == "block_refinement" and block == "adablock":
        return "needs windows of one fixed length"
    return None


@pytest.mark.parametrize("rule_name", sorted(RULES))
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gen_length=st.sampled_from(GEN_LENGTHS), seed=st.integers(0, 2**16),
       temperature=st.sampled_from([0.0, 0.7]), prompt=st.lists(st.integers(3, 23), min_size=1, max_size=6))
def test_every_composition_keeps_the_invariants(rule_name: str, gen_length: int, seed: int, temperature: float,
                                                prompt: list[int], controller_options: dict[str, str]) -> None:
    for block, extrapolate, stop, cache in COMBINATIONS:
        pipeline = Pipeline.from_names(rule_name, block, extrapolate, stop, cache=cache, block_length=8,
                                       init_block_length=8, **controller_options)
        config = DecodeConfig(gen_length=gen_length, temperature=temperature, seed=seed)
        if (message := refusal(rule_name, block, cache)) is not None:
            with pytest.raises(ValueError, match=message):
                decode(ADAPTER, prompt, pipeline, config)
            continue
        trace = decode(ADAPTER, prompt, pipeline, config)
        check_invariants(trace, config, edits=rule_name == "block_refinement")
        again = decode(ADAPTER, prompt, pipeline, config)
        assert np.array_equal(trace.tokens, again.tokens), "same seed, same trace"
        assert np.array_equal(trace.committed, again.committed)


@pytest.mark.parametrize("rule_name", sorted(RULES))
def test_the_exact_cache_is_refused_for_every_rule_on_a_whole_canvas_model(rule_name: str,
                                                                         controller_options: dict[str, str]) -> None:
    pipeline = Pipeline.from_names(rule_name, "aligned", cache="exact", block_length=8, **controller_options)
    with pytest.raises(ValueError, match=refusal(rule_name, "aligned", "exact")):
        decode(ADAPTER, [4, 5], pipeline, DecodeConfig(gen_length=16))


@pytest.mark.parametrize(("mode", "stop_reason"), [("halt", "eos"), ("finish", "complete")])
def test_eos_halt_mode_stops_with_masks_left_and_finish_mode_does_not(mode: str, stop_reason: str) -> None:
    """A low threshold commits a confident EOS in the first pass, while positions before it are still
    masked: halt stops there (the CORA release quirk), finish decodes them."""
    pipeline = Pipeline.from_names("threshold", "fixed", None, "eos", threshold=0.1, block_length=48,
                                   eos_mode=mode, eos_confidence=0.1)
    config = DecodeConfig(gen_length=48)
    trace = decode(ADAPTER, [4, 5], pipeline, config)
    check_invariants(trace, config)
    assert trace.meta.stop_reason == stop_reason
    left = int((trace.final_tokens == ADAPTER.info.mask_token_id).sum())
    assert (left > 0) == (mode == "halt")


@pytest.mark.parametrize("gen_length", GEN_LENGTHS)
def test_fixed_steps_commits_follow_the_schedule(gen_length: int) -> None:
    steps = gen_length // 2
    trace = decode(ADAPTER, [4, 5], Pipeline.from_names("fixed_steps", steps=steps, block_length=8),
                   DecodeConfig(gen_length=gen_length))
    per_block = FixedStepsPolicy(steps=steps).steps_for_window(8, gen_length)
    expected = transfer_schedule(8, per_block) * (gen_length // 8)
    assert trace.tokens_per_step.tolist() == [n for n in expected if n > 0]


@pytest.mark.parametrize("rule_name", sorted(RULES))
def test_stateful_policy_state_shapes_are_stable(rule_name: str, controller_options: dict[str, str]) -> None:
    # block_refinement's quota needs one block length: adablock is refused for it (test_block_engine.py)
    block = "aligned" if rule_name == "block_refinement" else "adablock"
    pipeline = Pipeline.from_names(rule_name, block, "kalman", block_length=8, init_block_length=8,
                                   **controller_options)
    trace = decode(ADAPTER, [4, 5], pipeline, DecodeConfig(gen_length=32))
    for name, values in trace.extras.items():
        assert values.shape == (trace.num_steps, 32), name
