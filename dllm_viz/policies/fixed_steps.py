"""LLaDA's fixed-steps rule: a precomputed number of commits per step (ALGORITHMS.md §1.2-1.5).

Mirrors `generate()` of github.com/ML-GSAI/LLaDA (generate.py): each window gets S_b steps and
the schedule of §1.3 spreads its masked positions over them; each step commits the n[t]
most confident (or random) open positions. Unlike the reference loop, trailing steps with
n[t] = 0 are never run (the engine exits a full window), so NFE can be lower than `steps`
when S_b exceeds the window's masks; the committed tokens are identical.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from dllm_viz.policies.base import Decision, StepView, top_k_mask


def transfer_schedule(num_masked: int, num_steps: int) -> list[int]:
    """LLaDA's per-step commit counts: floor(M/S) each, the remainder one extra, first.

    Sums to `num_masked` exactly; e.g. (32, 8) -> [4]*8 and (32, 64) -> [1]*32 + [0]*32.
    """
    if num_steps < 1:
        raise ValueError(f"`num_steps` must be >= 1, got {num_steps}")
    if num_masked < 0:
        raise ValueError(f"`num_masked` must be >= 0, got {num_masked}")
    base, rem = divmod(num_masked, num_steps)
    return [base + 1 if t < rem else base for t in range(num_steps)]


@dataclass(frozen=True)
class FixedStepsPolicy:
    """Commit a scheduled number of positions per step, by confidence or at random.

    Rule: a window with M masked positions gets S_b = steps * len(window) / gen_length steps;
    step t commits n[t] positions (`transfer_schedule`), the most confident ones
    (`low_confidence`, LLaDA's default) or uniformly random ones (`random`).
    Paper: "Large Language Diffusion Models" (LLaDA), arXiv 2502.09992.
    Unlike `threshold`, the number of commits per step never depends on confidence.
    """

    name: ClassVar[str] = "fixed_steps"
    steps: int | None = field(
        default=None,
        metadata={"help": "total steps over gen_length; None = gen_length (one token per step)"},
    )
    remasking: Literal["low_confidence", "random"] = field(
        default="low_confidence",
        metadata={"help": "which positions a step commits: low_confidence or random"},
    )

    def __post_init__(self) -> None:
        if self.steps is not None and (not isinstance(self.steps, int) or self.steps < 1):
            raise ValueError(f"`steps` must be a positive integer or None, got {self.steps!r}")
        if self.remasking not in ("low_confidence", "random"):
            raise ValueError(
                f"`remasking` must be 'low_confidence' or 'random', got {self.remasking!r}"
            )

    def steps_for_window(self, window_len: int, gen_length: int) -> int:
        """S_b: this window's share of the total steps (exactly S/K for equal blocks)."""
        total = gen_length if self.steps is None else self.steps
        return max(1, round(total * window_len / gen_length))

    def validate_blocks(self, gen_length: int, block_length: int | None) -> None:
        """LLaDA requires the steps to split evenly over equal blocks."""
        if self.steps is None or block_length is None:
            return
        num_blocks = gen_length // block_length
        if self.steps % num_blocks:
            raise ValueError(
                f"`steps` must be a multiple of the number of blocks "
                f"(gen_length/block_length = {num_blocks}), got steps={self.steps}"
            )

    def init_state(self, gen_length: int) -> None:
        return None

    def step(self, view: StepView, state: Any) -> tuple[Decision, Any]:
        start, end = view.window
        budget = self.steps_for_window(end - start, view.gen_length)
        open_ = view.open_positions
        if view.step_in_window >= budget:
            # Only reachable when another component changed the window's masks; flush.
            return Decision.of(open_, "last_step_flush"), state
        quota = transfer_schedule(view.window_masked_at_start, budget)[view.step_in_window]
        if self.remasking == "random":
            return Decision.of(top_k_mask(view.rand, open_, quota), "random"), state
        return Decision.of(top_k_mask(view.confidence, open_, quota), "quota"), state
