"""The per-step schema: every array a decoding step records, declared once.

`StepRecord` (one step, yielded by the engine), `trace.Trace` (all steps stacked),
`trace.TraceBuilder` (records -> Trace), the .npz save/load and `replay` are all driven from
STEP_FIELDS, so a new per-step
quantity (token edits, a renoised canvas) is one row here and then appears in every record,
trace, saved file and replayed trace. Knows nothing about decoding, numpy only.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from dllm_viz.cache_modes import PASS_KINDS

# How one step's value is shaped: one value per generated position, a [start, end) pair, or a
# single number. A Trace stacks S steps of it: [S, L], [S, 2] or [S].
Shape = Literal["positions", "pair", "scalar"]


@dataclass(frozen=True)
class StepField:
    """One per-step quantity.

    Attributes:
        name: attribute name on StepRecord and Trace, and the array's name in saved files.
        dtype: numpy dtype the Trace stores it as.
        shape: see `Shape`.
        doc: what it means (becomes the attribute's line in both classes' docstrings).
        missing: value for files saved before the field existed (and for a Trace built without
            it); None means the field is required.
        vocabulary: for a field of names: the names, in code order. A StepRecord holds the name,
            a Trace the int code (its index); saved traces carry the names in their metadata.
    """

    name: str
    dtype: type
    shape: Shape
    doc: str
    missing: float | int | None = None
    vocabulary: tuple[str, ...] | None = None

    def encode(self, value: Any) -> Any:
        """A record's value as the Trace stores it (a name becomes its code)."""
        if self.vocabulary is None:
            return value
        try:
            return self.vocabulary.index(value)
        except ValueError:
            raise ValueError(f"unknown {self.name} {value!r}; known: {self.vocabulary}") from None

    def decode(self, value: Any) -> Any:
        """A Trace's stored value as a record holds it (a code becomes its name)."""
        return value if self.vocabulary is None else self.vocabulary[int(value)]

    def trace_shape(self, num_steps: int, gen_length: int) -> tuple[int, ...]:
        """Shape of this field stacked over `num_steps` steps in a Trace."""
        return {"positions": (num_steps, gen_length), "pair": (num_steps, 2), "scalar": (num_steps,)}[self.shape]


STEP_FIELDS: tuple[StepField, ...] = (
    # `tokens` is the canvas after the step's commits; a Trace also keeps the canvas before the
    # first step as row 0 (so Trace.tokens is [S+1, L]).
    StepField("tokens", np.int32, "positions", "canvas after this step's commits"),
    StepField("candidate", np.int32, "positions", "token each position would take at this step"),
    StepField("confidence", np.float32, "positions",
              "probability of the candidate (NaN where the pass did not compute the position)"),
    StepField("entropy", np.float32, "positions", "entropy of the model's distribution (nats)"),
    StepField("margin", np.float32, "positions", "top-1 minus top-2 probability"),
    StepField("committed", np.bool_, "positions", "True where the position was committed at this step"),
    StepField("reason", np.int8, "positions",
              "commit reason code (policies.COMMIT_REASONS) where committed or edited, -1 elsewhere"),
    StepField("edited", np.bool_, "positions",
              "True where a committed token was replaced by another at this step (block refinement)",
              missing=False),
    StepField("padding_changes", np.int32, "scalar",
              "commits and edits at this step in the padding past the answer (aligned blocks pad the canvas "
              "to whole blocks; those positions are decoded but not recorded)", missing=0),
    StepField("window", np.int32, "pair", "[start, end) of the window in generated-position coordinates"),
    StepField("block_index", np.int32, "scalar", "index of the window this step belongs to"),
    StepField("pass_kind", np.int8, "scalar", "a full forward pass or a cached partial pass (cache_modes.PASS_KINDS)",
              vocabulary=PASS_KINDS),
    StepField("query_len", np.int32, "scalar", "query positions in the forward pass (its real cost)"),
    StepField("step_seconds", np.float64, "scalar", "wall time of the whole step (forward + policy + bookkeeping)"),
    StepField("forward_seconds", np.float64, "scalar", "wall time of the forward pass and its statistics"),
    StepField("policy_seconds", np.float64, "scalar",
              "wall time inside the policy's calls (block sizer, observer, commit rule, extrapolator, stop); "
              "NaN where not measured", missing=np.nan),
    StepField("cache_bytes", np.int64, "scalar",
              "memory held by the KV cache after this step (0 without caching, -1 where not recorded)",
              missing=-1),
)
STEP_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in STEP_FIELDS)

_Cls = TypeVar("_Cls", bound=type)


def with_step_fields(annotation: Callable[[StepField], str], *,
                     allow_missing: bool) -> Callable[[_Cls], _Cls]:
    """Class decorator: a frozen dataclass holding every STEP_FIELDS entry plus the class's own fields.

    `annotation` gives each field's type as the class sees it (a record holds one step's value, a
    trace the stacked array). With `allow_missing` the fields that have a `missing` value default
    to None (the class fills them, see `fill_missing`); otherwise every field is required. The
    class's own fields without defaults come first, then the schema's required fields, then every
    field with a default; the docstring gains one line per schema field.
    """

    def wrap(cls: _Cls) -> _Cls:
        own = dict(inspect.get_annotations(cls))
        required = {k: v for k, v in own.items() if not hasattr(cls, k)}
        optional = {k: v for k, v in own.items() if hasattr(cls, k)}
        schema = {f.name: annotation(f) for f in STEP_FIELDS}
        cls.__annotations__ = {
            **required,
            **{f.name: schema[f.name] for f in STEP_FIELDS if f.missing is None or not allow_missing},
            **{f.name: schema[f.name] for f in STEP_FIELDS if f.missing is not None and allow_missing},
            **optional,
        }
        for f in STEP_FIELDS:
            if f.missing is not None and allow_missing:
                setattr(cls, f.name, None)
        lines = "\n".join(f"        {f.name}: {f.doc}." for f in STEP_FIELDS)
        cls.__doc__ = f"{(cls.__doc__ or '').rstrip()}\n\n    Step fields (step_schema.STEP_FIELDS):\n{lines}\n"
        return dataclasses.dataclass(frozen=True, eq=False)(cls)

    return wrap


def _record_type(f: StepField) -> str:
    """How a StepRecord holds one step of a schema field."""
    if f.shape == "positions":
        return "np.ndarray"
    if f.shape == "pair":
        return "tuple[int, int]"
    if f.vocabulary is not None:
        return "str"
    return "float" if np.issubdtype(f.dtype, np.floating) else "int"


@with_step_fields(_record_type, allow_missing=False)
class StepRecord:
    """What happened in one forward pass. Arrays are over the generated positions.

    Attributes:
        step: index of the pass (0-based); nfe = step + 1.
        step_in_window: index of the pass within its window.
        extras: policy internals by name (recorded into Trace.extras).
        stop_reason: set on the last record: "complete", "max_steps" or "eos".
    """

    step: int
    step_in_window: int
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    stop_reason: str | None = None

    @property
    def nfe(self) -> int:
        """Forward passes so far, this one included."""
        return self.step + 1


def fill_missing(values: dict[str, Any], num_steps: int, gen_length: int) -> None:
    """Put each absent or None optional field into `values` as its `missing` value, in place."""
    for f in STEP_FIELDS:
        if f.missing is not None and values.get(f.name) is None:
            values[f.name] = np.full(f.trace_shape(num_steps, gen_length), f.missing, dtype=f.dtype)
