"""Checks that stand between an untrusted .npz file and a Trace: size first, then types and ranges.

A trace file may come from anyone (an upload, a shared link, a mail attachment), so loading one
must never cost more memory than a cap, and never let a value of the wrong type or range reach
the figures, where it would surface as an AttributeError or a silently wrong picture. The
checks run in three stages:

1. `check_archive` reads only the zip directory and each member's .npy header (a few hundred
   bytes, nothing decompressed beyond that) and refuses members whose declared shapes exceed
   the cap, disagree with their zip sizes, or claim more data than deflate can produce from
   the bytes on disk (a compression bomb), and every dtype that is not plain numbers.
2. `check_meta` validates the JSON metadata's types and the schema version.
3. `check_values` validates value ranges of the (now small) arrays: reason and pass-kind codes,
   windows, token ids, timings, and that token edits are real edits (`check_edits`).

Each failure raises TraceFileError naming the file (by name only: messages reach browsers,
which must not learn server paths) and the field. Knows nothing about Trace itself.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

MAX_TRACE_BYTES_ENV = "DLLM_VIZ_MAX_TRACE_MB"
DEFAULT_MAX_TRACE_MB = 1024
# Deflate cannot expand data by more than about 1032:1; a member declaring more is crafted.
MAX_DEFLATE_RATIO = 1100
MAX_MEMBERS = 1024
_NUMERIC_KINDS = "biuf"  # bool, int, uint, float: no objects (pickle), strings, structs, complex
_PICKLE_MAGIC = (b"\x80",)
_NPY_MAGIC = b"\x93NUMPY"


class TraceFileError(ValueError):
    """A file that is not a readable dllm_viz trace; the message names the file, the field and the fix."""


def max_trace_bytes() -> int:
    """The memory cap for one trace: $DLLM_VIZ_MAX_TRACE_MB megabytes, else 1024 MB."""
    text = os.environ.get(MAX_TRACE_BYTES_ENV, str(DEFAULT_MAX_TRACE_MB))
    try:
        megabytes = float(text)
    except ValueError:
        raise TraceFileError(f"${MAX_TRACE_BYTES_ENV}={text!r} is not a number of megabytes; "
                             f"unset it or set e.g. {DEFAULT_MAX_TRACE_MB}") from None
    return int(megabytes * 2**20)


# ---- stage 1: the archive, before anything is allocated --------------------------------------
def check_archive(source: Path | BinaryIO, cap: int | None = None) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """Member name -> (dtype, shape) as declared, after refusing anything that would cost too much.

    `source` is a path or a binary file the caller opened (and then loads from): checked through
    the same open file, the bytes checked are the bytes loaded, even when the file is replaced or
    deleted meanwhile (another session's autosave or Delete, in the app).

    Raises:
        TraceFileError: not a zip (random bytes, a pickle, a bare .npy), too many members, a
            member that is not a plain numeric .npy array, a declared size over `cap`, a size
            that disagrees with the zip entry, or a compression ratio deflate cannot produce.
    """
    if isinstance(source, Path):
        with source.open("rb") as handle:
            return check_archive(handle, cap)
    cap = max_trace_bytes() if cap is None else cap
    name, real_size = Path(str(getattr(source, "name", "trace"))).name, os.fstat(source.fileno()).st_size
    _refuse_non_zip(source, name)
    try:
        source.seek(0)
        with zipfile.ZipFile(source) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_MEMBERS:
                raise TraceFileError(f"{name!r} has {len(infos)} arrays (at most {MAX_MEMBERS}); not a dllm_viz trace")
            declared = {}
            total = 0
            for info in infos:
                dtype, shape, nbytes = _member_header(archive, info, name)
                _check_member_size(info, nbytes, real_size, name, cap)
                total += nbytes
                declared[info.filename.removesuffix(".npy")] = (dtype, shape)
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError) as exc:
        raise TraceFileError(f"{name!r} is a damaged or truncated .npz archive ({exc}); "
                             "save it again with Trace.save or `python -m dllm_viz decode --save`") from None
    if total > cap:
        raise TraceFileError(f"{name!r} declares {total / 2**20:.0f} MB of arrays, over the {cap / 2**20:.0f} MB "
                             f"cap; raise ${MAX_TRACE_BYTES_ENV} if you trust this file")
    return declared


def _refuse_non_zip(handle: BinaryIO, name: str) -> None:
    handle.seek(0)
    head = handle.read(8)
    if zipfile.is_zipfile(handle):
        return
    if head.startswith(_NPY_MAGIC):
        what = "it is a single .npy array"
    elif head[:1] in _PICKLE_MAGIC:
        what = "it is a Python pickle, which dllm_viz never loads"
    elif not head:
        what = "it is empty"
    else:
        what = "it is not a zip archive"
    raise TraceFileError(f"{name!r} is not a readable .npz trace ({what}); open a file written by Trace.save "
                         "or `python -m dllm_viz decode --save`")


def _member_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> tuple[np.dtype, tuple[int, ...], int]:
    """(dtype, shape, bytes the member should hold) read from the member's .npy header only."""
    member = info.filename
    if not member.endswith(".npy"):
        raise TraceFileError(f"{name!r} holds {member!r}, which is not a .npy array; not a dllm_viz trace")
    with archive.open(info) as handle:
        try:
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, _fortran, dtype = np.lib.format.read_array_header_1_0(handle, max_header_size=10_000)
            else:
                shape, _fortran, dtype = np.lib.format.read_array_header_2_0(handle, max_header_size=10_000)
        except ValueError as exc:
            raise TraceFileError(f"{name!r}: array {member!r} has an unreadable header ({exc}); "
                                 "the file is damaged or not a dllm_viz trace") from None
        header_bytes = handle.tell()
    if dtype.hasobject or dtype.kind not in _NUMERIC_KINDS or dtype.fields is not None:
        raise TraceFileError(f"{name!r}: array {member!r} has dtype {dtype.str!r}; traces hold only numbers "
                             "(object arrays would need pickle, which dllm_viz never loads)")
    if any(not isinstance(d, int) or d < 0 for d in shape) or len(shape) > 3:
        raise TraceFileError(f"{name!r}: array {member!r} declares shape {shape}; not a dllm_viz trace array")
    return dtype, tuple(shape), header_bytes + math.prod(shape) * dtype.itemsize


def _check_member_size(info: zipfile.ZipInfo, nbytes: int, real_size: int, name: str, cap: int) -> None:
    member = info.filename
    if nbytes > cap:
        raise TraceFileError(f"{name!r}: array {member!r} declares {nbytes / 2**20:.0f} MB, over the "
                             f"{cap / 2**20:.0f} MB cap; raise ${MAX_TRACE_BYTES_ENV} if you trust this file")
    if nbytes != info.file_size:
        raise TraceFileError(f"{name!r}: array {member!r} declares {nbytes} bytes but its zip entry holds "
                             f"{info.file_size}; the file is damaged or crafted")
    if info.header_offset + info.compress_size > real_size:
        raise TraceFileError(f"{name!r}: array {member!r} runs past the end of the file ({real_size} bytes); "
                             "the file is truncated")
    if info.file_size > MAX_DEFLATE_RATIO * max(info.compress_size, 1) and info.file_size > 2**20:
        raise TraceFileError(f"{name!r}: array {member!r} claims {info.file_size} bytes from {info.compress_size} "
                             "compressed ones, more than deflate can produce: a compression bomb")


def check_declared(declared: Mapping[str, tuple[np.dtype, tuple[int, ...]]], ranks: Mapping[str, int],
                   extra_prefix: str, meta_key: str, name: str, booleans: Collection[str] = ()) -> None:
    """Each known array must have its rank (so shapes can be compared without an IndexError);
    extras are [steps, positions]; the metadata is a 1-D byte string; the flag arrays named in
    `booleans` (committed, edited) are stored as booleans, as Trace.save writes them (a count
    or a float there would silently read as True)."""
    for member, (dtype, shape) in declared.items():
        rank = 2 if member.startswith(extra_prefix) else 1 if member == meta_key else ranks.get(member)
        if rank is not None and len(shape) != rank:
            raise TraceFileError(f"{name!r}: array {member!r} has shape {shape}; a trace stores it with "
                                 f"{rank} dimension{'s' if rank > 1 else ''}")
        if member in booleans and dtype.kind != "b":
            raise TraceFileError(f"{name!r}: array {member!r} has dtype {dtype.str!r}; a trace stores it as "
                                 "booleans (True where it happened): save the trace again with Trace.save")
    if meta_key in declared and declared[meta_key][0] != np.uint8:
        raise TraceFileError(f"{name!r}: the metadata entry has dtype {declared[meta_key][0].str!r}, not bytes; "
                             "not a dllm_viz trace")


# ---- stage 2: metadata types ------------------------------------------------------------------
# key -> (accepted types, description for the message). Unknown keys pass: later versions and
# callers (Compare labels, replays) add their own.
_META_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "model": ((dict,), "an object"),
    "pipeline": ((dict,), "an object"),
    "decode_config": ((dict, type(None)), "an object or null"),
    "label": ((str,), "a string"),
    "prompt_text": ((str, type(None)), "a string or null"),
    "answer_text": ((str,), "a string"),
    "stop_reason": ((str,), "a string"),
    "created_utc": ((str, type(None)), "a string or null"),
    "token_text": ((dict,), "an object of token id -> text"),
    "reason_names": ((list,), "a list of strings"),
    "pass_kind_names": ((list,), "a list of strings"),
    "dense_steps": ((list,), "a list of step numbers"),
    "replay_of": ((str, type(None)), "a string or null"),
}
_MODEL_INTS = ("mask_token_id", "eos_token_id", "eot_token_id", "vocab_size")


