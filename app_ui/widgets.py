"""Widgets generated from the policy dataclasses: one composition form shared by every page.

A policy is block sizing x commit rule x (CE) x (EOS stop) x cache. Every field of every chosen
component becomes a widget (slider, number input, toggle, choice) built from its type and its
`metadata["help"]`, so a new policy knob appears in the app without touching a page. Widget
keys are `<prefix><field name>` and can be bound to the URL, so a link reproduces the form.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import streamlit as st

from app_ui.common import confine_weights
from dllm_viz.cache_modes import CACHE_MODES
from dllm_viz.engine import check_geometry
from dllm_viz.explain import cache_help, component_help, knob_help
from dllm_viz.models import ModelAdapter
from dllm_viz.models.families import FAMILIES, calibrated_points
from dllm_viz.policies import BLOCKS, EXTRAPOLATORS, RULES, STOPS, Pipeline
from dllm_viz.policies.defaults import BIDIRECTIONAL, PolicyDefaults, calibrated_options, policy_defaults
from dllm_viz.policies.knobs import Knob, knobs, parse_strings

GEN_LENGTHS = (16, 32, 64, 128, 256, 512, 1024)
# A unit knob's slider moves in these steps (and shows two decimals): a value between two of them,
# such as a family's calibrated 0.995, would be shown rounded and lost on the first drag.
SLIDER_STEP = 0.01


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
    """The value a widget starts at: a family-calibrated knob's published value (a page with a
    model starts it at the loaded family's point instead, `model_defaults`), else the declared default."""
    return spec.default if spec.published is None else spec.published


def _is_slider(spec: Knob) -> bool:
    """A float with a value (required, or family-calibrated) whose range lies in [0, 1] and whose
    every starting value sits on the slider's grid: its own, and each model family's calibrated
    point for it (one family's delta_p of 0.995 makes delta_p a number input for every model, so a
    form never changes kind of widget with the loaded model)."""
    start = _start(spec)
    if spec.kind is not float or start is None or spec.range is None or not spec.range.is_unit:
        return False
    points = [values[spec.name] for family in FAMILIES for values in family.points.values() if spec.name in values]
    return all(_on_grid(float(value)) for value in [start, *points])


def _on_grid(value: float) -> bool:
    return abs(round(value / SLIDER_STEP) * SLIDER_STEP - value) < 1e-9


def field_widget(spec: Knob, key: str, *, bind: bool, weights: Callable[[str], list[str]] | None = None,
                 container: Any = None, start: Any = None, written: bool = False) -> Any:
    """Render one field's widget under `key` and return its value (None = the component default).

    `start` is the value it starts at when not the knob's own (`_start`): the loaded model's
    (`model_defaults`). `written`: the page wrote `key` into session state in this run, so the
    widget shows that value and is given no default of its own (Streamlit logs a warning for a
    widget given both; the default is only for a widget session state does not hold).
    """
    box = container if container is not None else st
    extra: dict[str, Any] = {"key": key, "help": knob_help(spec.name, spec.describe()), "persist_state": "session"}
    if bind:
        extra["bind"] = "query-params"
    label = spec.name.replace("_", " ")
    first = _start(spec) if start is None else start

    def initial(**default: Any) -> dict[str, Any]:
        return {} if written else default

    if spec.choices is not None:
        return box.selectbox(label, list(spec.choices), **initial(index=list(spec.choices).index(spec.default)),
                             **extra)
    if spec.kind is bool:
        return box.toggle(label, **initial(value=bool(spec.default)), **extra)
    if spec.kind is tuple:
        shown = ",".join(codecs.encode(s, "unicode_escape").decode() for s in spec.default or ())
        text = box.text_input(label, **initial(value=shown), placeholder="default", **extra) or ""
        try:
            return parse_strings(text) or None
        except ValueError as exc:  # a broken escape, typed or from a link: say so here; the raw text
            box.error(f"{label}: {exc}")  # fails the component's own check, so Run refuses it too
            return text
    if spec.kind is str:
        known = weights(spec.name) if weights is not None else []
        if known:
            extra["help"] += ". Trained here: " + ", ".join(known[:3])
        return box.text_input(label, **initial(value=str(spec.default)), **extra)
    if _is_slider(spec):
        return box.slider(label, *_slider_ends(spec), step=SLIDER_STEP, **initial(value=float(first)), **extra)
    bounds = _bounds(spec)
    if spec.kind is float:
        return box.number_input(label, **initial(value=None if first is None else float(first)), format="%.4g",
                                placeholder="default", **bounds, **extra)
    if spec.kind is int:
        return box.number_input(label, **initial(value=None if first is None else int(first)), step=1,
                                placeholder="default", **bounds, **extra)
    raise TypeError(f"no widget for field {spec.name!r} of type {spec.kind!r}; add one to app_ui/widgets.py")


