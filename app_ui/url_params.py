"""Say which URL parameters a page could not use, instead of silently showing its defaults.

Streamlit's `bind="query-params"` ignores a value its widget cannot take (`threshold=5`,
`gen=-3`, `seed=abc`, an unknown rule) and strips it from the address bar, so a shared link
would quietly show another view. app.py reads the raw parameters before any widget exists and
shows one warning naming each parameter that will be dropped and what it accepts.

The checks follow the widgets: policy fields are parsed by the component's own field types and
validated by constructing the component (so the range in the message is the component's own);
component pickers accept their registry's names; gen lengths the select slider's values; the
pages' own pickers (mode, sample, task, rule, problem count, Learn's chapter) the options they offer;
Decode's `view` the names of every trace view (which of them a trace offers depends on its policy:
the trace panel says when a linked view has no data in the trace shown); Tune's sweep fields
(`tune_f1`, `tune_f2`) the sweepable fields of the rule the link names (`tune_rule`, else Tune's
default rule). Keys of other controls are not judged here (no false alarms).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

import streamlit as st

from app_ui.chapters import CHAPTERS
from app_ui.common import (
    COMPARE_MODES,
    CONFIG_COUNTS,
    MAX_PROBLEMS,
    OWN_PROMPT,
    TEMPERATURE_MAX,
    TUNE_MODES,
    sample_prompts,
)
from app_ui.sweep import NO_SECOND_FIELD, TUNE_DEFAULT_RULE, TUNE_RULES, sweepable
from app_ui.widgets import GEN_LENGTHS
from dllm_viz.cache_modes import CACHE_MODES
from dllm_viz.figures.views import VIEWS
from dllm_viz.policies import BLOCKS, EXTRAPOLATORS, RULES, STOPS
from dllm_viz.policies.knobs import parse_knob
from dllm_viz.replay import not_replayable_reason
from dllm_viz.tasks import GENERATED_TASKS

SEED_MAX = 2**31 - 1
# Prefixes of the composition form (Decode: none, Compare: c1_..c4_) and of Tune's field widgets.
_FORM_PREFIX = re.compile(r"(c[1-4]_)?")
_FIELD_PREFIX = re.compile(r"(c[1-4]_|tune_)?")
_BOOLS = ("true", "false")


def _choice(options: tuple[str, ...]) -> Callable[[str], str | None]:
    return lambda text: None if text in options else f"one of {', '.join(options)}"


def _within(parse: Callable[[str], float], low: float, high: float, what: str) -> Callable[[str], str | None]:
    """A check that `text` parses and lies in [low, high] (NaN never does); `what` names the rule."""
    def check(text: str) -> str | None:
        try:
            ok = low <= parse(text) <= high
        except ValueError:
            ok = False
        return None if ok else what
    return check


def _integer(low: int, high: int) -> Callable[[str], str | None]:
    return _within(int, low, high, f"an integer from {low} to {high}")


def _number(low: float, high: float) -> Callable[[str], str | None]:
    return _within(float, low, high, f"a number from {low:g} to {high:g}")


def _gen_length(text: str) -> str | None:
    return None if text in {str(g) for g in GEN_LENGTHS} else f"one of {', '.join(map(str, GEN_LENGTHS))}"


def _view(text: str) -> str | None:
    """Decode's view: any view's name (dllm_viz.figures.views), whichever the trace shown offers."""
    names = [view.name for view in VIEWS]
    if text in names:
        return None
    return f"one of {', '.join(names)}; which of them a trace offers depends on its policy"


def _sample(text: str) -> str | None:
    """A prompt picker's value: a bundled sample id or OWN_PROMPT (read when the link is opened)."""
    return _choice((OWN_PROMPT, *sample_prompts()))(text)


def _tune_rule(text: str) -> str | None:
    """Tune's rule picker: a rule a dense trace can replay; a rule that cannot (block refinement,
    the default of a block-diffusion model) is named with why and where to run it."""
    if text in TUNE_RULES:
        return None
    offered = f"one of {', '.join(TUNE_RULES)}"
    reason = not_replayable_reason(RULES[text]) if text in RULES else None
    return offered if reason is None else f"{reason}; Tune offers {offered}"


