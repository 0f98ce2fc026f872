"""Trace: validation, derived views, and the .npz + JSON round trip without pickle."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from toy import ToyAdapter

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.policies import Pipeline
from dllm_viz.step_schema import STEP_FIELD_NAMES, STEP_FIELDS
from dllm_viz.trace import Trace, TraceBuilder, TraceFileError, TraceSaveError, load_trace
from dllm_viz.trace_files import trace_files
from dllm_viz.trace_meta import TraceMeta


@pytest.fixture(scope="module")
def trace() -> Trace:
    return decode(ToyAdapter(), [3, 4, 5], Pipeline.from_names("threshold", threshold=0.6, block_length=8),
                  DecodeConfig(gen_length=24), prompt_text="toy prompt")


def test_round_trip_is_identical(trace: Trace, tmp_path: Path) -> None:
    trace.extras["persistence"] = np.arange(trace.num_steps * 24, dtype=np.float32).reshape(-1, 24)
    path = trace.save(tmp_path / "run.npz")
    loaded = load_trace(path)
    for name in (*STEP_FIELD_NAMES, "prompt_ids"):
        assert np.array_equal(getattr(loaded, name), getattr(trace, name)), name
        assert getattr(loaded, name).dtype == getattr(trace, name).dtype
    assert np.array_equal(loaded.extras["persistence"], trace.extras["persistence"])
    assert loaded.meta.prompt_text == "toy prompt"
    assert loaded.meta.pipeline == trace.meta.pipeline
    assert Pipeline.from_dict(loaded.meta.pipeline) == Pipeline.from_names("threshold", threshold=0.6,
                                                                               block_length=8)
    with zipfile.ZipFile(path) as zf:
        assert all(not name.endswith(".pkl") for name in zf.namelist())
    np.load(path, allow_pickle=False).close()


def test_metadata_is_typed_immutable_and_round_trips(trace: Trace, tmp_path: Path) -> None:
    loaded = load_trace(trace.save(tmp_path / "meta.npz"))
    assert loaded.meta == trace.meta
    assert loaded.meta.model == ToyAdapter().info and loaded.meta.decode_config == DecodeConfig(gen_length=24)
    assert loaded.meta.answer_text != "" and loaded.meta.label == "fixed8+threshold0.6"
    with pytest.raises(AttributeError):
        trace.meta.label = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        trace.meta.pipeline["rule"]["threshold"] = 0.1  # type: ignore[index]
    with pytest.raises(TypeError):
        trace.meta.token_text["0"] = "x"  # type: ignore[index]


def test_unknown_metadata_keys_survive_a_load_and_save(trace: Trace, tmp_path: Path) -> None:
    """A newer writer's metadata keys are kept, not dropped, when an older reader saves the trace."""
    path = trace.save(tmp_path / "t.npz")
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(arrays["__meta_json__"].tobytes())
    meta["from_the_future"] = {"x": [1, 2]}
    arrays["__meta_json__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path, **arrays)
    again = load_trace(load_trace(path).save(tmp_path / "again.npz"))
    assert again.meta.other["from_the_future"]["x"] == (1, 2)


def test_derived_views(trace: Trace) -> None:
    steps = trace.commit_step
    assert (steps >= 0).all() and steps.max() == trace.num_steps - 1
    assert trace.tokens_per_step.sum() == trace.gen_length
    assert trace.nfe == trace.num_steps == trace.confidence.shape[0]
    assert trace.tokens.shape == (trace.num_steps + 1, trace.gen_length)
    assert (trace.tokens[0] == 0).all()
    assert set(trace.commit_reason.tolist()) <= set(range(len(trace.meta.reason_names)))
    assert trace.token_text(int(trace.final_tokens[0])).startswith("t")
    assert trace.meta.stop_reason == "complete"


def test_a_name_too_long_for_the_disk_is_a_save_error(trace: Trace, tmp_path: Path) -> None:
    """path.is_dir() raised ENAMETOOLONG past TraceSaveError (the app showed Streamlit's exception)."""
    with pytest.raises(TraceSaveError, match="too long for the disk"):
        trace.save(tmp_path / ("名" * 90 + ".npz"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("name", "saved_as", "fix"), [(".hidden", ".hidden.npz", "e.g. 'hidden.npz'"),
                                                     ("..x.npz", "..x.npz", "e.g. 'x.npz'"),
                                                     ("x.tmp.npz", "x.tmp.npz", "e.g. 'x.npz'")])
def test_a_name_the_library_would_not_list_is_refused(trace: Trace, tmp_path: Path, name: str, saved_as: str,
                                                      fix: str) -> None:
    """A trace saved as '.hidden.npz' was written, but trace_files leaves hidden files (and the
    '.tmp.npz' leftovers of failed saves) out: to the user the trace was lost."""
    with pytest.raises(ValueError, match=r"does not start with '\.'|do not list") as raised:  # a TraceSaveError
        trace.save(tmp_path / name)
    assert isinstance(raised.value, TraceSaveError)
    assert f"the file name {saved_as!r}" in str(raised.value) and fix in str(raised.value)
    assert list(tmp_path.iterdir()) == []  # nothing written
    trace.save(tmp_path / fix.removeprefix("e.g. ").strip("'"))  # the name it suggests is saved, and listed
    assert trace_files(tmp_path) == [fix.removeprefix("e.g. ").strip("'")]


def test_save_adds_npz_suffix(trace: Trace, tmp_path: Path) -> None:
    assert trace.save(tmp_path / "plain").name == "plain.npz"


def test_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip at all")
    with pytest.raises(TraceFileError, match=r"not a readable \.npz trace"):
        load_trace(bad)


def test_truncated_file_is_a_clear_error(trace: Trace, tmp_path: Path) -> None:
    path = trace.save(tmp_path / "t.npz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFileError):
        load_trace(path)


def test_foreign_npz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "foreign.npz"
    np.savez(path, weights=np.zeros(3))
    with pytest.raises(TraceFileError, match="not a dllm_viz trace"):
        load_trace(path)


def test_newer_schema_is_refused(trace: Trace, tmp_path: Path) -> None:
    path = trace.save(tmp_path / "t.npz")
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(arrays["__meta_json__"].tobytes())
    meta["schema_version"] = 99
    arrays["__meta_json__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path, **arrays)
    with pytest.raises(TraceFileError, match="upgrade dllm_viz"):
        load_trace(path)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(TraceFileError, match=r"nope\.npz"):
        load_trace(tmp_path / "nope.npz")


def test_shape_validation_and_double_commit_rejected(trace: Trace) -> None:
    with pytest.raises(ValueError, match="confidence"):
        Trace(**{**_fields(trace), "confidence": trace.confidence[:, :3]})
    committed = trace.committed.copy()
    committed[:, 0] = True
    with pytest.raises(ValueError, match="more than once"):
        Trace(**{**_fields(trace), "committed": committed})


@pytest.mark.parametrize("name", [f.name for f in STEP_FIELDS if f.missing is not None])
def test_trace_saved_before_a_field_existed_loads_with_its_missing_value(trace: Trace, tmp_path: Path,
                                                                         name: str) -> None:
    """Traces written before `policy_seconds` / `cache_bytes` / `edited` were recorded still load; the
    field reads "not measured" (NaN, or -1 for a count) or, for edits, none."""
    spec = next(f for f in STEP_FIELDS if f.name == name)
    missing = np.full(spec.trace_shape(trace.num_steps, trace.gen_length), spec.missing)
    if spec.shape == "scalar" and spec.missing != 0:  # measured values differ from "not measured" (counts of
        # events a decode may not have, edits or padding changes, read 0 when missing)
        assert not np.array_equal(getattr(trace, name), missing, equal_nan=True)
    path = trace.save(tmp_path / "new.npz")
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files if k != name}
    old = tmp_path / "old.npz"
    np.savez_compressed(old, **arrays)
    loaded = load_trace(old)
    assert np.array_equal(getattr(loaded, name), missing, equal_nan=True)
    assert np.array_equal(loaded.tokens, trace.tokens)


def test_every_step_field_of_the_records_reaches_the_trace() -> None:
    """Each StepRecord attribute the schema declares is the matching row of the built Trace."""
    from dllm_viz.engine import iter_decode

    pipeline, config = Pipeline.from_names("threshold", threshold=0.6, block_length=8), DecodeConfig(gen_length=24)
    records = list(iter_decode(ToyAdapter(), [3, 4, 5], pipeline, config))
    builder = TraceBuilder(24, np.zeros(24), np.array([3, 4, 5]))
    for record in records:
        builder.add(record)
    built = builder.build(TraceMeta())
    for step, record in enumerate(records):
        row = built.step_values(step)
        for f in STEP_FIELDS:
            recorded = np.asarray(f.encode(getattr(record, f.name))).astype(f.dtype)
            assert np.array_equal(np.asarray(f.encode(row[f.name])), recorded, equal_nan=True), f.name


def test_builder_makes_valid_empty_and_partial_traces() -> None:
    builder = TraceBuilder(8, np.zeros(8), np.array([1, 2]))
    empty = builder.build(TraceMeta())
    assert empty.num_steps == 0 and empty.meta.stop_reason == "not_started"
    assert empty.commit_step.tolist() == [-1] * 8


def _fields(trace: Trace) -> dict:
    return {name: getattr(trace, name) for name in (*STEP_FIELD_NAMES, "prompt_ids")} | {"meta": trace.meta}


def test_a_trace_whose_metadata_leaves_the_optional_fields_unset_round_trips(tmp_path: Path) -> None:
    """TraceMeta's decode_config and created_utc default to None (hand-built or replayed traces)."""
    from dataclasses import replace

    from trace_factory import make_trace

    trace = make_trace(4, 6, seed=0)
    bare = replace(trace, meta=trace.meta.replace(decode_config=None, created_utc=None))
    loaded = load_trace(bare.save(tmp_path / "bare.npz"))
    assert loaded.meta.decode_config is None and loaded.meta.created_utc is None


# ---- derived values are computed once per Trace (Trace._derived) and never go stale ----------------
_DERIVED_ARRAYS = ("commit_step", "commit_reason", "tokens_per_step", "masked_before", "in_window", "edits_per_step",
                   "edits_per_position", "post_steps", "is_end_of_text")


def _reference(trace: Trace) -> dict:
    """The derived values computed here from the raw arrays and metadata, by nothing Trace caches."""
    num_steps, length = trace.committed.shape
    mask = trace.meta.mask_token_id if trace.meta.mask_token_id is not None else int(trace.tokens[0, 0])
    commit, reason = np.full(length, -1), np.full(length, -1)
    for s, p in zip(*np.nonzero(trace.committed), strict=True):
        commit[p], reason[p] = s, trace.reason[s, p]
    masked = trace.tokens[:-1] == mask
    positions = np.arange(length)
    inside = np.array([(positions >= a) & (positions < b) for a, b in trace.window]).reshape(num_steps, length)
    post = ~(masked & inside).any(axis=1)
    end = np.isin(trace.tokens[-1], list(trace.meta.stop_token_ids))
    seconds = float(trace.step_seconds.sum())
    events = [(int(s), int(p), int(trace.tokens[s, p]), int(trace.tokens[s + 1, p]))
              for s, p in zip(*np.nonzero(trace.edited), strict=True)]
    return {"commit_step": commit, "commit_reason": reason, "tokens_per_step": trace.committed.sum(axis=1),
            "masked_before": masked, "in_window": inside, "edits_per_step": trace.edited.sum(axis=1),
            "edits_per_position": trace.edited.sum(axis=0), "post_steps": post, "is_end_of_text": end,
            "edit_events": events, "is_complete": bool((commit >= 0).all()), "wall_seconds": seconds,
            "summary": {"nfe": float(num_steps), "seconds": seconds, "tokens": float(((commit >= 0) & ~end).sum()),
                        "edits": float(trace.edited.sum()), "post_steps": float(post.sum()),
                        "tokens_per_step": float((commit >= 0).sum()) / num_steps if num_steps else 0.0}}


def _assert_fresh(trace: Trace) -> None:
    """Every derived value of `trace` (read twice: the second read is the cached one) equals `_reference`."""
    expected = _reference(trace)
    for _ in range(2):
        for name in _DERIVED_ARRAYS:
            assert np.array_equal(getattr(trace, name), expected[name]), name
        assert [tuple(e) for e in trace.edit_events] == expected["edit_events"]
        assert trace.is_complete == expected["is_complete"] and trace.wall_seconds == expected["wall_seconds"]
        summary = trace.summary()
        assert {k: summary[k] for k in expected["summary"]} == pytest.approx(expected["summary"])


def test_derived_values_are_computed_once_and_cannot_be_written() -> None:
    """Before: every read rescanned the [S, L] grids (~4 ms each at 2000 x 1024) and returned a new,
    writable array; now the first read is kept on the trace, read-only, and lists and dicts are copies."""
    from trace_factory import edit_trace

    trace = edit_trace()
    _assert_fresh(trace)
    for name in _DERIVED_ARRAYS:
        value = getattr(trace, name)
        assert getattr(trace, name) is value, f"{name} was computed again"
        assert not value.flags.writeable, name
        with pytest.raises(ValueError, match="read-only"):
            value[0] = value[0]
    for name in (*STEP_FIELD_NAMES, "prompt_ids"):  # nor can the arrays the cached values derive from
        assert not getattr(trace, name).flags.writeable, name
    with pytest.raises(ValueError, match="read-only"):
        trace.tokens[0, 0] = 7
    events, summary = trace.edit_events, trace.summary()
    events.clear()
    summary["edits"] = -1.0
    _assert_fresh(trace)


def test_a_trace_does_not_change_the_arrays_it_was_given() -> None:
    """The read-only flag is on the Trace's views only: the caller's arrays stay writable."""
    from trace_factory import make_trace

    trace = make_trace(3, 4, seed=0)
    tokens = trace.tokens.copy()
    again = Trace(**{**_fields(trace), "tokens": tokens})
    assert tokens.flags.writeable and not again.tokens.flags.writeable
    assert np.shares_memory(again.tokens, tokens)  # not copied: a 2000 x 2048 trace holds ~100 MB


def test_a_growing_trace_is_never_served_a_value_cached_at_an_earlier_step() -> None:
    """The app's step-by-step mode (Stepper) builds a new Trace after each step: each reads its own steps."""
    from dllm_viz.engine import decode_meta, iter_decode
    from dllm_viz.stepper import Stepper

    adapter, prompt = ToyAdapter(), [3, 4, 5]
    pipeline, config = Pipeline.from_names("threshold", threshold=0.6, block_length=8), DecodeConfig(gen_length=24)
    builder = TraceBuilder(24, np.full(24, adapter.info.mask_token_id), np.array(prompt))
    stepper = Stepper(adapter, (), builder, decode_meta(adapter, prompt, pipeline, config, "toy"),
                      iter_decode(adapter, prompt, pipeline, config))
    seen = []
    while stepper.step() is not None:
        trace = stepper.trace()
        _assert_fresh(trace)
        seen.append(trace)
    assert len(seen) > 2 and seen[-1].is_complete and not seen[0].is_complete
    for earlier in seen:  # reading the later traces left the earlier ones' values as they were
        assert earlier.commit_step.shape == (24,) and earlier.masked_before.shape == (earlier.num_steps, 24)
        _assert_fresh(earlier)


def test_a_replaced_trace_computes_its_own_values() -> None:
    """`dataclasses.replace` (finish_trace, branching, Compare's relabelling) makes a new Trace: every value
    read on the old one is recomputed for the new arrays and metadata, and the old one keeps its own."""
    from dataclasses import replace

    from trace_factory import edit_trace, edited_trace

    old = edited_trace(30, 16, edit_rate=0.3, seed=5)
    _assert_fresh(old)
    other = edited_trace(30, 16, edit_rate=0.3, seed=6)
    arrays = {name: getattr(other, name) for name in ("tokens", "candidate", "committed", "reason", "edited",
                                                       "window", "step_seconds")}
    new = replace(old, **arrays)
    _assert_fresh(new)
    assert not np.array_equal(new.commit_step, old.commit_step)
    assert new.summary() != old.summary() and new.edit_events != old.edit_events
    model = old.meta.model
    # another mask id and other stop ids: masked_before, post_steps, is_end_of_text and the summary change
    remeta = replace(old, meta=old.meta.replace(model=replace(model, mask_token_id=5, eos_token_id=7)))
    _assert_fresh(remeta)
    assert not np.array_equal(remeta.masked_before, old.masked_before)
    assert not np.array_equal(remeta.is_end_of_text, old.is_end_of_text)
    _assert_fresh(old)
    empty = edit_trace()
    _assert_fresh(replace(empty, edited=np.zeros_like(empty.edited)))
