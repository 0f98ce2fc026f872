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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import streamlit as st

from app_ui.common import confine_weights
from dllm_viz.cache_modes import CACHE_MODES
from dllm_viz.engine import check_geometry
from dllm_viz.explain import cache_help, component_help, knob_help
from dllm_viz.models import ModelAdapter
from dllm_viz.models.families import calibrated_points
from dllm_viz.policies import BLOCKS, EXTRAPOLATORS, RULES, STOPS, Pipeline
from dllm_viz.policies.defaults import BIDIRECTIONAL, PolicyDefaults, calibrated_options, policy_defaults
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


def _start(spec: Knob) -> Any:
    """The value a widget starts at: a family-calibrated knob's published value (`model_defaults`
    moves it to the loaded family's point), else the declared default."""
    return spec.default if spec.published is None else spec.published


def _is_slider(spec: Knob) -> bool:
    """A float with a value (required, or family-calibrated) whose range lies in [0, 1] and whose
    starting value sits on the slider's 0.01 grid."""
    start = _start(spec)
    if spec.kind is not float or start is None or spec.range is None or not spec.range.is_unit:
        return False
    return abs(round(float(start), 2) - float(start)) < 1e-12


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
        text = box.text_input(label, value=shown, placeholder="default", **extra) or ""
        try:
            return parse_strings(text) or None
        except ValueError as exc:  # a broken escape, typed or from a link: say so here; the raw text
            box.error(f"{label}: {exc}")  # fails the component's own check, so Run refuses it too
            return text
    if spec.kind is str:
        known = weights(spec.name) if weights is not None else []
        if known:
            extra["help"] += ". Trained here: " + ", ".join(known[:3])
        return box.text_input(label, value=str(spec.default), **extra)
    if _is_slider(spec):
        return box.slider(label, 0.0, 1.0, float(_start(spec)), 0.01, **extra)
    bounds, start = _bounds(spec), _start(spec)
    if spec.kind is float:
        value = None if start is None else float(start)
        return box.number_input(label, value=value, format="%.4g", placeholder="default", **bounds, **extra)
    if spec.kind is int:
        value = None if start is None else int(start)
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


def model_defaults(prefix: str, adapter: ModelAdapter | None, default_rule: str) -> PolicyDefaults:
    """The form's starting components for the loaded model (dllm_viz.policies.defaults).

    A block-causal model starts on block refinement over aligned blocks of its own length; a
    page's own default rule other than the bidirectional one (Compare's later slots) is kept.
    Family-calibrated knobs (AdaBlock's tau_D, CORA's (delta_p, m)) start at the model family's
    points, so the form shows the values the model decodes with.
    When the kind of model changes (tiny, then a block-diffusion checkpoint, or back), the form
    moves to the new defaults (a model that failed to load changes nothing); on the form's first
    run a shared link's values win.
    """
    chosen = policy_defaults(adapter.info.block_length if adapter is not None else None)
    if adapter is not None:
        points = calibrated_options(calibrated_points(adapter.info.family))
        chosen = replace(chosen, options={**points, **chosen.options})
    if chosen.rule == BIDIRECTIONAL.rule or default_rule != BIDIRECTIONAL.rule:
        chosen = replace(chosen, rule=default_rule)
    marker, kind = f"_{prefix}policy_model", (chosen.rule, chosen.block, tuple(chosen.options.items()))
    previous = st.session_state.get(marker)
    if previous != kind and adapter is not None:  # no model (a typo in the sidebar): keep the form as it is
        st.session_state[marker] = kind
        values: dict[str, Any] = {"rule": chosen.rule, "block": chosen.block, "block_length": None,
                                  **chosen.options}
        for name, value in values.items():
            key = prefix + name
            if previous is None and (key in st.query_params or name in ("rule", "block") or value is None):
                continue  # first run: the link's value or the widget's own default
            if value is None:
                st.session_state.pop(key, None)
            else:
                st.session_state[key] = value
    return chosen


