"""Properties every registered policy must satisfy, run through one parametrised suite."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toy import ToyAdapter

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.policies import BLOCKS, RULES, Pipeline

ADAPTER = ToyAdapter()
GEN_LENGTHS = (8, 16, 24, 48)


@pytest.mark.parametrize("rule_name", sorted(RULES))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gen_length=st.sampled_from(GEN_LENGTHS), seed=st.integers(0, 2**16),
       temperature=st.sampled_from([0.0, 0.7]), prompt=st.lists(st.integers(2, 23), min_size=1, max_size=6))
def test_policy_invariants(rule_name: str, gen_length: int, seed: int, temperature: float,
                           prompt: list[int]) -> None:
    for block_name in sorted(BLOCKS):
        pipeline = Pipeline.from_names(rule_name, block_name, block_length=8)
        config = DecodeConfig(gen_length=gen_length, temperature=temperature, seed=seed)
        trace = decode(ADAPTER, prompt, pipeline, config)
        masked_before = trace.tokens[:-1] == ADAPTER.info.mask_token_id
        # commits only masked positions inside the window
        assert not (trace.committed & ~masked_before).any()
        for step in range(trace.num_steps):
            start, end = trace.window[step]
            committed = np.flatnonzero(trace.committed[step])
            assert committed.size >= 1, "every step commits at least one position"
            assert ((committed >= start) & (committed < end)).all()
        # each position commits exactly once and the loop terminates within the cap
        assert (trace.committed.sum(axis=0) == 1).all()
        assert trace.num_steps <= config.step_cap and trace.is_complete
        assert (trace.reason[trace.committed] >= 0).all()
        # same seed, same trace
        again = decode(ADAPTER, prompt, pipeline, config)
        assert np.array_equal(trace.tokens, again.tokens)
        assert np.array_equal(trace.committed, again.committed)


@pytest.mark.parametrize("gen_length", GEN_LENGTHS)
def test_fixed_steps_commits_follow_the_schedule(gen_length: int) -> None:
    from dllm_viz.policies import FixedStepsPolicy, transfer_schedule

    steps = gen_length // 2
    trace = decode(ADAPTER, [4, 5], Pipeline.from_names("fixed_steps", steps=steps, block_length=8),
                   DecodeConfig(gen_length=gen_length))
    per_block = FixedStepsPolicy(steps=steps).steps_for_window(8, gen_length)
    expected = transfer_schedule(8, per_block) * (gen_length // 8)
    assert trace.tokens_per_step.tolist() == [n for n in expected if n > 0]
