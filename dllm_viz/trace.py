"""Trace: everything one decode did, as named [steps x positions] numpy arrays plus metadata.

Figures and the app read only Traces, so a saved trace can be replayed and plotted without a
model or torch. Saved as one .npz (arrays + a JSON metadata blob), never pickle.
"""

from __future__ import annotations

import functools
import json
import zipfile
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np

from dllm_viz.cache_modes import PASS_KINDS
from dllm_viz.step_schema import STEP_FIELD_NAMES, STEP_FIELDS, fill_missing, with_step_fields
from dllm_viz.trace_files import TraceSaveError, write_npz
from dllm_viz.trace_meta import TraceMeta
from dllm_viz.trace_validation import TraceFileError, check_archive, check_declared, check_meta, check_values

__all__ = ["SCHEMA_VERSION", "EditEvent", "Trace", "TraceBuilder", "TraceFileError", "TraceSaveError", "load_trace"]

SCHEMA_VERSION = 1
_META_KEY = "__meta_json__"
_EXTRA_PREFIX = "extra__"
_ARRAY_NAMES = (*STEP_FIELD_NAMES, "prompt_ids")  # the arrays a saved trace holds besides its extras


_Value = TypeVar("_Value")


def _read_only(array: np.ndarray) -> np.ndarray:
    """`array` as a view nobody can write through (the caller's own array keeps its flags)."""
    view = array.view()
    view.flags.writeable = False
    return view


def _derived(compute: Callable[[Trace], _Value]) -> property:
    """A Trace property computed on first access and kept on that instance.

    Why: the views read `commit_step`, `masked_before`, `in_window`... many times a page run and
    each scans the whole [S, L] grid (~4 ms at 2000 x 1024, twice that at 2048). Safe because a
    Trace never changes: it is frozen, its step arrays are read-only, and a grown or replaced
    trace (the stepper's next step, `dataclasses.replace`) is a new instance whose __init__ starts
    it without cached values. A cached array is read-only too, so no caller can corrupt it.
    """
    name = compute.__name__

    @functools.wraps(compute)
    def get(self: Trace) -> _Value:
        cache = self.__dict__  # the frozen dataclass's __setattr__ is bypassed, as functools.cached_property does
        if name not in cache:
            value = compute(self)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
            cache[name] = value
        return cache[name]

    return property(get)


class EditEvent(NamedTuple):
    """One token edit (block refinement): at `step`, `position`'s committed token `old` became `new`.

    `new` may be the mask token: the edit re-opened the position, which is committed again later.
    """

    step: int
    position: int
    old: int
    new: int