def check_meta(meta: Any, name: str, schema_version: int) -> None:
    """Raise TraceFileError unless `meta` has the types the figures and pages rely on."""
    if not isinstance(meta, dict):
        raise TraceFileError(f"{name!r}: trace metadata is a JSON {type(meta).__name__}, not an object; "
                             "not a dllm_viz trace")
    version = meta.get("schema_version")
    if type(version) is not int or not 1 <= version <= schema_version:
        fix = "upgrade dllm_viz" if type(version) is int and version > schema_version else "the file is damaged"
        raise TraceFileError(f"{name!r} has trace schema {version!r}; this dllm_viz reads versions 1 to "
                             f"{schema_version}: {fix}")
    for key, (types, what) in _META_TYPES.items():
        if key in meta and not isinstance(meta[key], types):
            raise TraceFileError(f"{name!r}: metadata field {key!r} must be {what}, got {_kind(meta[key])}")
    for key in ("reason_names", "pass_kind_names"):
        if key in meta and not all(isinstance(v, str) for v in meta[key]):
            raise TraceFileError(f"{name!r}: metadata field {key!r} must be a list of strings")
    if "dense_steps" in meta and not all(type(v) is int and v >= 0 for v in meta["dense_steps"]):
        raise TraceFileError(f"{name!r}: metadata field 'dense_steps' must be a list of step numbers >= 0")
    tokens = meta.get("token_text", {})
    if not all(key.lstrip("-").isdigit() and isinstance(text, str) for key, text in tokens.items()):
        raise TraceFileError(f"{name!r}: metadata field 'token_text' must map token ids (digits) to strings")
    _check_model(meta.get("model", {}), name)
    for part in ("pipeline", "decode_config"):
        _check_components(meta.get(part) or {}, part, name)


