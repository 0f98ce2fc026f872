"""Per-position features of the learned controllers, computed the same way in training and decoding.

TSPD (docs/ALGORITHMS.md §6.2, [PROPOSED]): for each position at each step,
[confidence, entropy / log V, confidence - previous EMA, EMA, relative position in the window,
candidate unchanged since the last pass, steps since the window opened / window length], with
EMA e_t = beta * e_(t-1) + (1 - beta) * c_t started at the first observed confidence.
Learn2PD (§3.2): the vector of confidences of the window's positions, padded or cut to 32.
Pure numpy: the trainer feeds recorded traces through exactly these functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TSPD_FEATURES = 7
FILTER_WIDTH = 32


@dataclass(frozen=True)
class FeatureState:
    """What the TSPD features carry from one pass to the next."""

    ema: np.ndarray
    previous: np.ndarray
    seen: np.ndarray


def initial_feature_state(gen_length: int) -> FeatureState:
    """Before the first pass: no EMA, no previous candidate."""
    return FeatureState(ema=np.zeros(gen_length), previous=np.full(gen_length, -1, np.int64),
                        seen=np.zeros(gen_length, bool))


def tspd_features(confidence: np.ndarray, entropy: np.ndarray, candidate: np.ndarray, window: tuple[int, int],
                  step_in_window: int, vocab_size: int, state: FeatureState, beta: float
                  ) -> tuple[np.ndarray, FeatureState]:
    """[window positions, TSPD_FEATURES] features of one pass, and the state for the next pass.

    Only the window's rows are returned (the controller runs there, docs/ALGORITHMS.md §6.2); the
    EMA and the previous candidate are carried for every position, since a position's EMA starts
    at its first observed confidence, before its window opens.
    """
    finite = np.isfinite(confidence)
    conf = np.where(finite, confidence, 0.0)  # NaN (not computed this pass) -> 0, as nan_to_num
    previous_ema = np.where(~state.seen & finite, conf, state.ema)
    ema = beta * previous_ema + (1.0 - beta) * conf
    start, end = window
    length = max(end - start, 1)
    rows = slice(start, end)
    entropy_rows = entropy[rows]
    features = np.array([  # float64 values rounded once to float32, as computing then casting does
        conf[rows],
        np.where(np.isnan(entropy_rows), 0.0, entropy_rows) / np.log(max(vocab_size, 2)),
        conf[rows] - previous_ema[rows],
        ema[rows],
        np.arange(end - start) / length,
        candidate[rows] == state.previous[rows],
        np.full(end - start, step_in_window / length),
    ], dtype=np.float32).T
    next_state = FeatureState(ema=ema, previous=candidate.copy(), seen=state.seen | finite)
    return features, next_state


def filter_input(confidence: np.ndarray, window: tuple[int, int]) -> np.ndarray:
    """Learn2PD's input: the window's confidences (committed positions included), padded to 32."""
    start, end = window
    values = np.nan_to_num(confidence[start:end], nan=0.0)[:FILTER_WIDTH]
    out = np.zeros(FILTER_WIDTH, dtype=np.float32)
    out[: values.shape[0]] = values
    return out