def _slider_ends(spec: Knob) -> tuple[float, float]:
    """A unit slider's ends, one step inside an open end of the knob's range: a slider that
    reached a value the rule always refuses (threshold 0) offered an error as a setting. A link
    with such a value is then named by the link warning (url_params), as any unusable value is."""
    rng = spec.range
    low = 0.0 if rng is None or rng.low is None else float(rng.low)
    high = 1.0 if rng is None or rng.high is None else float(rng.high)
    if rng is not None and not rng.low_closed:
        low = round(low + SLIDER_STEP, 10)
    if rng is not None and not rng.high_closed:
        high = round(high - SLIDER_STEP, 10)
    return low, high


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
                     weights: Callable[[str], list[str]] | None = None, starts: Mapping[str, Any] | None = None,
                     written: Collection[str] = ()) -> dict[str, Any]:
    """Widgets for every field of `cls` laid out in columns; returns field name -> value.

    `starts`: field name -> the value its widget starts at, where not the knob's own (the loaded
    model's, `model_defaults`); `written`: the keys the page wrote into session state in this run
    (`field_widget`)."""
    specs = knobs(cls)
    if not specs:
        return {}
    starts = starts or {}
    cols = st.columns(min(columns, len(specs)))
    return {s.name: field_widget(s, prefix + s.name, bind=bind, weights=weights, container=cols[i % len(cols)],
                                 start=starts.get(s.name), written=prefix + s.name in written)
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


def model_defaults(prefix: str, adapter: ModelAdapter | None, default_rule: str) -> tuple[PolicyDefaults, set[str]]:
    """The form's starting components for the loaded model (dllm_viz.policies.defaults), and the
    widget keys written into session state in this run.

    A block-causal model starts on block refinement over aligned blocks of its own length; a
    page's own default rule other than the bidirectional one (Compare's later slots) is kept.
    Family-calibrated knobs (AdaBlock's tau_D, CORA's (delta_p, m)) start at the model family's
    points, so the form shows the values the model decodes with: the options are the widgets'
    starting values (`component_fields`' `starts`), so a first run writes nothing and a shared
    link's values win. When the kind of model changes later (tiny, then a block-diffusion
    checkpoint, or back), the form's values move to the new defaults (a model that failed to load
    changes nothing).
    """
    chosen = policy_defaults(adapter.info.block_length if adapter is not None else None)
    if adapter is not None:
        points = calibrated_options(calibrated_points(adapter.info.family))
        chosen = replace(chosen, options={**points, **chosen.options})
    if chosen.rule == BIDIRECTIONAL.rule or default_rule != BIDIRECTIONAL.rule:
        chosen = replace(chosen, rule=default_rule)
    marker, kind = f"_{prefix}policy_model", (chosen.rule, chosen.block, tuple(chosen.options.items()))
    previous = st.session_state.get(marker)
    written: set[str] = set()
    if previous != kind and adapter is not None:  # no model (a typo in the sidebar): keep the form as it is
        st.session_state[marker] = kind
        if previous is None:
            return chosen, written  # first run: the link's values or the widgets' starting values
        # Every value is written, none popped: a popped key let its URL-bound widget read the address bar
        # again, so a block model's block length (SDAR's 4) stayed in the form after switching back to tiny.
        values: dict[str, Any] = {"rule": chosen.rule, "block": chosen.block,
                                  "block_length": _declared(BLOCKS[chosen.block], "block_length"), **chosen.options}
        for name, value in values.items():
            key = prefix + name
            if value is None:
                st.session_state.pop(key, None)
            else:
                st.session_state[key] = value
                written.add(key)
    return chosen, written


def _declared(cls: type, name: str) -> Any:
    """The declared default of field `name` of component `cls` (None when it has no such field)."""
    return next((spec.default for spec in knobs(cls) if spec.name == name), None)


def _tiles(cls: type, block_length: int, gen_length: int) -> bool:
    """True when block sizer `cls` with `block_length` accepts `gen_length` (its own `validate`)."""
    try:
        cls(block_length=block_length).validate(gen_length)
    except (ValueError, TypeError):
        return False
    return True


def block_length_start(cls: type, key: str, start: int, gen_length: int | None, written: set[str]) -> int:
    """The block length widget's starting value for `gen_length` (writing it to session state when
    it must move; `written` then names `key`).

    Until the user sets a block length (types one, or opens a link with one), it follows the gen
    length: `start` (the model's) if the sizer accepts it, else the longest shorter length it
    accepts (16 for fixed blocks at gen length 16), so a short canvas never starts on a "must
    divide" error. A value the user set is never changed (`block_length_problem` says when it
    does not fit).
    """
    if gen_length is None or "block_length" not in getattr(cls, "__dataclass_fields__", {}):
        return start
    fitting = next((n for n in (start, *range(min(start, gen_length), 0, -1)) if _tiles(cls, n, gen_length)), start)
    marker = f"_{key}_follows"  # the value this form last gave the widget itself
    current = st.session_state.get(key)
    if current is None or current == st.session_state.get(marker) or key in written:
        st.session_state[marker] = fitting
        if current is not None and current != fitting:
            st.session_state[key] = fitting
            written.add(key)
    return fitting


def block_length_problem(cls: type, block_length: Any, gen_length: int | None) -> str | None:
    """Why the block sizer `cls` cannot tile `gen_length` with the chosen `block_length`, naming the
    lengths that work (None when it can, or when the sizer has no block length)."""
    if gen_length is None or not isinstance(block_length, int) or block_length < 1:
        return None
    if "block_length" not in getattr(cls, "__dataclass_fields__", {}) or _tiles(cls, block_length, gen_length):
        return None
    works = [n for n in range(1, gen_length + 1) if _tiles(cls, n, gen_length)]
    return (f"Block length {block_length} does not fit Gen length {gen_length}: the {cls.name} block sizer needs a "
            f"block length that divides the gen length. Use one of {', '.join(map(str, works))}, or another gen "
            "length.")


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


def _offered(key: str, names: list[str], refused: dict[str, str], default: str, written: set[str]) -> list[str]:
    """`names` less the refused ones; a session value that is no longer offered goes back to `default`
    (and `written` names `key`)."""
    offered = [n for n in names if n not in refused]
    if st.session_state.get(key) not in (None, *offered):
        st.session_state[key] = default if default in offered else offered[0]
        written.add(key)
    asked = st.query_params.get(key)
    if asked in refused:
        st.warning(f"{key}={asked} is not available for this model: {refused[asked]}.")
    return offered


def policy_form(prefix: str = "", *, bind: bool = False, default_rule: str = "threshold",
                weights: Callable[[str], list[str]] | None = None, adapter: ModelAdapter | None = None,
                gen_length: int | None = None) -> PolicySpec:
    """The whole composition form: components, then every field of each chosen component.

    With the loaded model's `adapter`, the defaults follow the model (block refinement on a
    block-causal one) and block sizers and cache modes the engine refuses for it are not offered;
    a caption names them with the engine's reason. With the page's `gen_length`, the block length
    follows it until the user sets one (`block_length_start`), and a block length the user set
    that cannot tile it is named at once under the fields, with the lengths that can
    (`block_length_problem`), not only when a decode starts.
    """
    keep: dict[str, Any] = {"persist_state": "session", **({"bind": "query-params"} if bind else {})}
    chosen, written = model_defaults(prefix, adapter, default_rule)

    def default(key: str, value: Any) -> Any:
        """A widget's default, or None when session state got its value in this run (`field_widget`)."""
        return None if prefix + key in written else value

    rule = st.segmented_control("Commit rule", list(RULES), default=default("rule", chosen.rule), required=True,
                                key=f"{prefix}rule", help="which masked positions a step commits", **keep)
    st.caption(component_help(str(rule)))  # what the chosen rule does, and its paper (dllm_viz.explain)
    refused = unavailable(adapter, str(rule))
    blocks = _offered(f"{prefix}block", list(BLOCKS), refused, chosen.block, written)
    caches = _offered(f"{prefix}cache", list(CACHE_MODES), refused, "none", written)
    a, b, c, d = st.columns([1.4, 1.3, 0.9, 1], vertical_alignment="bottom")  # room for three block sizers
    block = a.segmented_control("Block sizing", blocks,
                                default=default("block", chosen.block if chosen.block in blocks else blocks[0]),
                                required=True, key=f"{prefix}block", help=" ".join(component_help(n) for n in blocks),
                                **keep)
    cache = b.segmented_control("KV cache", caches, default=default("cache", "none"), required=True,
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
    starts = dict(chosen.options)
    options = component_fields(RULES[rule], prefix, bind=bind, weights=weights, starts=starts, written=written)
    sizer = BLOCKS[block]
    if "block_length" in getattr(sizer, "__dataclass_fields__", {}):
        declared = next(s.default for s in knobs(sizer) if s.name == "block_length")
        starts["block_length"] = block_length_start(sizer, f"{prefix}block_length",
                                                    int(starts.get("block_length", declared)), gen_length, written)
    options |= component_fields(sizer, prefix, bind=bind, starts=starts, written=written)
    if (problem := block_length_problem(sizer, options.get("block_length"), gen_length)) is not None:
        st.error(problem)
    stop = None
    if ce:
        with st.expander("CE settings"):
            options |= component_fields(EXTRAPOLATORS["kalman"], prefix, bind=bind, columns=4, starts=starts,
                                        written=written)
    if eos:
        with st.expander("EOS stop settings"):
            stop = str(st.segmented_control("Stop rule", list(STOPS), default=chosen.stop, required=True,
                                            key=f"{prefix}stop_rule", help=" ".join(component_help(n) for n in STOPS),
                                            **keep))
            options |= component_fields(STOPS[stop], prefix, bind=bind, columns=4, starts=starts,
                                        written=written)
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
    else:  # a widget whose value session state got in this run takes no default (`field_widget`)
        extra["value"] = min(default, max(offered))
    help_text = "positions the model generates (the canvas after the prompt)"
    if limit is not None:
        help_text += f"; up to {limit} fit the model's context after this prompt"
    return int(box.select_slider("Gen length", offered, key=key, help=help_text, **extra))
