"""What every page shares: the cached model, the model lock, the sidebar and small helpers.

One model per process (st.cache_resource) behind a lock, so two browser sessions never run
the model at once; per-session choices and traces live only in st.session_state. Helpers that
are plain Python (no numpy math) live here too: prompt checks, directories, text diffs.
"""

from __future__ import annotations

import difflib
import html
import math
import os
import re
import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from app_ui.live_chart import preload_charts
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.evaluation import runs_code
from dllm_viz.explain import model_summary
from dllm_viz.models import ModelAdapter, ModelLoadError, load
from dllm_viz.policies import Pipeline
from dllm_viz.policies.controller_weights import BUNDLED, load_controller
from dllm_viz.roots import OutsideRootError, browser_model, inside, redact
from dllm_viz.tasks import get_task, load_problems
from dllm_viz.tasks.base import Problem
from dllm_viz.threads import THREADS_ENV, ThreadChoice, apply_choice, apply_inference_threads, env_override
from dllm_viz.trace import Trace

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_prompts"
TRACE_DIR_ENV = "DLLM_VIZ_TRACE_DIR"
CONTROLLER_DIR_ENV = "DLLM_VIZ_CONTROLLER_DIR"
MODELS_DIR_ENV = "DLLM_VIZ_MODELS_DIR"
# The policy fields that name weight files, and the controller kind each must hold.
WEIGHT_KINDS = {"controller_weights": "tspd", "filter_weights": "learn2pd"}
MAX_PROMPT_CHARS = 4000
# A typed file name (Traces' Save, Train's Save as): a longer one made the file system refuse it
# (ENAMETOOLONG) and the page showed Streamlit's redacted exception instead of a message.
MAX_FILE_NAME = 100
TEMPERATURE_MAX = 10.0  # the sidebar's range; the engine takes any finite value >= 0
OWN_PROMPT = "(type your own)"
# The prompt-set pickers (Compare, Tune) offer generated tasks only: the real benchmarks need a data file.
TASK_HELP = ("a generated task's held-out problems; GSM8K and HumanEval are read from their data files: "
             "`python -m dllm_viz bench --tasks gsm8k --data FILE`")
DEFAULT_PROMPT = "Tom has 12 apples. He buys 7 more. How many apples does he have now?"
TEXT_PARAM = "text"
# The sample a prompt picker opens on: a breadth problem of the hard split, on which the bundled model
# (step 112000) needs several passes a block under the threshold rule (8 passes at gen 64, against 2-3
# for an easy arith sample), writes the two groups in the other order than the reference and a product
# the other way round (`2 * 3` for `3 * 2`), and is wrong at threshold 0.5 (3 passes: `3 * 3 = 624 * 3`),
# so the first decode a visitor runs already shows a trade-off
# (dllm_viz/tasks/export_sets.py DEMO_BREADTH_3 says how it was picked). A retrained model can get the
# sample wrong at 0.9 too, as steps 103000 and 109000 did hard/breadth-1 and -2, the samples before it:
# then pick another (tests/test_bundled_model.py checks that it is right at 0.9 in several passes a
# block). Falls back to the first sample.
DEFAULT_SAMPLE = "hard/breadth-3"
# The pages' own pickers, here so app_ui.url_params can name what a bad link value should be.
COMPARE_MODES = ("one prompt", "a prompt set")
CONFIG_COUNTS = (2, 3, 4)  # Compare's configurations
TUNE_MODES = ("by eye", "sweep")
MAX_PROBLEMS = 50  # Compare's and Tune's prompt sets (small n keeps them quick on CPU)
# One decode each, not repeated interleaved runs: on a shared CPU this ratio is mostly noise
# (209.7x wall against 21.3x NFE was seen); `python -m dllm_viz bench` measures it properly.
WALL_SPEEDUP = "wall speedup (single run)"


class PromptError(ValueError):
    """An unusable prompt; the message says what is wrong and how to fix it."""