_COMPONENT_KEYS: dict[str, Callable[[str], str | None]] = {
    "rule": _choice(tuple(RULES)),
    "block": _choice(tuple(BLOCKS)),
    "cache": _choice(CACHE_MODES),
    "ce": _choice(_BOOLS),
    "eos": _choice(_BOOLS),
    "stop_rule": _choice(tuple(STOPS)),
    "refresh": _integer(1, 10**6),
}
_PAGE_KEYS: dict[str, Callable[[str], str | None]] = {
    "seed": _integer(0, SEED_MAX),
    "temperature": _number(0.0, TEMPERATURE_MAX),
    "gen": _gen_length,
    "cmp_gen": _gen_length,
    "tune_gen": _gen_length,
    "tune_block": _integer(1, 1024),
    # The pages' own pickers (pages/compare.py, pages/tune.py, app_ui.common.prompt_input).
    "sample": _sample,
    "cmp_sample": _sample,
    "tune_sample": _sample,
    "cmp_mode": _choice(COMPARE_MODES),
    "cmp_n": _choice(tuple(map(str, CONFIG_COUNTS))),
    "cmp_task": _choice(GENERATED_TASKS),
    "cmp_count": _integer(1, MAX_PROBLEMS),
    "cmp_align": _choice(_BOOLS),
    "tune_mode": _choice(TUNE_MODES),
    "tune_rule": _tune_rule,
    "tune_task": _choice(GENERATED_TASKS),
    "tune_n": _integer(1, MAX_PROBLEMS),
    "tune_ce": _choice(_BOOLS),
    "chapter": _choice(tuple(CHAPTERS)),  # pages/learn.py
    "view": _view,  # Decode's trace panel (app_ui.trace_panel)
}
# Keys whose valid values depend on another parameter of the same link.
_LINKED_KEYS: dict[str, Callable[[str, Mapping[str, str]], str | None]] = {
    "tune_f1": lambda text, query: _sweep_field(text, query, second=False),
    "tune_f2": lambda text, query: _sweep_field(text, query, second=True),
}


def _linked_tune_rule(query: Mapping[str, str]) -> str:
    """The rule Tune will use for this link: its `tune_rule` when valid, else Tune's default."""
    rule = str(query.get("tune_rule", TUNE_DEFAULT_RULE))
    return rule if rule in TUNE_RULES else TUNE_DEFAULT_RULE


def _sweep_field(text: str, query: Mapping[str, str], *, second: bool) -> str | None:
    """A sweep field picker's value: a sweepable field of the linked rule (pages/tune.py `sweep`);
    the second picker also takes NO_SECOND_FIELD and never the first picker's field."""
    rule = _linked_tune_rule(query)
    names = [s.name for s in sweepable(rule)]
    if not names:
        return f"the rule {rule} has no numeric field to sweep"
    offered = names
    if second:
        first = str(query.get("tune_f1", names[0]))
        first = first if first in names else names[0]
        offered = [NO_SECOND_FIELD, *(n for n in names if n != first)]
        if text == first:
            return f"a field other than the first one, {first}: one of {', '.join(offered)}"
    if text in offered:
        return None
    return f"a numeric field of the rule {rule}: one of {', '.join(offered)}"


def _owners(field: str) -> list[type]:
    return [cls for registry in (RULES, BLOCKS, EXTRAPOLATORS, STOPS) for cls in registry.values()
            if field in getattr(cls, "__dataclass_fields__", {})]


def field_problem(field: str, text: str) -> str | None:
    """Why `text` is not a value of policy field `field` (None if some component takes it, or if
    the field is free text such as a weights path or delimiters, which the page checks itself)."""
    reasons = []
    for cls in _owners(field):
        kind = cls.__dataclass_fields__[field].type
        if "str" in str(kind) and "Literal" not in str(kind):
            return None  # free text: any value reaches the widget
        try:
            value = parse_knob(cls, field, text)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"`{field}` must be a finite number, got {text}")
            cls(**{field: value})
        except (ValueError, TypeError) as exc:
            reasons.append(str(exc))
            continue
        return None
    return reasons[0] if reasons else None


