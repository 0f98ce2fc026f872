"""Widgets generated from the policy dataclasses: one composition form shared by every page.

A policy is block sizing x commit rule x (CE) x (EOS stop) x cache. Every field of every chosen
component becomes a widget (slider, number input, toggle, choice) built from its type and its
`metadata["help"]`, so a new policy knob appears in the app without touching a page. Widget
keys are `<prefix><field name>` and can be bound to the URL, so a link reproduces the form.
"""

from __future__ import annotations

import codecs
import json
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import streamlit as st

from dllm_viz.explain import component_help, knob_help
from dllm_viz.policies import BLOCKS, EXTRAPOLATORS, RULES, STOPS, Pipeline
from pages.common import confine_weights

GEN_LENGTHS = (16, 32, 64, 128, 256, 512, 1024)
CACHE_MODES = ("none", "prefix", "dual")
# A float field whose help mentions one of these (and whose default is in [0, 1]) is a slider.
_UNIT_HINTS = ("(0, 1", "[0, 1", "probability", "confidence", "fraction", "lower bound", "coverage")


@dataclass(frozen=True)
class FieldSpec:
    """One configurable field of a policy component, as the form needs it."""

    name: str
    kind: type
    choices: tuple[Any, ...] | None
    optional: bool
    default: Any
    help: str


@dataclass(frozen=True)
class PolicySpec:
    """What the form chose: component names, cache and the flat field values."""

    rule: str
    block: str
    extrapolate: str | None
    stop: str | None
    cache: str
    refresh_every: int | None
    options: dict[str, Any] = field(default_factory=dict)

    def pipeline(self) -> Pipeline:
        """The Pipeline; raises ValueError naming a bad value (e.g. a threshold out of range)."""
        return Pipeline.from_names(self.rule, self.block, self.extrapolate, self.stop, cache=self.cache,
                                   refresh_every=self.refresh_every, **confine_weights(self.options))


def field_specs(cls: type) -> list[FieldSpec]:
    """FieldSpecs of a policy component dataclass, in declaration order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        kind, choices, optional = _kind(hints[f.name])
        default = None if f.default is MISSING else f.default
        out.append(FieldSpec(f.name, kind, choices, optional, default, str(f.metadata.get("help", f.name))))
    return out


def _kind(annotation: Any) -> tuple[type, tuple[Any, ...] | None, bool]:
    """(base type, Literal choices, whether None is allowed) of a field annotation."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = type(None) in typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return tuple, None, optional
    if origin is Literal:
        return type(args[0]), tuple(args), optional
    if optional and args:
        kind, choices, _ = _kind(args[0])
        return kind, choices, True
    return annotation, None, optional


def parse_strings(text: str) -> tuple[str, ...] | None:
    r"""Comma-separated strings with Python escapes (`\n,.` -> ("\n", ".")); empty -> None."""
    parts = tuple(codecs.decode(p, "unicode_escape") for p in text.split(",") if p)
    return parts or None


def _is_unit(spec: FieldSpec) -> bool:
    default = spec.default if spec.default is not None else 0.5
    return 0.0 <= float(default) <= 1.0 and any(h in spec.help for h in _UNIT_HINTS)


def field_widget(spec: FieldSpec, key: str, *, bind: bool, weights: Callable[[str], list[str]] | None = None,
                 container: Any = None) -> Any:
    """Render one field's widget under `key` and return its value (None = the component default)."""
    box = container if container is not None else st
    extra: dict[str, Any] = {"key": key, "help": f"{knob_help(spec.name, spec.help)} (default {spec.default!r})",
                             "persist_state": "session"}
    if bind:
        extra["bind"] = "query-params"
    label = spec.name.replace("_", " ")
    if spec.choices is not None:
        return box.selectbox(label, list(spec.choices), index=list(spec.choices).index(spec.default), **extra)
    if spec.kind is bool:
        return box.toggle(label, value=bool(spec.default), **extra)
    if spec.kind is tuple:
        shown = ",".join(codecs.encode(s, "unicode_escape").decode() for s in spec.default or ())
        return parse_strings(box.text_input(label, value=shown, placeholder="default", **extra) or "")
    if spec.kind is str:
        known = weights(spec.name) if weights is not None else []
        if known:
            extra["help"] += ". Trained here: " + ", ".join(known[:3])
        return box.text_input(label, value=str(spec.default), **extra)
    if spec.kind is float and not spec.optional and _is_unit(spec):
        return box.slider(label, 0.0, 1.0, float(spec.default), 0.01, **extra)
    if spec.kind is float:
        value = None if spec.default is None else float(spec.default)
        return box.number_input(label, value=value, format="%.4g", placeholder="default", **extra)
    if spec.kind is int:
        value = None if spec.default is None else int(spec.default)
        return box.number_input(label, value=value, step=1, placeholder="default", **extra)
    raise TypeError(f"no widget for field {spec.name!r} of type {spec.kind!r}; add one to pages/widgets.py")