def default_model() -> str:
    """The model the sidebar starts with: $DLLM_VIZ_MODEL, else the bundled tiny model."""
    return os.environ.get("DLLM_VIZ_MODEL", "tiny")


def trace_dir() -> Path:
    """Where saved traces live: $DLLM_VIZ_TRACE_DIR, else ~/.dllm_viz/traces."""
    return Path(os.environ.get(TRACE_DIR_ENV, "~/.dllm_viz/traces")).expanduser()


def controller_dir() -> Path:
    """Where the Train page writes controllers: $DLLM_VIZ_CONTROLLER_DIR, else ~/.dllm_viz/controllers."""
    return Path(os.environ.get(CONTROLLER_DIR_ENV, "~/.dllm_viz/controllers")).expanduser()


def models_dir() -> Path:
    """Where browser-chosen checkpoints live: $DLLM_VIZ_MODELS_DIR, else ~/.dllm_viz/models."""
    return Path(os.environ.get(MODELS_DIR_ENV, "~/.dllm_viz/models")).expanduser()


def app_roots() -> dict[str, Path]:
    """The folders the app serves, by the label messages use instead of their server paths."""
    return {"models folder": models_dir(), "trace folder": trace_dir(), "controller folder": controller_dir()}


def confine_weights(options: dict[str, Any]) -> dict[str, Any]:
    """`options` with each weights file resolved inside the controller folder and checked now.

    The field may come from a typed value or a shared link, so it must not reach other server
    files; reading it here also turns a bad file into a message without server paths.
    """
    out = dict(options)
    for name, kind in WEIGHT_KINDS.items():
        value = out.get(name)
        if not isinstance(value, str) or value == BUNDLED:
            continue
        path = inside(controller_dir(), value, what="controller weights", folder="controller folder")
        try:
            load_controller(str(path), kind)
        except Exception as exc:  # a missing, corrupt or wrong-kind file: one message, no paths
            raise ValueError(redact(str(exc), app_roots())) from None
        out[name] = str(path)
    return out


MODELS_KEPT = 2  # two sessions comparing two models do not reload them in turn


@st.cache_resource(show_spinner="Loading model…", max_entries=MODELS_KEPT)
def cached_model(name_or_path: str, device: str) -> ModelAdapter:
    """The shared adapter for (model, device); loaded once per process, the MODELS_KEPT most recent
    kept (every model any session ever picked stayed loaded: on a GPU, an 8B model is 16 GB)."""
    return load(name_or_path, device=device)


@st.cache_resource
def model_lock() -> threading.Lock:
    """Serialises model use across sessions (one GPU, one decode at a time)."""
    return threading.Lock()


@contextmanager
def model_turn() -> Iterator[None]:
    """Hold the model lock; while another session has it, say so and keep the page responsive.

    Once held, this session's CPU thread count is set in the running thread (threads.apply_choice):
    torch's count belongs to each thread, and a fragment's run (Decode's Step and Play, a fork,
    Tune's Verify) skips the page code that chose it, so it ran at another session's count.
    """
    lock = model_lock()
    if not lock.acquire(blocking=False):
        note = st.empty()
        while not lock.acquire(timeout=0.5):
            note.info("The model is busy (another run or session); waiting for it…")  # a yield point
        note.empty()
    try:
        apply_choice(st.session_state.get("threads"))
        yield
    finally:
        lock.release()


@st.cache_data
def sample_problems() -> dict[str, Problem]:
    """Short id (`arith-1`, `code-2`, …) -> the bundled demo problem (prompt, reference answer, gold)."""
    path = SAMPLE_DIR / "demo.jsonl"
    if not path.is_file():
        return {}
    out: dict[str, Problem] = {}
    for problem in load_problems(path):
        out[f"{problem.task}-{sum(k.startswith(problem.task) for k in out) + 1}"] = problem
    return out


ANSWER_MARKS = {True: "right ✓", False: "wrong ✗"}


def checkable_samples() -> dict[str, Problem]:
    """The bundled samples whose answers can be marked right or wrong without running code (not the
    code ones: their scorer executes the completion)."""
    return {sample_id: p for sample_id, p in sample_problems().items() if not runs_code([p])}


