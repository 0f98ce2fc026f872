"""Sweep one knob of one configuration: `threshold(threshold=0.5:0.99:8)` -> eight configurations.

The bench runs the expanded configurations like any others (prompt by prompt, against dense)
and reports the knob's NFE-accuracy frontier, its AUP, and where every other configuration of
the same run sits against that frontier (dllm_viz/metrics.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from dllm_viz.policies.knobs import knobs
from dllm_viz.policies.pipeline import REGISTRIES

# `name=lo:hi:count` inside a component's parentheses. The count is read up to the next ',' or ')'
# so that a malformed one (`2.5`, `-2`, `x`) is named in the error instead of being cut short.
_RANGE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([-+0-9.eE]+):([-+0-9.eE]+):([^,()\s]*)")
MAX_POINTS = 50


@dataclass(frozen=True, slots=True)
class Sweep:
    """A configuration with one knob over a range.

    Attributes:
        spec: what the user wrote.
        knob: the swept field's name.
        values: the knob's values, evenly spaced from lo to hi inclusive (to 4 significant digits).
        labels: one bench configuration per value (the spec with the range replaced).
    """

    spec: str
    knob: str
    values: tuple[float, ...]
    labels: tuple[str, ...]


def parse_sweep(spec: str) -> Sweep:
    """Expand `rule(knob=lo:hi:count,...)+...` into `count` configurations.

    Raises:
        ValueError: no range or more than one, a count that is not a whole number in
            2..MAX_POINTS, lo >= hi, a bound that is not a number, or a range of an integer knob
            whose points are not whole (the message shows the form to write).
    """
    found = list(_RANGE.finditer(spec))
    if len(found) != 1:
        raise ValueError(
            f"a sweep needs exactly one knob range written name=lo:hi:count, e.g. "
            f"'threshold(threshold=0.5:0.99:8)'; {spec!r} has {len(found)}"
        )
    match = found[0]
    knob, low_text, high_text, count_text = match.groups()
    try:
        low, high = float(low_text), float(high_text)
    except ValueError as exc:
        raise ValueError(f"sweep bounds of {knob!r} must be numbers, got {low_text!r} and {high_text!r}") from exc
    if not count_text.isdigit():
        raise ValueError(f"the sweep count of {knob!r} must be a whole number of points in 2..{MAX_POINTS}, "
                         f"got {count_text!r} in {spec!r}; e.g. {knob}={low_text}:{high_text}:8")
    count = int(count_text)
    if not 2 <= count <= MAX_POINTS:
        raise ValueError(f"a sweep takes 2..{MAX_POINTS} points, got {count} in {spec!r}")
    if not low < high:
        raise ValueError(f"sweep range of {knob!r} must go from low to high, got {low_text}:{high_text}")
    integral = all(float(v).is_integer() for v in (low, high)) and (high - low) % (count - 1) == 0
    if not integral and _knob_kind(spec, match.start(), knob) is int:
        raise ValueError(_whole_steps_advice(knob, low, high, count, spec))
    # Four significant digits: the label is what runs, so the value is what the label says.
    texts = [f"{int(v)}" if integral else f"{v:.4g}" for v in np.linspace(low, high, count)]
    values = tuple(float(text) for text in texts)
    labels = tuple(spec[: match.start()] + f"{knob}={text}" + spec[match.end():] for text in texts)
    return Sweep(spec=spec, knob=knob, values=values, labels=labels)


def _knob_kind(spec: str, start: int, knob: str) -> type | None:
    """The declared type (policies/knobs.py) of field `knob` of the component whose parentheses
    hold the range at `start`, e.g. int for `cora(m=1:4:3)`; None when the component or field is
    unknown (parse_config then names it)."""
    opening = spec.rfind("(", 0, start)
    name = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", spec[:opening]) if opening >= 0 else None
    if name is None:
        return None
    for registry in REGISTRIES.values():
        if (cls := registry.get(name.group(1))) is not None:
            return next((spec.kind for spec in knobs(cls) if spec.name == knob), None)
    return None


def _whole_steps_advice(knob: str, low: float, high: float, count: int, spec: str) -> str:
    """Why an integer knob's range cannot run (its points would be e.g. 2.5) and ranges that can:
    whole bounds with the count nearest `count` whose steps are whole (more points on a tie), and,
    where one fits inside the range, `count` points from lo with the widest whole step."""
    lo, hi = math.ceil(low), math.floor(high)
    hi = max(hi, lo + 1)
    fits = [c for c in range(2, min(MAX_POINTS, hi - lo + 1) + 1) if (hi - lo) % (c - 1) == 0]
    best = min(fits, key=lambda c: (abs(c - count), -c))
    ideas = [f"{knob}={lo}:{hi}:{best}"]
    if (step := (hi - lo) // (count - 1)) >= 1 and lo + step * (count - 1) != hi:
        ideas.append(f"{knob}={lo}:{lo + step * (count - 1)}:{count}")
    return (f"{knob!r} is an integer knob, so its sweep needs whole bounds and a count whose steps are whole "
            f"numbers; {_num(low)}:{_num(high)}:{count} in {spec!r} gives points such as "
            f"{_num(float(np.linspace(low, high, count)[1]))}; e.g. {' or '.join(ideas)}")


def _num(value: float) -> str:
    return f"{int(value)}" if value.is_integer() else f"{value:.4g}"
