"""Absolute-aligned blocks: the canvas geometry of block-diffusion decoding (LLaDA2.x, SDAR).

Blocks tile the whole row from position 0, prompt included, and the canvas is padded up to a
whole number of blocks (docs/PARADIGMS.md, "The canvas and its blocks"). Pure arithmetic on
lengths; it knows nothing about tokens, models or the engine's window bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass


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
