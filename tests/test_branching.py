"""Forking a recorded decode at step k (dllm_viz.branching) through the engine's one loop."""

from __future__ import annotations

import numpy as np
import pytest
from toy import MASK, ToyAdapter

from dllm_viz.branching import Fork, fork_decode
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode, iter_decode
from dllm_viz.policies import Pipeline
from dllm_viz.trace import Trace

PROMPT = [3, 4, 5]


@pytest.fixture(scope="module")
def original() -> Trace:
    return decode(ToyAdapter(), PROMPT, Pipeline.from_names("threshold", threshold=0.9, block_length=8),
                  DecodeConfig(gen_length=32))


@pytest.mark.parametrize("at", [0, 3, 7])
def test_forking_under_the_same_rule_reproduces_the_recorded_decode(original: Trace, at: int) -> None:
    same = fork_decode(ToyAdapter(), original, Fork(at, Pipeline.from_names("threshold", threshold=0.9,
                                                                            block_length=8)))
    np.testing.assert_array_equal(same.fork.tokens, original.tokens[at:])
    assert same.fork_nfe == original.nfe and same.first_divergence() is None
    assert not same.final_difference().any()


def test_another_threshold_changes_only_what_comes_after_the_fork(original: Trace) -> None:
    at = 2
    other = fork_decode(ToyAdapter(), original, Fork(at, Pipeline.from_names("threshold", threshold=0.3,
                                                                             block_length=8)))
    divergence = other.divergence()
    assert (divergence[: at + 1] == 0).all()  # the shared steps are the recorded ones
    assert other.fork_nfe < original.nfe and other.first_divergence() is not None
    assert other.fork.meta.fork_of["step"] == at
    committed_before = original.tokens[at] != MASK
    assert not other.fork.committed[:, committed_before].any()  # decided before the fork: context only


def test_a_forced_token_is_kept_and_the_branches_diverge_there(original: Trace) -> None:
    at, position = 1, int(np.flatnonzero(original.tokens[1] == MASK)[0])
    token = int((original.final_tokens[position] + 1) % 20 + 3)
    forced = fork_decode(ToyAdapter(), original, Fork(at, Pipeline.from_names("threshold", block_length=8),
                                                      force_position=position, force_token=token))
    assert forced.fork.tokens[0, position] == token and forced.fork.final_tokens[position] == token
    assert forced.first_divergence() == at and forced.final_difference()[position]


def test_bad_forks_are_refused_with_the_reason(original: Trace) -> None:
    pipe = Pipeline.from_names("threshold", block_length=8)
    with pytest.raises(ValueError, match="fork step must be in"):
        fork_decode(ToyAdapter(), original, Fork(original.num_steps, pipe))
    committed = int(np.flatnonzero(original.tokens[3] != MASK)[0])
    with pytest.raises(ValueError, match="already committed at step 3"):
        fork_decode(ToyAdapter(), original, Fork(3, pipe, force_position=committed, force_token=5))
    with pytest.raises(ValueError, match="both a position and a token"):
        fork_decode(ToyAdapter(), original, Fork(3, pipe, force_position=committed))


def test_the_engine_starts_from_an_initial_canvas_and_checks_its_length() -> None:
    canvas = np.full(16, MASK)
    canvas[:8] = 7
    records = list(iter_decode(ToyAdapter(), PROMPT, Pipeline.from_names("threshold", block_length=8),
                               DecodeConfig(gen_length=16), initial_tokens=canvas))
    assert records and not any(r.committed[:8].any() for r in records)
    assert (records[-1].tokens[:8] == 7).all() and (records[-1].tokens != MASK).all()
    assert records[0].window == (8, 16)  # the filled first block is skipped
    trace = decode(ToyAdapter(), PROMPT, Pipeline.from_names("threshold", block_length=8),
                   DecodeConfig(gen_length=16), initial_tokens=canvas)
    assert (trace.tokens[0] == canvas).all() and (trace.final_tokens[:8] == 7).all()
    assert trace.nfe == len(records) and (trace.commit_step[:8] < 0).all()
    with pytest.raises(ValueError, match="gen_length \\(16\\) ids"):
        next(iter_decode(ToyAdapter(), PROMPT, Pipeline.from_names("threshold", block_length=8),
                         DecodeConfig(gen_length=16), initial_tokens=np.full(8, MASK)))


def test_the_divergence_figure_marks_the_fork_and_both_ends(original: Trace) -> None:
    from dllm_viz.figures import branch_divergence_line

    other = fork_decode(ToyAdapter(), original, Fork(2, Pipeline.from_names("threshold", threshold=0.3,
                                                                            block_length=8)))
    fig = branch_divergence_line(other.divergence(), fork_step=other.at, nfe=(original.nfe, other.fork_nfe))
    line, *ends = fig.data
    assert list(line.y) == other.divergence().tolist()
    assert [e.x[0] for e in ends] == [original.nfe, other.fork_nfe]
    assert fig.layout.shapes[0].x0 == 2 and "fork at step 2" in fig.layout.annotations[0].text
