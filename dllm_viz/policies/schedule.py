"""LLaDA's per-window commit quota, shared by the rules built on it (fixed_steps, CORA, Learn2PD).

A window with M masked positions gets S_b steps (its share of the total `steps`); step t
commits n[t] positions, with n = transfer_schedule(M, S_b) (docs/ALGORITHMS.md §1.3).
"""

from __future__ import annotations

from typing import Any

from dllm_viz.policies.base import StepView
from dllm_viz.policies.knobs import knob


def steps_knob() -> Any:
    """The `steps` knob of every rule on a step budget (fixed_steps, CORA, Learn2PD, Dream): declared here once."""
    return knob(None, "total steps over gen_length; None = gen_length (one token per step)", within=">= 1")


class EvenBlockSteps:
    """For rules on LLaDA's quota: their `steps` must split evenly over equal blocks."""

    steps: int | None

    def validate_blocks(self, gen_length: int, block_length: int | None) -> None:
        """LLaDA's schedule requires the steps to split evenly over equal blocks."""
        validate_steps(self.steps, gen_length, block_length)


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


def steps_for_window(steps: int | None, window_len: int, gen_length: int) -> int:
    """S_b: a window's share of the total steps (exactly S/K for K equal blocks).

    `steps=None` means gen_length steps in total, i.e. one token per step.
    """
    total = gen_length if steps is None else steps
    return max(1, round(total * window_len / gen_length))


def quota(view: StepView, steps: int | None) -> int | None:
    """n[t] for this step of the window, or None once the window's step budget is spent."""
    start, end = view.window
    budget = steps_for_window(steps, end - start, view.gen_length)
    if view.step_in_window >= budget:
        return None
    return transfer_schedule(view.window_masked_at_start, budget)[view.step_in_window]


def validate_steps(steps: int | None, gen_length: int, block_length: int | None) -> None:
    """LLaDA requires the steps to split evenly over equal blocks.

    A block longer than the canvas (aligned blocks allow one: a block-causal model's own, past a short
    canvas) leaves one block to give every step to; the check divided by zero blocks there.
    """
    if steps is None or block_length is None:
        return
    num_blocks = gen_length // block_length
    if num_blocks and steps % num_blocks:
        raise ValueError(
            f"`steps` must be a multiple of the number of blocks "
            f"(gen_length/block_length = {num_blocks}), got steps={steps}"
        )
