"""The commit step: a rule's Decision turned into this step's commits, with the engine's guarantees.

Shared by the engine and by replay so that both enforce the same invariants (docs/DESIGN.md §5):
commits are clipped to the open positions (masked and in the window), every committed position
carries a reason, and a step that would commit nothing commits the most confident open position
(`forced_top1`). Token edits (a rule replacing committed tokens) will be settled here too, as
one more field of CommitStep. Knows nothing about models or windows beyond the StepView.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dllm_viz.policies.base import NO_REASON, Decision, StepView, reason_code, top_k_mask


@dataclass(frozen=True)
class CommitStep:
    """This step's outcome.

    Attributes:
        committed: positions committed from mask at this step.
        reason: their reason codes (COMMIT_REASONS), NO_REASON elsewhere.
        tokens: the canvas after the commits (a new array; the view's tokens are untouched).
    """

    committed: np.ndarray
    reason: np.ndarray
    tokens: np.ndarray


def commit_step(view: StepView, decision: Decision, *, carried: tuple[np.ndarray, np.ndarray] | None = None
                ) -> CommitStep:
    """Settle `decision` on `view`: clip, fill reasons, add `carried` commits, force top-1 if empty.

    Args:
        view: what the rule saw (its candidates become the committed tokens).
        decision: the rule's (and extrapolator's) answer.
        carried: commits made by someone other than the rule, with their reason codes, added
            where the rule did not commit (replay: the dense run's own commits at that step).
    """
    committed = np.asarray(decision.commit, dtype=bool) & view.open_positions
    reason = np.where(committed, decision.reason, NO_REASON).astype(np.int8)
    if carried is not None:
        extra = np.asarray(carried[0], dtype=bool) & view.open_positions & ~committed
        committed = committed | extra
        reason[extra] = carried[1][extra]
    if not committed.any():
        # Guarantee progress: the most confident open position commits.
        committed = top_k_mask(view.confidence, view.open_positions, 1)
        reason[committed] = reason_code("forced_top1")
    tokens = view.tokens.copy()
    tokens[committed] = view.candidate[committed]
    return CommitStep(committed=committed, reason=reason, tokens=tokens)
