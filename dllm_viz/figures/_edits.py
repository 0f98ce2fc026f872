"""How every figure words and groups token edits (block refinement replacing committed tokens).

One phrasing, "edited: 'old' → 'new' at step s", in every hover and tooltip, and one grouping of
`Trace.edit_events` by position up to a step, so the heatmap, token strip, commit order and
refinement views all say the same thing about the same edit. Texts are display texts (newlines
as ⏎), not escaped: plotly callers pass them through `plotly_text`, HTML ones through
`html.escape`.
"""

from __future__ import annotations

from collections import defaultdict

from dllm_viz.figures._layout import display_text
from dllm_viz.trace import EditEvent, Trace

MAX_HOVER_EDITS = 4  # hover lines per cell; a long oscillation starts with "… N earlier edits"


def token_display(trace: Trace, token_id: int) -> str:
    """Display text of one token id (the mask token included), not escaped."""
    return display_text(trace.token_text(token_id))


def edit_text(trace: Trace, event: EditEvent) -> str:
    """"edited: 'old' → 'new' at step s", not escaped."""
    return f"edited: '{token_display(trace, event.old)}' → '{token_display(trace, event.new)}' at step {event.step}"


def capped(lines: list[str], limit: int = MAX_HOVER_EDITS) -> list[str]:
    """The last `limit` lines (the edits that led to the token shown), after one line counting the rest."""
    return lines if len(lines) <= limit else [f"… {len(lines) - limit} earlier edits", *lines[-limit:]]


def edits_by_position(trace: Trace, up_to: int | None = None) -> dict[int, list[EditEvent]]:
    """The edit events of each edited position, in step order, of steps <= `up_to` (None = all)."""
    out: dict[int, list[EditEvent]] = defaultdict(list)
    for event in trace.edit_events:
        if up_to is None or event.step <= up_to:
            out[event.position].append(event)
    return dict(out)
