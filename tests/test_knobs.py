"""Knob declarations: one per field name, and validation, parsing and help all follow from them."""

from __future__ import annotations

import math

import pytest

from dllm_viz.cli.options import policy_fields
from dllm_viz.policies import BLOCKS, EXTRAPOLATORS, RULES, STOPS
from dllm_viz.policies.knobs import Range, fill_points, knob, knobs, parse_knob, point

COMPONENTS = [cls for registry in (RULES, BLOCKS, EXTRAPOLATORS, STOPS) for cls in registry.values()]
RANGED = [(cls, spec) for cls in COMPONENTS for spec in knobs(cls) if spec.range is not None]


def test_a_field_name_shared_by_components_has_one_type_and_one_meaning() -> None:
    """The CLI gives each name one flag and the app one widget key, so every declaration of it must agree;
    a knob with another meaning needs its own name."""
    declared: dict[str, tuple] = {}
    for cls in COMPONENTS:
        for spec in knobs(cls):
            facts = (spec.kind, spec.choices, spec.optional, spec.default, spec.help, spec.range)
            first = declared.setdefault(spec.name, (cls.name, facts))
            assert first[1] == facts, f"`{spec.name}` of {cls.name} differs from {first[0]}'s: {facts} vs {first[1]}"
    assert policy_fields()["steps"][1] == ["cora", "dream", "fixed_steps", "learn2pd"]


@pytest.mark.parametrize(("cls", "spec"), RANGED, ids=[f"{c.name}.{s.name}" for c, s in RANGED])
def test_every_declared_range_is_what_construction_enforces(cls: type, spec) -> None:  # type: ignore[no-untyped-def]
    cls()  # the defaults are allowed
    rng = spec.range
    outside = [rng.low - 1 if rng.low is not None else None, rng.high + 1 if rng.high is not None else None]
    outside += [rng.low if rng.low is not None and not rng.low_closed else None,
                rng.high if rng.high is not None and not rng.high_closed else None]
    for value in [v for v in outside if v is not None]:
        value = int(value) if spec.kind is int else float(value)
        with pytest.raises(ValueError, match=rf"`{spec.name}` must be .*got {value!r}"):
            cls(**{spec.name: value})


def test_ranges_read_intervals_and_bounds() -> None:
    unit = Range.parse("(0, 1]")
    assert 1.0 in unit and 0.5 in unit and 0.0 not in unit and unit.is_unit
    assert 1 in Range.parse(">= 1") and 0 not in Range.parse(">= 1") and not Range.parse(">= 1").is_unit
    assert math.inf not in Range.parse("[0, 1)") and math.nan not in Range.parse("> 0")
    with pytest.raises(ValueError, match="cannot read"):
        Range.parse("0..1")


def test_a_wrong_type_or_choice_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"`m` must be an integer, got 1\.5"):
        RULES["cora"](m=1.5)
    with pytest.raises(ValueError, match="`remasking` must be one of"):
        RULES["fixed_steps"](remasking="sideways")
    assert parse_knob(BLOCKS["adablock"], "delimiters", r"\n,.") == ("\n", ".")
    assert parse_knob(RULES["cora"], "steps", "none") is None


def test_a_family_calibrated_knob_defaults_to_none_and_fills_from_points_else_its_published_value() -> None:
    calibrated = {(cls.name, spec.name): spec.published for cls in COMPONENTS for spec in knobs(cls)
                  if spec.published is not None}
    assert calibrated == {("cora", "delta_p"): 0.97, ("cora", "m"): 2, ("adablock", "delimiter_threshold"): 0.3,
                          ("tspd", "tau_fix"): 0.5}
    cora = RULES["cora"]()
    assert (cora.delta_p, cora.m) == (None, None)  # None = the model family's point
    assert (point(cora, "delta_p"), point(cora, "m")) == (0.97, 2)  # stepped without a model: published
    filled = fill_points(RULES["cora"](delta_p=0.5), {"delta_p": 0.8, "m": 1})
    assert (filled.delta_p, filled.m) == (0.5, 1)  # the user's value wins over the family's point
    assert fill_points(cora, {}) == RULES["cora"](delta_p=0.97, m=2)
    spec = next(s for s in knobs(RULES["cora"]) if s.name == "delta_p")
    assert "the model family's calibrated point, else 0.97" in spec.describe()
    with pytest.raises(ValueError, match="defaults to None"):
        knob(0.5, "a point with a default of its own", published=0.3)
