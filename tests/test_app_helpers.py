"""The app's plain helpers: replaying a rule over a dense trace, export bytes, prompt and value checks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app_ui.autosave import autosave_name_problem, library_count
from app_ui.common import (
    ANSWER_MARKS,
    OWN_PROMPT,
    PromptError,
    check_prompt,
    comparison_rows,
    diff_html,
    file_name_problem,
    prompt_query,
    sample_problems,
    sample_verdict,
    share_query,
)
from app_ui.export import npz_bytes, png_available, png_bytes, uploaded_trace
from app_ui.sweep import parse_values, sweep_configs
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.policies.knobs import knobs, parse_strings
from dllm_viz.replay import agreement, replay, replay_signature
from dllm_viz.trace import Trace, TraceFileError


@pytest.fixture(scope="module")
def dense(tiny_adapter: ModelAdapter) -> Trace:
    """LLaDA dense decoding (one token per step) of a short prompt, 2 blocks of 16."""
    pipeline = Pipeline.dense(16)
    return decode(tiny_adapter, tiny_adapter.encode_prompt("What is 3 + 4?"), pipeline, DecodeConfig(gen_length=32))


def test_replaying_the_dense_rule_reproduces_the_dense_trace(dense: Trace) -> None:
    again = replay(dense, Pipeline.dense(16))
    assert again.nfe == dense.nfe
    np.testing.assert_array_equal(again.tokens, dense.tokens)
    np.testing.assert_array_equal(again.committed, dense.committed)
    assert agreement(again, dense) == dense.gen_length


@pytest.mark.parametrize("extrapolate", [None, "kalman"])
def test_a_lower_threshold_never_needs_more_replayed_steps(dense: Trace, extrapolate: str | None) -> None:
    nfe = []
    for threshold in (1.0, 0.9, 0.012, 0.005):
        trace = replay(dense, Pipeline.from_names("threshold", "fixed", extrapolate, threshold=threshold))
        assert trace.is_complete and trace.tokens_per_step.min() >= 1
        assert (trace.committed.sum(axis=0) == 1).all()
        nfe.append(trace.nfe)
    assert nfe == sorted(nfe, reverse=True) and nfe[0] == dense.nfe and nfe[-1] < dense.nfe


def test_replay_records_the_rule_internals_and_which_dense_step_each_step_read(dense: Trace) -> None:
    trace = replay(dense, Pipeline.from_names("cora", "fixed", "kalman", delta_p=0.012, m=1))
    assert {"persistence", "kalman_lower"} <= set(trace.extras)
    steps = list(trace.meta.dense_steps)
    assert len(steps) == trace.nfe and steps == sorted(steps) and steps[0] == 0
    np.testing.assert_array_equal(trace.confidence, dense.confidence[steps])
    assert trace.meta.label == "replay: cora+kalman"


def test_replay_runs_a_family_calibrated_knob_at_the_dense_trace_models_point(
        dense: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Like a decode of that model: `cora` with no knobs at its family's (delta_p, m), not the
    published ones, and the replayed trace says which."""
    from dllm_viz.models import families

    row = families.by_name("tiny")
    assert row is not None
    moved = replace(row, points={**row.points, "cora": {"delta_p": 0.012, "m": 1}})
    monkeypatch.setattr(families, "FAMILIES", tuple(moved if f.name == "tiny" else f for f in families.FAMILIES))
    unset = replay(dense, Pipeline.from_names("cora", "fixed"))
    assert (unset.meta.pipeline["rule"]["delta_p"], unset.meta.pipeline["rule"]["m"]) == (0.012, 1)
    stated = replay(dense, Pipeline.from_names("cora", "fixed", delta_p=0.012, m=1))
    published = replay(dense, Pipeline.from_names("cora", "fixed", delta_p=0.97, m=2))
    assert unset.nfe == stated.nfe < published.nfe


def test_replays_that_commit_alike_share_a_signature_and_others_do_not(dense: Trace) -> None:
    def signature(threshold: float) -> bytes:
        return replay_signature(replay(dense, Pipeline.from_names("threshold", "fixed", None, threshold=threshold)))

    assert signature(0.9) == signature(0.9)  # wall times differ between the two replays; the digest does not
    assert signature(1.0) != signature(0.005)  # one token a step against several: other commits
    assert signature(1e-6) == signature(1e-7)  # below any top-1 probability: both commit whole windows at once


