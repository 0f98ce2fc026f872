"""Token-level views of a trace: the canvas at one step (token strip) and the commit-order map.

Positions are laid out as text, wrapped `tokens_per_row` to a row, as a heatmap of cell
colours plus one text scatter (plotly heatmaps cannot colour text per cell). Colours follow
the LLaDA demo: masked dark grey (its draft candidate written faintly), committed this step
red / orange / green by confidence, committed earlier blue. A token reached by edits (block
refinement) is written after the token(s) it replaced, struck through; a position edited at the
shown step carries a purple corner mark (the commit-order map marks every edited position). Both
appear, with their legend keys, only in traces that have edits. `token_strip_html` gives the same
strip as escaped HTML for `st.html` (its shared style in one <style> block). Knows nothing about
policies.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go

from dllm_viz.figures._edits import position_edits, token_display
from dllm_viz.figures._layout import (
    DRAFT_TEXT_COLOR,
    EARLIER_COLOR,
    EDIT_COLOR,
    HIGH_COLOR,
    LOW_COLOR,
    LOW_CONFIDENCE,
    MASKED_COLOR,
    MID_COLOR,
    MID_CONFIDENCE,
    NO_DATA_COLOR,
    STEP_SCALE,
    axis,
    figure,
    mask_token_id,
    plotly_text,
    reason_names,
    titled,
    token_texts,
    trace_label,
)
from dllm_viz.trace import Trace

STATE_NAMES: tuple[str, ...] = ("masked", "new, confidence < 0.3", "new, confidence < 0.7",
                                "new, confidence >= 0.7", "committed earlier")
STATE_COLORS: tuple[str, ...] = (MASKED_COLOR, LOW_COLOR, MID_COLOR, HIGH_COLOR, EARLIER_COLOR)
MASKED, EARLIER = 0, 4
_CELL_CHARS = 8
_STRUCK_CHARS = 4  # a replaced token in a plotly cell: the newest only, cut short
_STRUCK_HTML = 2  # replaced tokens written before an HTML strip token (newest last; older ones as …)
EDITED_NOW = "edited this step"


@dataclass(frozen=True)
class TokenStates:
    """The canvas after one step, per position.

    Attributes:
        state: index into STATE_NAMES / STATE_COLORS.
        text: display text: the token if committed, the draft candidate if masked.
        confidence: the model's confidence in that text at this step (NaN before step 0).
        is_draft: True where the text is a masked position's current candidate.
        edited_now: True where the position's committed token was replaced at this step.
        edit_count: per position, how many edits replaced its token up to this step.
        replaced: per position, the texts of the tokens the newest edits (at most
            MAX_HOVER_EDITS) replaced up to this step, oldest first; empty where there were none
            or the position is masked now. `edit_count` says how many there were in all.
        edit_notes: per position, one `edit_text` line per edit up to this step, capped as a
            hover shows them (`_edits.capped`: the newest MAX_HOVER_EDITS after one line counting
            the rest). Why capped here: a position edited hundreds of times would otherwise cost
            hundreds of strings per strip, all but the last few never shown.
    """

    state: np.ndarray
    text: list[str]
    confidence: np.ndarray
    is_draft: np.ndarray
    edited_now: np.ndarray
    edit_count: np.ndarray
    replaced: list[tuple[str, ...]]
    edit_notes: list[list[str]]


def resolve_step(trace: Trace, step: int | None) -> int:
    """`step` checked against the trace; None = the last step (-1 for a zero-step trace)."""
    if step is None:
        return trace.num_steps - 1
    if not 0 <= step < max(trace.num_steps, 1) or (trace.num_steps == 0 and step != 0):
        raise ValueError(f"`step` must be in [0, {max(trace.num_steps - 1, 0)}] for this trace, got {step}; "
                         "pass None for the last step")
    return min(step, trace.num_steps - 1)


def token_states(trace: Trace, step: int | None = None) -> TokenStates:
    """State, text and confidence of every position after `step` (None = last; see resolve_step)."""
    s = resolve_step(trace, step)
    mask = mask_token_id(trace)
    if s < 0:
        before = after = trace.tokens[0]
        shown, conf, now = after, np.full(trace.gen_length, np.nan), np.zeros(trace.gen_length, bool)
    else:
        before, after = trace.tokens[s], trace.tokens[s + 1]
        now, conf = trace.committed[s], trace.confidence[s]
        shown = np.where(after == mask, trace.candidate[s], after)
    state = np.select([now & (conf < LOW_CONFIDENCE), now & (conf < MID_CONFIDENCE), now, before != mask],
                      [1, 2, 3, EARLIER], default=MASKED).astype(np.int8)
    is_draft = (after == mask) & (s >= 0)
    edits = position_edits(trace, s)
    replaced: list[tuple[str, ...]] = [()] * trace.gen_length
    notes: list[list[str]] = [[] for _ in range(trace.gen_length)]
    for p, events in edits.recent.items():
        notes[p] = edits.notes(trace, p)
        if after[p] != mask:
            replaced[p] = tuple(token_display(trace, e.old) for e in events)
    return TokenStates(
        state=state, text=token_texts(trace, shown), confidence=conf.astype(np.float64), is_draft=is_draft,
        edited_now=trace.edited[s].copy() if s >= 0 else np.zeros(trace.gen_length, bool),
        edit_count=edits.count, replaced=replaced, edit_notes=notes)


def wrap(values: np.ndarray, width: int, fill: float = np.nan) -> np.ndarray:
    """Lay a 1-D array out row-major in rows of `width`, padding the last row with `fill`."""
    rows = max(1, -(-values.size // width))
    out = np.full(rows * width, fill, dtype=np.float64)
    out[: values.size] = values
    return out.reshape(rows, width)


def _cell(text: str, limit: int = _CELL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _struck(old: str) -> str:
    """A replaced token as plotly text: struck through and cut short, then a space ('' for none)."""
    return f"<s>{plotly_text(_cell(old, _STRUCK_CHARS))}</s> " if old else ""


def edit_marks(positions: np.ndarray, hover: list[str], *, width: int, name: str,
               showlegend: bool) -> go.Scatter:
    """A purple diamond in the top-right corner of each listed cell of a wrapped grid, with `hover`."""
    positions = np.asarray(positions, dtype=np.int64)
    return go.Scatter(x=positions % width + 0.38, y=positions // width - 0.3, mode="markers", name=name,
                      marker={"symbol": "diamond", "size": 8, "color": EDIT_COLOR,
                              "line": {"color": "#FFFFFF", "width": 1}},
                      text=hover, hovertemplate="%{text}<extra></extra>", showlegend=showlegend)


def _notes(notes: list[str]) -> str:
    """Edit lines (already capped: `PositionEdits.notes`) for a plotly hover: each on its own line,
    escaped ('' for none)."""
    return "".join(f"<br>{plotly_text(line)}" for line in notes)


def grid_traces(z: np.ndarray, texts: list[str], text_colors: list[str], *, width: int,
                hover: list[str] | None = None, struck: list[str] | None = None,
                **heatmap: object) -> list[go.Heatmap | go.Scatter]:
    """A wrapped grid as [heatmap of cell colours, text scatter]; positions run row-major.

    With `hover`, the heatmap shows it per cell; otherwise the heatmap has no hover. With
    `struck`, a non-empty entry (a token an edit replaced) is written struck through before
    that cell's text.
    """
    grid = wrap(z.astype(np.float64), width)
    hover_options: dict[str, object] = {"hoverinfo": "skip"}
    if hover is not None:
        cells = np.full(grid.size, "", dtype=object)
        cells[: len(hover)] = hover
        hover_options = {"text": cells.reshape(grid.shape).tolist(),
                         "hovertemplate": "%{text}<extra></extra>"}
    positions = np.arange(len(texts))
    return [
        go.Heatmap(z=grid, xgap=1, ygap=1, **hover_options, **heatmap),
        go.Scatter(x=positions % width, y=positions // width, mode="text", name="tokens",
                   text=[_struck(old) + plotly_text(_cell(t)) for t, old in zip(texts, struck or [""] * len(texts),
                                                                               strict=True)],
                   textfont={"color": text_colors, "size": 11},
                   hoverinfo="skip", showlegend=False),
    ]


def grid_width(size: int, tokens_per_row: int) -> int:
    """Columns of the wrapped grid: `tokens_per_row`, or fewer for a short canvas."""
    if tokens_per_row < 1:
        raise ValueError(f"`tokens_per_row` must be >= 1, got {tokens_per_row}")
    return max(1, min(tokens_per_row, size))


def grid_layout() -> dict[str, Any]:
    """Layout of a wrapped token grid: hidden column axis, reversed row axis, white background."""
    return {"xaxis": axis("", showticklabels=False, showgrid=False, zeroline=False),
            "yaxis": axis("row", autorange="reversed", showgrid=False, zeroline=False, dtick=1),
            "plot_bgcolor": "#FFFFFF"}


MIN_GRID_HEIGHT = 280  # below this a 2-row grid's colour bar piles its title on its tick labels


def grid_height(size: int, width: int) -> int:
    """Figure height that gives each wrapped row about 34 px (readable tokens), at least MIN_GRID_HEIGHT."""
    return max(MIN_GRID_HEIGHT, 110 + 34 * max(1, -(-size // width)))


def text_color(state: int, is_draft: bool) -> str:
    """Faint text for drafts, white on masked cells, near-black on coloured cells."""
    return DRAFT_TEXT_COLOR if is_draft else ("#FFFFFF" if state == MASKED else "#111111")


def state_text_colors(states: TokenStates) -> list[str]:
    """`text_color` of every position."""
    return [text_color(int(k), bool(d)) for k, d in zip(states.state, states.is_draft, strict=True)]


def state_colorscale() -> list[list[object]]:
    """Discrete scale for state codes 0..4 (use zmin=-0.5, zmax=4.5)."""
    return [[f, c] for i, c in enumerate(STATE_COLORS) for f in (i / 5, (i + 1) / 5)]


def state_legend() -> str:
    """The five token-state colours as a one-line plotly rich-text legend."""
    pairs = zip(STATE_COLORS, STATE_NAMES, strict=True)
    return "  ".join(f"<span style='color:{c}'>■</span> {plotly_text(n)}" for c, n in pairs)


def edit_legend() -> str:
    """The edit keys of a token strip as plotly rich text (for traces that have edits)."""
    return f"<s>old</s> new: edited  <span style='color:{EDIT_COLOR}'>◆</span> {EDITED_NOW}"


def token_strip(trace: Trace, step: int | None = None, *, tokens_per_row: int = 32,
                title: str | None = None) -> go.Figure:
    """The canvas after `step`, coloured by token state as in the LLaDA demo.

    Args:
        trace: the decode to draw.
        step: step index in [0, S-1]; None = the last step (the initial canvas if S = 0).
        tokens_per_row: positions per row before wrapping.
        title: figure title; the default names the step and carries the colour legend.

    Returns:
        A figure with a heatmap of state codes (0..4, STATE_NAMES) and a text scatter, plus a
        marker scatter of the positions edited at `step` when there are any.
    """
    s = resolve_step(trace, step)
    states = token_states(trace, step)
    hover = [f"position {p}: {plotly_text(t)}<br>{plotly_text(STATE_NAMES[k])}{' (draft)' if d else ''}"
             f"<br>confidence {c:.3f}{_notes(notes)}" for p, (t, k, d, c, notes) in
             enumerate(zip(states.text, states.state, states.is_draft, states.confidence, states.edit_notes,
                           strict=True))]
    width = grid_width(trace.gen_length, tokens_per_row)
    traces = grid_traces(states.state, states.text, state_text_colors(states), width=width, hover=hover,
                         struck=[old[-1] if old else "" for old in states.replaced], zmin=-0.5, zmax=4.5,
                         colorscale=state_colorscale(), showscale=False, name="token state")
    now = np.flatnonzero(states.edited_now)
    if now.size:
        traces.append(edit_marks(now, [hover[p] for p in now], width=width, name=EDITED_NOW, showlegend=False))
    where = "initial canvas" if s < 0 else f"after step {s} of {trace.num_steps}"
    keys = state_legend() + (f"  {edit_legend()}" if trace.edited.any() else "")
    default = f"Tokens {where}: {trace_label(trace)}<br><sup>{keys}</sup>"
    return figure(traces, title=title or default, height=grid_height(trace.gen_length, width), **grid_layout())


def commit_order_heatmap(trace: Trace, *, tokens_per_row: int = 32, title: str | None = None) -> go.Figure:
    """The final text, each token coloured by the step at which it was committed (Cividis).

    Args:
        trace: the decode to draw.
        tokens_per_row: positions per row before wrapping.
        title: figure title; the default names the trace and NFE.

    Returns:
        A figure with a heatmap of commit steps (NaN = never committed) and a text scatter; in a
        trace with edits, the edited positions' text follows the token they last replaced, struck
        through, and a marker scatter "edited after commit" marks them, its hover listing every
        edit ("edited: 'old' → 'new' at step s"). The colour stays the step of the commit.
    """
    steps = trace.commit_step.astype(np.float64)
    steps[steps < 0] = np.nan
    names = reason_names(trace)
    reasons = [names[r] if 0 <= r < len(names) else "never committed" for r in trace.commit_reason]
    texts = token_texts(trace, trace.final_tokens)
    edits = position_edits(trace)
    notes = [edits.notes(trace, p) for p in range(trace.gen_length)]
    hover = [f"position {p}: {plotly_text(t)}<br>committed at step {int(c) if np.isfinite(c) else '-'}"
             f"<br>reason {r}{_notes(n)}"
             for p, (t, c, r, n) in enumerate(zip(texts, steps, reasons, notes, strict=True))]
    top = max(trace.num_steps - 1, 1)
    colors = ["#111111" if np.isnan(c) or c / top > 0.55 else "#FFFFFF" for c in steps]
    width = grid_width(trace.gen_length, tokens_per_row)
    mask = mask_token_id(trace)
    struck = [token_display(trace, edits.recent[p][-1].old) if p in edits.recent and token != mask else ""
              for p, token in enumerate(trace.final_tokens.tolist())]
    traces = grid_traces(steps, texts, colors, width=width, hover=hover, struck=struck, zmin=0, zmax=top,
                         colorscale=STEP_SCALE, name="commit step", colorbar={"title": {"text": "commit step"}})
    if edits.recent:
        edited = np.array(sorted(edits.recent))
        traces.append(edit_marks(edited, [hover[p] for p in edited], width=width, name="edited after commit",
                                 showlegend=True))
    default = titled("Commit order", trace_label(trace), f"NFE {trace.nfe}")
    return figure(traces, title=title or default, height=grid_height(trace.gen_length, width),
                  **{**grid_layout(), "plot_bgcolor": NO_DATA_COLOR})


STRIP_CLASS = "dllm-token-strip"


def strip_css(*, edits: bool) -> str:
    """The token strip's <style> block: what every token shares, once per strip instead of per token.

    Why: inline, the shared style was ~125 of a token's ~215 characters, and the Decode page sends
    the strip on every scrub (0.46 MB at 2048 positions). Every rule is scoped under the strip's
    class: st.html and the trace panel put the block into the page itself (no iframe), so it
    reaches the whole document. In Chromium the tokens on Decode (trace panel), Tune and Learn
    (st.html) compute the same styles as inline and draw the same pixels. State `sK` gives
    STATE_COLORS[K] with `text_color(K, False)`; `d` marks a draft (after the states: its colour
    wins), `e` a position edited at the shown step, `k` the legend row. With `edits` False the
    edit rules are left out (a trace without edits shows no edit keys).
    """
    scope = f".{STRIP_CLASS}"
    rules = [f"{scope}{{font-family:monospace;line-height:1.8}}",
             f"{scope} span{{padding:1px 3px;margin:1px;border-radius:3px;white-space:pre;display:inline-block}}"]
    rules += [f"{scope} .s{k}{{background:{color};color:{text_color(k, False)}}}"
              for k, color in enumerate(STATE_COLORS)]
    rules.append(f"{scope} .d{{color:{DRAFT_TEXT_COLOR};font-style:italic;opacity:0.75}}")
    if edits:
        rules += [f"{scope} .e{{outline:2px solid {EDIT_COLOR}}}", f"{scope} s{{opacity:0.7}}"]
    rules.append(f"{scope} .k{{margin-top:4px;font-size:0.8em}}")
    return "<style>" + "".join(rules) + "</style>"


def _span(text: str, state: int, tip: str, *, draft: bool, replaced: tuple[str, ...] = (),
          replaced_count: int | None = None, edited_now: bool = False) -> str:
    """One strip token (its look from `strip_css`'s classes); `replaced` are the newest tokens edits
    replaced (of `replaced_count` in all)."""
    classes = f"s{state}" + (" d" if draft else "") + (" e" if edited_now else "")
    shown = replaced[-_STRUCK_HTML:]
    total = len(replaced) if replaced_count is None else replaced_count
    old = ("…" if shown and total > len(shown) else "") + "".join(f"<s>{html.escape(t)}</s> " for t in shown)
    return f'<span class="{classes}" title="{html.escape(tip, quote=True)}">{old}{html.escape(text)}</span>'


def token_strip_html(trace: Trace, step: int | None = None, *, legend: bool = True) -> str:
    """The `token_strip` canvas as self-contained HTML (one <style> block, all text escaped).

    Args:
        trace: the decode to draw.
        step: step index in [0, S-1]; None = the last step (the initial canvas if S = 0).
        legend: append a one-line colour legend.

    Returns:
        An HTML fragment (a <div> holding its <style> block and a <span> per token) safe to pass to
        `st.html`. The style block comes inside the <div>: a fragment that starts with one can lose
        it to an HTML sanitizer, which moves a leading <style> to the document head.
    """
    states = token_states(trace, step)
    edits = bool(trace.edited.any())
    spans = []
    for p, (text, k, draft, conf) in enumerate(zip(states.text, states.state, states.is_draft,
                                                   states.confidence, strict=True)):
        tip = "; ".join([f"position {p}: {STATE_NAMES[k]}{' (draft)' if draft else ''}, confidence {conf:.3f}",
                         *states.edit_notes[p]])
        spans.append(_span(text, int(k), tip, draft=bool(draft), replaced=states.replaced[p],
                           replaced_count=int(states.edit_count[p]), edited_now=bool(states.edited_now[p])))
    out = f'<div class="{STRIP_CLASS}">{strip_css(edits=edits)}' + "".join(spans)
    if legend:
        keys = "".join(_span(n, i, n, draft=False) for i, n in enumerate(STATE_NAMES))
        if edits:
            keys += (_span("new", EARLIER, "edited: the struck token was replaced", draft=False, replaced=("old",))
                     + _span(EDITED_NOW, EARLIER, EDITED_NOW, draft=False, edited_now=True))
        out += f'<div class="k">{keys}</div>'
    return out + "</div>"


MASK_GLYPH = "▒"


def output_text(trace: Trace) -> str:
    """The decoded output as plain text, with every still-masked position shown as ▒.

    A finished trace returns the tokenizer's answer text (meta['answer_text']). A stopped one
    would lose its masked positions there ("2 +  = 9" reads like model output), so it is built
    from the recorded token texts instead, one ▒ per masked position, up to the first
    committed end-of-text token.
    """
    if trace.is_complete:
        return trace.meta.answer_text
    mask, stops = mask_token_id(trace), set(trace.stop_token_ids)
    parts = []
    for token in trace.final_tokens.tolist():
        if token in stops:
            break
        parts.append(MASK_GLYPH if token == mask else trace.token_text(int(token)))
    return "".join(parts)
