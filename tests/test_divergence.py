"""Where a decode parted from a reference decode of the same prompt (dllm_viz.divergence), and its
rings on the heatmap (figures: CellFlags)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from trace_factory import hand_trace, make_trace

from dllm_viz import divergence, figures

# Dense: one position a step, left to right; tokens 5 6 7 8.
DENSE = hand_trace([[5, 6, 7, 8]] * 4, [0, 1, 2, 3])
# Parallel: everything in two passes; positions 1 and 2 committed together at step 0 with other tokens.
FAST = hand_trace([[5, 9, 4, 8], [5, 9, 4, 8]], [0, 0, 0, 1],
                  confidence=[[0.95, 0.62, 0.71, 0.3], [0.9, 0.9, 0.9, 0.93]])


def test_parted_commits_name_position_step_tokens_confidence_and_crowd() -> None:
    parted = divergence.parted_commits(DENSE, FAST)
    assert [c.position for c in parted] == [1, 2]
    first = parted[0]
    assert (first.step, first.token, first.reference, first.crowd) == (0, "w9", "w6", 3)
    assert first.confidence == pytest.approx(0.62)
    assert parted[1].token == FAST.token_text(4) and parted[1].confidence == pytest.approx(0.71)


def test_the_cells_to_ring_are_the_parted_commits() -> None:
    cells = divergence.parted_cells(DENSE, FAST)
    assert cells.shape == (FAST.num_steps, FAST.gen_length)
    assert list(zip(*np.nonzero(cells), strict=True)) == [(0, 1), (0, 2)]


def test_the_same_decode_has_not_parted_and_a_stopped_one_lists_its_masks_last() -> None:
    assert divergence.parted_commits(DENSE, DENSE) == [] and not divergence.parted_cells(DENSE, DENSE).any()
    stopped = hand_trace([[5, 9, 7, 8]], [-1, 0, -1, -1])  # one pass, then stopped
    parted = divergence.parted_commits(DENSE, stopped)
    assert [c.position for c in parted] == [1, 0, 2, 3]
    assert parted[1].step == -1 and parted[1].crowd == 0 and math.isnan(parted[1].confidence)


def test_decodes_of_other_prompts_or_canvases_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="different canvases"):
        divergence.parted_commits(DENSE, make_trace(3, 6))
    other = replace(FAST, prompt_ids=np.asarray([1, 2, 3], dtype=np.int32))
    with pytest.raises(ValueError, match="different prompts"):
        divergence.differs(DENSE, other)


def test_flagged_cells_are_one_ring_trace_with_its_own_legend_entry() -> None:
    flags = figures.CellFlags("differs from one token per step", divergence.parted_cells(DENSE, FAST))
    fig = figures.confidence_heatmap(FAST, flags=flags)
    rings = [d for d in fig.data if d.name == "differs from one token per step"]
    assert len(rings) == 1 and rings[0].marker.symbol == "circle-open"
    assert list(rings[0].y) == [0.0, 0.0] and list(rings[0].x) == [fig.data[0].x[1], fig.data[0].x[2]]
    assert not [d for d in figures.confidence_heatmap(FAST).data if d.name == flags.name]


def test_flags_of_another_shape_are_refused() -> None:
    with pytest.raises(ValueError, match=r"must be \[steps, positions\]"):
        figures.confidence_heatmap(FAST, flags=figures.CellFlags("x", np.zeros((3, 3), dtype=bool)))