def test_comparison_rows_show_policy_overhead_and_leave_it_blank_when_unknown(dense: Trace) -> None:
    replayed = replay(dense, Pipeline.from_names("threshold", block_length=16))
    assert np.isfinite(replayed.policy_seconds).all() and replayed.summary()["policy_overhead"] > 0
    old = replace(replayed, policy_seconds=None)  # as loaded from a file saved before policy timing
    rows = comparison_rows(dense, [replayed, old])
    overhead = [row["policy overhead %"] for row in rows]
    assert overhead[0] == pytest.approx(100 * dense.policy_seconds.sum() / dense.forward_seconds.sum())
    assert overhead[1] > 0 and np.isnan(overhead[2])
    assert np.isnan(old.summary()["policy_ms_per_pass"])
    assert replayed.summary()["policy_ms_per_pass"] == pytest.approx(1e3 * replayed.policy_seconds.sum() / replayed.nfe)


def test_answers_to_bundled_samples_are_marked_and_others_are_not(dense: Trace) -> None:
    samples = sample_problems()
    breadth, code = samples["hard/breadth-1"], samples["code-1"]

    def answered(prompt: str | None, answer: str) -> Trace:
        return replace(dense, meta=dense.meta.replace(prompt_text=prompt, answer_text=answer))

    reordered = "\n".join([*reversed(breadth.target.split("\n")[:2]), *breadth.target.split("\n")[2:]])
    assert sample_verdict(answered(breadth.prompt, breadth.target)) == ANSWER_MARKS[True]
    assert sample_verdict(answered(breadth.prompt + "\n", reordered)) == ANSWER_MARKS[True]  # any valid form
    assert sample_verdict(answered(breadth.prompt, breadth.target.replace("####", "## "))) == ANSWER_MARKS[False]
    assert sample_verdict(answered("What is 3 + 4?", "#### 7")) is None  # a prompt of one's own: no reference
    assert sample_verdict(answered(None, "#### 7")) is None
    assert sample_verdict(answered(code.prompt, code.target)) is None  # marking it would run the code
    rows = comparison_rows(answered(breadth.prompt, breadth.target), [answered(breadth.prompt, "#### 1")])
    assert [row["answer"] for row in rows] == [ANSWER_MARKS[True], ANSWER_MARKS[False]]
    assert "answer" not in comparison_rows(dense, [dense])[0]


def test_npz_export_round_trips_and_a_corrupt_upload_is_refused(dense: Trace) -> None:
    again = uploaded_trace(npz_bytes(dense), "copy.npz")
    np.testing.assert_array_equal(again.tokens, dense.tokens)
    assert again.meta.label == dense.meta.label
    with pytest.raises(TraceFileError, match=r"broken\.npz"):
        uploaded_trace(b"not a zip", "broken.npz")


@pytest.mark.slow
@pytest.mark.skipif(not png_available(), reason="PNG export needs kaleido and a Chromium (apt-get install chromium)")
def test_png_export_through_kaleido(dense: Trace) -> None:
    from dllm_viz.figures import confidence_heatmap

    assert png_bytes(confidence_heatmap(dense)).startswith(b"\x89PNG\r\n\x1a\n")


def test_share_query_names_the_decode_page_widgets(dense: Trace) -> None:
    query = share_query(dense)
    prompt = {k: query.pop(k) for k in ("sample", "text") if k in query}
    assert query == {"gen": "32", "seed": "0", "rule": "fixed_steps", "remasking": "low_confidence",
                     "block": "fixed", "block_length": "16"}
    # the prompt travels too: its text when it is not a bundled sample (prompt_input reads it back)
    assert prompt == (prompt_query(dense.meta.prompt_text) if dense.meta.prompt_text else {})
    assert prompt_query("my own question") == {"sample": OWN_PROMPT, "text": "my own question"}


@pytest.mark.parametrize(("text", "message"), [("", "empty"), ("  \n ", "empty"), ("x" * 4001, "at most 4000")])
def test_check_prompt_refuses_empty_and_oversized_prompts(text: str, message: str) -> None:
    with pytest.raises(PromptError, match=message):
        check_prompt(text)
    assert check_prompt("  hi ") == "hi"


