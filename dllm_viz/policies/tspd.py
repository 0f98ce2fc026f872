"""TSPD: a learned fix-or-continue controller over denoising steps (docs/ALGORITHMS.md §6.2).

From "Efficient Diffusion LLMs via Temporal-Spatial Parallel Decoding and Confidence
Extrapolation" (arXiv 2605.30753); only the abstract is public, so the features, the 2-layer
64-unit LSTM and tau_fix = 0.5 are the [PROPOSED] choices of docs/ALGORITHMS.md, all configurable;
tau_fix is family-calibrated like CORA's (delta_p, m): the gate's scale is the controller's, which is
trained per model, so a model family may state its own point (dllm_viz/models/tiny.py).
Each position of the current window keeps its own LSTM state across the window's steps
(weights shared across positions); at each step the controller reads that position's features
and outputs the probability that its current candidate is final; open positions above tau_fix
are committed; if none is, the engine commits the most confident one (Fast-dLLM's fallback), so
progress is guaranteed. Positions outside the window are not run (NaN gate): at gen length 256
that is 32 LSTM rows a pass instead of up to 256.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dllm_viz.model_facts import AdapterInfo
from dllm_viz.policies.base import CommitRule, Decision, StepView
from dllm_viz.policies.controller_features import FeatureState, initial_feature_state, tspd_features
from dllm_viz.policies.controller_weights import (
    BUNDLED,
    ControllerWeights,
    check_trained_for,
    load_named,
    lstm_step,
    sigmoid,
)
from dllm_viz.policies.extras import TSPD_GATE
from dllm_viz.policies.knobs import check_knobs, knob, point


@dataclass(frozen=True)
class TspdState:
    """The controller's weights (read once per decode), the feature state, and the LSTM's (h, c)
    for the window's positions still open after the last pass ([layers, len(rows), hidden], rows
    relative to the window start; zero when the window opens)."""

    weights: ControllerWeights
    features: FeatureState
    window: tuple[int, int]
    rows: np.ndarray
    h: np.ndarray
    c: np.ndarray


@dataclass(frozen=True)
class TspdPolicy(CommitRule):
    """Commit open positions whose learned fix probability exceeds tau_fix.

    Unlike `threshold`, the decision uses each position's history (confidence trend, EMA,
    stability, place in the window) through a recurrent state, not one step's confidence.
    """

    name: ClassVar[str] = "tspd"
    controller_weights: str = knob(BUNDLED, "TSPD controller weights (.safetensors); 'bundled'")
    tau_fix: float | None = knob(None, "TSPD: gate probability needed to commit", within="(0, 1)", published=0.5)
    beta: float = knob(0.7, "TSPD: EMA factor of the confidence momentum feature", within="[0, 1)")

    def __post_init__(self) -> None:
        check_knobs(self)

    def validate_model(self, info: AdapterInfo) -> None:
        check_trained_for(load_named(self.controller_weights, "tspd"), info, self.controller_weights)

    def init_state(self, gen_length: int) -> TspdState:
        weights = load_named(self.controller_weights, "tspd")
        empty = np.zeros((int(weights.card["layers"]), 0, int(weights.card["hidden"])), dtype=np.float32)
        return TspdState(weights=weights, features=initial_feature_state(gen_length), window=(0, 0),
                         rows=np.zeros(0, np.int64), h=empty, c=empty)

    def step(self, view: StepView, state: TspdState) -> tuple[Decision, TspdState]:
        weights = state.weights
        x, features = tspd_features(view.confidence, view.entropy, view.candidate, view.window, view.step_in_window,
                                    int(weights.card["vocab_size"]), state.features, self.beta)
        # The controller runs on the masked positions of the current window (docs/ALGORITHMS.md §6.2:
        # "per masked position within the current block"); a position's LSTM state starts at zero
        # when its window opens and stops once it is committed. Training builds the same sequences
        # (train.controller.tspd_sequences). The LSTM is row-wise, so only those rows are computed.
        start, end = view.window
        rows = np.flatnonzero(view.open_positions[start:end])
        if view.window != state.window:
            h = np.zeros((state.h.shape[0], rows.size, state.h.shape[2]), dtype=np.float32)
            c = np.zeros_like(h)
        else:  # inside a window the open rows only shrink (nothing is re-masked): keep theirs
            keep = np.searchsorted(state.rows, rows)
            h, c = state.h[:, keep], state.c[:, keep]
        logit, h, c = lstm_step(weights, x[rows], h, c)
        gate = np.full(view.gen_length, np.nan, dtype=np.float32)
        gate[start + rows] = sigmoid(logit)
        commit = view.open_positions & (gate > point(self, "tau_fix"))
        extras = {TSPD_GATE: gate}
        return Decision.of(commit, "tspd", extras), TspdState(weights=weights, features=features,
                                                              window=view.window, rows=rows, h=h, c=c)
