"""Decode dynamics measured on a trace: when answers settle, and whether candidates change.

Two numbers say whether a model gives decoding rules anything to decide (docs/TESTBED.md):
redundant refinement, the share of masked token-steps spent on positions whose answer had
already settled (near 1 when every answer is known from the first pass; over every position and
over the answer's alone, without the end-of-text tail), and candidate flips,
answer positions whose top-1 candidate changed while they were still masked (a later commit
changed what an earlier position would have been). The Decode page's refinement view and the
bench's columns both read them from here; `reliability` asks whether a confidence is earned (the
share of window cells at each confidence whose candidate is the token the decode committed there).
Needs numpy only.
"""

from __future__ import annotations

import numpy as np

from dllm_viz.trace import Trace


def mask_token_id(trace: Trace) -> int:
    """The mask token id (`Trace.mask_token_id`: the recorded model's, else the initial canvas's)."""
    return trace.mask_token_id


def masked_before(trace: Trace) -> np.ndarray:
    """[S, L] True where the position was still masked when step s began (`Trace.masked_before`)."""
    return trace.masked_before


def _commit(trace: Trace) -> np.ndarray:
    """[L] int64 `Trace.commit_step` (a new array). Why passed around rather than re-read: the
    property is computed once per trace, but each int64 cast copies it, and the refinement view's
    three numbers read it ten times."""
    return trace.commit_step.astype(np.int64)


def _considered(trace: Trace, commit: np.ndarray) -> np.ndarray:
    """[S, L] True at the steps where a position was masked, up to and including its (last) commit step.

    Why not `steps <= commit`: a block-refinement edit can write the mask back into a committed
    position (committed, edited, committed again); the steps it spent committed in between are
    not steps it was refined at, and counting them made a position look settled at a step it
    was not even masked.
    """
    steps = np.arange(trace.num_steps)[:, None]
    return np.asarray((steps <= commit[None, :]) & masked_before(trace), dtype=bool)


def settled_step(trace: Trace) -> np.ndarray:
    """Per position, the step from which its candidate was its final token until it committed.

    Only steps where the position was still masked (up to and including its commit step) are
    considered: the settled step is the first of them after the last one whose candidate was not
    the final token.

    Args:
        trace: the decode to analyse.

    Returns:
        [L] int32 steps; -1 where the position never committed or its candidate at the commit
        step was not its final token.
    """
    commit = _commit(trace)
    return _settled(trace, commit, _considered(trace, commit))


def _settled(trace: Trace, commit: np.ndarray, considered: np.ndarray) -> np.ndarray:
    """`settled_step` from the commit steps and `_considered` cells already at hand."""
    steps = np.arange(trace.num_steps)[:, None]
    good = trace.candidate == trace.final_tokens[None, :]
    last_bad = np.where(considered & ~good, steps, -1).max(axis=0, initial=-1)
    after = considered & (steps > last_bad[None, :])
    settled = np.where(after, steps, np.iinfo(np.int64).max).min(axis=0, initial=np.iinfo(np.int64).max)
    return np.where((commit >= 0) & (settled <= commit), settled, -1).astype(np.int32)


def wasted_refinement_fraction(trace: Trace, *, answer_only: bool = False) -> float:
    """Share of masked token-steps spent on positions whose answer had already settled.

    Defined as  sum_p (commit_step_p - settled_step_p) / sum_p (commit_step_p + 1)  over
    committed positions: a position committed at step c was masked for c + 1 steps, and the
    c - t of them after it settled at step t refined nothing. Positions that never settled
    add 0 to the numerator.

    Args:
        trace: the decode to analyse.
        answer_only: leave out the positions whose final token ends the text (the end-of-text
            tail). Why: a model knows the tail from the first pass and semi-autoregressive blocks
            keep it masked to the end, so on a canvas longer than its answer the tail alone
            decides the share (the bundled model under dense on the hard split at gen 256: 96.6%
            over all positions, 72.3% over the answer's; session 29, BENCHMARKS.md).

    Returns:
        A fraction in [0, 1); 0.0 when nothing (of the answer, with `answer_only`) was committed.
    """
    positions = ~trace.is_end_of_text if answer_only else np.ones(trace.gen_length, dtype=bool)
    return _redundant_share(trace, spent_on=positions, wasted_on=positions)