@pytest.mark.parametrize(("name", "fix"), [(".hidden", "e.g. 'hidden'"), ("..x", "e.g. 'x'"), ("...", "or '-'")])
def test_file_names_starting_with_a_dot_are_refused(name: str, fix: str) -> None:
    """'.hidden' passed: saved as a hidden file, which the trace library does not list."""
    problem = file_name_problem(name)
    assert problem is not None and f"the file name {name!r} starts with '.'" in problem and problem.endswith(fix)
    assert file_name_problem("hidden") is None and file_name_problem("a.b") is None  # a '.' inside is fine


def test_library_count_counts_autosaves_apart() -> None:
    """One total counted each run's autosave as a trace the user had saved."""
    assert library_count([]) == "0 traces" and library_count(["a.npz"]) == "1 trace"
    assert library_count(["a.npz", "b.npz", "autosave-1.npz"]) == "2 saved traces and 1 autosave"
    assert library_count(["autosave-1.npz", "autosave-2.npz"]) == "0 saved traces and 2 autosaves"
    assert "'autosave-x' starts with 'autosave-'" in (autosave_name_problem("autosave-x") or "")
    assert autosave_name_problem("my-autosave-x") is None


def test_diff_html_marks_only_the_changed_words() -> None:
    out = diff_html("12 + 7 = 19", "12 + 8 = 19 <b>")
    assert out.count("<mark") == 2 and ">8</mark> = 19 <mark" in out and "&lt;b&gt;" in out  # escaped
    assert "<mark" not in diff_html("same text", "same text")


def test_sweep_values_and_grid() -> None:
    specs = knobs(Pipeline.from_names("cora").rule.__class__)
    assert parse_values("delta_p", "0.5, 0.9,", specs) == [0.5, 0.9]
    assert parse_values("m", "1,2", specs) == [1, 2]
    with pytest.raises(ValueError, match=r"'x'.*delta_p"):
        parse_values("delta_p", "0.5, x", specs)
    with pytest.raises(ValueError, match="no values"):
        parse_values("m", " , ", specs)
    with pytest.raises(ValueError, match=r"delta_p lists 0.9 more than once"):
        parse_values("delta_p", "0.9, 0.5, 0.90", specs)
    configs = sweep_configs("cora", None, 16, 32, {"delta_p": [0.5, 0.9], "m": [1, 2]})
    assert next(iter(configs)) == "dense" and "delta_p=0.9, m=2" in configs and len(configs) == 5
    with pytest.raises(ValueError, match="must be in"):
        sweep_configs("cora", None, 16, 32, {"delta_p": [1.5]})


def test_parse_strings_reads_python_escapes() -> None:
    assert parse_strings(r"\n,.") == ("\n", ".")
    assert parse_strings("") == ()
    assert parse_strings("。,é,\\x2c") == ("。", "é", ",")  # typed characters stay as typed, not UTF-8 bytes
    for broken in ("\\", r"a,\x4", r"\u12"):  # a ValueError naming the part, not a UnicodeDecodeError
        with pytest.raises(ValueError, match=r"holds a broken escape .*write a backslash as") as info:
            parse_strings(broken)
        assert type(info.value) is ValueError


def test_rules_that_draw_their_own_candidates_are_not_replayable(dense: Trace) -> None:
    from dllm_viz.policies import RULES
    from dllm_viz.replay import replayable

    assert {name for name, cls in RULES.items() if not replayable(cls)} == {"block_refinement"}
    with pytest.raises(ValueError, match="decode it for real"):
        replay(dense, Pipeline.from_names("block_refinement", "fixed", block_length=16))


def test_a_unit_knob_is_a_slider_only_where_every_familys_point_sits_on_its_grid(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A slider in 0.01 steps shows 0.995 as 0.99 or 1.00 and loses it on the first drag (the tiny
    family's CORA delta_p since session 49), so such a knob is a number input for every model."""
    from app_ui import widgets
    from dllm_viz.models import families
    from dllm_viz.policies import BLOCKS, RULES

    delta_p = next(spec for spec in knobs(RULES["cora"]) if spec.name == "delta_p")
    tau_d = next(spec for spec in knobs(BLOCKS["adablock"]) if spec.name == "delimiter_threshold")
    for point, slider in ((0.995, False), (0.99, True)):
        points = {"cora": {"delta_p": point, "m": 1}, "adablock": {"delimiter_threshold": 0.9}}
        monkeypatch.setattr(widgets, "FAMILIES", tuple(replace(f, points=points) for f in families.FAMILIES))
        assert widgets._is_slider(delta_p) is slider and widgets._is_slider(tau_d)
