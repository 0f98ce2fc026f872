"""Knobs: each policy field declared once (default, help, allowed range) in its dataclass metadata.

A component's `__post_init__` validation (`check_knobs`), the CLI's flags (cli/options.py), the
bench's `rule(field=value)` parser (`parse_knob`) and the app's widgets (app widgets module) are
all derived from the declaration and the field's type annotation, read by the one annotation
reader here (`field_kind`). Knows nothing about what a knob means.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cache
from typing import Any, Literal

_INTERVAL = re.compile(r"^([(\[])\s*(\S+)\s*,\s*(\S+)\s*([)\]])$")
_BOUND = re.compile(r"^(>=|>|<=|<)\s*(\S+)$")


@dataclass(frozen=True)
class Range:
    """Allowed values of a numeric knob, written as an interval ("(0, 1]") or a bound (">= 1")."""

    text: str
    low: float | None = None
    high: float | None = None
    low_closed: bool = True
    high_closed: bool = True

    @classmethod
    def parse(cls, text: str) -> Range:
        """Read "(0, 1]", "[0, 1)", "> 0", ">= 1", "<= 5" ...; ValueError for anything else."""
        if match := _INTERVAL.match(text.strip()):
            left, low, high, right = match.groups()
            return cls(text, float(low), float(high), left == "[", right == "]")
        if match := _BOUND.match(text.strip()):
            op, value = match.group(1), float(match.group(2))
            if op.startswith(">"):
                return cls(text, low=value, low_closed=op == ">=")
            return cls(text, high=value, high_closed=op == "<=")
        raise ValueError(f"cannot read knob range {text!r}; write e.g. '(0, 1]' or '>= 1'")

    def __contains__(self, value: float) -> bool:
        if value != value:  # NaN fails every comparison, so it would pass them all
            return False
        if self.low is not None and (value < self.low or (value == self.low and not self.low_closed)):
            return False
        return not (self.high is not None and (value > self.high or (value == self.high and not self.high_closed)))

    def describe(self) -> str:
        """'in (0, 1]' or '>= 1', as an error message or a help text says it."""
        return self.text if self.text[0] in "<>" else f"in {self.text}"

    @property
    def is_unit(self) -> bool:
        """True when every allowed value lies in [0, 1] (a probability-like knob)."""
        return self.low is not None and self.high is not None and self.low >= 0.0 and self.high <= 1.0


def knob(default: Any, help: str, *, within: str | None = None, published: Any = None) -> Any:
    """A dataclass field declaring a knob: its default, help text and allowed range (see Range).

    `published` declares a family-calibrated knob: its default is None, meaning "the loaded model
    family's calibrated point" (the model-family table's `points`, filled by `fill_points` when a
    pipeline is resolved for a model), and `published` is the paper's value, used where the
    family states none.
    """
    if within is not None:
        Range.parse(within)  # a typo in a declaration fails at import, not at first use
    if published is not None and default is not None:
        raise ValueError(f"a family-calibrated knob ({help!r}) defaults to None, got {default!r}")
    return field(default=default, metadata={"help": help, "within": within, "published": published})


@dataclass(frozen=True)
class Knob:
    """One configurable field of a policy component, as validation, the CLI and widgets need it.

    Attributes:
        name: the field name.
        kind: int, float, bool, str, or tuple (a tuple of strings).
        choices: the allowed values of a Literal field, else None.
        optional: None is allowed (it means "the component's own default").
        default: the declared default.
        help: what it does.
        range: allowed numeric values, or None for any.
        published: for a family-calibrated knob (default None = the model family's point), the
            paper's value, used for families that state no point of their own; else None.
    """

    name: str
    kind: type
    choices: tuple[Any, ...] | None
    optional: bool
    default: Any
    help: str
    range: Range | None
    published: Any = None

    def describe(self) -> str:
        """Help text with the range and the default, for --help and widget tooltips."""
        where = f", {self.range.describe()}" if self.range is not None else ""
        if self.published is not None:
            return f"{self.help}{where} (default: the model family's calibrated point, else {self.published!r})"
        return f"{self.help}{where} (default {self.default!r})"

    def check(self, value: Any) -> None:
        """ValueError naming the field, the constraint and the value when `value` is not allowed."""
        if value is None:
            if not self.optional:
                raise ValueError(f"`{self.name}` must be set, got None")
            return
        if self.choices is not None:
            if value not in self.choices:
                raise ValueError(f"`{self.name}` must be one of {', '.join(map(repr, self.choices))}, got {value!r}")
            return
        if not _has_kind(value, self.kind):
            raise ValueError(f"`{self.name}` must be {_KIND_WORDS[self.kind]}, got {value!r}")
        if self.kind is tuple and not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"`{self.name}` must be non-empty strings, got {value!r}")
        if self.range is not None and value not in self.range:
            raise ValueError(f"`{self.name}` must be {self.range.describe()}, got {value!r}")


_KIND_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string",
               tuple: "a tuple of strings"}


def _has_kind(value: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def field_kind(annotation: Any) -> tuple[type, tuple[Any, ...] | None, bool]:
    """(base type, Literal choices or None, whether None is allowed) of a field's annotation.

    The one annotation reader: `X | None` reads as X (optional), a Literal gives its choices,
    `tuple[str, ...]` reads as tuple.
    """
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = type(None) in typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return tuple, None, optional
    if origin is Literal:
        return type(args[0]), tuple(args), optional
    if optional and args:
        kind, choices, _ = field_kind(args[0])
        return kind, choices, True
    return annotation, None, optional


@cache
def knobs(cls: type) -> tuple[Knob, ...]:
    """Every knob of a component dataclass, in declaration order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        kind, choices, optional = field_kind(hints[f.name])
        within = f.metadata.get("within")
        out.append(Knob(f.name, kind, choices, optional, None if f.default is MISSING else f.default,
                        str(f.metadata.get("help", f.name)), None if within is None else Range.parse(within),
                        f.metadata.get("published")))
    return tuple(out)


def fill_points(component: Any, points: Mapping[str, Any]) -> Any:
    """`component` with each family-calibrated knob left None set: from `points` (a model family's
    calibrated values by field name), else to the knob's published value. Other knobs, and
    family-calibrated ones the user set, are kept."""
    unset = {spec.name: points.get(spec.name, spec.published) for spec in knobs(type(component))
             if spec.published is not None and getattr(component, spec.name) is None}
    return replace(component, **unset) if unset else component


def point(component: Any, name: str) -> Any:
    """Knob `name` of `component`, its published value while it is left to the family (a component
    used without a model, e.g. stepped by hand in a test)."""
    value = getattr(component, name)
    if value is not None:
        return value
    return next(spec.published for spec in knobs(type(component)) if spec.name == name)


def check_knobs(component: Any) -> None:
    """Validate every knob of a component instance against its declaration (call from __post_init__)."""
    for spec in knobs(type(component)):
        spec.check(getattr(component, spec.name))


def parse_strings(text: str) -> tuple[str, ...]:
    r"""Comma-separated strings with Python escapes, e.g. `\n,.` -> ("\n", "."); `\x2c` is a comma.

    Other characters are kept as typed: `codecs.decode(part, "unicode_escape")` read a typed
    delimiter such as `。` (a Chinese full stop) as its UTF-8 bytes, `ã\x80\x82`, a string no
    token of the model spells, so the delimiter was silently never found.

    Raises:
        ValueError: a part holds a broken escape (a lone trailing backslash, `\x4`, ...); the
            message names the part and how to write a backslash.
    """
    out = []
    for part in text.split(","):
        if not part:
            continue
        try:  # escape only what latin-1 lacks, so unicode_escape reads every other character back as itself
            out.append(part.encode("latin-1", "backslashreplace").decode("unicode_escape"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"{part!r} holds a broken escape ({exc.reason}); write a backslash as \\\\, a "
                             "newline as \\n, a comma as \\x2c") from None
    return tuple(out)


_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def parse_text(spec: Knob, text: str, label: str = "") -> Any:
    """The value of knob `spec` written as `text` ("0.99", "none", "true", "\\n,.").

    Raises:
        ValueError: the text is not a valid value (type or choices); the message names the knob.
    """
    text = text.strip()
    where = f"{label} option " if label else "option "
    if text.lower() == "none" and spec.optional:
        return None
    if spec.kind is tuple:
        try:
            return parse_strings(text)
        except ValueError as exc:  # its message says which part is broken and how to write it
            raise ValueError(f"{where}{spec.name}: {exc}") from None
    try:
        if spec.kind is bool:
            if text.lower() not in _TRUE + _FALSE:
                raise ValueError(text)
            value: Any = text.lower() in _TRUE
        else:
            value = spec.kind(text)
    except ValueError:
        raise ValueError(f"{where}{spec.name}={text!r} is not {_KIND_WORDS.get(spec.kind, spec.kind)}") from None
    if spec.choices is not None and value not in spec.choices:
        raise ValueError(f"{where}{spec.name}={text!r}: choose one of {list(spec.choices)}")
    return value


def parse_knob(cls: type, name: str, text: str) -> Any:
    """The value of field `name` of component class `cls` written as `text`.

    Raises:
        ValueError: `cls` has no such field, or the text is not a valid value for it.
    """
    specs = {spec.name: spec for spec in knobs(cls)}
    label = getattr(cls, "name", cls.__name__)
    if name not in specs:
        raise ValueError(f"{label} has no option {name!r}; its options: {', '.join(specs) or 'none'}")
    return parse_text(specs[name], text, label)
