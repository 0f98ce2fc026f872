"""End-of-text stop: once the answer has confidently ended, the rest of the canvas is padding.

Two published variants (docs/ALGORITHMS.md §3.4, §6.1), one component:
- eos_trigger "committed" (CORA-Diff's EOS-aware deployment): a stop token committed in this
  step with confidence >= `eos_confidence` ends the answer right after it;
- eos_trigger "predicted" (Learn2PD's EoTP rule b): additionally, a still-masked position whose
  candidate is a stop token with confidence >= `confidence` ends it (the most confident such
  position; the first of equal maxima).
Positions after the cut are filled with EOS (reason eos_stop) and the engine stops feeding them
to the model, so every later forward pass is shorter. eos_mode "finish" keeps decoding the masks
before the cut (Learn2PD); "halt" stops at once and leaves them masked (the CORA release quirk).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from dllm_viz.policies.base import StepView, StopDecision, StopRule
from dllm_viz.policies.block_refinement import eos_finishes
from dllm_viz.policies.knobs import check_knobs, knob


@dataclass(frozen=True)
class EosStop(StopRule):
    """Cut the canvas after a confident end-of-sequence token."""

    name: ClassVar[str] = "eos"
    eos_confidence: float = knob(0.8, "EOS stop: confidence of the end token (CORA: 0.8)", within="[0, 1]")
    eos_trigger: Literal["committed", "predicted"] = knob(
        "committed", "EOS stop: cut on a committed EOS, or also on a predicted one"
    )
    eos_mode: Literal["finish", "halt"] = knob(
        "finish", "EOS stop: finish the masks before the cut, or halt at once"
    )

    def __post_init__(self) -> None:
        check_knobs(self)

    def check(self, view: StepView, tokens: np.ndarray, committed: np.ndarray) -> StopDecision:
        confident = view.is_eos_candidate & (view.confidence >= self.eos_confidence)
        ends = np.flatnonzero(committed & confident)
        if ends.size:
            return StopDecision(cut=int(ends[0]) + 1, halt=self.eos_mode == "halt")
        if self.eos_trigger == "predicted":
            predicted = np.flatnonzero(view.is_masked & ~committed & confident)
            if predicted.size:
                best = int(predicted[np.argmax(view.confidence[predicted])])
                return StopDecision(cut=best + 1, halt=False)
        return StopDecision()


@dataclass(frozen=True)
class FirstEosStop(StopRule):
    """LLaDA2.x's early stop: halt once the answer's first EOS is in place with no mask before it.

    Rule: after a step that committed or edited an end-of-sequence token, if the first EOS of
    the row up to the window's end lies in the answer and every position before it is filled,
    decoding halts (later positions stay masked; the answer ends at that EOS). An EOS inside the
    prompt blocks the stop for good, as the reference searches the whole row. diffusers 0.42.1
    `LLaDA2Pipeline` (`eos_early_stop=True`, its default). Unlike `eos`, no confidence bar and no
    cut: nothing is filled with EOS.
    """

    name: ClassVar[str] = "eos_first"

    def check(self, view: StepView, tokens: np.ndarray, committed: np.ndarray) -> StopDecision:
        if view.eos_token_id is None or view.prompt_has_eos:
            return StopDecision()
        end = view.window[1]
        is_eos = tokens[:end] == view.eos_token_id
        # the reference's test over the row; the prompt (checked above) is not in these positions
        return StopDecision(halt=eos_finishes(is_eos, tokens[:end] == view.mask_token_id, prompt_length=0,
                                              changed_to_eos=bool((committed[:end] & is_eos).any())))
