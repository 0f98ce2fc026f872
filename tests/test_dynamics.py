"""Decode dynamics: candidate flips before commit (the bench's flip_share), redundant refinement and the
reliability of confidences, on hand-made traces."""

from __future__ import annotations

import numpy as np
import pytest

from dllm_viz.dynamics import (
    candidate_flips,
    reliability,
    reliability_cells,
    tail_redundant_share,
    wasted_refinement_fraction,
)
from tests.trace_factory import EOS, hand_trace, make_trace

# As tests/test_figures_views.py: position 0 holds 3 then 4 (committed at 4), position 1 goes 5 -> 6
# (committed at 2), position 2 flips 7 -> 8 -> 7 (committed at 3), position 3 never commits.
CANDIDATES = [[3, 5, 7, 9], [3, 6, 8, 9], [4, 6, 7, 9], [4, 7, 7, 10], [4, 7, 7, 10]]


def test_flips_count_committed_positions_whose_candidate_changed_while_masked() -> None:
    assert candidate_flips(hand_trace(CANDIDATES, [4, 2, 3, -1])) == 3
    # Committed before any change: position 0 at step 0 (3), position 1 at 0 (5); position 2 still flips.
    assert candidate_flips(hand_trace(CANDIDATES, [0, 0, 3, -1])) == 1
    # Changes after the commit step do not count (position 1's candidate moves to 7 after step 2).
    assert candidate_flips(hand_trace(CANDIDATES, [1, 0, 0, 0])) == 0


def test_a_settled_answer_has_no_flip_and_empty_traces_have_none() -> None:
    steady = [[1, 2]] * 4
    assert candidate_flips(hand_trace(steady, [3, 3])) == 0
    assert wasted_refinement_fraction(hand_trace(steady, [3, 3])) == 6 / 8
    assert candidate_flips(make_trace(0, 4)) == 0


def test_the_answer_share_leaves_the_end_of_text_tail_out() -> None:
    # Position 0 settles at step 2 and commits at 3 (1 of its 4 masked steps wasted); positions 1-2
    # are an EOS tail known from step 0 and committed at 3 (3 of 4 wasted each).
    candidates = [[5, EOS, EOS], [6, EOS, EOS], [7, EOS, EOS], [7, EOS, EOS]]
    trace = hand_trace(candidates, [3, 3, 3])
    assert wasted_refinement_fraction(trace) == 7 / 12
    assert wasted_refinement_fraction(trace, answer_only=True) == 1 / 4
    tail_only = hand_trace([[EOS, EOS]] * 2, [1, 1])
    assert wasted_refinement_fraction(tail_only) == 1 / 2
    assert wasted_refinement_fraction(tail_only, answer_only=True) == 0.0


def test_the_tail_share_is_the_tails_part_of_the_all_position_share() -> None:
    # The trace above: the tail's 3 + 3 wasted steps of 12 masked ones; position 0's 1 is the answer's.
    candidates = [[5, EOS, EOS], [6, EOS, EOS], [7, EOS, EOS], [7, EOS, EOS]]
    assert tail_redundant_share(hand_trace(candidates, [3, 3, 3])) == 6 / 12
    # A tail that settles late (EOS only from step 2) wastes less: 1 + 1 of 12.
    late = [[5, 8, 9], [6, 8, 9], [7, EOS, EOS], [7, EOS, EOS]]
    assert tail_redundant_share(hand_trace(late, [3, 3, 3])) == 2 / 12
    assert tail_redundant_share(hand_trace([[5, 6]] * 3, [2, 2])) == 0.0  # no tail
    assert tail_redundant_share(make_trace(0, 4)) == 0.0


def test_block_passes_counts_commit_steps_per_block_answer_and_tail_apart() -> None:
    """tools/block_passes.py: a block's passes are the distinct steps its positions committed at."""
    from tool_scripts import tool

    # Block 0 (positions 0-1): answer text committed at steps 0 and 1; block 1: answer then EOS,
    # one step; block 2: EOS only, one step.
    candidates = [[5, 6, 7, EOS, EOS, EOS]] * 4
    answer, tail = tool("block_passes").block_passes(hand_trace(candidates, [0, 1, 2, 2, 3, 3]), 2)
    assert answer == [2, 1] and tail == [1]