def is_right(problem: Problem, trace: Trace) -> bool:
    """Whether `trace`'s answer solves `problem`, by its task's own scorer (as bench scores it)."""
    return bool(get_task(problem.task).score(problem, trace.meta.answer_text))


def sample_verdict(trace: Trace) -> str | None:
    """ANSWER_MARKS for `trace`'s answer when its prompt is a checkable bundled sample, unedited; None
    for a prompt of one's own (no reference to mark it against) or a code sample."""
    prompt = (trace.meta.prompt_text or "").strip()
    problem = next((p for p in checkable_samples().values() if p.prompt.strip() == prompt), None) if prompt else None
    return None if problem is None else ANSWER_MARKS[is_right(problem, trace)]


def answer_mark(trace: Trace, sep: str) -> str:
    """`sep` and `sample_verdict`'s mark, to follow an output's label once its decode has finished (a
    partial answer is not judged); "" where there is nothing to mark."""
    verdict = sample_verdict(trace) if trace.is_complete else None
    return "" if verdict is None else f"{sep}{verdict}"


def sample_prompts() -> dict[str, str]:
    """Short id -> prompt text of the bundled demo prompts (`sample_problems`)."""
    return {sample_id: problem.prompt for sample_id, problem in sample_problems().items()}


def require_app_frame() -> None:
    """Make sure this page runs inside app.py's navigation, not Streamlit's legacy pages/ mode.

    Streamlit 1.67 treats a `pages/` folder beside the entrypoint as a legacy multipage app until
    some session's app.py calls st.navigation: on a freshly started server, a first visit to a
    deep link (e.g. a shared `/tune?...` URL) ran pages/tune.py alone, without the sidebar or the
    top navigation, and listed every helper module in pages/ as a page. Every page calls this
    first: in that state it switches Streamlit to st.navigation mode (the flag st.navigation
    itself clears) and reruns, and the rerun goes through app.py to the same page and URL.
    """
    try:  # a Streamlit internal (pinned 1.67): if it moves, pages still run, as before this fix
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


def sidebar() -> None:
    """Model, device and seed controls shared by every page."""
    with st.sidebar:
        st.header("Model")
        st.text_input("Model (tiny, or a checkpoint folder)", value=default_model(), key="model",
                      help="'tiny' is the bundled model; or a LLaDA / Dream / tiny checkpoint folder, or a block-"
                           "diffusion one (LLaDA2.x, SDAR, Fast-dLLM v2), inside the app's models folder "
                           "($DLLM_VIZ_MODELS_DIR), e.g. GSAI-ML/LLaDA-8B-Instruct")
        st.selectbox("Device", ["auto", "cpu", "cuda", "mps"], key="device")
        st.number_input("Seed", min_value=0, max_value=2**31 - 1, value=0, step=1, key="seed",
                        bind="query-params", help="seeds sampling and random remasking")
        st.number_input("Temperature", min_value=0.0, max_value=TEMPERATURE_MAX, value=0.0, step=0.1,
                        key="temperature", bind="query-params",
                        help="sampling temperature of the candidates: 0 is greedy (the most probable token); "
                             "above 0 candidates are drawn, and block refinement's top_k / top_p apply")
        if (threads := st.session_state.get("threads")) is not None:
            st.caption(f"CPU threads: {threads.reason}. Set {THREADS_ENV} to change.")
        preload_charts()


def current_model() -> ModelAdapter | None:
    """The adapter chosen in the sidebar, or None after showing why it failed to load.

    Also applies the CPU thread policy for that model (dllm_viz.threads: one intra-op thread
    for a small model, which made a tiny-model pass 10x faster on a busy 2-core machine).
    """
    name = st.session_state.get("model") or default_model()
    try:
        chosen = browser_model(name, models_root=models_dir(), allowed={"tiny", default_model()})
        adapter = cached_model(chosen, st.session_state.get("device", "auto"))
    except (OutsideRootError, ModelLoadError) as exc:
        st.error(f"Could not load the model: {redact(str(exc), app_roots())}. Pick 'tiny' or a checkpoint folder "
                 "inside the app's models folder in the sidebar.")
        return None
    st.session_state["threads"] = use_threads(adapter)
    st.sidebar.caption(model_summary(adapter.info))
    return adapter


