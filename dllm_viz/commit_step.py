"""The commit step: a rule's Decision turned into this step's commits, with the engine's guarantees.

Shared by the engine and by replay so that both enforce the same invariants (docs/DESIGN.md §5):
commits are clipped to the open positions (masked and in the window), every committed position
carries a reason, and a step that would commit nothing commits the most confident open position
(`forced_top1`) unless the rule allows an empty step. Token edits (block refinement replacing
committed tokens of the window) are clipped to committed, in-window positions whose candidate
differs, and carry the reason `edit`. Knows nothing about models or windows beyond the StepView.
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
        tokens: the canvas after the commits and edits (a new array; the view's is untouched).
        edited: committed positions whose token was replaced at this step.
    """

    committed: np.ndarray
    reason: np.ndarray
    tokens: np.ndarray
    edited: np.ndarray


def commit_step(view: StepView, decision: Decision, *, carried: tuple[np.ndarray, np.ndarray] | None = None
                ) -> CommitStep:
    """Settle `decision` on `view`: clip, fill reasons, add `carried` commits, force top-1 if empty.

    A commit whose candidate is the mask token itself (LLaDA2's sampler may draw it from an
    untrained model) changes nothing and is not recorded: the position stays open. An edit to
    the mask token re-opens the position, as the reference does; it is recorded as an edit.

    Args:
        view: what the rule saw (its candidates become the committed tokens).
        decision: the rule's (and extrapolator's) answer.
        carried: commits made by someone other than the rule, with their reason codes, added
            where the rule did not commit (replay: the dense run's own commits at that step).
    """
    candidate_is_mask = view.candidate == view.mask_token_id
    committed = np.asarray(decision.commit, dtype=bool) & view.open_positions & ~candidate_is_mask
    reason = np.where(committed, decision.reason, NO_REASON).astype(np.int8)
    if carried is not None:
        extra = np.asarray(carried[0], dtype=bool) & view.open_positions & ~committed
        committed = committed | extra
        reason[extra] = carried[1][extra]
    if not committed.any() and not decision.allow_empty:
        # Guarantee progress: the most confident open position commits.
        committed = top_k_mask(view.confidence, view.open_positions, 1)
        reason[committed] = reason_code("forced_top1")
    edited = np.zeros(view.gen_length, dtype=bool)
    if decision.edit is not None:
        edited = (np.asarray(decision.edit, dtype=bool) & view.in_window & ~view.is_masked
                  & (view.candidate != view.tokens))
        reason[edited] = reason_code("edit")
    tokens = view.tokens.copy()
    changed = committed | edited
    tokens[changed] = view.candidate[changed]
    return CommitStep(committed=committed, reason=reason, tokens=tokens, edited=edited)

