"""Trace: everything one decode did, as named [steps x positions] numpy arrays plus metadata.

Figures and the app read only Traces, so a saved trace can be replayed and plotted without a
model or torch. Saved as one .npz (arrays + a JSON metadata blob), never pickle.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dllm_viz.trace_files import TraceSaveError, write_npz
from dllm_viz.trace_validation import TraceFileError, check_archive, check_declared, check_meta, check_values

__all__ = ["PASS_KINDS", "SCHEMA_VERSION", "Trace", "TraceBuilder", "TraceFileError", "TraceSaveError", "load_trace"]

SCHEMA_VERSION = 1
PASS_KINDS: tuple[str, ...] = ("full", "prefix_cached", "dual_cached")
_META_KEY = "__meta_json__"
_EXTRA_PREFIX = "extra__"

# name -> (dtype, shape kind): "SL" = [steps, positions], "S1L" = [steps + 1, positions],
# "S" = [steps], "S2" = [steps, 2], "L" = [positions], "P" = [prompt positions].
_FIELDS: dict[str, tuple[type, str]] = {
    "tokens": (np.int32, "S1L"),
    "candidate": (np.int32, "SL"),
    "confidence": (np.float32, "SL"),
    "entropy": (np.float32, "SL"),
    "margin": (np.float32, "SL"),
    "committed": (np.bool_, "SL"),
    "reason": (np.int8, "SL"),
    "window": (np.int32, "S2"),
    "block_index": (np.int32, "S"),
    "pass_kind": (np.int8, "S"),
    "query_len": (np.int32, "S"),
    "step_seconds": (np.float64, "S"),
    "forward_seconds": (np.float64, "S"),
    "prompt_ids": (np.int32, "P"),
    "policy_seconds": (np.float64, "S"),
}
# Fields added after traces were first saved: files (and callers) without them get NaN ("not
# measured") instead of being refused.
_OPTIONAL_FIELDS = ("policy_seconds",)


@dataclass(frozen=True, eq=False)
class Trace:
    """One decode, indexed over generated positions only (S = steps taken, L = gen_length).

    Attributes:
        tokens: [S+1, L] canvas after each step; row 0 is the initial all-mask canvas.
        candidate: [S, L] token each position would take at that step.
        confidence / entropy / margin: [S, L] statistics of the model's distribution.
        committed: [S, L] True where the position was committed at that step.
        reason: [S, L] commit reason code (policies.COMMIT_REASONS) where committed, else -1.
        window: [S, 2] [start, end) of the window in generated-position coordinates.
        block_index: [S] index of the window each step belongs to.
        pass_kind: [S] index into PASS_KINDS (full forward or a cached partial pass).
        query_len: [S] number of query positions in that forward pass (its real cost).
        step_seconds / forward_seconds: [S] wall time of the step and of its forward pass.
        prompt_ids: [P] the prompt's token ids.
        policy_seconds: [S] wall time inside the policy's calls (block sizer, commit rule,
            extrapolator, stop) in that step; the rest of step - forward is the engine's own
            bookkeeping. NaN where not measured (traces saved before it was recorded).
        extras: policy internals by name, each [S, L] float32 (NaN where undefined).
        meta: JSON-ready metadata: model, pipeline, decode config, prompt text, token texts.
    """

    tokens: np.ndarray
    candidate: np.ndarray
    confidence: np.ndarray
    entropy: np.ndarray
    margin: np.ndarray
    committed: np.ndarray
    reason: np.ndarray
    window: np.ndarray
    block_index: np.ndarray
    pass_kind: np.ndarray
    query_len: np.ndarray
    step_seconds: np.ndarray
    forward_seconds: np.ndarray
    prompt_ids: np.ndarray
    policy_seconds: np.ndarray | None = None
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        num_steps, gen_length = self.tokens.shape[0] - 1, self.tokens.shape[1]
        expected = {
            "SL": (num_steps, gen_length),
            "S1L": (num_steps + 1, gen_length),
            "S": (num_steps,),
            "S2": (num_steps, 2),
        }
        if self.policy_seconds is None:
            object.__setattr__(self, "policy_seconds", np.full(num_steps, np.nan))
        for name, (dtype, kind) in _FIELDS.items():
            value = np.asarray(getattr(self, name))
            if value.dtype != dtype:
                value = value.astype(dtype)
            object.__setattr__(self, name, value)
            if kind in expected and value.shape != expected[kind]:
                raise ValueError(f"Trace.{name} must have shape {expected[kind]}, got {value.shape}")
        for name, value in self.extras.items():
            arr = np.asarray(value, dtype=np.float32)
            if arr.shape != (num_steps, gen_length):
                raise ValueError(
                    f"Trace extra {name!r} must have shape {(num_steps, gen_length)}, got {arr.shape}"
                )
            self.extras[name] = arr
        if num_steps and int(self.committed.sum(axis=0).max(initial=0)) > 1:
            raise ValueError("Trace.committed commits some position more than once")

    # ---- derived views -------------------------------------------------------------------
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

    @property
    def commit_step(self) -> np.ndarray:
        """[L] step at which each position was committed, -1 if it never was."""
        out = np.full(self.gen_length, -1, dtype=np.int32)
        steps, positions = np.nonzero(self.committed)
        out[positions] = steps
        return out

    @property
    def commit_reason(self) -> np.ndarray:
        """[L] reason code of each position's commit, -1 if never committed."""
        out = np.full(self.gen_length, -1, dtype=np.int8)
        steps, positions = np.nonzero(self.committed)
        out[positions] = self.reason[steps, positions]
        return out

    @property
    def tokens_per_step(self) -> np.ndarray:
        """[S] number of positions committed at each step."""
        return self.committed.sum(axis=1).astype(np.int32)

    @property
    def wall_seconds(self) -> float:
        """Total wall time of the decode loop."""
        return float(self.step_seconds.sum())

    @property
    def is_complete(self) -> bool:
        """True when every position was committed (not cut by the step cap or a stop)."""
        return bool((self.commit_step >= 0).all())

    @property
    def stop_token_ids(self) -> list[int]:
        """The model's EOS/EoT ids as recorded at decode time (empty if unknown)."""
        return [int(i) for i in (self.meta.get("model") or {}).get("stop_token_ids", [])]

    @property
    def cut_off(self) -> bool:
        """True when no EOS/EoT token is anywhere in the final canvas: the answer ran out of room.

        (A model trained with EOS padding can also squeeze an answer into a short canvas and end
        it with EOS; that is not detected.)
        """
        return not bool(np.isin(self.final_tokens, self.stop_token_ids).any())

    def summary(self) -> dict[str, float]:
        """Headline numbers: NFE, wall seconds, answer tokens, tokens/s, tokens per step and policy overhead.

        tokens/s follows Fast-dLLM's throughput: committed tokens that are not EOS/EoT,
        over the wall time of the decode loop. policy_overhead is the time inside the
        policy's calls over the forward passes' time, policy_ms_per_pass that time per pass
        (both NaN when not recorded).
        """
        committed = self.commit_step >= 0
        answer = int((committed & ~np.isin(self.final_tokens, self.stop_token_ids)).sum())
        seconds = self.wall_seconds
        return {
            "nfe": float(self.nfe),
            "seconds": seconds,
            "tokens": float(answer),
            "tokens_per_second": answer / seconds if seconds > 0 else 0.0,
            "tokens_per_step": float(committed.sum()) / self.nfe if self.nfe else 0.0,
            "policy_overhead": self._policy_overhead(),
            "policy_ms_per_pass": float(self.policy_seconds.sum()) * 1e3 / self.nfe if self.nfe else float("nan"),
        }

    def _policy_overhead(self) -> float:
        forward = float(self.forward_seconds.sum())
        if forward <= 0 or not np.isfinite(self.policy_seconds).all():
            return float("nan")
        return float(self.policy_seconds.sum()) / forward

    def token_text(self, token_id: int) -> str:
        """Display text of a token id as recorded at decode time ('?' if unknown)."""
        return str(self.meta.get("token_text", {}).get(str(int(token_id)), "?"))

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
        arrays = {name: getattr(self, name) for name in _FIELDS}
        arrays.update({_EXTRA_PREFIX + k: v for k, v in self.extras.items()})
        meta = {"schema_version": SCHEMA_VERSION, **self.meta}
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
    if not path.is_file():
        raise TraceFileError(f"trace file {name!r} does not exist; check the path")
    declared = check_archive(path)
    ranks = {field: len(kind.replace("1", "")) for field, (_, kind) in _FIELDS.items()}
    check_declared(declared, ranks, _EXTRA_PREFIX, _META_KEY, name)
    try:
        with np.load(path, allow_pickle=False) as data:
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
    missing = sorted(set(_FIELDS) - set(arrays) - set(_OPTIONAL_FIELDS))
    if missing:
        raise TraceFileError(f"{name!r} lacks trace arrays {missing}; the file is truncated")
    extras = {k[len(_EXTRA_PREFIX) :]: v for k, v in arrays.items() if k.startswith(_EXTRA_PREFIX)}
    try:
        with np.errstate(invalid="ignore", over="ignore"):
            trace = Trace(**{f: arrays[f] for f in _FIELDS if f in arrays}, extras=extras, meta=meta)
    except ValueError as exc:
        raise TraceFileError(f"{name!r} holds an inconsistent trace: {exc}") from None
    reasons = meta.get("reason_names") or _current_reasons()
    values = {field: getattr(trace, field) for field in _FIELDS}
    check_values(values, meta, name, reasons, meta.get("pass_kind_names") or PASS_KINDS)
    return trace


