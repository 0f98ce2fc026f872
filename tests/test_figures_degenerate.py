"""Unusual but legal inputs to the figure builders and the trace statistics they draw on.

Each case is one a real decode or a saved file can produce (a position re-opened by an edit, a
long trace, labels with markup or bidi controls, settings saved as text) and once made a builder
raise a bare exception, draw wrong numbers or take seconds.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from trace_factory import MASK, make_trace, step_trace

from dllm_viz import dynamics
from dllm_viz import figures as F
from dllm_viz.figures.compare import unique_labels
from dllm_viz.figures.summary import step_series
from dllm_viz.trace import Trace

MARKUP = "<img src=x onerror=alert(1)>"


def strings(value: object) -> list[str]:
    """Every string anywhere in a figure's JSON."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def labelled(trace: Trace, label: str) -> Trace:
    return replace(trace, meta=trace.meta.replace(label=label))


def reopened_trace() -> Trace:
    """One position: committed to 10 at step 0, re-opened by an edit at step 1, masked with its final
    candidate 12 at step 2, committed to 12 at step 3."""
    trace = step_trace([({0: 10}, {}), ({}, {0: MASK}), ({}, {}), ({0: 12}, {})], 1)
    candidate = trace.candidate.copy()  # a Trace's arrays are read-only: a changed trace is a new one
    candidate[2, 0] = 12  # its candidate settles on the final token as soon as it is masked again
    return replace(trace, candidate=candidate)


def test_step_series_counts_the_mask_an_edit_writes_back() -> None:
    """Before: masked_remaining = L - cumsum(commits) went to -1 and committed_fraction to 2.0."""
    series = step_series(reopened_trace())
    assert series["masked_remaining"].tolist() == [0.0, 1.0, 1.0, 0.0]
    assert series["committed_fraction"].tolist() == [1.0, 0.0, 0.0, 1.0]


def test_settled_step_ignores_the_steps_a_reopened_position_spent_committed() -> None:
    """Before: settled at step 1 (when the position held a committed token) and 2 of 4 steps wasted."""
    trace = reopened_trace()
    assert dynamics.settled_step(trace).tolist() == [2]
    # masked at steps 0, 2, 3; only step 2 refined an answer already settled
    assert dynamics.wasted_refinement_fraction(trace) == pytest.approx(1 / 3)


def test_most_revised_position_reads_each_token_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: one token_text call per masked cell (4 s on a 1024-position, 1000-step trace)."""
    trace = make_trace(200, 64, block_length=64, seed=1)
    expected = [max(len(dynamics.candidate_history(trace, p)) - 1, 0) for p in range(trace.gen_length)]
    calls = []
    original = Trace.token_text
    monkeypatch.setattr(Trace, "token_text", lambda self, token_id: calls.append(token_id) or original(self, token_id))
    counts = np.where(trace.commit_step >= 0, expected, 0)
    assert dynamics.most_revised_position(trace) == int(np.argmax(counts))
    assert len(calls) <= len(np.unique(trace.candidate))
    assert dynamics.candidate_revisions(trace).tolist() == expected


def test_repeated_labels_stay_distinct_in_bars_and_legends() -> None:
    """Before: labels 'a', 'a', 'a #2' gave 'a', 'a #2', 'a #2': two bars on one category."""
    base = make_trace(4, 6)
    traces = [labelled(base, label) for label in ("a", "a", "a #2")]
    assert len(set(unique_labels(traces))) == 3
    assert len(set(F.nfe_bar(traces).data[0].x)) == 3
    assert len({line.name for line in F.step_series_lines(traces).data}) == 3


def test_nfe_accuracy_scatter_escapes_labels() -> None:
    """Before: sweep labels reached plotly's hover and annotations as raw markup."""
    fig = F.nfe_accuracy_scatter([(MARKUP, 3, 0.5), ("<script>x</script>", 5, 0.9)])
    shown = strings(json.loads(fig.to_json()))
    assert not [s for s in shown if "<img" in s or "<script" in s]
    assert "&lt;img src=x onerror=alert(1)&gt;" in fig.data[0].text


def test_nfe_accuracy_scatter_rejects_percentages() -> None:
    """Before: accuracy 75 was drawn above the fixed [0, 1] axis: an empty chart."""
    with pytest.raises(ValueError, match=r"fraction in \[0, 1\], got \[75.0\]; divide percentages by 100"):
        F.nfe_accuracy_scatter([("a", 3, 0.5), ("b", 4, 75.0)])
    with pytest.raises(ValueError, match="must be numbers"):
        F.nfe_accuracy_scatter([("a", "many", 0.5)])
    assert F.nfe_accuracy_scatter([("a", 3, float("nan"))]).data  # unknown accuracy: drawn off the front


def test_branch_divergence_line_rejects_an_empty_series() -> None:
    """Before: IndexError from placing the end marks on an empty array."""
    with pytest.raises(ValueError, match="`divergence` must be a 1-D count"):
        F.branch_divergence_line(np.zeros(0, dtype=int), fork_step=0, nfe=(0, 0))
    assert F.branch_divergence_line(np.array([0]), fork_step=0, nfe=(0, 0)).data


def test_settings_saved_as_text_raise_one_value_error() -> None:
    """An older or hand-edited file's pipeline may hold text; before: TypeError / float() errors."""
    trace = make_trace(8, 6, seed=2)
    texty = replace(trace, meta=trace.meta.replace(pipeline={
        "rule": {"name": "cora", "delta_p": "0.9", "m": "2"}, "extrapolate": {"name": "kalman", "tau_ce": "high"}}))
    with pytest.raises(ValueError, match=r"rule.delta_p = '0.9', not a finite number; pass delta_p="):
        F.persistence_runs_bar(texty)
    with pytest.raises(ValueError, match=r"extrapolate.tau_ce = 'high', not a finite number; pass threshold="):
        F.kalman_forecast_bands(texty)
    assert F.persistence_runs_bar(texty, delta_p=0.9, m=2).data
    assert F.kalman_forecast_bands(texty, threshold=0.9).data


def test_bidi_override_never_reaches_a_title_or_hover() -> None:
    """Before: a label or token holding U+202E reversed the rest of its title or hover line."""
    trace = labelled(make_trace(5, 6), "fast\u202e")
    meta = trace.meta.to_dict()
    meta["token_text"] = {**meta["token_text"], **{str(i): "\u202eevil" for i in range(2, 40)}}
    trace = replace(trace, meta=trace.meta.from_dict(meta))
    for fig in (F.confidence_heatmap(trace), F.commit_order_heatmap(trace), F.token_strip(trace),
                F.step_series_lines([trace])):
        assert not [s for s in strings(json.loads(fig.to_json())) if "\u202e" in s]
    assert "[U+202E]" in F.confidence_heatmap(trace).layout.title.text
    assert "\u202e" not in F.token_strip_html(trace)
