"""LLaDA fixed steps, Fast-dLLM threshold and factor rules on hand-made step views."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dllm_viz.policies import (
    COMMIT_REASONS,
    FactorPolicy,
    FixedBlocks,
    FixedStepsPolicy,
    Pipeline,
    StepView,
    ThresholdPolicy,
    transfer_schedule,
)


def make_view(confidence: list[float], *, masked: list[bool] | None = None, window: tuple[int, int] | None = None,
              step_in_window: int = 0, masked_at_start: int | None = None) -> StepView:
    conf = np.asarray(confidence, dtype=np.float64)
    n = conf.shape[0]
    is_masked = np.ones(n, dtype=bool) if masked is None else np.asarray(masked)
    window = window or (0, n)
    at_start = int(is_masked[window[0]:window[1]].sum()) if masked_at_start is None else masked_at_start
    return StepView(step=0, step_in_window=step_in_window, window=window, tokens=np.zeros(n, np.int64),
                    is_masked=is_masked, candidate=np.arange(n), confidence=conf, margin=conf,
                    entropy=1 - conf, is_eos_candidate=np.zeros(n, bool), rand=np.linspace(0, 1, n),
                    window_masked_at_start=at_start)


def reasons(decision) -> set[str]:
    return {COMMIT_REASONS[c] for c in decision.reason[decision.commit]}


@pytest.mark.parametrize(("masked", "steps", "expected"), [
    (32, 32, [1] * 32),
    (32, 8, [4] * 8),
    (32, 64, [1] * 32 + [0] * 32),
    (10, 4, [3, 3, 2, 2]),
    (0, 3, [0, 0, 0]),
])
def test_transfer_schedule_examples(masked: int, steps: int, expected: list[int]) -> None:
    assert transfer_schedule(masked, steps) == expected


@given(st.integers(0, 512), st.integers(1, 256))
def test_transfer_schedule_sums_to_masked_with_remainder_first(masked: int, steps: int) -> None:
    schedule = transfer_schedule(masked, steps)
    assert sum(schedule) == masked and len(schedule) == steps
    assert schedule == sorted(schedule, reverse=True)
    assert max(schedule) - min(schedule) <= 1


def test_fixed_steps_commits_scheduled_count_of_most_confident() -> None:
    policy = FixedStepsPolicy(steps=4)  # gen_length 8, one window: S_b = 4, 2 per step
    view = make_view([0.1, 0.9, 0.3, 0.8, 0.2, 0.7, 0.05, 0.6])
    decision, _ = policy.step(view, None)
    assert np.flatnonzero(decision.commit).tolist() == [1, 3]
    assert reasons(decision) == {"quota"}


def test_fixed_steps_random_remasking_uses_the_random_draws() -> None:
    view = make_view([0.9] * 4 + [0.1] * 4)
    decision, _ = FixedStepsPolicy(steps=4, remasking="random").step(view, None)
    assert np.flatnonzero(decision.commit).tolist() == [6, 7]  # rand = linspace: highest last
    assert reasons(decision) == {"random"}


def test_fixed_steps_rejects_steps_not_divisible_by_blocks() -> None:
    with pytest.raises(ValueError, match="multiple of the number of blocks"):
        Pipeline(rule=FixedStepsPolicy(steps=6), block=FixedBlocks(32)).validate(128)
    Pipeline(rule=FixedStepsPolicy(steps=8), block=FixedBlocks(32)).validate(128)


def test_steps_on_an_aligned_block_longer_than_the_canvas_are_one_blocks_budget() -> None:
    """Decode on a block-32 model with a 16-position canvas and fixed_steps(steps=8) raised
    ZeroDivisionError (a traceback in the app) counting the canvas's 16 // 32 blocks."""
    Pipeline.from_names("fixed_steps", "aligned", steps=8, block_length=32).validate(16)
    Pipeline.from_names("cora", "aligned", steps=3, block_length=64).validate(16)


def test_threshold_commits_all_at_or_above_tau() -> None:
    view = make_view([0.95, 0.9, 0.89, 0.2], window=(0, 4))
    decision, _ = ThresholdPolicy(0.9).step(view, None)
    assert np.flatnonzero(decision.commit).tolist() == [0, 1]
    assert reasons(decision) == {"threshold"}


def test_threshold_forces_the_single_most_confident_when_none_qualifies() -> None:
    view = make_view([0.3, 0.5, 0.4, 0.99], window=(0, 3))  # 0.99 is outside the window
    decision, _ = ThresholdPolicy(0.9).step(view, None)
    assert np.flatnonzero(decision.commit).tolist() == [1]
    assert reasons(decision) == {"forced_top1"}


@given(st.lists(st.floats(0, 1), min_size=1, max_size=40), st.floats(0.05, 1.0), st.floats(0.05, 1.0))
def test_raising_threshold_never_commits_more(conf: list[float], t1: float, t2: float) -> None:
    low, high = sorted((t1, t2))
    view = make_view(conf)
    n_low = ThresholdPolicy(low).step(view, None)[0].commit.sum()
    n_high = ThresholdPolicy(high).step(view, None)[0].commit.sum()
    assert 1 <= n_high <= n_low


@pytest.mark.parametrize("tau", [0.0, -0.1, 1.5, float("nan")])
def test_threshold_out_of_range_names_the_value(tau: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        ThresholdPolicy(tau)


def test_factor_rule_accepts_longest_qualifying_prefix() -> None:
    # f=1: rank n needs c >= 1 - 1/(n+1): rank2 0.667, rank3 0.75, rank4 0.8
    view = make_view([0.78, 0.99, 0.76, 0.5, 0.1])
    decision, _ = FactorPolicy(1.0).step(view, None)
    assert sorted(np.flatnonzero(decision.commit).tolist()) == [0, 1, 2]


def test_factor_rule_reference_quirk_accepts_all_when_only_last_rank_fails() -> None:
    view = make_view([0.99, 0.9, 0.1])
    assert FactorPolicy(1.0, faithful=True).step(view, None)[0].commit.sum() == 3
    assert FactorPolicy(1.0, faithful=False).step(view, None)[0].commit.sum() == 2


def test_factor_rule_always_accepts_one() -> None:
    decision, _ = FactorPolicy(0.1).step(make_view([0.2, 0.1, 0.05, 0.3]), None)
    assert np.flatnonzero(decision.commit).tolist() == [3]
    assert reasons(decision) == {"forced_top1"}


def test_fixed_blocks_require_a_divisor_and_suggest_one() -> None:
    with pytest.raises(ValueError, match=r"block_length=30.*gen_length=128.*32"):
        FixedBlocks(30).validate(128)


def test_pipeline_round_trips_through_dict() -> None:
    pipeline = Pipeline.from_names("factor", factor=2.0, block_length=16)
    assert Pipeline.from_dict(pipeline.to_dict()) == pipeline
    with pytest.raises(ValueError, match="unknown commit rule 'nope'"):
        Pipeline.from_names("nope")