def _redundant_share(trace: Trace, *, spent_on: np.ndarray, wasted_on: np.ndarray) -> float:
    """Redundant token-steps of the committed positions in `wasted_on` over the masked token-steps of
    those in `spent_on` (see wasted_refinement_fraction); 0.0 when nothing there was committed.

    Both count masked steps up to the commit (`_considered`): c + 1 and c - t for a position masked
    from the start, fewer for one an edit re-opened (its committed steps in between refined nothing).
    """
    commit = _commit(trace)
    considered = _considered(trace, commit)
    settled = _settled(trace, commit, considered).astype(np.int64)
    steps = np.arange(trace.num_steps)[:, None]
    committed = commit >= 0
    redundant = (considered & (steps >= settled[None, :]) & (steps < commit[None, :])).sum(axis=0)
    spent = int(considered.sum(axis=0)[committed & spent_on].sum())
    wasted = int(redundant[committed & wasted_on & (settled >= 0)].sum())
    return wasted / spent if spent else 0.0


def tail_redundant_share(trace: Trace) -> float:
    """The part of `wasted_refinement_fraction(trace)` (over all positions) the end-of-text tail makes.

    The tail's redundant token-steps over all masked token-steps: a floor under the all-position share
    that no better answer can lower. Why: a model that knows from its first pass where its answer ends
    (the bundled model does, on every held-out hard problem) keeps the tail masked but settled until its
    block opens, so on a canvas far longer than the answer this floor alone decides the share (issue
    #19's "< 80%" at gen 256: BENCHMARKS.md, session 32).

    Returns:
        A fraction in [0, 1); 0.0 when nothing was committed.
    """
    return _redundant_share(trace, spent_on=np.ones(trace.gen_length, dtype=bool), wasted_on=trace.is_end_of_text)