@with_step_fields(lambda f: "np.ndarray", allow_missing=True)
class Trace:
    """One decode, indexed over generated positions only (S = steps taken, L = gen_length).

    Every step field (listed below, declared in step_schema.STEP_FIELDS) is stacked over steps:
    [S, L] per position, [S, 2] for the window, [S] per step; `tokens` is [S+1, L], its row 0
    the canvas before the first step (all mask).

    A Trace never changes once built: its step arrays and `prompt_ids` are read-only views (they
    are not copied: whoever passes an array in must not write into it afterwards), so the derived
    arrays below and `summary()` are computed once per instance (`_derived`). To change a trace,
    build another (`dataclasses.replace`, `TraceBuilder.build`).

    Attributes:
        prompt_ids: [P] the prompt's token ids.
        extras: policy internals by name, each [S, L] float32 (NaN where undefined).
        meta: model, pipeline, decode config, prompt and answer texts, token texts (a mapping
            given here is read with TraceMeta.from_dict).
    """

    prompt_ids: np.ndarray
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    meta: TraceMeta = field(default_factory=TraceMeta)

    def __post_init__(self) -> None:
        tokens = np.asarray(self.tokens)
        if tokens.ndim != 2:
            raise ValueError(f"Trace.tokens must be [steps + 1, positions], got shape {tokens.shape}")
        num_steps, gen_length = tokens.shape[0] - 1, tokens.shape[1]
        values = {f.name: getattr(self, f.name) for f in STEP_FIELDS}
        fill_missing(values, num_steps, gen_length)
        for f in STEP_FIELDS:
            value = np.asarray(values[f.name]).astype(f.dtype, copy=False)
            expected = f.trace_shape(num_steps + (f.name == "tokens"), gen_length)
            if value.shape != expected:
                raise ValueError(f"Trace.{f.name} must have shape {expected}, got {value.shape}")
            object.__setattr__(self, f.name, _read_only(value))
        object.__setattr__(self, "prompt_ids", _read_only(np.asarray(self.prompt_ids).astype(np.int32, copy=False)))
        if not isinstance(self.meta, TraceMeta):
            object.__setattr__(self, "meta", TraceMeta.from_dict(self.meta))
        for name, value in self.extras.items():
            arr = np.asarray(value, dtype=np.float32)
            if arr.shape != (num_steps, gen_length):
                raise ValueError(
                    f"Trace extra {name!r} must have shape {(num_steps, gen_length)}, got {arr.shape}"
                )
            self.extras[name] = arr
        # A position leaves the mask once, unless an edit wrote the mask token back (block
        # refinement on an untrained model): then it may be committed once more per edit.
        if num_steps and int((self.committed.sum(axis=0) - self.edited.sum(axis=0)).max(initial=0)) > 1:
            raise ValueError("Trace.committed commits some position more than once")

    # ---- derived views -------------------------------------------------------------------
    def step_values(self, step: int) -> dict[str, Any]:
        """Step `step`'s value of every step field, as a StepRecord holds it (replay reads these)."""
        return {f.name: f.decode(getattr(self, f.name)[step + (f.name == "tokens")]) for f in STEP_FIELDS}

    @property
    def num_steps(self) -> int:
        """Forward passes taken (S)."""
        return int(self.tokens.shape[0] - 1)

    @property
    def nfe(self) -> int:
        """Number of function evaluations: one per forward pass, cached passes included."""
        return self.num_steps

    @property
    def gen_length(self) -> int:
        """Number of generated positions (L)."""
        return int(self.tokens.shape[1])

    @property
    def final_tokens(self) -> np.ndarray:
        """The canvas after the last step."""
        return self.tokens[-1]

    @_derived
    def commit_step(self) -> np.ndarray:
        """[L] step at which each position was committed, -1 if it never was."""
        out = np.full(self.gen_length, -1, dtype=np.int32)
        steps, positions = np.nonzero(self.committed)
        out[positions] = steps
        return out

    @_derived
    def commit_reason(self) -> np.ndarray:
        """[L] reason code of each position's commit, -1 if never committed."""
        out = np.full(self.gen_length, -1, dtype=np.int8)
        steps, positions = np.nonzero(self.committed)
        out[positions] = self.reason[steps, positions]
        return out

    @_derived
    def tokens_per_step(self) -> np.ndarray:
        """[S] number of positions committed at each step."""
        return self.committed.sum(axis=1).astype(np.int32)

    @property
    def mask_token_id(self) -> int:
        """The mask token id: the recorded model's, else the initial canvas's token (-1 if L = 0)."""
        if self.meta.mask_token_id is not None:
            return self.meta.mask_token_id
        return int(self.tokens[0, 0]) if self.gen_length else -1

    @_derived
    def masked_before(self) -> np.ndarray:
        """[S, L] True where the position was still masked when step s began."""
        return np.asarray(self.tokens[:-1] == self.mask_token_id, dtype=bool)

    @_derived
    def in_window(self) -> np.ndarray:
        """[S, L] True where the position lies inside that step's window."""
        positions = np.arange(self.gen_length)[None, :]
        return (positions >= self.window[:, :1]) & (positions < self.window[:, 1:])

    # ---- edits (block refinement replaces committed tokens; docs/PARADIGMS.md) -------------
    @_derived
    def edits_per_step(self) -> np.ndarray:
        """[S] number of committed tokens replaced at each step."""
        return self.edited.sum(axis=1).astype(np.int32)

    @_derived
    def edits_per_position(self) -> np.ndarray:
        """[L] number of times each position's committed token was replaced."""
        return self.edited.sum(axis=0).astype(np.int32)

    @property
    def edit_events(self) -> list[EditEvent]:
        """Every edit in step order (then position order): which token replaced which, and when.

        tokens[s + 1] is the canvas after step s, so the edit at step s replaced tokens[s, p] by
        tokens[s + 1, p]. A new list each call (of the events built once: 150 ms for 100k edits).
        """
        return list(self._edit_events)

    def edit_event(self, step: int, position: int) -> EditEvent:
        """The edit at (`step`, `position`) (a cell where `edited` is True), built alone: for views
        that show a few edits of a trace with ~100k, without building all of `edit_events`."""
        return EditEvent(step, position, int(self.tokens[step, position]), int(self.tokens[step + 1, position]))

    @_derived
    def _edit_events(self) -> tuple[EditEvent, ...]:
        steps, positions = np.nonzero(self.edited)  # `edit_event` for every cell, indexed all at once
        old, new = self.tokens[steps, positions], self.tokens[steps + 1, positions]
        return tuple(EditEvent(int(s), int(p), int(a), int(b))
                     for s, p, a, b in zip(steps, positions, old, new, strict=True))

    @_derived
    def post_steps(self) -> np.ndarray:
        """[S] True where the step's window held no masked position when the step began.

        Such a pass can only edit (block refinement's post-steps); other rules never run one.
        Derived from the recorded positions: padding past gen_length (aligned blocks) is not
        recorded, so a pass that filled only padding reads as a post-step.
        """
        return ~(self.masked_before & self.in_window).any(axis=1)

    @_derived
    def wall_seconds(self) -> float:
        """Total wall time of the decode loop."""
        return float(self.step_seconds.sum())

    @_derived
    def is_complete(self) -> bool:
        """True when every position was committed (not cut by the step cap or a stop)."""
        return bool((self.commit_step >= 0).all())

    @property
    def stop_token_ids(self) -> list[int]:
        """The model's EOS/EoT ids as recorded at decode time (empty if unknown)."""
        return list(self.meta.stop_token_ids)

    @_derived
    def is_end_of_text(self) -> np.ndarray:
        """[L] True where the final token is an EOS/EoT id: the tail after the answer, which views
        and counts of the answer leave out."""
        return np.isin(self.final_tokens, self.stop_token_ids)

    @property
    def cut_off(self) -> bool:
        """True when no EOS/EoT token is anywhere in the final canvas: the answer ran out of room.

        (A model trained with EOS padding can also squeeze an answer into a short canvas and end
        it with EOS; that is not detected.)
        """
        return not bool(self.is_end_of_text.any())

    def summary(self) -> dict[str, float]:
        """Headline numbers: NFE, wall seconds, answer tokens, tokens/s, tokens per step, policy
        overhead, edits and post-steps.

        tokens/s follows Fast-dLLM's throughput: committed tokens that are not EOS/EoT,
        over the wall time of the decode loop. policy_overhead is the time inside the
        policy's calls over the forward passes' time, policy_ms_per_pass that time per pass
        (both NaN when not recorded). edits counts committed tokens replaced (block refinement),
        post_steps the passes whose window had no mask left (`post_steps`); both 0 for other rules.
        A new dict each call, of numbers computed once per trace (8-17 ms on a 2000-step trace, and a
        Decode run reads them three times).
        """
        return dict(self._summary)

    @_derived
    def _summary(self) -> dict[str, float]:
        committed = self.commit_step >= 0
        answer = int((committed & ~self.is_end_of_text).sum())
        seconds = self.wall_seconds
        return {
            "nfe": float(self.nfe),
            "seconds": seconds,
            "tokens": float(answer),
            "tokens_per_second": answer / seconds if seconds > 0 else 0.0,
            "tokens_per_step": float(committed.sum()) / self.nfe if self.nfe else 0.0,
            "policy_overhead": self._policy_overhead(),
            "policy_ms_per_pass": float(self.policy_seconds.sum()) * 1e3 / self.nfe if self.nfe else float("nan"),
            "edits": float(self.edited.sum()),
            "post_steps": float(self.post_steps.sum()),
        }

    def _policy_overhead(self) -> float:
        forward = float(self.forward_seconds.sum())
        if forward <= 0 or not np.isfinite(self.policy_seconds).all():
            return float("nan")
        return float(self.policy_seconds.sum()) / forward

    def token_text(self, token_id: int) -> str:
        """Display text of a token id as recorded at decode time ('?' if unknown)."""
        return self.meta.token_text.get(str(int(token_id)), "?")

    # ---- persistence ---------------------------------------------------------------------
    def save(self, path: str | Path, *, overwrite: bool = True) -> Path:
        """Write this trace as a compressed .npz (arrays + JSON metadata, no pickle).

        With `overwrite=False` an existing file is never replaced (the CLI without --force,
        the Traces page). A failed write leaves nothing behind (trace_files.write_npz).

        Raises:
            TraceSaveError: the file exists (overwrite=False), its folder cannot be made, the
                path is a directory, or the disk is full; the message names the path and the fix.
        """
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
        arrays = {name: getattr(self, name) for name in _ARRAY_NAMES}
        arrays.update({_EXTRA_PREFIX + k: v for k, v in self.extras.items()})
        meta = {"schema_version": SCHEMA_VERSION, **self.meta.to_dict()}
        arrays[_META_KEY] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
        return write_npz(path, arrays, overwrite=overwrite)