def _check_model(model: Mapping[str, Any], name: str) -> None:
    for key in _MODEL_INTS:
        value = model.get(key)
        if value is not None and (type(value) is not int or value < 0):
            raise TraceFileError(f"{name!r}: metadata field 'model.{key}' must be a token id >= 0 or null, "
                                 f"got {value!r}")
    stops = model.get("stop_token_ids", [])
    if not isinstance(stops, list) or not all(type(v) is int and v >= 0 for v in stops):
        raise TraceFileError(f"{name!r}: metadata field 'model.stop_token_ids' must be a list of token ids, "
                             f"got {stops!r}")
    for key in ("family", "name_or_path", "device", "dtype"):
        if key in model and not isinstance(model[key], str | None):
            raise TraceFileError(f"{name!r}: metadata field 'model.{key}' must be a string, got {_kind(model[key])}")


def _check_components(part: Mapping[str, Any], where: str, name: str) -> None:
    """The pipeline's components must be objects with a string name (pages read `part['name']`)."""
    if where != "pipeline":
        return
    for key in ("rule", "block", "extrapolate", "stop"):
        component = part.get(key)
        if component is not None and not (isinstance(component, dict) and isinstance(component.get("name"), str)):
            raise TraceFileError(f"{name!r}: metadata field 'pipeline.{key}' must be null or an object with a "
                                 f"string 'name', got {_kind(component)}")
    if not isinstance(part.get("cache", "none"), str):
        raise TraceFileError(f"{name!r}: metadata field 'pipeline.cache' must be a string")


def _kind(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40] + '…' if len(text) > 40 else text}"


