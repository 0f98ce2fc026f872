"""Fast-dLLM's confidence-threshold rule (docs/ALGORITHMS.md §2.1).

Mirrors the threshold branch of `get_transfer_index` in github.com/NVlabs/Fast-dLLM
(llada/generate.py): commit every open position whose confidence reaches the threshold; if
none does, commit the single most confident one so every step makes progress.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from dllm_viz.policies.base import CommitRule, Decision, StepView, top_k_mask
from dllm_viz.policies.knobs import check_knobs, knob


@dataclass(frozen=True)
class ThresholdPolicy(CommitRule):
    """Commit all open positions with confidence >= threshold, else the most confident one.

    Paper: "Fast-dLLM: Training-free Acceleration of Diffusion LLM by Enabling KV Cache and
    Parallel Decoding", arXiv 2505.22618 (threshold 0.9 is the paper's selected value).
    The reference baseline: this is the rule the other adaptive rules are compared against.
    """

    name: ClassVar[str] = "threshold"
    threshold: float = knob(0.9, "confidence a position needs to be committed", within="(0, 1]")

    def __post_init__(self) -> None:
        check_knobs(self)

    def init_state(self, gen_length: int) -> None:
        return None

    def step(self, view: StepView, state: Any) -> tuple[Decision, Any]:
        open_ = view.open_positions
        above = open_ & (view.confidence >= self.threshold)
        if above.any():
            return Decision.of(above, "threshold"), state
        return Decision.of(top_k_mask(view.confidence, open_, 1), "forced_top1"), state

