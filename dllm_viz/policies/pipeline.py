"""Pipeline: one explicit composition of block sizing x commit rule x extrapolation x stop.

docs/DESIGN.md §5: every combination runs through the one engine. This module validates,
resolves model-family defaults and (de)serialises; it never decodes.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import PurePath
from typing import Any

from dllm_viz.cache_modes import CacheMode, check_cache_mode
from dllm_viz.model_facts import AdapterInfo
from dllm_viz.policies.base import (
    BlockSizer,
    CommitRule,
    Extrapolator,
    StopRule,
    build_component,
    component_to_dict,
)
from dllm_viz.policies.blocks import FixedBlocks
from dllm_viz.policies.fixed_steps import FixedStepsPolicy
from dllm_viz.policies.knobs import fill_points
from dllm_viz.policies.registry import BLOCKS, EXTRAPOLATORS, RULES, STOPS, lookup
from dllm_viz.policies.threshold import ThresholdPolicy

_PARTS = (("block", BLOCKS, "block sizer"), ("rule", RULES, "commit rule"),
          ("extrapolate", EXTRAPOLATORS, "extrapolator"), ("stop", STOPS, "stop rule"))
# Each part's registry, by the part's name ("rule", "block", "extrapolate", "stop").
REGISTRIES: dict[str, dict[str, type]] = {name: registry for name, registry, _ in _PARTS}


@dataclass(frozen=True)
class Pipeline:
    """A complete decoding policy.

    Attributes:
        rule: commit rule deciding which open positions to commit at each step.
        block: block sizer deciding where each window ends.
        extrapolate: optional look-ahead plug-in adding early commits (CE), or None.
        stop: optional end-of-text stop, or None.
        cache: Fast-dLLM KV cache: "none" (full pass every step), "prefix" or "dual"; the
            cache is refreshed by a full pass at each window start.
        refresh_every: also refresh the cache every this many steps inside a window (None =
            only at window starts).
    """

    rule: CommitRule = field(default_factory=ThresholdPolicy)
    block: BlockSizer = field(default_factory=FixedBlocks)
    extrapolate: Extrapolator | None = None
    stop: StopRule | None = None
    cache: CacheMode = "none"
    refresh_every: int | None = None

    def __post_init__(self) -> None:
        check_cache_mode(self.cache)
        if self.refresh_every is not None and (not isinstance(self.refresh_every, int) or self.refresh_every < 1):
            raise ValueError(f"`refresh_every` must be a positive integer or None, got {self.refresh_every!r}")

    def validate(self, gen_length: int) -> None:
        """Raise ValueError if this pipeline cannot decode `gen_length` positions."""
        self.block.validate(gen_length)
        self.rule.validate_blocks(gen_length, self.block.block_length)

    def validate_model(self, info: AdapterInfo) -> None:
        """Raise ValueError if this pipeline's rule cannot run on the model `info` describes."""
        self.rule.validate_model(info)

    def resolve(self, family: str, delimiters: tuple[str, ...]) -> Pipeline:
        """Fill model-family defaults left unset: the family-calibrated knobs (`calibrated`) and
        the block sizer's delimiters from the model's."""
        calibrated = self.calibrated(family)
        return replace(calibrated, block=calibrated.block.resolve(family, delimiters))

    def calibrated(self, family: str | None) -> Pipeline:
        """Every family-calibrated knob left unset (AdaBlock's tau_D, CORA's (delta_p, m)) filled
        from `family`'s points in the model-family table, else with its published value (a family
        without a row, or None: remote code, block diffusion). The values a decode of that
        family's model runs with, which is what a results file records (cli/options.py)."""
        # Imported here, not at module level: the family table imports the model adapters (torch),
        # and policies stay torch-free until a decode, which has a model loaded.
        from dllm_viz.models.families import calibrated_points

        points = {} if family is None else calibrated_points(family)
        parts = {name: fill_points(getattr(self, name), points.get(getattr(self, name).name, {}))
                 for name, _, _ in _PARTS if getattr(self, name) is not None}
        return replace(self, **parts)

    @property
    def delimiters(self) -> tuple[str, ...] | None:
        """Delimiter strings the block sizer looks for, if it uses any."""
        return self.block.delimiters

    @classmethod
    def dense(cls, block_length: int = 32, *, gen_length: int | None = None, cache: CacheMode = "none") -> Pipeline:
        """LLaDA's dense baseline: one token per step, lowest-confidence first, in fixed blocks.

        With `gen_length`, a `block_length` that does not divide it becomes one block of
        gen_length (the app's pages pass their canvas length).
        """
        if gen_length is not None and gen_length % block_length:
            block_length = gen_length
        return cls(rule=FixedStepsPolicy(), block=FixedBlocks(block_length), cache=cache)

    @property
    def label(self) -> str:
        """Short human-readable name, e.g. `fixed32+threshold0.9+kalman`."""
        parts = [getattr(self, name) for name, _, _ in _PARTS]
        label = "+".join(_short(c) for c in parts if c is not None)
        if self.cache != "none":
            label += f"+{self.cache}" + (f"(every {self.refresh_every})" if self.refresh_every else "")
        return label

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description; `from_dict` inverts it."""
        parts = {name: None if getattr(self, name) is None else component_to_dict(getattr(self, name))
                 for name, _, _ in _PARTS}
        return {**parts, "cache": self.cache, "refresh_every": self.refresh_every}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pipeline:
        """Rebuild a pipeline from `to_dict` output (unknown names raise ValueError)."""
        parts = {name: _component(registry, kind, data[name])
                 for name, registry, kind in _PARTS if data.get(name) is not None}
        return cls(**parts, cache=data.get("cache", "none"), refresh_every=data.get("refresh_every"))

    @classmethod
    def from_names(cls, rule: str, block: str = "fixed", extrapolate: str | None = None,
                   stop: str | None = None, *, cache: CacheMode = "none", refresh_every: int | None = None,
                   overrides: Mapping[str, Mapping[str, Any]] | None = None, **options: Any) -> Pipeline:
        """Build from registry names and a flat dict of field values (CLI, app widgets).

        Each option goes to whichever chosen component has a field of that name; None means
        the component's default. `overrides` maps a part ("rule", "block", "extrapolate",
        "stop") to values for that component only, which win over `options` (a bench
        configuration such as `cora(delta_p=0.99)+kalman(tau_ce=0.95)`).

        Raises:
            ValueError: an unknown component name, a bad value, or an option that no registered
                component has (a typo such as `treshold=0.5`, which was ignored silently).
        """
        names = {"block": block, "rule": rule, "extrapolate": extrapolate, "stop": stop}
        _check_option_names(options)
        overrides = overrides or {}
        parts = {name: build_component(lookup(registry, kind, names[name]), {**options, **overrides.get(name, {})})
                 for name, registry, kind in _PARTS if names[name] is not None}
        return cls(**parts, cache=cache, refresh_every=refresh_every)  # type: ignore[arg-type]


def _check_option_names(options: Mapping[str, Any]) -> None:
    """Refuse an option no registered component has a field of.

    An option of another, unchosen component is deliberately ignored (the CLI and the app pass
    every knob); a name no component knows is a typo, and ignoring it decoded with the default.
    """
    known = {f.name for _, registry, _ in _PARTS for cls in registry.values() for f in fields(cls)}
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"unknown policy option {name!r}; {hint}options are the fields of the components: "
                             f"{sorted(known)}")


def _component(registry: dict[str, type], kind: str, data: Mapping[str, Any]) -> Any:
    """One part of a `to_dict` description rebuilt; a malformed part (a dict from a hand-edited file
    or another version) is a ValueError naming it, not a KeyError / TypeError from the constructor."""
    if not isinstance(data, Mapping) or "name" not in data:
        raise ValueError(f"a {kind} must be described as {{'name': ..., <its options>}}, got {data!r}")
    values = dict(data)
    cls = lookup(registry, kind, values.pop("name"))
    unknown = sorted(set(values) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"{kind} {cls.name!r} has no option {', '.join(map(repr, unknown))}; its options are "
                         f"{sorted(f.name for f in fields(cls))}")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def _short(component: Any) -> str:
    """`name` + its first field's value + other non-default fields in parentheses."""
    values = {f.name: getattr(component, f.name) for f in fields(component)}
    defaults = {f.name: f.default for f in fields(component)}
    names = list(values)
    first = values[names[0]] if names else None
    # Numbers read glued (`threshold0.9`); words and weight files after a colon (`tspd:bundled`,
    # `dream:entropy`, `learn2pd:my_filter`), not run together as `tspdbundled`.
    head = ("" if first is None else f":{PurePath(first).stem}" if isinstance(first, str)
            else _value_text(first))
    rest = [_value_text(values[n]) for n in names[1:] if values[n] != defaults[n]]
    return type(component).name + head + (f"({','.join(rest)})" if rest else "")


def _value_text(value: Any) -> str:
    """A field value as a label shows it: sequences joined by '|', a newline as '⏎'.

    AdaBlock's delimiters made labels like `adablock32(0.9,('\\n',))` in every figure title.
    """
    if isinstance(value, tuple | list):
        return "|".join(_value_text(v) for v in value)
    if isinstance(value, str):
        return value.replace("\n", "⏎").replace("\t", "⇥") or "''"
    return str(value)