def dropped_params(query: Mapping[str, str]) -> list[str]:
    """One phrase per URL parameter the page will ignore: `name=value (what it accepts)`."""
    out = []
    for key, text in query.items():
        problem = _LINKED_KEYS[key](str(text), query) if key in _LINKED_KEYS else _problem(key, str(text))
        if problem is not None:
            out.append(f"{key}={str(text)[:40]!r} ({problem})")
    return out


def _problem(key: str, text: str) -> str | None:
    if key in _PAGE_KEYS:
        return _PAGE_KEYS[key](text)
    form = _FORM_PREFIX.match(key)
    bare = key[form.end():] if form else key
    if bare in _COMPONENT_KEYS:
        return _COMPONENT_KEYS[bare](text)
    match = _FIELD_PREFIX.match(key)
    field = key[match.end():] if match else key
    if _owners(field):
        return field_problem(field, text)
    return None


def warning_text(query: Mapping[str, str]) -> str | None:
    """The warning to show for `query`, or None when every parameter is usable."""
    dropped = dropped_params(query)
    if not dropped:
        return None
    return ("This link has settings the page cannot use, so it shows their defaults instead: "
            + "; ".join(dropped) + ".")


def _widget_holds(key: str, text: str) -> bool:
    """True when the session's widget `key` already holds the value `text` says: the user set it
    here (a slider moved to 0), so it is no link's setting; the form's own error names the problem."""
    if key not in st.session_state:
        return False
    value = st.session_state[key]
    if isinstance(value, bool):
        return text == str(value).lower()
    if isinstance(value, (int, float)):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return value is not None and str(value) == text


def warn_dropped_params(page: str) -> None:
    """Show the warning for this page's link; call before any bound widget exists (app.py).

    Streamlit strips the bad values on the first run, so the warning is remembered for the
    page in session state and shown on its reruns until another page is opened or the user sets
    one of the parameters it names (which puts it back into the address). A value a widget of
    this session already holds is the user's own, not a link's: it is not named.
    """
    raw = st.query_params.to_dict()
    query = {key: text for key, text in raw.items() if not _widget_holds(key, str(text))}
    text = warning_text(query)
    remembered = st.session_state.get("_url_warning")
    if text is not None:
        st.session_state["_url_warning"] = (page, text, [p.split("=", 1)[0] for p in dropped_params(query)])
    elif remembered is not None and remembered[0] == page and not set(remembered[2]) & set(raw):
        text = remembered[1]
    else:
        st.session_state.pop("_url_warning", None)
    if text is not None:
        st.warning(text, icon=":material/link_off:")


_PAGE_QUERIES = "_page_queries"  # session state: page url path -> its query parameters at the end of its last run
_LAST_PAGE = "_last_page"


def restore_page_params(page: str) -> None:
    """Give a page opened again in this session with a bare address the settings it was left with.

    The browser's Back (or Forward) button onto a page goes to a history entry Streamlit left
    without the page's query string, and the bound widgets then fall back to their defaults: a
    tuned threshold silently went back to 0.9 after a visit to Compare. A page switch (the
    previous run showed another page) that arrives with no parameters at all gets the ones the
    page had when it was left (`remember_page_params`); call before any bound widget exists
    (app.py); the page then runs again from the start. A link opened in the address bar starts a
    new session, so it is never overridden.
    """
    last = st.session_state.get(_LAST_PAGE)
    st.session_state[_LAST_PAGE] = page
    kept = st.session_state.get(_PAGE_QUERIES, {}).get(page)
    if last is not None and last != page and kept and not st.query_params.to_dict():
        st.query_params.from_dict(kept)
        st.rerun()  # bound widgets read the address a run starts with, as when a link is opened


def remember_page_params(page: str) -> None:
    """Keep `page`'s query parameters at the end of its run, for `restore_page_params`."""
    st.session_state.setdefault(_PAGE_QUERIES, {})[page] = st.query_params.to_dict()