def other_model(recorded: str | None, adapter: ModelAdapter | None) -> tuple[str, str] | None:
    """(recorded, loaded) model names, redacted, when what a page shows was decoded by the model
    `recorded` and the sidebar now has another one loaded; None when they are the same (or unknown).

    Why: a switch of the sidebar's model kept the previous model's decode, comparison or sweep on
    screen, labelled by policy only, so a block model's page showed the tiny model's numbers.
    """
    if recorded is None or adapter is None or adapter.info.name_or_path == recorded:
        return None
    return redact(recorded, app_roots()), redact(adapter.info.name_or_path, app_roots())


def use_threads(adapter: ModelAdapter) -> ThreadChoice:
    """Apply the thread policy for `adapter` ($DLLM_VIZ_THREADS overrides it); cheap, so every run does."""
    try:
        override = env_override()
    except ValueError as exc:  # the app still runs, on the policy's choice
        st.sidebar.warning(f"{exc}; using the thread policy's choice.")
        override = None
    return apply_inference_threads(adapter.model, adapter.info.device, override=override)


def canvas_limit(adapter: ModelAdapter | None, prompt: str | None) -> int | None:
    """The longest canvas the model's context leaves after `prompt` (None when unknown)."""
    if adapter is None or adapter.context_length is None:
        return None
    try:
        used = len(adapter.encode_prompt(prompt or ""))
    except (ValueError, TypeError):  # a tokenizer that rejects the text: the engine will say why
        used = 0
    return adapter.context_length - used


def decode_config(gen_length: int) -> DecodeConfig:
    """DecodeConfig for this session: the gen length and the sidebar's seed and temperature."""
    return DecodeConfig(gen_length=int(gen_length), seed=int(st.session_state.get("seed", 0)),
                        temperature=float(st.session_state.get("temperature") or 0.0))


def decode_with_bar(adapter: ModelAdapter, prompt: str, pipeline: Pipeline, config: DecodeConfig, bar: Any,
                    text: str) -> Trace:
    """Decode under the model lock, updating `bar` (a yield point) after every forward pass."""
    with model_turn():
        return decode(adapter, adapter.encode_prompt(prompt), pipeline, config, prompt_text=prompt,
                      on_step=lambda r: bar.progress(min(1.0, r.nfe / config.gen_length), text=f"{text}: NFE {r.nfe}"))


def check_prompt(text: str | None) -> str:
    """The prompt, stripped; raises PromptError if it is empty or too long."""
    text = (text or "").strip()
    if not text:
        raise PromptError("the prompt is empty; type a question or pick a sample prompt")
    if len(text) > MAX_PROMPT_CHARS:
        raise PromptError(f"the prompt has {len(text)} characters; shorten it to at most {MAX_PROMPT_CHARS}")
    return text


def file_name_problem(name: str) -> str | None:
    """Why `name` (no extension) cannot be a file name in the app's folders, or None when it can."""
    if not re.fullmatch(r"[\w.-]+", name) or name in (".", ".."):
        return f"the file name {name!r} is not usable; use letters, digits, '_', '-' or '.'"
    if name.startswith("."):  # '.hidden' was saved, but the Traces library lists no hidden file: a lost trace
        example = f", e.g. {name.lstrip('.')!r}" if name.strip(".") else ""
        return (f"the file name {name!r} starts with '.', which hides the file (the trace library does not list "
                f"hidden files); start it with a letter, digit, '_' or '-'{example}")
    if len(name) > MAX_FILE_NAME:
        return f"the file name has {len(name)} characters; use at most {MAX_FILE_NAME}"
    if len(name.encode()) > 2 * MAX_FILE_NAME:  # the file system counts bytes: 名 is 3
        return f"the file name is {len(name.encode())} bytes in UTF-8, too long for the disk; shorten it"
    return None


