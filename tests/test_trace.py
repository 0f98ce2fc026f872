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
