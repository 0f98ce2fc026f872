"""How every figure words and groups token edits (block refinement replacing committed tokens).

One phrasing, "edited: 'old' → 'new' at step s", in every hover and tooltip, and one grouping of
the trace's `edited` cells by position up to a step, so the heatmap, token strip, commit order and
refinement views all say the same thing about the same edit. Texts are display texts (newlines
as ⏎), not escaped: plotly callers pass them through `plotly_text`, HTML ones through
`html.escape`.

Why grouped with numpy and kept short: an untrained model under block refinement can edit
~100k cells of a 1024 x 1000 trace. Building an EditEvent and a text line for every one of them
cost ~0.2 s per token strip (each scrub of the Decode page) and 20 s per exported replay, to
show at most MAX_HOVER_EDITS lines of each position; only those lines are built now.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dllm_viz.figures._layout import display_text
from dllm_viz.trace import EditEvent, Trace

MAX_HOVER_EDITS = 4  # hover lines per cell; a long oscillation starts with "… N earlier edits"


def token_display(trace: Trace, token_id: int) -> str:
    """Display text of one token id (the mask token included), not escaped."""
    return display_text(trace.token_text(token_id))


def edit_text(trace: Trace, event: EditEvent) -> str:
    """"edited: 'old' → 'new' at step s", not escaped."""
    return f"edited: '{token_display(trace, event.old)}' → '{token_display(trace, event.new)}' at step {event.step}"


def earlier_line(count: int) -> str:
    """The line that stands for `count` edits left out of a hover."""
    return f"… {count} earlier edits"


def capped(lines: list[str], limit: int = MAX_HOVER_EDITS) -> list[str]:
    """The last `limit` lines (the edits that led to the token shown), after one line counting the rest."""
    return lines if len(lines) <= limit else [earlier_line(len(lines) - limit), *lines[-limit:]]


@dataclass(frozen=True)
class PositionEdits:
    """The edits of every position up to a step, the newest few of each kept as events.

    Attributes:
        count: [L] how many edits each position had.
        recent: edited position -> its last `keep` edit events, in step order.
    """

    count: np.ndarray
    recent: dict[int, list[EditEvent]]

    def notes(self, trace: Trace, position: int) -> list[str]:
        """`edit_text` lines of `position`'s recent edits, after an `earlier_line` counting the rest
        (what `capped` makes of all its lines when `keep` is MAX_HOVER_EDITS); [] if none."""
        events = self.recent.get(position, [])
        lines = [edit_text(trace, event) for event in events]
        hidden = int(self.count[position]) - len(events)
        return [earlier_line(hidden), *lines] if hidden > 0 else lines


def position_edits(trace: Trace, up_to: int | None = None, *, keep: int = MAX_HOVER_EDITS) -> PositionEdits:
    """Edit counts per position over steps <= `up_to` (None = all), with the last `keep` events of each.

    Equal to grouping `trace.edit_events` by position and keeping each group's tail, without
    building an event for every edit.
    """
    edited = trace.edited if up_to is None else trace.edited[: max(up_to + 1, 0)]
    steps, positions = np.nonzero(edited)  # step order (a scan of the transpose was 4x slower)
    order = np.argsort(positions, kind="stable")  # by position, each position's edits in step order
    steps, positions = steps[order], positions[order]
    count = np.bincount(positions, minlength=trace.gen_length).astype(np.int64)
    from_end = np.cumsum(count)[positions] - np.arange(positions.size)  # 1 for a position's last edit
    kept = from_end <= keep
    positions, steps = positions[kept], steps[kept]
    recent: dict[int, list[EditEvent]] = {}
    for s, p in zip(steps.tolist(), positions.tolist(), strict=True):
        recent.setdefault(p, []).append(trace.edit_event(s, p))
    return PositionEdits(count=count, recent=recent)
