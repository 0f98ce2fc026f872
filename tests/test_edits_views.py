"""Token edits (block refinement) in the Trace helpers and every view that shows them.

The EDIT_STEPS trace (trace_factory) has three edits at two positions and two post-steps; each
view must show them, and a trace without edits must draw exactly what it drew before.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from html_styles import resolved, token_styles
from toy import ToyAdapter
from trace_factory import MASK, edit_trace, hand_trace, make_trace, step_trace

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.figures import (
    commit_order_heatmap,
    confidence_heatmap,
    entropy_heatmap,
    refinement_dumbbell,
    step_series,
    step_summary_strip,
    token_states,
    token_strip,
    token_strip_html,
)
from dllm_viz.figures._layout import EDIT_COLOR
from dllm_viz.figures.summary import LEGEND_ROW, TITLE_LINE
from dllm_viz.policies import AlignedBlocks, BlockRefinementRule, Pipeline
from dllm_viz.policies.base import COMMIT_REASONS
from dllm_viz.trace import EditEvent, TraceFileError, load_trace


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


# ---- views -------------------------------------------------------------------------------------
def _by_name(fig, name: str):
    found = [d for d in fig.data if d.name == name]
    assert len(found) == 1, [d.name for d in fig.data]
    return found[0]


def test_heatmap_marks_every_edit_with_old_and_new_in_its_hover(edits) -> None:
    fig = confidence_heatmap(edits)
    marks = _by_name(fig, "edit")
    cells = sorted(zip(list(marks.x), np.asarray(marks.y).tolist(), strict=True))
    assert cells == [("0:w30", 1.0), ("0:w30", 3.0), ("1:w21", 3.0)]
    hover = dict(zip(zip(marks.x, np.asarray(marks.y).tolist(), strict=True), marks.text, strict=True))
    assert hover[("0:w30", 1.0)] == "position 0: edited: 'w10' → 'w20' at step 1"
    assert hover[("1:w21", 3.0)] == "position 1: edited: 'w11' → 'w21' at step 3"
    assert marks.marker.symbol != _by_name(fig, "commit").marker.symbol
    assert "edit" in [d.name for d in entropy_heatmap(edits).data]  # every statistic heatmap shares it
    assert "edit" not in [d.name for d in confidence_heatmap(edits, show_commits=False).data]


def test_pooled_heatmap_lists_each_edit_of_a_cell() -> None:
    trace = step_trace([({0: 10, 1: 11}, {}), ({}, {0: 20, 1: 21})], 2)
    marks = _by_name(confidence_heatmap(trace, max_positions=1), "edit")
    assert list(marks.x) == ["0-1:w20w21"] and marks.text[0].split("<br>") == [
        "position 0: edited: 'w10' → 'w20' at step 1", "position 1: edited: 'w11' → 'w21' at step 1"]


def test_token_strip_strikes_the_replaced_token_and_marks_this_steps_edits(edits) -> None:
    fig = token_strip(edits, 3)
    texts = list(fig.data[1].text)
    assert texts[:3] == ["<s>w20</s> w30", "<s>w11</s> w21", "w12"]
    marks = _by_name(fig, "edited this step")
    assert list(marks.x) == pytest.approx([0.38, 1.38]) and "edited: 'w20' → 'w30' at step 3" in marks.text[0]
    hover = np.asarray(fig.data[0].text).ravel().tolist()
    assert "edited: 'w10' → 'w20' at step 1<br>edited: 'w20' → 'w30' at step 3" in hover[0]
    assert "edited this step" in fig.layout.title.text
    before = token_strip(edits, 0)  # nothing edited yet: plain text, no marks, the legend keys stay
    assert list(before.data[1].text)[:2] == ["w10", "w11"] and len(before.data) == 2
    assert "<s>" not in "".join(token_strip(edits, 2).data[1].text[1:])


def test_token_strip_html_strikes_old_tokens_and_outlines_this_steps_edits(edits) -> None:
    page = token_strip_html(edits, 3)
    assert "<s>w10</s> <s>w20</s> w30</span>" in page
    assert "edited: &#x27;w11&#x27; → &#x27;w21&#x27; at step 3" in page
    struck = [style for tag, style, _ in resolved(page) if tag == "s"]
    assert len(struck) == 4 and all(style == {"opacity": "0.7"} for style in struck)  # 3 tokens, the legend's
    outline = f"2px solid {EDIT_COLOR}"
    assert [style.get("outline") for style in token_styles(page)].count(outline) == 3  # positions 0, 1, the key
    assert [style.get("outline") for style in token_styles(token_strip_html(edits, 4))].count(outline) == 1


def test_a_remasked_position_is_a_draft_with_its_edit_in_the_hover() -> None:
    trace = step_trace([({0: 10}, {}), ({}, {0: MASK}), ({0: 12}, {})], 1)
    states = token_states(trace, 1)
    assert states.is_draft.tolist() == [True] and states.replaced == [()]
    assert states.edit_notes == [["edited: 'w10' → '[MASK]' at step 1"]]
    assert token_states(trace, 2).replaced == [("w10",)]


def test_commit_order_marks_edited_positions_and_keeps_the_commit_colour(edits) -> None:
    fig = commit_order_heatmap(edits, tokens_per_row=2)
    assert np.asarray(fig.data[0].z).tolist() == [[0, 0], [1, 2]]  # colour: the step of the commit
    assert list(fig.data[1].text) == ["<s>w20</s> w30", "<s>w11</s> w21", "w12", "w13"]
    marks = _by_name(fig, "edited after commit")
    assert marks.showlegend and list(marks.x) == pytest.approx([0.38, 1.38]) and list(marks.y) == [-0.3, -0.3]
    assert marks.text[0].endswith("edited: 'w10' → 'w20' at step 1<br>edited: 'w20' → 'w30' at step 3")


def test_refinement_view_draws_edits_from_commit_to_last_edit(edits) -> None:
    fig = refinement_dumbbell(edits)
    marks = _by_name(fig, "edit")
    assert list(zip(marks.x, marks.y, strict=True)) == [(1, 0), (3, 0), (3, 1)]
    assert list(marks.text) == ["edited: 'w10' → 'w20' at step 1", "edited: 'w20' → 'w30' at step 3",
                                "edited: 'w11' → 'w21' at step 3"]
    assert list(_by_name(fig, "committed, later edited").x) == [0, 3, None, 0, 3, None]
    assert "3 edits changed 2 committed positions" in fig.layout.annotations[0].text
    # one short line each, above the plot: on one line the note ran past a half-width chart's right edge
    lines = fig.layout.annotations[0].text.split("<br>")
    assert len(lines) == 3 and max(map(len, lines)) <= 80
    assert fig.layout.margin.t >= 80 + 16 * len(lines)  # room for the two-line title and the note


def test_summary_counts_edits_and_post_steps_per_step(edits) -> None:
    series = step_series(edits)
    assert series["edited"].tolist() == [0, 1, 0, 2, 0] and series["post_step"].tolist() == [0, 0, 0, 1, 1]
    fig = step_summary_strip(edits)
    assert _by_name(fig, "edited this step").y.tolist() == [0, 1, 0, 2, 0]
    posts = _by_name(fig, "post-step (window had no masks)")
    assert posts.x.tolist() == [3, 4] and posts.y.tolist() == [2, 0]  # on top of the step's bar
    assert "3 edits" in fig.layout.title.text and "2 post-steps" in fig.layout.title.text
    # the counts on a line of their own (on the label's line they were cut off a half-width chart), and
    # the figure grows by that line and by the two legend entries, so its panels keep their height
    title_lines = fig.layout.title.text.split("<br>")
    assert len(title_lines) == 3 and "3 edits · 2 post-steps" in title_lines[2]
    assert fig.layout.height == 620 + 2 * LEGEND_ROW + TITLE_LINE and fig.layout.margin.t == 80 + TITLE_LINE
    # two short lines: "commits, edits" on one ran down into the masked panel's title at 1024 px
    assert fig.layout.yaxis.title.text == "commits<br>+ edits"
    assert max(len(line) for line in fig.layout.yaxis.title.text.split("<br>")) <= len("commits")


VIEWS_OF = {
    "heatmap": lambda t: confidence_heatmap(t), "strip": lambda t: token_strip(t, 1),
    "order": commit_order_heatmap, "refinement": refinement_dumbbell, "summary": step_summary_strip,
}


@pytest.mark.parametrize("view", list(VIEWS_OF))
def test_a_trace_without_edits_draws_no_edit_trace_or_legend_entry(view: str) -> None:
    trace = make_trace(30, 16, seed=3)
    fig = VIEWS_OF[view](trace)
    names = {d.name for d in fig.data}
    assert not names & {"edit", "edited this step", "edited after commit",
                        "committed, later edited", "post-step (window had no masks)"}
    shown = fig.to_json()
    assert "edited" not in shown and "<s>" not in shown and "edits" not in str(fig.layout.title.text)
    assert "post-step" not in str(fig.layout.title.text)
    with_edits = VIEWS_OF[view](edit_trace())
    assert {d.name for d in with_edits.data} - names  # the same view does show a trace's edits


def test_the_strip_html_of_a_trace_without_edits_has_no_edit_keys() -> None:
    page = token_strip_html(make_trace(30, 16, seed=3), 5)
    assert "<s>" not in page and "<s " not in page and "outline" not in page and "edited" not in page


# ---- saved files -------------------------------------------------------------------------------
EDIT = COMMIT_REASONS.index("edit")


def _arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _with_meta(arrays: dict[str, np.ndarray], change) -> dict[str, np.ndarray]:
    meta = change(json.loads(arrays["__meta_json__"].tobytes()))
    return {**arrays, "__meta_json__": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}


def test_a_trace_with_edits_round_trips(edits, tmp_path: Path) -> None:
    loaded = load_trace(edits.save(tmp_path / "edits.npz"))
    assert np.array_equal(loaded.edited, edits.edited) and loaded.edit_events == edits.edit_events


def _set(values: np.ndarray, where: tuple, value) -> np.ndarray:
    values = values.copy()
    values[where] = value
    return values


@pytest.mark.parametrize(("change", "needle"), [
    (lambda a: {**a, "edited": a["edited"].astype(np.int8)}, r"'edited' has dtype '\|i1'.*booleans"),
    (lambda a: {**a, "edited": a["edited"][:, :3]}, r"Trace\.edited must have shape \(5, 4\)"),
    (lambda a: {**a, "edited": a["edited"][0]}, r"'edited'.*2 dimensions"),
    # step 1 edits position 0 (10 -> 20): its reason must be 'edit', and 'edit' only there
    (lambda a: {**a, "reason": _set(a["reason"], (1, 0), 2)}, "'reason' must be 'edit' exactly where"),
    (lambda a: {**a, "reason": _set(a["reason"], (0, 0), EDIT)},
     "'reason' must be 'edit' exactly where"),
    # an edit that changes nothing, or replaces a mask, is not an edit
    (lambda a: {**a, "tokens": _set(a["tokens"], (2, 0), 10)}, "token must change"),
    (lambda a: {**a, "edited": _set(a["edited"], (0, 2), True), "reason": _set(a["reason"], (0, 2), EDIT)},
     "token must change"),
    (lambda a: {**a, "window": _set(a["window"], (1,), [1, 4])}, "outside that step's window"),
    # a file from before the 'edit' reason existed cannot hold edits
    (lambda a: _with_meta({**a, "reason": np.where(a["edited"], 2, a["reason"])},
                          lambda m: {**m, "reason_names": m["reason_names"][:-1]}), "have no 'edit'"),
])
def test_crafted_edits_are_refused_naming_the_field(edits, tmp_path: Path, change, needle: str) -> None:
    arrays = change(_arrays(edits.save(tmp_path / "edits.npz")))
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(TraceFileError, match=needle):
        load_trace(path)


def test_an_edit_of_a_masked_position_is_refused(tmp_path: Path) -> None:
    trace = step_trace([({0: 10}, {}), ({1: 11}, {})], 2)
    arrays = _arrays(trace.save(tmp_path / "t.npz"))
    arrays["committed"][1, 1], arrays["edited"][1, 1], arrays["reason"][1, 1] = False, True, EDIT
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(TraceFileError, match="replaced a masked position"):
        load_trace(tmp_path / "bad.npz")


def test_a_real_block_refinement_decode_shows_its_edits_everywhere(tmp_path: Path) -> None:
    """The engine's own edits (toy model, LLaDA2's rule) pass the file checks and reach every view."""
    pipeline = Pipeline(rule=BlockRefinementRule(commit_threshold=0.5, editing_threshold=0.3), block=AlignedBlocks(8))
    trace = load_trace(decode(ToyAdapter(), [3, 4, 5], pipeline, DecodeConfig(gen_length=24)).save(tmp_path / "r.npz"))
    events = trace.edit_events
    assert events and trace.post_steps.any()
    for event in events:  # the recorded canvas agrees with each event
        assert trace.tokens[event.step, event.position] == event.old != event.new
        assert trace.reason[event.step, event.position] == EDIT
    assert len(_by_name(confidence_heatmap(trace), "edit").x) == len({(e.step, e.position) for e in events})
    assert len(_by_name(refinement_dumbbell(trace), "edit").x) == len(events)
    assert _by_name(step_summary_strip(trace), "edited this step").y.sum() == len(events)
    assert trace.summary()["edits"] == len(events)
    posts = _by_name(step_summary_strip(trace), "post-step (window had no masks)")
    assert trace.summary()["post_steps"] == len(posts.x)