# ---- stage 3: value ranges of the arrays ------------------------------------------------------
def check_values(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], name: str,
                 reason_names: Sequence[str], pass_kinds: Sequence[str]) -> None:
    """Raise TraceFileError for codes, windows, token ids or timings out of range.

    `arrays` are the trace's fields, already of the right shapes; `reason_names` and
    `pass_kinds` are the vocabularies the codes index (the trace's own, else the current ones).
    """
    gen_length = int(arrays["tokens"].shape[1])
    _in_range(arrays["reason"], -1, len(reason_names) - 1, "reason", name,
              f"-1 (not committed) or a code of {list(reason_names)}")
    committed_reasons = arrays["reason"][arrays["committed"]]
    if (committed_reasons < 0).any():
        raise TraceFileError(f"{name!r}: array 'reason' has no reason code where 'committed' is true")
    check_edits(arrays, meta, name, reason_names)
    _in_range(arrays["pass_kind"], 0, len(pass_kinds) - 1, "pass_kind", name, f"a code of {list(pass_kinds)}")
    window = arrays["window"]
    start, end = window[:, 0], window[:, 1]
    ok = (start >= 0) & (start <= end) & (end <= gen_length)
    if not ok.all():
        bad = window[~ok][0]
        raise TraceFileError(f"{name!r}: array 'window' holds [{bad[0]}, {bad[1]}]; windows must satisfy "
                             f"0 <= start <= end <= gen length {gen_length}")
    vocab = (meta.get("model") or {}).get("vocab_size")
    top = None if vocab is None else vocab - 1
    for field in ("tokens", "candidate", "prompt_ids"):
        _in_range(arrays[field], 0, top, field, name, "token ids" + ("" if top is None else f" below {vocab}"))
    for field in ("block_index", "query_len"):
        _in_range(arrays[field], 0, None, field, name, "counts >= 0")
    for field in ("step_seconds", "forward_seconds", "policy_seconds"):
        values = arrays[field]
        if values is not None and not (np.isnan(values) | ((values >= 0) & np.isfinite(values))).all():
            raise TraceFileError(f"{name!r}: array {field!r} holds negative or infinite seconds")
    for field in ("confidence", "margin"):
        values = arrays[field]
        if not (np.isnan(values) | ((values >= -1e-3) & (values <= 1 + 1e-3))).all():
            raise TraceFileError(f"{name!r}: array {field!r} holds values outside [0, 1]; the file is damaged")


def check_edits(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], name: str,
                reason_names: Sequence[str]) -> None:
    """Raise TraceFileError unless every `edited` cell is a real edit with the reason 'edit'.

    An edit replaces a committed token (not the mask) of the step's window by another token, at a
    position not committed from mask in the same step; its reason is 'edit', and 'edit' is the
    reason of edits only. The figures draw "old → new" from these cells, so a crafted file must
    not make them claim a replacement that did not happen.
    """
    edited, reason, tokens = arrays["edited"], arrays["reason"], arrays["tokens"]
    code = list(reason_names).index("edit") if "edit" in reason_names else None
    if code is None:
        if edited.any():
            raise TraceFileError(f"{name!r}: array 'edited' marks token edits but the file's reason names "
                                 f"{list(reason_names)} have no 'edit'; the file is damaged or crafted")
        return
    steps, positions = np.nonzero(edited)
    problems = (
        ((reason == code) != edited, "'reason' must be 'edit' exactly where 'edited' is true"),
        (edited & arrays["committed"], "a position cannot be both committed from mask and edited in one step"),
        (edited & (tokens[1:] == tokens[:-1]), "an edited position's token must change at that step"),
    )
    mask_id = (meta.get("model") or {}).get("mask_token_id")
    window = arrays["window"]
    outside = (positions < window[steps, 0]) | (positions >= window[steps, 1])
    for bad, what in problems:
        if bad.any():
            step, position = (int(i) for i in np.argwhere(bad)[0])
            raise TraceFileError(f"{name!r}: at step {step}, position {position}: {what}; the file is damaged "
                                 "or crafted")
    if outside.any():
        raise TraceFileError(f"{name!r}: at step {int(steps[outside][0])}, position {int(positions[outside][0])}: "
                             "an edit lies outside that step's window; the file is damaged or crafted")
    if mask_id is not None and (tokens[steps, positions] == mask_id).any():
        at = int(np.flatnonzero(tokens[steps, positions] == mask_id)[0])
        raise TraceFileError(f"{name!r}: at step {int(steps[at])}, position {int(positions[at])}: an edit "
                             "replaced a masked position (edits replace committed tokens); the file is damaged "
                             "or crafted")


def _in_range(values: np.ndarray, low: int, high: int | None, field: str, name: str, what: str) -> None:
    bad = (values < low) if high is None else (values < low) | (values > high)
    if values.size and bad.any():
        raise TraceFileError(f"{name!r}: array {field!r} holds {values[bad].flat[0].item()!r}; expected {what}")

