"""Absolute-aligned blocks: the canvas geometry of block-diffusion decoding (LLaDA2.x, SDAR).

Blocks tile the whole row from position 0, prompt included, and the canvas is padded up to a
whole number of blocks (docs/PARADIGMS.md, "The canvas and its blocks"). Pure arithmetic on
lengths (AlignedCanvas) and the block sizer built on it (AlignedBlocks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dllm_viz.policies.base import BlockSizer, StepView
from dllm_viz.policies.blocks import BLOCK_LENGTH_HELP
from dllm_viz.policies.knobs import check_knobs, knob


@dataclass(frozen=True)
class AlignedCanvas:
    """Where the blocks of one decode lie.

    Attributes:
        prompt_length: P, prompt tokens at the start of the row.
        gen_length: G, positions the answer may use.
        block_length: B.
    """

    prompt_length: int
    gen_length: int
    block_length: int

    def __post_init__(self) -> None:
        for name in ("gen_length", "block_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)!r}")
        if self.prompt_length < 0:
            raise ValueError(f"`prompt_length` must be >= 0, got {self.prompt_length!r}")

    @property
    def total_length(self) -> int:
        """Canvas length: P + G rounded up to a multiple of B."""
        blocks = -(-(self.prompt_length + self.gen_length) // self.block_length)
        return blocks * self.block_length

    @property
    def padding(self) -> int:
        """Positions after P + G: decoded like the others, hidden as keys, dropped from the answer."""
        return self.total_length - self.prompt_length - self.gen_length

    @property
    def windows(self) -> tuple[tuple[int, int], ...]:
        """[start, end) of every block that holds a generated position, in row positions, in order.

        Blocks of prompt only are skipped; the first window holds P mod B prompt positions.
        """
        b = self.block_length
        return tuple((k * b, (k + 1) * b) for k in range(self.prompt_length // b, self.total_length // b))

    def prompt_in_window(self, window: tuple[int, int]) -> int:
        """How many leading positions of `window` are prompt (never committed or edited)."""
        return max(0, min(self.prompt_length, window[1]) - window[0])


@dataclass(frozen=True)
class AlignedBlocks(BlockSizer):
    """Windows on absolute-aligned blocks of `block_length` rows, prompt included (LLaDA2.x, SDAR).

    Rule: blocks tile the row from position 0; the first window holds the generated positions of
    the block the prompt ends in, and the canvas is padded to a whole number of blocks (the
    padding is decoded but hidden from the model and not part of the answer). Paper: "LLaDA2.0:
    Scaling Up Diffusion Language Models to 100B", arXiv 2512.15745; diffusers 0.42.1
    `LLaDA2Pipeline`. Unlike `fixed`, windows do not start at the prompt's end and any gen_length
    works; a block-causal model's own block length is the natural choice.
    """

    name: ClassVar[str] = "aligned"
    block_length: int = knob(32, BLOCK_LENGTH_HELP, within=">= 1")

    def __post_init__(self) -> None:
        check_knobs(self)

    def validate(self, gen_length: int) -> None:
        """Any gen_length tiles: the canvas is padded to whole blocks."""

    def canvas_padding(self, prompt_length: int, gen_length: int) -> int:
        return AlignedCanvas(prompt_length, gen_length, self.block_length).padding

    def block_start(self, prompt_length: int, start: int) -> int:
        return (prompt_length + start) // self.block_length * self.block_length

    def window_end(self, view: StepView, start: int) -> tuple[int, Mapping[str, np.ndarray]]:
        end = self.block_start(view.prompt_length, start) + self.block_length - view.prompt_length
        return min(end, view.gen_length), {}