def component_fields(cls: type, prefix: str, *, bind: bool, columns: int = 3,
                     weights: Callable[[str], list[str]] | None = None) -> dict[str, Any]:
    """Widgets for every field of `cls` laid out in columns; returns field name -> value."""
    specs = field_specs(cls)
    if not specs:
        return {}
    cols = st.columns(min(columns, len(specs)))
    return {s.name: field_widget(s, prefix + s.name, bind=bind, weights=weights,
                                 container=cols[i % len(cols)])
            for i, s in enumerate(specs)}


def trained_controllers(directory: Path) -> dict[str, dict[str, Any]]:
    """Path -> JSON card of every controller (weights + card) in `directory`, newest first."""
    if not directory.is_dir():
        return {}
    out = {}
    for weights in sorted(directory.glob("*.safetensors"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            out[str(weights)] = json.loads(weights.with_suffix(".json").read_text())
        except (OSError, ValueError):
            continue  # no card or an unreadable one: not a controller we can offer
    return out


def controller_choices(directory: Path) -> Callable[[str], list[str]]:
    """For a weights field: the trained controllers of its kind in `directory`, newest first, by
    their names there (what the field takes; the browser never sees the server's path)."""
    def choices(field_name: str) -> list[str]:
        kind = "tspd" if field_name == "controller_weights" else "learn2pd"
        return [Path(p).name for p, card in trained_controllers(directory).items() if card.get("kind") == kind]
    return choices


def policy_form(prefix: str = "", *, bind: bool = False, default_rule: str = "threshold",
                weights: Callable[[str], list[str]] | None = None) -> PolicySpec:
    """The whole composition form: components, then every field of each chosen component."""
    keep: dict[str, Any] = {"persist_state": "session", **({"bind": "query-params"} if bind else {})}
    rule = st.segmented_control("Commit rule", list(RULES), default=default_rule, required=True,
                                key=f"{prefix}rule", help="which masked positions a step commits", **keep)
    st.caption(component_help(str(rule)))  # what the chosen rule does, and its paper (dllm_viz.explain)
    a, b, c, d = st.columns([1, 1.2, 1, 1], vertical_alignment="bottom")
    block = a.segmented_control("Block sizing", list(BLOCKS), default="fixed", required=True,
                                key=f"{prefix}block", help="fixed semi-AR blocks or AdaBlock", **keep)
    cache = b.segmented_control("KV cache", list(CACHE_MODES), default="none", required=True,
                                key=f"{prefix}cache", help="Fast-dLLM prefix / dual cache", **keep)
    ce = c.toggle("CE (Kalman)", key=f"{prefix}ce", help="Confidence Extrapolation: Kalman look-ahead commits",
                  **keep)
    eos = d.toggle("EOS early stop", key=f"{prefix}eos", help="cut the canvas after a confident EOS", **keep)
    refresh = None
    if cache != "none":
        refresh = st.number_input("Refresh cache every N steps", min_value=1, value=None, step=1,
                                  placeholder="only at block starts", key=f"{prefix}refresh", **keep)
    options = component_fields(RULES[rule], prefix, bind=bind, weights=weights)
    options |= component_fields(BLOCKS[block], prefix, bind=bind)
    plugins = ((ce, "kalman", EXTRAPOLATORS, "CE settings"), (eos, "eos", STOPS, "EOS stop settings"))
    for on, name, registry, title in plugins:
        if on:
            with st.expander(title):
                options |= component_fields(registry[name], prefix, bind=bind, columns=4)
    return PolicySpec(rule=str(rule), block=str(block), extrapolate="kalman" if ce else None,
                      stop="eos" if eos else None, cache=str(cache), refresh_every=refresh, options=options)


def gen_length_input(key: str, *, default: int = 64, bind: bool = False, container: Any = None,
                     limit: int | None = None) -> int:
    """The canvas length (positions generated) as a select slider, offering only lengths <= `limit`.

    `limit` is what the model's context leaves after the prompt (pages.common.canvas_limit), so
    a length the model cannot decode is never offered; the default shrinks to fit it.
    """
    box = container if container is not None else st
    offered = [g for g in GEN_LENGTHS if limit is None or g <= limit] or [GEN_LENGTHS[0]]
    extra: dict[str, Any] = {"persist_state": "session", **({"bind": "query-params"} if bind else {})}
    asked = st.query_params.get(key) if bind else None
    if asked is not None and asked.isdigit() and int(asked) in GEN_LENGTHS and int(asked) not in offered:
        st.warning(f"{key}={asked} does not fit the model's context after this prompt ({limit} positions "
                   f"are left); the longest that fits, {max(offered)}, is offered instead.")
    if st.session_state.get(key) not in (None, *offered):
        st.session_state[key] = max(offered)  # a length kept from a shorter prompt or another model
    help_text = "positions the model generates (the canvas after the prompt)"
    if limit is not None:
        help_text += f"; up to {limit} fit the model's context after this prompt"
    return int(box.select_slider("Gen length", offered, value=min(default, max(offered)), key=key, help=help_text,
                                 **extra))
