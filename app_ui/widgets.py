"""Widgets generated from the policy dataclasses: one composition form shared by every page.

A policy is block sizing x commit rule x (CE) x (EOS stop) x cache. Every field of every chosen
component becomes a widget (slider, number input, toggle, choice) built from its type and its
`metadata["help"]`, so a new policy knob appears in the app without touching a page. Widget
keys are `<prefix><field name>` and can be bound to the URL, so a link reproduces the form.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from app_ui.common import confine_weights
from dllm_viz.cache_modes import CACHE_MODES
from dllm_viz.explain import component_help, knob_help
from dllm_viz.policies import BLOCKS, EXTRAPOLATORS, RULES, STOPS, Pipeline
from dllm_viz.policies.knobs import Knob, knobs, parse_strings

GEN_LENGTHS = (16, 32, 64, 128, 256, 512, 1024)


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


def _is_slider(spec: Knob) -> bool:
    """A required float whose range lies in [0, 1] and whose default sits on the slider's 0.01 grid."""
    if spec.kind is not float or spec.optional or spec.range is None or not spec.range.is_unit:
        return False
    return abs(round(float(spec.default), 2) - float(spec.default)) < 1e-12


def field_widget(spec: Knob, key: str, *, bind: bool, weights: Callable[[str], list[str]] | None = None,
                 container: Any = None) -> Any:
    """Render one field's widget under `key` and return its value (None = the component default)."""
    box = container if container is not None else st
    extra: dict[str, Any] = {"key": key, "help": knob_help(spec.name, spec.describe()), "persist_state": "session"}
    if bind:
        extra["bind"] = "query-params"
    label = spec.name.replace("_", " ")
    if spec.choices is not None:
        return box.selectbox(label, list(spec.choices), index=list(spec.choices).index(spec.default), **extra)
    if spec.kind is bool:
        return box.toggle(label, value=bool(spec.default), **extra)
    if spec.kind is tuple:
        shown = ",".join(codecs.encode(s, "unicode_escape").decode() for s in spec.default or ())
        return parse_strings(box.text_input(label, value=shown, placeholder="default", **extra) or "") or None
    if spec.kind is str:
        known = weights(spec.name) if weights is not None else []
        if known:
            extra["help"] += ". Trained here: " + ", ".join(known[:3])
        return box.text_input(label, value=str(spec.default), **extra)
    if _is_slider(spec):
        return box.slider(label, 0.0, 1.0, float(spec.default), 0.01, **extra)
    bounds = _bounds(spec)
    if spec.kind is float:
        value = None if spec.default is None else float(spec.default)
        return box.number_input(label, value=value, format="%.4g", placeholder="default", **bounds, **extra)
    if spec.kind is int:
        value = None if spec.default is None else int(spec.default)
        return box.number_input(label, value=value, step=1, placeholder="default", **bounds, **extra)
    raise TypeError(f"no widget for field {spec.name!r} of type {spec.kind!r}; add one to app_ui/widgets.py")


def _bounds(spec: Knob) -> dict[str, Any]:
    """number_input limits from a knob's closed range ends (an open end is checked on submit instead)."""
    out: dict[str, Any] = {}
    rng = spec.range
    if rng is not None and rng.low is not None and rng.low_closed:
        out["min_value"] = spec.kind(rng.low)
    if rng is not None and rng.high is not None and rng.high_closed:
        out["max_value"] = spec.kind(rng.high)
    return out


def component_fields(cls: type, prefix: str, *, bind: bool, columns: int = 3,
                     weights: Callable[[str], list[str]] | None = None) -> dict[str, Any]:
    """Widgets for every field of `cls` laid out in columns; returns field name -> value."""
    specs = knobs(cls)
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