def unavailable(adapter: ModelAdapter | None, rule: str) -> dict[str, str]:
    """Block sizers and cache modes the engine would refuse for this model and rule: name -> its reason."""
    if adapter is None:
        return {}
    out = {}
    candidates = [("block", name, Pipeline(rule=RULES[rule](), block=cls())) for name, cls in BLOCKS.items()]
    candidates += [("cache", mode, Pipeline(rule=RULES[rule](), cache=mode)) for mode in CACHE_MODES]
    for _, name, pipe in candidates:
        try:
            check_geometry(adapter, pipe)
        except ValueError as exc:
            out[name] = str(exc)
    return out


def _offered(key: str, names: list[str], refused: dict[str, str], default: str) -> list[str]:
    """`names` less the refused ones; a session value that is no longer offered goes back to `default`."""
    offered = [n for n in names if n not in refused]
    if st.session_state.get(key) not in (None, *offered):
        st.session_state[key] = default if default in offered else offered[0]
    asked = st.query_params.get(key)
    if asked in refused:
        st.warning(f"{key}={asked} is not available for this model: {refused[asked]}.")
    return offered


def policy_form(prefix: str = "", *, bind: bool = False, default_rule: str = "threshold",
                weights: Callable[[str], list[str]] | None = None, adapter: ModelAdapter | None = None) -> PolicySpec:
    """The whole composition form: components, then every field of each chosen component.

    With the loaded model's `adapter`, the defaults follow the model (block refinement on a
    block-causal one) and block sizers and cache modes the engine refuses for it are not offered;
    a caption names them with the engine's reason.
    """
    keep: dict[str, Any] = {"persist_state": "session", **({"bind": "query-params"} if bind else {})}
    chosen = model_defaults(prefix, adapter, default_rule)
    rule = st.segmented_control("Commit rule", list(RULES), default=chosen.rule, required=True,
                                key=f"{prefix}rule", help="which masked positions a step commits", **keep)
    st.caption(component_help(str(rule)))  # what the chosen rule does, and its paper (dllm_viz.explain)
    refused = unavailable(adapter, str(rule))
    blocks = _offered(f"{prefix}block", list(BLOCKS), refused, chosen.block)
    caches = _offered(f"{prefix}cache", list(CACHE_MODES), refused, "none")
    a, b, c, d = st.columns([1.4, 1.3, 0.9, 1], vertical_alignment="bottom")  # room for three block sizers
    block = a.segmented_control("Block sizing", blocks, default=chosen.block if chosen.block in blocks else blocks[0],
                                required=True, key=f"{prefix}block", help=" ".join(component_help(n) for n in blocks),
                                **keep)
    cache = b.segmented_control("KV cache", caches, default="none", required=True,
                                key=f"{prefix}cache", help=" ".join(cache_help(m) for m in caches), **keep)
    ce = c.toggle("CE (Kalman)", key=f"{prefix}ce", help="Confidence Extrapolation: Kalman look-ahead commits",
                  **keep)
    eos = d.toggle("EOS early stop", key=f"{prefix}eos", help="stop at a confident or first complete end-of-text",
                   **keep)
    if refused:
        st.caption("Not offered for this model and rule: "
                   + "; ".join(f"**{name}**: {reason}" for name, reason in refused.items()))
    refresh = None
    if cache not in ("none", "exact"):
        refresh = st.number_input("Refresh cache every N steps", min_value=1, value=None, step=1,
                                  placeholder="only at block starts", key=f"{prefix}refresh", **keep)
    options = component_fields(RULES[rule], prefix, bind=bind, weights=weights)
    options |= component_fields(BLOCKS[block], prefix, bind=bind)
    stop = None
    if ce:
        with st.expander("CE settings"):
            options |= component_fields(EXTRAPOLATORS["kalman"], prefix, bind=bind, columns=4)
    if eos:
        with st.expander("EOS stop settings"):
            stop = str(st.segmented_control("Stop rule", list(STOPS), default=chosen.stop, required=True,
                                            key=f"{prefix}stop_rule", help=" ".join(component_help(n) for n in STOPS),
                                            **keep))
            options |= component_fields(STOPS[stop], prefix, bind=bind, columns=4)
    return PolicySpec(rule=str(rule), block=str(block), extrapolate="kalman" if ce else None,
                      stop=stop, cache=str(cache), refresh_every=refresh, options=options)


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