def reliability_cells(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The answer cells a rule could have committed, and whether committing them then was right.

    Cells are (step, position) pairs where an answer position (end-of-text tail left out) was masked
    and inside that step's window, up to and including its commit step. Why these: they are what a
    confidence rule (threshold, CORA, CE) chooses among; cells outside the window or already
    committed are never candidates. Right means the candidate then equals the token the decode
    committed at the end, so on a dense (one-token-a-step) trace it asks whether the model's
    confidence predicts what careful decoding writes; on a faster rule's trace a cell committed at
    its own step agrees by construction.

    Returns:
        (confidence, agrees): float64 and bool arrays, one entry per cell, in step-major order.
    """
    commit = _commit(trace)
    cells = _considered(trace, commit) & trace.in_window & ~trace.is_end_of_text[None, :]  # never committed: none
    agrees = trace.candidate == trace.final_tokens[None, :]
    return trace.confidence[cells].astype(np.float64), agrees[cells]


RELIABILITY_BINS = (0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0)
ReliabilityRow = tuple[float, float, int, float, float]  # low, high, cells, mean confidence, share right


def reliability(confidence: np.ndarray, agrees: np.ndarray,
                bins: tuple[float, ...] = RELIABILITY_BINS) -> tuple[list[ReliabilityRow], float]:
    """A reliability table and the expected calibration error (ECE) of `reliability_cells`' output.

    Args:
        confidence: [N] confidences in [0, 1].
        agrees: [N] whether each cell's candidate was right.
        bins: increasing edges from 0 to 1; the last bin is closed (holds confidence 1.0).

    Returns:
        (rows, ece): one (low, high, cells, mean confidence, share right) row per non-empty bin, and
        the cell-weighted mean of |mean confidence - share right| over the bins (0.0 for no cells).

    Raises:
        ValueError: bins that are not increasing from 0 to 1, or arrays of different lengths.
    """
    edges = np.asarray(bins, dtype=np.float64)
    if edges.size < 2 or edges[0] != 0.0 or edges[-1] != 1.0 or np.any(np.diff(edges) <= 0):
        raise ValueError(f"reliability bins must increase from 0 to 1, got {bins}")
    confidence, agrees = np.asarray(confidence, dtype=np.float64), np.asarray(agrees, dtype=bool)
    if confidence.shape != agrees.shape:
        raise ValueError(f"confidence {confidence.shape} and agrees {agrees.shape} must have one shape")
    which = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, edges.size - 2)
    rows: list[ReliabilityRow] = []
    gap = 0.0
    for b in range(edges.size - 1):
        inside = which == b
        count = int(inside.sum())
        if count:
            mean, right = float(confidence[inside].mean()), float(agrees[inside].mean())
            rows.append((float(edges[b]), float(edges[b + 1]), count, mean, right))
            gap += count * abs(mean - right)
    return rows, gap / confidence.size if confidence.size else 0.0


def candidate_flips(trace: Trace) -> int:
    """Answer positions whose top-1 candidate changed at least once while they were masked.

    Only steps up to and including the commit step count (after it the candidate is the
    committed token); end-of-text positions of the final canvas are left out, so the count is
    about the answer, not the padding.
    """
    if trace.num_steps < 2 or not trace.gen_length:
        return 0
    masked = masked_before(trace)
    commit = trace.commit_step.astype(np.int64)
    steps = np.arange(trace.num_steps)[:, None]
    live = masked & (steps <= commit[None, :])
    changed = (trace.candidate[1:] != trace.candidate[:-1]) & live[1:] & live[:-1]
    return int((changed.any(axis=0) & ~trace.is_end_of_text).sum())


def candidate_history(trace: Trace, position: int) -> list[tuple[int, str]]:
    """The candidates a position went through while masked: (step, token text) at each change.

    The last entry is the candidate at its commit step (or the latest step if never committed),
    so a history of two or more entries is remasking made visible: the model proposed one token,
    left the position masked, and proposed another with more context.
    """
    commit = int(trace.commit_step[position])
    last = commit if commit >= 0 else trace.num_steps - 1
    masked = masked_before(trace)[: last + 1, position]
    history: list[tuple[int, str]] = []
    for step in np.flatnonzero(masked).tolist():
        token = trace.token_text(int(trace.candidate[step, position]))
        if not history or history[-1][1] != token:
            history.append((int(step), token))
    return history


def candidate_revisions(trace: Trace) -> np.ndarray:
    """[L] how often each position's candidate changed while it was masked: `len(candidate_history) - 1`.

    Computed for all positions at once. Why: calling `candidate_history` once per position is a
    Python loop over L x S cells, 4 s on a 1024-position, 1000-step trace (the refinement view
    stalled on it). Candidates are compared by display text, as the history is.
    """
    num_steps, length = trace.num_steps, trace.gen_length
    if not num_steps or not length:
        return np.zeros(length, dtype=np.int64)
    last = np.where(trace.commit_step >= 0, trace.commit_step, num_steps - 1).astype(np.int64)
    considered = masked_before(trace) & (np.arange(num_steps)[:, None] <= last[None, :])
    ids, inverse = np.unique(trace.candidate, return_inverse=True)
    classes: dict[str, int] = {}
    text_class = np.array([classes.setdefault(trace.token_text(int(i)), len(classes)) for i in ids])
    kind = text_class[inverse.reshape(-1)].reshape(num_steps, length)
    cells = np.flatnonzero(considered.T.ravel())  # position-major: index = position * S + step
    position, value = cells // num_steps, kind.T.ravel()[cells]
    changed = (position[1:] == position[:-1]) & (value[1:] != value[:-1])
    return np.bincount(position[1:][changed], minlength=length).astype(np.int64)


def most_revised_position(trace: Trace) -> int | None:
    """The committed position whose candidate changed most often before its commit (None if none changed)."""
    counts = np.where(trace.commit_step >= 0, candidate_revisions(trace), 0)
    best = int(np.argmax(counts)) if counts.size else 0
    return best if counts.size and counts[best] > 0 else None