def _current_reasons() -> tuple[str, ...]:
    from dllm_viz.policies.base import COMMIT_REASONS  # numpy-only module; lazy keeps trace torch-free

    return COMMIT_REASONS


class TraceBuilder:
    """Accumulates per-step records (duck-typed `engine.StepRecord`s) into a Trace.

    Used by `engine.decode` and by the app's step-by-step mode, which builds a partial trace
    from however many steps have run (an interrupted run keeps what it recorded).
    """

    def __init__(self, gen_length: int, initial_tokens: np.ndarray, prompt_ids: np.ndarray) -> None:
        self.gen_length = gen_length
        self._rows: dict[str, list[Any]] = {name: [] for name in _FIELDS if name not in ("prompt_ids",)}
        self._rows["tokens"].append(np.asarray(initial_tokens, dtype=np.int32))
        self._extras: dict[str, dict[int, np.ndarray]] = {}
        self._prompt_ids = np.asarray(prompt_ids, dtype=np.int32)
        self.stop_reason: str | None = None

    @property
    def num_steps(self) -> int:
        """Steps recorded so far."""
        return len(self._rows["candidate"])

    def add(self, record: Any) -> None:
        """Append one step record."""
        rows = self._rows
        rows["tokens"].append(record.tokens)
        for name in ("candidate", "confidence", "entropy", "margin", "committed", "reason"):
            rows[name].append(getattr(record, name))
        rows["window"].append(record.window)
        rows["block_index"].append(record.block_index)
        rows["pass_kind"].append(PASS_KINDS.index(record.pass_kind))
        rows["query_len"].append(record.query_len)
        rows["step_seconds"].append(record.step_seconds)
        rows["forward_seconds"].append(record.forward_seconds)
        rows["policy_seconds"].append(getattr(record, "policy_seconds", np.nan))
        for name, values in record.extras.items():
            self._extras.setdefault(name, {})[self.num_steps - 1] = np.asarray(values, np.float32)
        if record.stop_reason is not None:
            self.stop_reason = record.stop_reason

    def build(self, meta: dict[str, Any]) -> Trace:
        """The Trace of the steps so far (valid after any number of steps, even zero)."""
        num_steps, length = self.num_steps, self.gen_length
        arrays: dict[str, np.ndarray] = {}
        for name, (dtype, kind) in _FIELDS.items():
            if name == "prompt_ids":
                continue
            rows = self._rows[name]
            if rows:
                arrays[name] = np.stack([np.asarray(r) for r in rows]).astype(dtype)
            else:
                shape = {"SL": (0, length), "S2": (0, 2), "S": (0,)}[kind]
                arrays[name] = np.zeros(shape, dtype=dtype)
        extras = {}
        for name, by_step in self._extras.items():
            full = np.full((num_steps, length), np.nan, dtype=np.float32)
            for step, values in by_step.items():
                full[step] = values
            extras[name] = full
        meta = {**meta, "stop_reason": self.stop_reason or ("incomplete" if num_steps else "not_started")}
        return Trace(**arrays, prompt_ids=self._prompt_ids, extras=extras, meta=meta)
