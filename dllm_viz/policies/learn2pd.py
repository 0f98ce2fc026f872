"""Learn2PD-style learned filter over the window's confidences (docs/ALGORITHMS.md §3).

From "Learning to Parallel Decode" (arXiv 2509.25188; the official code was not public, the
reference behaviour comes from the copy vendored in the CORA-Diff release): a 32 -> 32 -> 32
MLP reads the confidences of all 32 window positions (committed ones included) and accepts
each masked position whose sigmoid output exceeds tau_acc = 0.96; LLaDA's quota is added on
top (accepted positions do not reduce it), and the window is left as soon as it is full.
End-of-text prediction (EoTP) is the `eos` stop with eos_trigger="predicted". Deviation: the
reference top-k can pick positions outside the window when the quota exceeds the window's
masks; here the quota is clipped to the open positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dllm_viz.model_facts import AdapterInfo
from dllm_viz.policies.base import NO_REASON, CommitRule, Decision, StepView, reason_code, top_k_mask
from dllm_viz.policies.controller_features import FILTER_WIDTH, filter_input
from dllm_viz.policies.controller_weights import (
    BUNDLED,
    ControllerWeights,
    check_trained_for,
    load_named,
    mlp_forward,
    sigmoid,
)
from dllm_viz.policies.extras import FILTER_PROB
from dllm_viz.policies.knobs import check_knobs, knob
from dllm_viz.policies.schedule import EvenBlockSteps, quota, steps_knob


@dataclass(frozen=True)
class Learn2PdPolicy(EvenBlockSteps, CommitRule):
    """Commit filter-accepted positions plus LLaDA's scheduled quota.

    Unlike `threshold`, acceptance is learned from the whole window's confidence profile.
    """

    name: ClassVar[str] = "learn2pd"
    filter_weights: str = knob(BUNDLED, "Learn2PD filter weights (.safetensors); 'bundled'")
    tau_acc: float = knob(0.96, "Learn2PD: filter probability needed to accept", within="(0, 1)")
    steps: int | None = steps_knob()

    def __post_init__(self) -> None:
        check_knobs(self)

    def validate_model(self, info: AdapterInfo) -> None:
        check_trained_for(load_named(self.filter_weights, "learn2pd"), info, self.filter_weights)

    def init_state(self, gen_length: int) -> ControllerWeights:
        """The filter's weights, read once per decode (an error names a missing file before any pass)."""
        return load_named(self.filter_weights, "learn2pd")

    def step(self, view: StepView, state: ControllerWeights) -> tuple[Decision, ControllerWeights]:
        weights = state
        start, end = view.window
        probs = sigmoid(mlp_forward(weights, filter_input(view.confidence, view.window)))
        prob = np.full(view.gen_length, np.nan)
        width = min(end - start, FILTER_WIDTH)
        prob[start : start + width] = probs[:width]
        open_ = view.open_positions
        accepted = open_ & (prob > self.tau_acc)  # NaN (outside the window) compares False
        n = quota(view, self.steps)
        extra = top_k_mask(view.confidence, open_ & ~accepted, int(open_.sum()) if n is None else n)
        reason = np.full(view.gen_length, NO_REASON, dtype=np.int8)
        reason[extra] = reason_code("quota")
        reason[accepted] = reason_code("filter")
        extras = {FILTER_PROB: np.where(view.is_masked, prob, np.nan).astype(np.float32)}
        return Decision(commit=accepted | extra, reason=reason, extras=extras), state