def prompt_input(prefix: str = "", *, bind: bool = False) -> str:
    """A sample-prompt picker and the editable prompt text; with `bind`, both are in the URL.

    The sample id is a bound widget; the text goes into the `<prefix>text` parameter only when
    it differs from the chosen sample's, so a link to a sample stays short while a typed prompt
    (a shared link from someone's own question) still reproduces the same decode.
    """
    samples = sample_prompts()
    keep: dict[str, Any] = {"persist_state": "session", **({"bind": "query-params"} if bind else {})}
    options = [OWN_PROMPT, *samples]
    choice = st.selectbox("Sample prompt", options, index=options.index(DEFAULT_SAMPLE) if DEFAULT_SAMPLE in samples
                          else min(1, len(samples)),
                          key=f"{prefix}sample", help="a bundled demo prompt; its id goes into shareable links",
                          **keep)
    default = samples.get(str(choice), DEFAULT_PROMPT)
    key, param = f"{prefix}prompt_{choice}", f"{prefix}{TEXT_PARAM}"
    shared = st.query_params.get(param) if bind else None
    if shared and st.session_state.get(f"_{param}_read") != shared:  # a new link: its text wins, once
        st.session_state[key] = shared
    text = st.text_area("Prompt", value=None if key in st.session_state else default, key=key, height=90) or ""
    if bind and text != default:
        st.query_params[param] = st.session_state[f"_{param}_read"] = text  # ours: not a new link next run
    elif bind and param in st.query_params:
        del st.query_params[param]
    return text


def prompt_query(text: str, prefix: str = "") -> dict[str, str]:
    """The URL parameters prompt_input reads back as `text`: a sample id, or the text itself."""
    samples = sample_prompts()
    for sample_id, sample_text in samples.items():
        if sample_text == text:
            return {f"{prefix}sample": sample_id}
    return {f"{prefix}sample": OWN_PROMPT, f"{prefix}{TEXT_PARAM}": text}


def set_trace(trace: Trace, key: str = "trace") -> None:
    """Store a trace for this session and bump its version (views rebuild their figures)."""
    st.session_state[key] = trace
    st.session_state[f"{key}_version"] = st.session_state.get(f"{key}_version", 0) + 1


def cached_figure(name: str, version: Hashable, build: Any) -> Any:
    """A figure built once per version of what it draws (a trace version, or a replay's digest), so
    an unchanged view is not rebuilt and goes out byte-identical, which the browser does not redraw."""
    cache: dict[tuple[str, Hashable], Any] = st.session_state.setdefault("_figures", {})
    if (name, version) not in cache:
        for stale in [k for k in cache if k[0] == name]:
            del cache[stale]
        cache[(name, version)] = build()
    return cache[(name, version)]


def cut_off_message(trace: Trace, label: str = "") -> str | None:
    """Why `trace`'s answer may be wrong for lack of room (it ran out of canvas with no
    end-of-text token), or None when it did not."""
    if not (trace.is_complete and trace.cut_off):
        return None
    who = f"{label}: the" if label else "The"
    return (f"{who} answer filled the whole canvas without an end-of-text token, so it may be wrong only "
            f"for lack of room: raise Gen length (now {trace.gen_length}).")


def warn_if_cut_off(trace: Trace, label: str = "") -> None:
    """A visible warning when `trace`'s answer ran out of canvas (no end-of-text token in it)."""
    if message := cut_off_message(trace, label):
        st.warning(message, icon="✂️")


