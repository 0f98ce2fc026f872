"""CORA-Diff: confidence + persistence residual acceptance over LLaDA's quota (docs/ALGORITHMS.md §6.1).

Mirrors `generate_cora` of the authors' open-source release (cora_diff_llada_open_source,
llada/generate.py). Before the quota, any open position with confidence >= delta_p whose top-1
candidate has been the same for >= m consecutive passes is committed; those commits count
against the step's quota, which then takes the most confident of the rest. The window is left
as soon as it is full (block early exit), so unused planned steps are skipped. The EOS-aware
truncation of the release is the separate `eos` stop component.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dllm_viz.policies.base import NO_REASON, CommitRule, Decision, StepView, reason_code, top_k_mask
from dllm_viz.policies.extras import PERSISTENCE
from dllm_viz.policies.knobs import check_knobs, knob, point
from dllm_viz.policies.schedule import EvenBlockSteps, quota, steps_knob


@dataclass(frozen=True)
class CoraState:
    """Previous pass's candidates and each position's persistence count m_i."""

    previous: np.ndarray
    persistence: np.ndarray


@dataclass(frozen=True)
class CoraPolicy(EvenBlockSteps, CommitRule):
    """Accept persistent, confident positions early; fill the rest of LLaDA's quota by confidence.

    Rule: m_i counts consecutive passes (reset at each window start) in which position i's
    top-1 candidate did not change. Commit every open position with c_i >= delta_p and
    m_i >= m; then commit the n[t] - accepted most confident remaining positions.
    Paper: "CORA-Diff: Confidence-Oriented Residual Acceptance", arXiv 2608.11235.
    Unlike `threshold`, a confident position must also have been stable, and the LLaDA
    quota still guarantees a fixed minimum of progress.
    Defaults: the model family's calibrated (delta_p, m) (dllm_viz/models/families.py), else the
    release's best validated point (delta_p 0.97, m 2); S = gen_length.
    """

    name: ClassVar[str] = "cora"
    delta_p: float | None = knob(None, "CORA confidence bar delta_p", within="(0, 1]", published=0.97)
    m: int | None = knob(None, "CORA persistence passes required", within=">= 0", published=2)
    steps: int | None = steps_knob()

    def __post_init__(self) -> None:
        check_knobs(self)

    def init_state(self, gen_length: int) -> CoraState:
        return CoraState(previous=np.full(gen_length, -1, dtype=np.int64),
                         persistence=np.zeros(gen_length, dtype=np.int64))

    def step(self, view: StepView, state: CoraState) -> tuple[Decision, CoraState]:
        open_ = view.open_positions
        counts = np.zeros_like(state.persistence) if view.step_in_window == 0 else state.persistence
        same = open_ & (view.candidate == state.previous)
        counts = np.where(same, counts + 1, 0)
        accepted = open_ & (view.confidence >= point(self, "delta_p")) & (counts >= point(self, "m"))
        n = quota(view, self.steps)
        remaining = max(0, (int(open_.sum()) if n is None else n) - int(accepted.sum()))
        filled = top_k_mask(view.confidence, open_ & ~accepted, remaining)
        reason = np.full(view.gen_length, NO_REASON, dtype=np.int8)
        reason[filled] = reason_code("quota" if n is not None else "last_step_flush")
        reason[accepted] = reason_code("cora_residual")
        extras = {PERSISTENCE: np.where(open_, counts, np.nan).astype(np.float32)}
        decision = Decision(commit=accepted | filled, reason=reason, extras=extras)
        return decision, CoraState(previous=view.candidate.copy(), persistence=counts)
