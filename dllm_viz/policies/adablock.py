"""AdaBlock-dLLM: end each window at a confidently predicted delimiter (docs/ALGORITHMS.md §5).

Mirrors `generate_adablock.py` of github.com/lgxi24/AdaBlock-dLLM: at the first pass of each
window, look at a look-ahead of 25% of gen_length; among positions whose candidate is a
delimiter (newline by default), take the MOST confident one (not the nearest); if its
confidence reaches tau_D the window ends right after it, else the window is B0 long. Any
commit rule decides inside the window (the paper uses Fast-dLLM's threshold 0.9).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from dllm_viz.policies.base import BlockSizer, StepView
from dllm_viz.policies.extras import DELIMITER_CONFIDENCE, VOLATILITY_REGION
from dllm_viz.policies.knobs import check_knobs, knob, point

PLATEAU, BAND, FLOOR = 0.0, 1.0, 2.0


@dataclass(frozen=True)
class AdaBlock(BlockSizer):
    """Semantic-aware adaptive window sizes.

    Rule: window length = (most confident delimiter in the look-ahead) - start + 1 when that
    confidence >= tau_D, else init_block_length; the last window is clipped to gen_length.
    Paper: "AdaBlock-dLLM: Semantic-Aware Diffusion LLM Inference via Adaptive Block Size",
    arXiv 2509.26432. Unlike fixed blocks, gen_length need not be a multiple of anything.
    """

    name: ClassVar[str] = "adablock"
    reads_pass: ClassVar[bool] = True
    init_block_length: int = knob(32, "AdaBlock fallback block size B0", within=">= 1")
    # Published: LLaDA's value, the paper's main model; each family's is in the model-family table.
    delimiter_threshold: float | None = knob(None, "AdaBlock tau_D", within="[0, 1]", published=0.3)
    lookahead_fraction: float = knob(0.25, "AdaBlock look-ahead window as a fraction of gen_length", within="(0, 1]")
    delimiters: tuple[str, ...] | None = knob(None, "delimiter strings; None = the model's (newline)")
    floor_confidence: float = knob(0.1, "confidence below which a masked position is in the low floor", within="[0, 1]")

    def __post_init__(self) -> None:
        check_knobs(self)

    def resolve(self, family: str, delimiters: tuple[str, ...]) -> AdaBlock:
        """Fill the model's delimiters where left unset (tau_D is filled with every family-calibrated
        knob, by `Pipeline.resolve`)."""
        return replace(self, delimiters=self.delimiters or delimiters)

    def validate(self, gen_length: int) -> None:
        """Any gen_length works: windows adapt and the last one is clipped."""

    def window_end(self, view: StepView, start: int) -> tuple[int, Mapping[str, np.ndarray]]:
        length = view.gen_length
        look = min(max(1, int(self.lookahead_fraction * length)), length - start)
        fallback = min(start + self.init_block_length, length)
        extras = np.full(length, np.nan, dtype=np.float32)
        if view.is_delimiter_candidate is None:
            return fallback, {DELIMITER_CONFIDENCE: extras}
        span = np.arange(start, start + look)
        found = span[view.is_delimiter_candidate[span]]
        extras[found] = view.confidence[found]
        if found.size == 0:
            return fallback, {DELIMITER_CONFIDENCE: extras}
        best = int(found[np.argmax(view.confidence[found])])  # first of equal maxima
        end = best + 1 if view.confidence[best] >= point(self, "delimiter_threshold") else fallback
        return end, {DELIMITER_CONFIDENCE: extras}

    def observe(self, view: StepView) -> dict[str, np.ndarray]:
        """Volatility-band classification of every position at this step (docs/ALGORITHMS.md §5.1)."""
        return {VOLATILITY_REGION: volatility_region(view, self.floor_confidence)}


def volatility_region(view: StepView, floor_confidence: float) -> np.ndarray:
    """0 = plateau (committed), 2 = low floor (EOS candidate or confidence < floor), 1 = band."""
    region = np.full(view.gen_length, BAND, dtype=np.float32)
    region[~view.is_masked] = PLATEAU
    region[view.is_masked & (view.is_eos_candidate | (view.confidence < floor_confidence))] = FLOOR
    return region

