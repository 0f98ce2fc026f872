"""Canonical names of the per-position policy internals recorded in Trace.extras.

One naming scheme for every policy (as TransformerLens names its hook points), so figures and
the app can find a quantity without knowing which policy produced it. Every extra is a
[steps x positions] float32 array, NaN where the quantity is undefined at that step.
"""

from __future__ import annotations

# CORA-Diff (policies/cora.py)
PERSISTENCE = "persistence"  # passes in a row with an unchanged top-1 candidate (m_i)
# AdaBlock-dLLM (policies/adablock.py), recorded on each window's first step
DELIMITER_CONFIDENCE = "delimiter_confidence"  # confidence where the candidate is a delimiter, in the look-ahead
VOLATILITY_REGION = "volatility_region"  # 0 plateau (committed), 1 volatility band, 2 low floor; every step
# Confidence Extrapolation (policies/kalman.py)
KALMAN_LEVEL = "kalman_level"  # filtered confidence level
KALMAN_VELOCITY = "kalman_velocity"  # filtered confidence change per step
KALMAN_FORECAST = "kalman_forecast"  # forecast mean at the horizon
KALMAN_LOWER = "kalman_lower"  # forecast lower bound (mean - z * sd)
KALMAN_UPPER = "kalman_upper"  # forecast upper bound (mean + z * sd)
KALMAN_HORIZON = "kalman_horizon"  # look-ahead horizon h* in steps
CE_EARLY = "ce_early"  # 1 where CE committed a position the base rule did not
# Learned controllers (policies/tspd.py, policies/learn2pd.py)
TSPD_GATE = "tspd_gate"  # sigmoid fix probability of the LSTM controller
FILTER_PROB = "filter_prob"  # Learn2PD filter acceptance probability
