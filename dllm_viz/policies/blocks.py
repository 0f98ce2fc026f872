"""Fixed-size windows: LLaDA / Fast-dLLM semi-autoregressive blocks (docs/ALGORITHMS.md §0.1).

The generated positions are cut into gen_length / block_length equal windows decoded left to
right; block_length = gen_length is a single window (pure diffusion).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dllm_viz.policies.base import BlockSizer, StepView
from dllm_viz.policies.knobs import check_knobs, knob

# One declaration for every sizer with a `block_length` (one CLI flag, one widget).
BLOCK_LENGTH_HELP = "positions per semi-autoregressive block (aligned: rows from position 0, prompt included)"


@dataclass(frozen=True)
class FixedBlocks(BlockSizer):
    """Windows of exactly `block_length` positions; block_length must divide gen_length."""

    name: ClassVar[str] = "fixed"
    block_length: int = knob(32, BLOCK_LENGTH_HELP, within=">= 1")

    def __post_init__(self) -> None:
        check_knobs(self)

    def validate(self, gen_length: int) -> None:
        if gen_length % self.block_length:
            raise ValueError(
                f"`block_length` must divide `gen_length`, got block_length={self.block_length} "
                f"and gen_length={gen_length}; pick a divisor such as "
                f"{_nearest_divisor(gen_length, self.block_length)}"
            )

    def window_end(self, view: StepView, start: int) -> tuple[int, Mapping[str, np.ndarray]]:
        return min(start + self.block_length, view.gen_length), {}


def _nearest_divisor(n: int, near: int) -> int:
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return min(divisors, key=lambda d: (abs(d - near), d))
