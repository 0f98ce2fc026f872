"""LLaDA's fixed-steps rule: a precomputed number of commits per step (docs/ALGORITHMS.md §1.2-1.5).

Mirrors `generate()` of github.com/ML-GSAI/LLaDA (generate.py): each window gets S_b steps and
the schedule of §1.3 spreads its masked positions over them; each step commits the n[t]
most confident (or random) open positions. Unlike the reference loop, trailing steps with
n[t] = 0 are never run (the engine exits a full window), so NFE can be lower than `steps`
when S_b exceeds the window's masks; the committed tokens are identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from dllm_viz.policies.base import CommitRule, Decision, StepView, top_k_mask
from dllm_viz.policies.knobs import check_knobs, knob
from dllm_viz.policies.schedule import EvenBlockSteps, quota, steps_for_window, steps_knob, transfer_schedule

__all__ = ["FixedStepsPolicy", "transfer_schedule"]


@dataclass(frozen=True)
class FixedStepsPolicy(EvenBlockSteps, CommitRule):
    """Commit a scheduled number of positions per step, by confidence or at random.

    Rule: a window with M masked positions gets S_b = steps * len(window) / gen_length steps;
    step t commits n[t] positions (`transfer_schedule`), the most confident ones
    (`low_confidence`, LLaDA's default) or uniformly random ones (`random`).
    Paper: "Large Language Diffusion Models" (LLaDA), arXiv 2502.09992.
    Unlike `threshold`, the number of commits per step never depends on confidence.
    """

    name: ClassVar[str] = "fixed_steps"
    steps: int | None = steps_knob()
    remasking: Literal["low_confidence", "random"] = knob(
        "low_confidence", "which positions a step commits: low_confidence or random"
    )

    def __post_init__(self) -> None:
        check_knobs(self)

    def steps_for_window(self, window_len: int, gen_length: int) -> int:
        """S_b: this window's share of the total steps (exactly S/K for equal blocks)."""
        return steps_for_window(self.steps, window_len, gen_length)

    def init_state(self, gen_length: int) -> None:
        return None

    def step(self, view: StepView, state: Any) -> tuple[Decision, Any]:
        open_ = view.open_positions
        n = quota(view, self.steps)
        if n is None:
            # Only reachable when another component changed the window's masks; flush.
            return Decision.of(open_, "last_step_flush"), state
        if self.remasking == "random":
            return Decision.of(top_k_mask(view.rand, open_, n), "random"), state
        return Decision.of(top_k_mask(view.confidence, open_, n), "quota"), state