def load_trace(path: str | Path) -> Trace:
    """Read a trace written by `Trace.save`, checking it before trusting it (trace_validation).

    Sizes are checked from the zip directory and the .npy headers before any array is read, so
    a crafted file costs at most the cap ($DLLM_VIZ_MAX_TRACE_MB); then metadata types and
    array value ranges. Messages name the file by its name only (they reach browsers).

    Raises:
        TraceFileError: the file is missing, not an .npz, not a dllm_viz trace, too large, from
            a newer schema, or holds a field of the wrong type, shape or range. The message
            names the file, the field and the fix.
    """
    path = Path(path)
    name = path.name
    missing = TraceFileError(f"trace file {name!r} does not exist; check the path")
    if not path.is_file():
        raise missing
    # One open file for the checks and the read: in the app another session may delete this file
    # (Traces' Delete, the autosave pruning) or replace it (its autosave) at any moment. Opened by
    # name for each step, a file deleted after the check above raised FileNotFoundError, and a
    # replaced one was checked in one version and read in another.
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise missing from None
    except OSError as exc:
        raise TraceFileError(f"trace file {name!r} cannot be opened ({exc.strerror or exc.__class__.__name__}); "
                             "check its permissions") from None
    with handle:
        declared = check_archive(handle)
        ranks = {f.name: len(f.trace_shape(0, 0)) for f in STEP_FIELDS} | {"prompt_ids": 1}
        booleans = {f.name for f in STEP_FIELDS if f.dtype is np.bool_}
        check_declared(declared, ranks, _EXTRA_PREFIX, _META_KEY, name, booleans)
        try:
            handle.seek(0)
            with np.load(handle, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise TraceFileError(
                f"{name!r} is not a readable .npz trace ({exc.__class__.__name__}: {exc}); "
                "save traces with Trace.save or `python -m dllm_viz decode --save`"
            ) from None
    if _META_KEY not in arrays:
        raise TraceFileError(
            f"{name!r} is an .npz file but not a dllm_viz trace (no metadata entry); "
            "load a file written by Trace.save"
        )
    try:
        meta = json.loads(arrays.pop(_META_KEY).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise TraceFileError(f"{name!r} has corrupt trace metadata ({exc.__class__.__name__}); "
                             "the file is damaged: save it again") from None
    check_meta(meta, name, SCHEMA_VERSION)
    required = [f.name for f in STEP_FIELDS if f.missing is None] + ["prompt_ids"]
    missing = sorted(set(required) - set(arrays))
    if missing:
        raise TraceFileError(f"{name!r} lacks trace arrays {missing}; the file is truncated")
    extras = {k[len(_EXTRA_PREFIX) :]: v for k, v in arrays.items() if k.startswith(_EXTRA_PREFIX)}
    try:
        with np.errstate(invalid="ignore", over="ignore"):
            known = {name: arrays[name] for name in _ARRAY_NAMES if name in arrays}
            trace = Trace(**known, extras=extras, meta=TraceMeta.from_dict(meta))
    except ValueError as exc:
        raise TraceFileError(f"{name!r} holds an inconsistent trace: {exc}") from None
    reasons = meta.get("reason_names") or _current_reasons()
    values = {name: getattr(trace, name) for name in _ARRAY_NAMES}
    check_values(values, meta, name, reasons, meta.get("pass_kind_names") or PASS_KINDS)
    return trace


def _current_reasons() -> tuple[str, ...]:
    from dllm_viz.policies.base import COMMIT_REASONS  # numpy-only module; lazy keeps trace torch-free

    return COMMIT_REASONS


class TraceBuilder:
    """Accumulates per-step records (`engine.StepRecord`s) into a Trace.

    Used by `engine.decode`, by `replay` and by the app's step-by-step mode, which builds a
    partial trace from however many steps have run (an interrupted run keeps what it recorded).
    """

    def __init__(self, gen_length: int, initial_tokens: np.ndarray, prompt_ids: np.ndarray) -> None:
        self.gen_length = gen_length
        self._rows: dict[str, list[Any]] = {name: [] for name in STEP_FIELD_NAMES}
        self._initial_tokens = np.asarray(initial_tokens, dtype=np.int32)
        self._extras: dict[str, dict[int, np.ndarray]] = {}
        self._prompt_ids = np.asarray(prompt_ids, dtype=np.int32)
        self.stop_reason: str | None = None

    @property
    def num_steps(self) -> int:
        """Steps recorded so far."""
        return len(self._rows["tokens"])

    def add(self, record: Any) -> None:
        """Append one step record (every STEP_FIELDS attribute, `extras` and `stop_reason`)."""
        for f in STEP_FIELDS:
            self._rows[f.name].append(f.encode(getattr(record, f.name)))
        for name, values in record.extras.items():
            self._extras.setdefault(name, {})[self.num_steps - 1] = np.asarray(values, np.float32)
        if record.stop_reason is not None:
            self.stop_reason = record.stop_reason

    def build(self, meta: TraceMeta) -> Trace:
        """The Trace of the steps so far (valid after any number of steps, even zero); `meta`'s
        stop_reason is replaced by the recorded one."""
        num_steps, length = self.num_steps, self.gen_length
        arrays = {f.name: np.asarray(self._rows[f.name], dtype=f.dtype).reshape(f.trace_shape(num_steps, length))
                  for f in STEP_FIELDS}
        arrays["tokens"] = np.concatenate([self._initial_tokens[None, :], arrays["tokens"]])
        extras = {}
        for name, by_step in self._extras.items():
            full = np.full((num_steps, length), np.nan, dtype=np.float32)
            for step, values in by_step.items():
                full[step] = values
            extras[name] = full
        stop = self.stop_reason or ("incomplete" if num_steps else "not_started")
        return Trace(**arrays, prompt_ids=self._prompt_ids, extras=extras, meta=meta.replace(stop_reason=stop))