def diff_html(reference: str, text: str) -> str:
    """`text` as HTML with the words that differ from `reference` highlighted.

    A run of text with no space (a block-diffusion model's garbage, a URL, code) breaks anywhere: it ran
    out of its column across the next ones in Compare's three columns at 1024 px.
    """
    ref_words, words = reference.split(" "), text.split(" ")
    out = []
    for op, _, _, j1, j2 in difflib.SequenceMatcher(a=ref_words, b=words, autojunk=False).get_opcodes():
        chunk = html.escape(" ".join(words[j1:j2]))
        if chunk:
            out.append(chunk if op == "equal" else f"<mark style='background:#FFD166'>{chunk}</mark>")
    body = " ".join(out).replace("\n", "<br>")
    return (f"<div style='font-family:monospace;white-space:pre-wrap;overflow-wrap:anywhere;font-size:0.9em'>"
            f"{body or '∅'}</div>")


@dataclass(frozen=True)
class MetricCard:
    """One number shown about a trace: st.metric's label, value, delta (None: none) and help."""

    label: str
    value: str
    delta: str | None = None
    help: str | None = None


POLICY_OVERHEAD_HELP = ("Time inside the policy's calls (block sizer, commit rule, extrapolator, stop) over the "
                        "forward passes' time. Traces saved before this was recorded show n/a.")


def metric_cards(trace: Trace, *, baseline: Trace | None = None) -> list[MetricCard]:
    """NFE, time, tokens/s, tokens per step (with speedups when a baseline is given) and the
    policy's share of the time (its calls over the forward passes; "n/a" for older traces).
    Drawn by `metrics_row` here and by the trace panel in the page (app_ui.trace_panel)."""
    summary = trace.summary()
    nfe_delta = None if baseline is None else f"{baseline.nfe / max(trace.nfe, 1):.2f}x fewer NFE than dense"
    time_delta = None
    if baseline is not None and summary["seconds"] > 0:
        time_delta = f"{baseline.summary()['seconds'] / summary['seconds']:.2f}x speedup (single run)"
    overhead, per_pass = summary["policy_overhead"], summary["policy_ms_per_pass"]
    known = math.isfinite(overhead)
    return [MetricCard("NFE", str(trace.nfe), nfe_delta),
            MetricCard("Time", f"{summary['seconds']:.2f} s", time_delta),
            MetricCard("Tokens/s", f"{summary['tokens_per_second']:.1f}"),
            MetricCard("Tokens per step", f"{summary['tokens_per_step']:.2f}"),
            MetricCard("Policy overhead", f"{100 * overhead:.2f}%" if known else "n/a",
                       f"{per_pass:.2f} ms a pass" if known else None, POLICY_OVERHEAD_HELP)]


def edits_note(trace: Trace) -> str | None:
    """What block refinement did beyond unmasking (edits of committed tokens, post-steps); None for a
    trace of another rule that edited nothing.

    A block-refinement decode with no edit is said too, with why: on a block-diffusion model whose
    confidences never clear the editing threshold, NFE exceeded the canvas by its post-steps and
    nothing on the page said what those passes were.
    """
    summary = trace.summary()
    posts = f"{summary['post_steps']:.0f} post-steps (passes over a block with no mask left)"
    if trace.edited.any():
        return f"Block refinement edited {summary['edits']:.0f} committed tokens and ran {posts}."
    rule = trace.meta.pipeline.get("rule") or {}
    if rule.get("name") != "block_refinement":
        return None
    threshold = rule.get("editing_threshold")
    why = ("editing is off: editing_threshold is not above 0" if not isinstance(threshold, int | float)
           or threshold <= 0 else f"no committed token's candidate changed with confidence above editing_threshold "
           f"{threshold:g}")
    ran = (f"; its {posts} changed nothing (a block filled before its last scheduled step takes one more pass)"
           if summary["post_steps"] else "")
    return f"Block refinement edited no committed token ({why}){ran}."


METRIC_CARD_WIDTH = 172  # px: five to a row in a 1400-px window's ~940 px, three at 1024 px's ~560


# Streamlit sets a metric's delta on one line cut with an ellipsis; in a metric_row it wraps instead.
_WRAP_DELTAS = ("<style>.st-key-{key} [data-testid='stMetricDelta'] div, .st-key-{key} [data-testid='stMetricDelta'] p "
                "{{white-space: normal; overflow: visible; text-overflow: clip;}}</style>")


