"""Confidence Extrapolation (CE): a per-position Kalman filter that commits ahead of the base rule.

From "Efficient Diffusion LLMs via Temporal-Spatial Parallel Decoding and Confidence
Extrapolation" (arXiv 2605.30753). Only the abstract is public, so every constant is a config
field marked [PROPOSED] in docs/ALGORITHMS.md §6.2. Deliberate choices, documented here:
- the forecast variance at horizon h is the propagated covariance P_h[0, 0] (predict h times
  with process noise), which includes the term [1 h] P [1 h]^T of §6.2;
- "targeted stabilization": a position whose last innovation exceeded `veto_sigma` standard
  deviations (an oscillating trajectory) or whose velocity is negative gets no early commit for
  `veto_steps` steps; early commits also need an unchanged candidate since the last pass.
- noises default to q = 1e-4 and r = 2e-3, not §6.2's proposed q = 1e-3, r = 1e-2: with those
  the forecast sd at h = 3 settles near 0.23, so the lower bound of a steadily rising
  confidence never cleared 0.9 before the confidence itself did and CE never looked ahead
  (measured on synthetic trajectories: ramps of +0.05 and +0.1 per step, an oscillation
  0.4/0.95, a noisy ramp). With the defaults a +0.1 ramp commits one step before it reaches
  0.9, a +0.05 ramp when it reaches it, and the oscillation never; all four are fields.
The filter is vectorised over positions; it observes every masked position at every pass. Its
covariance does not depend on the data (a constant-noise Kalman filter's Riccati recursion), so
it is a function of how many times a position was observed and is tabulated once per setting:
the per-pass work is the level and velocity update plus table lookups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import ClassVar

import numpy as np

from dllm_viz.policies.base import Decision, Extrapolator, StepView, reason_code
from dllm_viz.policies.extras import (
    CE_EARLY,
    KALMAN_FORECAST,
    KALMAN_HORIZON,
    KALMAN_LEVEL,
    KALMAN_LOWER,
    KALMAN_UPPER,
    KALMAN_VELOCITY,
)
from dllm_viz.policies.knobs import check_knobs, knob

_CE_LOOKAHEAD = reason_code("ce_lookahead")


@dataclass(frozen=True)
class CovarianceTable:
    """The filter's covariance after n observations of a position, with what each pass reads.

    Row n holds the covariance (p00, p01, p11) after n observations: 0 never observed (zeros), 1
    started (diag(p0, p0)), each later observation one Kalman update. gain0, gain1 and
    sd_innovation at row n are those of the update the next observation applies;
    forecast_sd[n * (h_max + 1) + h] is the sd of the level h predictions ahead. Computed with the
    same double arithmetic, in the same order, as the per-position formulas, so the values are the
    ones an untabulated filter would hold.
    """

    p00: np.ndarray
    p01: np.ndarray
    p11: np.ndarray
    gain0: np.ndarray
    gain1: np.ndarray
    sd_innovation: np.ndarray
    forecast_sd: np.ndarray

    @property
    def rows(self) -> int:
        """Observation counts covered (0 .. rows - 1)."""
        return int(self.p00.shape[0])


@lru_cache(maxsize=16)
def covariance_table(q_level: float, q_velocity: float, r: float, p0: float, h_max: int,
                     rows: int) -> CovarianceTable:
    """Tabulate the covariance recursion for observation counts 0 .. rows - 1 (cached per setting)."""
    p00, p01, p11 = [0.0, p0], [0.0, 0.0], [0.0, p0]
    gain0, gain1, sd_innovation = [0.0], [0.0], [1.0]  # row 0 never updates (it starts instead)
    for n in range(1, rows):
        c00, c01, c11 = p00[n], p01[n], p11[n]
        pred00 = c00 + 2 * c01 + c11 + q_level
        pred01 = c01 + c11
        s = pred00 + r
        k0, k1 = pred00 / s, pred01 / s
        gain0.append(k0)
        gain1.append(k1)
        sd_innovation.append(math.sqrt(s))
        if n + 1 < rows:
            p00.append((1 - k0) * pred00)
            p01.append((1 - k0) * pred01)
            p11.append(c11 + q_velocity - k1 * pred01)
    forecast_sd = [
        math.sqrt(p00[n] + h * (2 * p01[n] + h * p11[n]) + h * q_level + q_velocity * (h - 1) * h * (2 * h - 1) / 6)
        for n in range(rows) for h in map(float, range(h_max + 1))
    ]
    return CovarianceTable(*(np.array(v[:rows]) for v in (p00, p01, p11, gain0, gain1, sd_innovation)),
                           forecast_sd=np.array(forecast_sd))


@dataclass(frozen=True)
class KalmanState:
    """Filter state per position: level, velocity, observation count, bookkeeping.

    The covariance (p00, p01, p11) of a position is `table`'s row `observations`; `passes`
    bounds every count (one observation per pass at most), so the table is extended in time.
    """

    level: np.ndarray
    velocity: np.ndarray
    observations: np.ndarray
    previous: np.ndarray
    veto_until: np.ndarray
    table: CovarianceTable
    passes: int = 0

    @property
    def seen(self) -> np.ndarray:
        """Positions observed at least once."""
        return self.observations > 0

    @property
    def p00(self) -> np.ndarray:
        """Variance of the level, per position."""
        return self.table.p00[self.observations]

    @property
    def p01(self) -> np.ndarray:
        """Covariance of level and velocity, per position."""
        return self.table.p01[self.observations]

    @property
    def p11(self) -> np.ndarray:
        """Variance of the velocity, per position."""
        return self.table.p11[self.observations]


@dataclass(frozen=True)
class KalmanExtrapolation(Extrapolator):
    """Commit a position now when its forecast confidence, lower-bounded, clears tau_ce.

    Rule: a constant-velocity Kalman filter tracks each position's confidence. With left
    context coverage kappa_i (share of the window before i already committed; 1 at the
    window start), the horizon is h* = floor(h_max * kappa_i) (0 if kappa_i < kappa_min);
    commit early when level + h* velocity - z * sd_h* >= tau_ce, velocity > 0 and the
    candidate did not change. A plug-in over any commit rule; it only adds commits.
    """

    name: ClassVar[str] = "kalman"
    tau_ce: float = knob(0.9, "CE: forecast lower bound needed to commit early", within="(0, 1]")
    z: float = knob(1.645, "CE: standard deviations below the forecast mean", within="> 0")
    h_max: int = knob(3, "CE: maximum look-ahead horizon in steps", within=">= 0")
    kappa_min: float = knob(0.5, "CE: minimum left-context coverage to look ahead", within="[0, 1]")
    q_level: float = knob(1e-4, "CE: process noise of the level", within="> 0")
    q_velocity: float = knob(1e-4, "CE: process noise of the velocity", within="> 0")
    r: float = knob(2e-3, "CE: observation noise", within="> 0")
    p0: float = knob(1e-2, "CE: initial variance of level and velocity", within="> 0")
    veto_sigma: float = knob(3.0, "CE: innovation (in sd) that vetoes early commits", within="> 0")
    # >= 0: a negative count put veto_until before the current step, disabling the veto silently.
    veto_steps: int = knob(1, "CE: steps a veto lasts", within=">= 0")

    def __post_init__(self) -> None:
        check_knobs(self)

    def init_state(self, gen_length: int) -> KalmanState:
        zeros = np.zeros(gen_length)
        return KalmanState(level=zeros, velocity=zeros, observations=np.zeros(gen_length, np.int64),
                           previous=np.full(gen_length, -1, np.int64),
                           veto_until=np.full(gen_length, -1, np.int64), table=self._table(gen_length + 2))

    def _table(self, rows: int) -> CovarianceTable:
        """The covariance table with at least `rows` rows (rounded up to a power of two, cached)."""
        size = 1 << max(rows - 1, 1).bit_length()
        return covariance_table(self.q_level, self.q_velocity, self.r, self.p0, self.h_max, size)

    def filter(self, state: KalmanState, observed: np.ndarray, y: np.ndarray) -> tuple[KalmanState, np.ndarray]:
        """One predict + update for the observed positions; returns the new state and innovation z-scores.

        Positions seen for the first time start at (y, 0) with variance p0; unobserved ones keep
        their state. Gains come from the covariance table by observation count; the update is
        computed on every position and kept where observed (np.where): elementwise calls over a
        few hundred floats cost about what they cost over a few, and this runs at every pass.
        """
        table = state.table if state.passes + 2 < state.table.rows else self._table(state.passes + 3)
        count, level, velocity = state.observations, state.level, state.velocity
        update = observed & (count > 0)
        first = observed ^ update
        innovation = y - (level + velocity)
        updated = KalmanState(
            level=np.where(update, level + (velocity + table.gain0[count] * innovation), np.where(first, y, level)),
            velocity=np.where(update, velocity + table.gain1[count] * innovation, velocity),
            observations=count + observed, previous=state.previous, veto_until=state.veto_until, table=table,
            passes=state.passes + 1)
        return updated, np.where(update, np.abs(innovation) / table.sd_innovation[count], 0.0)

    def forecast(self, state: KalmanState, horizon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the level `horizon` steps ahead (per position).

        The variance is P_h[0, 0] after h predictions with process noise, in closed form:
        p00 + 2h p01 + h^2 p11 + h q_level + q_velocity (h - 1) h (2h - 1) / 6 (tabulated by
        observation count and h; horizon must lie in 0 .. h_max).
        """
        sd = state.table.forecast_sd[state.observations * (self.h_max + 1) + horizon]
        return state.level + horizon * state.velocity, sd

    def horizon(self, view: StepView) -> np.ndarray:
        """h* per position from left-context coverage inside the window.

        A plain loop over the window's positions: for the usual windows (32 positions) a dozen
        numpy calls right after a forward pass cost several times the loop (measured in decodes);
        a 1024-position window takes about 0.3 ms, small beside the forward pass of a canvas that
        long. The arithmetic is the same IEEE double arithmetic as the vectorised form.
        """
        start, end = view.window
        horizon = np.zeros(view.gen_length, dtype=np.int64)
        levels, committed = [], 0
        for i, masked in enumerate(view.is_masked[start:end].tolist()):
            kappa = committed / i if i else 1.0
            levels.append(math.floor(self.h_max * kappa) if kappa >= self.kappa_min else 0)
            committed += not masked
        horizon[start:end] = levels
        return horizon

    def step(self, view: StepView, decision: Decision, state: KalmanState) -> tuple[Decision, KalmanState]:
        observed = view.is_masked & np.isfinite(view.confidence)
        state, zscore = self.filter(state, observed, view.confidence)  # reads only observed (finite) rows
        horizon = self.horizon(view)
        mean, sd = self.forecast(state, horizon)
        spread = self.z * sd
        lower, upper = mean - spread, mean + spread
        unstable = observed & ((zscore > self.veto_sigma) | (state.velocity < 0))
        veto_until = np.where(unstable, view.step + self.veto_steps, state.veto_until)
        unchanged = view.candidate == state.previous
        early = (view.open_positions & (horizon >= 1) & (lower >= self.tau_ce) & (state.velocity > 0)
                 & unchanged & (veto_until < view.step) & ~decision.commit)
        reason = decision.reason.copy()
        reason[early] = _CE_LOOKAHEAD
        # One float32 block for the six recorded bands (NaN where not shown): a few calls, not 12.
        bands = np.array((state.level, state.velocity, mean, lower, upper, horizon), dtype=np.float32)
        bands[:, ~(observed | view.open_positions)] = np.nan
        extras = dict(decision.extras)
        extras.update(zip((KALMAN_LEVEL, KALMAN_VELOCITY, KALMAN_FORECAST, KALMAN_LOWER, KALMAN_UPPER,
                           KALMAN_HORIZON), bands, strict=True))
        extras[CE_EARLY] = early.astype(np.float32)
        state = KalmanState(level=state.level, velocity=state.velocity, observations=state.observations,
                            previous=view.candidate.copy(), veto_until=veto_until, table=state.table,
                            passes=state.passes)
        # replace(): the base rule's edits and window request (block refinement) carry through
        return replace(decision, commit=decision.commit | early, reason=reason, extras=extras), state