def test_ce_fires_counts_what_ce_committed_and_the_passes_both_ways(tiny_adapter) -> None:  # type: ignore[no-untyped-def]
    from tool_scripts import tool

    from dllm_viz.bench import parse_config
    from dllm_viz.config import DecodeConfig
    from dllm_viz.evaluation import heldout_problems, run_problem
    from dllm_viz.policies.extras import CE_EARLY

    ce = tool("ce_fires")
    problems = heldout_problems("hard/chain", 2)
    config = DecodeConfig(gen_length=32)
    fires = ce.measure(tiny_adapter, problems, "threshold", config, 8)
    plain = [run_problem(tiny_adapter, p, parse_config("threshold", {"block_length": 8}), config) for p in problems]
    with_ce = [run_problem(tiny_adapter, p, parse_config("threshold+kalman", {"block_length": 8}), config)
               for p in problems]
    assert fires.problems == 2 and fires.passes == sum(r.nfe for r, _ in plain)
    assert fires.passes_with_ce == sum(r.nfe for r, _ in with_ce)
    assert fires.early_positions == sum(int(t.extras[CE_EARLY].sum()) for _, t in with_ce)
    assert all(ce.early_positions(t) == 0 for _, t in plain)  # no CE, nothing committed early
    assert f"{fires.early_positions} positions early, on {fires.problems_fired} problems" in fires.line()


def test_reliability_cells_are_masked_answer_cells_in_the_window_up_to_the_commit() -> None:
    # Position 0 commits 7 at step 2 (candidates 5, 7, 7); position 1 commits 6 at step 0; position 2
    # is end-of-text; position 3 is outside the window at step 0 and commits 9 at step 1.
    candidates = [[5, 6, EOS, 8], [7, 6, EOS, 9], [7, 6, EOS, 9]]
    confidence = [[0.6, 0.95, 0.99, 0.3], [0.8, 0.9, 0.99, 0.97], [0.9, 0.9, 0.99, 0.9]]
    trace = hand_trace(candidates, [2, 0, 1, 1], confidence=confidence, window=[(0, 3), (0, 4), (0, 4)])
    conf, agrees = reliability_cells(trace)
    # step 0: positions 0 (0.6, wrong), 1 (0.95, right); step 1: 0 (0.8, right), 3 (0.97, right); step 2: 0.
    assert conf.tolist() == pytest.approx([0.6, 0.95, 0.8, 0.97, 0.9])
    assert agrees.tolist() == [False, True, True, True, True]


def test_reliability_bins_cells_and_weighs_the_calibration_gap_by_cells() -> None:
    conf = np.array([0.6, 0.65, 0.95, 0.97, 1.0])
    right = np.array([True, False, True, True, True])
    rows, ece = reliability(conf, right, bins=(0.0, 0.9, 1.0))
    assert [(low, high, n) for low, high, n, _, _ in rows] == [(0.0, 0.9, 2), (0.9, 1.0, 3)]  # 1.0 in the last bin
    assert rows[0][3:] == pytest.approx((0.625, 0.5)) and rows[1][3:] == pytest.approx((2.92 / 3, 1.0))
    assert ece == pytest.approx((2 * 0.125 + 3 * (1 - 2.92 / 3)) / 5)
    assert reliability(np.zeros(0), np.zeros(0, dtype=bool)) == ([], 0.0)


@pytest.mark.parametrize("bins", [(0.0, 0.5), (0.1, 1.0), (0.0, 0.7, 0.5, 1.0), (0.0,)])
def test_reliability_refuses_bins_that_do_not_cover_zero_to_one(bins: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="must increase from 0 to 1"):
        reliability(np.array([0.5]), np.array([True]), bins=bins)


def test_reliability_refuses_arrays_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="must have one shape"):
        reliability(np.array([0.5, 0.6]), np.array([True]))


def test_the_reliability_tool_prints_each_bin_and_the_share_of_sure_cells() -> None:
    """tools/confidence_reliability.py: the header counts the cells at >= 0.999 and how many were right."""
    from tool_scripts import tool

    conf = np.array([0.3, 0.9995, 0.9999, 1.0])
    lines = tool("confidence_reliability").table("x", conf, np.array([False, True, False, True]))
    assert lines[0].startswith("x: 4 cells, ECE ") and "at >= 0.999: 75.0% of cells, 66.67% of them right" in lines[0]
    assert len(lines) == 3 and lines[1].startswith("  [0.000, 0.500)") and lines[2].startswith("  [0.999, 1.000]")