def metric_row(key: str) -> Any:
    """A row (keyed `key`) for st.metric cards that wraps onto more rows where they do not fit,
    each card's delta onto more lines.

    In st.columns(5) every card got a fifth of the row whatever the window, ~100 px at 1024 px,
    and cut its label and value ("Polic…", "0.…" for the time, "2…" for tokens/s). Write the cards
    into it with a width in pixels (METRIC_CARD_WIDTH): a 1400-px window keeps its one row, a
    narrower one wraps the last cards onto a second row. A delta longer than its card ("1.33x speedup
    (single run)" in Tune's Verify row, ~160 px of text in a 172-px card) was still cut to "1.33x
    speedup (si…"; no fixed width fits every ratio, so it wraps in place.
    """
    st.html(_WRAP_DELTAS.format(key=key))  # style only: Streamlit adds it without taking room on the page
    return st.container(horizontal=True, wrap=True, gap="small", key=key)


def metrics_row(trace: Trace, *, baseline: Trace | None = None, key: str) -> None:
    """`metric_cards` as a row of st.metric keyed `key` (metric_row), and what block refinement
    edited (if it did)."""
    row = metric_row(key)
    for card in metric_cards(trace, baseline=baseline):
        row.metric(card.label, card.value, delta=card.delta, delta_color="off", border=True, help=card.help,
                   width=METRIC_CARD_WIDTH)
    if note := edits_note(trace):
        st.caption(note)


def comparison_rows(dense: Trace, traces: list[Trace]) -> list[dict[str, Any]]:
    """One row per trace (dense first): NFE, time, speedups vs dense, throughput, policy overhead
    (its calls' time per forward-pass time; blank for traces saved before it was recorded), agreement,
    and, on a bundled sample's prompt, whether the finished answer is right (`answer_mark`)."""
    base = dense.summary()
    rows = []
    for trace in [dense, *traces]:
        verdict = answer_mark(trace, "")
        summary = trace.summary()
        same = sum(a == b for a, b in zip(trace.final_tokens.tolist(), dense.final_tokens.tolist(), strict=False))
        rows.append({
            "policy": trace.meta.label, "NFE": trace.nfe,
            "NFE speedup": base["nfe"] / max(summary["nfe"], 1.0),
            "seconds": summary["seconds"],
            WALL_SPEEDUP: base["seconds"] / summary["seconds"] if summary["seconds"] > 0 else None,
            "tokens/s": summary["tokens_per_second"], "tokens/step": summary["tokens_per_step"],
            "policy overhead %": 100 * summary["policy_overhead"],
            "same as dense": f"{same}/{dense.gen_length}",
            **({"answer": verdict} if verdict else {}),
        })
    return rows


def share_query(trace: Trace) -> dict[str, str]:
    """Decode-page query params that rebuild `trace`: policy, fields, gen length, seed and prompt."""
    pipe = trace.meta.pipeline
    query = {"gen": str(trace.gen_length), "seed": str(trace.meta.seed)}
    if trace.meta.decode_config is not None and trace.meta.decode_config.temperature:
        query["temperature"] = str(trace.meta.decode_config.temperature)
    if prompt := trace.meta.prompt_text:  # traces saved without their text keep the page's prompt
        query |= prompt_query(prompt)
    for part in ("rule", "block"):
        if pipe.get(part):
            query[part] = pipe[part]["name"]
            query |= {k: _query_value(v) for k, v in pipe[part].items() if k != "name" and v is not None}
    for part, flag in (("extrapolate", "ce"), ("stop", "eos")):
        if pipe.get(part):
            query[flag] = "true"
            query |= {k: _query_value(v) for k, v in pipe[part].items() if k != "name" and v is not None}
    if pipe.get("stop"):
        query["stop_rule"] = pipe["stop"]["name"]  # which stop rule the EOS toggle turns on (eos, eos_first)
    if pipe.get("cache", "none") != "none":
        query["cache"] = pipe["cache"]
    return query


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(str(v).encode("unicode_escape").decode() for v in value)
    return str(value)
