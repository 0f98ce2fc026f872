"""Token edits (block refinement) in the Trace helpers and every view that shows them.

The EDIT_STEPS trace (trace_factory) has three edits at two positions and two post-steps; each
view must show them, and a trace without edits must draw exactly what it drew before.
"""

from __future__ import annotations

import numpy as np  # noqa: F401 (used by the views branch's later tests in this file)
import pytest
from trace_factory import MASK, edit_trace, hand_trace, make_trace, step_trace

from dllm_viz.trace import EditEvent


@pytest.fixture
def edits():
    return edit_trace()


def test_trace_derives_edit_events_counts_and_post_steps(edits) -> None:
    assert edits.edit_events == [EditEvent(1, 0, 10, 20), EditEvent(3, 0, 20, 30), EditEvent(3, 1, 11, 21)]
    assert edits.edits_per_step.tolist() == [0, 1, 0, 2, 0]
    assert edits.edits_per_position.tolist() == [2, 1, 0, 0]
    assert edits.post_steps.tolist() == [False, False, False, True, True]
    summary = edits.summary()
    assert summary["edits"] == 3 and summary["post_steps"] == 2


def test_post_steps_look_only_inside_the_step_window() -> None:
    # Step 1's window [0, 2) is full although position 2 (outside it) is still masked.
    trace = step_trace([({0: 10, 1: 11}, {}), ({}, {1: 12}), ({2: 13}, {})], 3,
                       window=[(0, 2), (0, 2), (2, 3)])
    assert trace.post_steps.tolist() == [False, True, False]


def test_an_edit_to_the_mask_reopens_the_position() -> None:
    trace = step_trace([({0: 10}, {}), ({}, {0: MASK}), ({0: 12}, {})], 1)
    assert trace.edit_events == [EditEvent(1, 0, 10, MASK)]
    assert trace.commit_step.tolist() == [2] and trace.post_steps.tolist() == [False, True, False]


def test_traces_without_edits_have_none() -> None:
    trace = make_trace(30, 16)
    assert trace.edit_events == [] and not trace.post_steps.any()
    assert trace.summary()["edits"] == 0 and trace.summary()["post_steps"] == 0
    assert hand_trace([[4, 5]] * 2, [0, 1]).edits_per_position.tolist() == [0, 0]
