"""CORA-Diff, AdaBlock, Confidence Extrapolation, EOS stop and Dream's samplers on synthetic views."""

from __future__ import annotations

import numpy as np
import pytest
from test_policies_baseline import make_view, reasons
from toy import ToyAdapter

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.policies import AdaBlock, CoraPolicy, Decision, DreamPolicy, EosStop, KalmanExtrapolation, Pipeline
from dllm_viz.policies.base import StepView
from dllm_viz.policies.extras import CE_EARLY, KALMAN_LOWER, KALMAN_UPPER, PERSISTENCE, VOLATILITY_REGION
from dllm_viz.policies.kalman import KalmanState


def view_with(view: StepView, **changes) -> StepView:
    data = {k: getattr(view, k) for k in view.__dataclass_fields__}
    return StepView(**{**data, **changes})


# ---- CORA-Diff -----------------------------------------------------------------------------
def run_cora(policy: CoraPolicy, confidences: list[list[float]], candidates: list[list[int]]):
    """Feed synthetic passes to CORA, applying its commits to the mask between passes."""
    state = policy.init_state(len(confidences[0]))
    masked = np.ones(len(confidences[0]), dtype=bool)
    out = []
    for t, (conf, cand) in enumerate(zip(confidences, candidates, strict=True)):
        view = view_with(make_view(conf, masked=masked.tolist(), step_in_window=t, masked_at_start=len(conf)),
                         candidate=np.asarray(cand), step=t)
        decision, state = policy.step(view, state)
        masked &= ~decision.commit
        out.append(decision)
    return out, state


def test_cora_accepts_only_when_confident_and_persistent() -> None:
    policy = CoraPolicy(delta_p=0.9, m=1, steps=4)  # 4 positions, 4 steps: quota 1 per step
    conf = [0.93, 0.93, 0.5, 0.99]
    decisions, _ = run_cora(policy, [conf, conf], [[5, 6, 7, 8], [5, 9, 7, 8]])
    # step 0: nothing has persisted yet -> only the quota (the most confident: position 3)
    assert reasons(decisions[0]) == {"quota"} and np.flatnonzero(decisions[0].commit).tolist() == [3]
    # step 1: position 0 kept its candidate (m=1) with c >= 0.9 -> residual; position 1 flipped;
    # the acceptance used up the quota of 1, so nothing else is taken
    assert np.flatnonzero(decisions[1].commit).tolist() == [0]
    assert reasons(decisions[1]) == {"cora_residual"}
    assert decisions[1].extras[PERSISTENCE][0] == 1 and decisions[1].extras[PERSISTENCE][1] == 0


def test_cora_accepted_tokens_count_against_the_quota() -> None:
    policy = CoraPolicy(delta_p=0.9, m=0, steps=2)  # 4 positions, 2 steps: quota 2/step
    view = make_view([0.95, 0.97, 0.3, 0.4], step_in_window=0, masked_at_start=4)
    decision, _ = policy.step(view, policy.init_state(4))
    assert np.flatnonzero(decision.commit).tolist() == [0, 1]  # 2 accepted, quota 2 -> no extra
    assert reasons(decision) == {"cora_residual"}


def test_cora_persistence_resets_at_window_start() -> None:
    policy = CoraPolicy(delta_p=0.99, m=5)
    state = policy.init_state(4)
    cand = np.array([1, 2, 3, 4])
    for t in range(3):
        _, state = policy.step(view_with(make_view([0.1] * 4, step_in_window=t), candidate=cand), state)
    assert state.persistence.tolist() == [2, 2, 2, 2]
    _, state = policy.step(view_with(make_view([0.1] * 4, step_in_window=0), candidate=cand), state)
    assert state.persistence.tolist() == [1, 1, 1, 1]


def test_cora_with_huge_bar_equals_dense_decoding() -> None:
    prompt, config = [4, 5], DecodeConfig(gen_length=32)
    dense = decode(ToyAdapter(), prompt, Pipeline.from_names("fixed_steps", block_length=8), config)
    cora = decode(ToyAdapter(), prompt, Pipeline.from_names("cora", delta_p=1.0, m=100, block_length=8), config)
    assert np.array_equal(dense.final_tokens, cora.final_tokens) and dense.nfe == cora.nfe


def test_cora_saves_steps_on_confident_positions() -> None:
    prompt, config = [4, 5], DecodeConfig(gen_length=48)
    dense = decode(ToyAdapter(), prompt, Pipeline.from_names("fixed_steps", block_length=16), config)
    cora = decode(ToyAdapter(), prompt, Pipeline.from_names("cora", delta_p=0.6, m=1, block_length=16), config)
    assert cora.nfe < dense.nfe and PERSISTENCE in cora.extras


# ---- AdaBlock ------------------------------------------------------------------------------
def test_adablock_picks_the_most_confident_delimiter_not_the_nearest() -> None:
    conf = np.full(64, 0.2)
    is_delim = np.zeros(64, bool)
    is_delim[[5, 10, 14]] = True
    conf[[5, 10, 14]] = [0.35, 0.8, 0.4]
    view = view_with(make_view(conf.tolist()), is_delimiter_candidate=is_delim)
    end, extras = AdaBlock(init_block_length=8, delimiter_threshold=0.3).window_end(view, 0)
    assert end == 11  # the delimiter at 10 (most confident) is the window's last position
    assert np.isfinite(extras["delimiter_confidence"][[5, 10, 14]]).all()


def test_adablock_falls_back_to_b0_below_tau_d_and_outside_lookahead() -> None:
    conf = np.full(64, 0.2)
    is_delim = np.zeros(64, bool)
    is_delim[[3, 40]] = True
    conf[[3, 40]] = [0.25, 0.99]  # 40 is beyond the 25% look-ahead (16 positions)
    view = view_with(make_view(conf.tolist()), is_delimiter_candidate=is_delim)
    assert AdaBlock(init_block_length=8, delimiter_threshold=0.3).window_end(view, 0)[0] == 8
    assert AdaBlock(init_block_length=8, delimiter_threshold=0.2).window_end(view, 0)[0] == 4


def test_adablock_family_defaults() -> None:
    def resolved(block: AdaBlock, family: str) -> AdaBlock:  # tau_D is filled with the pipeline's other points
        return Pipeline(block=block).resolve(family, ("\n",)).block  # type: ignore[return-value]

    assert resolved(AdaBlock(), "llada").delimiter_threshold == 0.3
    assert resolved(AdaBlock(), "dream").delimiter_threshold == 0.5
    assert resolved(AdaBlock(delimiter_threshold=0.7), "dream").delimiter_threshold == 0.7
    assert resolved(AdaBlock(delimiters=(",",)), "tiny").delimiters == (",",)


def test_adablock_windows_follow_the_delimiters_in_a_decode() -> None:
    trace = decode(ToyAdapter(), [4, 5], Pipeline.from_names("threshold", "adablock", init_block_length=16,
                                                              delimiter_threshold=0.1),
                   DecodeConfig(gen_length=48))
    ends = sorted({int(e) for e in trace.window[:, 1]})
    # toy newlines sit at sequence positions 8, 17, 26 ... = generated positions 6, 15, 24 (prompt of 2)
    assert any((e + 1) % 9 == 8 for e in ends[:-1]), ends
    assert VOLATILITY_REGION in trace.extras and "delimiter_confidence" in trace.extras
    assert set(np.unique(trace.extras[VOLATILITY_REGION])) <= {0.0, 1.0, 2.0}


# ---- Confidence Extrapolation --------------------------------------------------------------
def test_kalman_tracks_a_linear_ramp_and_bounds_bracket_the_mean() -> None:
    ce = KalmanExtrapolation()
    state = ce.init_state(1)
    observed = np.ones(1, bool)
    for t in range(25):
        state, _ = ce.filter(state, observed, np.array([0.2 + 0.02 * t]))
    assert abs(state.level[0] - (0.2 + 0.02 * 24)) < 0.02
    assert abs(state.velocity[0] - 0.02) < 0.005
    mean, sd = ce.forecast(state, np.array([3]))
    assert abs(mean[0] - (state.level[0] + 3 * state.velocity[0])) < 1e-12 and sd[0] > 0


@pytest.mark.parametrize("h_max,kappa_min", [(3, 0.5), (5, 0.0), (2, 1 / 3), (0, 0.5), (4, 1.0)])
def test_kalman_horizon_follows_left_context_coverage(h_max: int, kappa_min: float) -> None:
    """h*_i = floor(h_max * kappa_i) when kappa_i >= kappa_min, else 0; kappa_i is the committed share
    of the window positions before i (1 at the window start); 0 outside the window (§6.2)."""
    ce, rng = KalmanExtrapolation(h_max=h_max, kappa_min=kappa_min), np.random.default_rng(h_max)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        start = int(rng.integers(0, n))
        end = int(rng.integers(start + 1, n + 1))
        masked = rng.random(n) < rng.random()
        horizon = ce.horizon(make_view([0.5] * n, masked=masked.tolist(), window=(start, end)))
        expected = np.zeros(n, dtype=np.int64)
        for i in range(start, end):
            kappa = 1.0 if i == start else float(np.sum(~masked[start:i])) / (i - start)
            expected[i] = int(np.floor(h_max * kappa)) if kappa >= kappa_min else 0
        assert horizon.dtype == np.int64
        np.testing.assert_array_equal(horizon, expected)


def _random_filter_state(ce: KalmanExtrapolation, n: int, passes: int, seed: int) -> KalmanState:
    """Run the filter over random confidences with random observation patterns."""
    rng = np.random.default_rng(seed)
    state = ce.init_state(n)
    for _ in range(passes):
        observed = rng.random(n) < 0.7
        state, _ = ce.filter(state, observed, np.where(observed, rng.random(n), np.nan))
    return state


def test_kalman_forecast_variance_equals_predicting_h_times() -> None:
    """The closed-form P_h[0, 0] is the covariance after h predict steps with process noise (§6.2)."""
    ce = KalmanExtrapolation(q_level=3e-4, q_velocity=7e-4, h_max=5)
    state = _random_filter_state(ce, 40, 12, seed=0)
    horizon = np.random.default_rng(1).integers(0, 6, 40)
    mean, sd = ce.forecast(state, horizon)
    for i, h in enumerate(horizon):
        p00, p01, p11 = state.p00[i], state.p01[i], state.p11[i]
        for _ in range(h):
            p00, p01, p11 = p00 + 2 * p01 + p11 + ce.q_level, p01 + p11, p11 + ce.q_velocity
        assert sd[i] ** 2 == pytest.approx(p00, rel=1e-12, abs=1e-15)
        assert mean[i] == pytest.approx(state.level[i] + h * state.velocity[i], rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_kalman_filter_equals_the_textbook_filter_per_position(seed: int) -> None:
    """Level, velocity, covariance and innovation z-scores equal a per-position constant-velocity
    Kalman filter written out with matrices (F = [[1, 1], [0, 1]], H = [1, 0]), over random
    observation patterns and more passes than the covariance table starts with."""
    ce = KalmanExtrapolation(q_level=2e-4, q_velocity=5e-4, r=3e-3, p0=2e-2)
    n, passes = 6, 70
    rng = np.random.default_rng(seed)
    state = ce.init_state(n)
    f, hm = np.array([[1.0, 1.0], [0.0, 1.0]]), np.array([1.0, 0.0])
    q = np.diag([ce.q_level, ce.q_velocity])
    x: list[np.ndarray | None] = [None] * n
    p: list[np.ndarray | None] = [None] * n
    for _ in range(passes):
        observed = rng.random(n) < 0.6
        y = np.where(observed, rng.random(n), np.nan)
        state, zscore = ce.filter(state, observed, y)
        for i in range(n):
            if not observed[i]:
                continue
            if x[i] is None:
                x[i], p[i] = np.array([y[i], 0.0]), np.diag([ce.p0, ce.p0])
                assert zscore[i] == 0.0
                continue
            xp, pp = f @ x[i], f @ p[i] @ f.T + q
            s = hm @ pp @ hm + ce.r
            gain = pp @ hm / s
            innovation = y[i] - hm @ xp
            x[i], p[i] = xp + gain * innovation, (np.eye(2) - np.outer(gain, hm)) @ pp
            assert zscore[i] == pytest.approx(abs(innovation) / np.sqrt(s), rel=1e-9)
        for i in range(n):
            if x[i] is None:
                assert not state.seen[i] and state.level[i] == 0.0 and state.p00[i] == 0.0
                continue
            np.testing.assert_allclose([state.level[i], state.velocity[i]], x[i], rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose([state.p00[i], state.p01[i], state.p11[i]],
                                       [p[i][0, 0], p[i][0, 1], p[i][1, 1]], rtol=1e-9, atol=1e-15)
    assert state.table.rows > passes  # the table grew past its first size (gen_length + 2 rows)


def ce_run(ce: KalmanExtrapolation, series: list[float]) -> list[float]:
    """Early-commit flags of a single position (at the window start) over a confidence series."""
    state, flags = ce.init_state(1), []
    for t, c in enumerate(series):
        view = view_with(make_view([c], step_in_window=t), step=t, candidate=np.array([7]))
        decision, state = ce.step(view, Decision.of(np.zeros(1, bool), "quota"), state)
        flags.append(float(decision.extras[CE_EARLY][0]))
        assert decision.extras[KALMAN_LOWER][0] <= decision.extras[KALMAN_UPPER][0]
    return flags


def test_ce_commits_early_on_a_rising_stable_trajectory_and_not_on_oscillation() -> None:
    ce = KalmanExtrapolation()  # tau_ce 0.9
    series = [min(0.2 + 0.1 * t, 0.99) for t in range(10)]
    rising = ce_run(ce, series)
    first = rising.index(1.0)
    assert series[first] < ce.tau_ce, (series, rising)  # the forecast clears 0.9 before the data does
    oscillating = ce_run(ce, [0.95 if t % 2 else 0.4 for t in range(12)])
    assert not any(oscillating), oscillating


def test_ce_needs_left_context_coverage() -> None:
    ce = KalmanExtrapolation(kappa_min=0.5, h_max=3)
    view = make_view([0.5] * 6, masked=[False, False, True, True, False, True])
    assert ce.horizon(view).tolist() == [3, 3, 3, 2, 1, 1]  # kappa 1, 1, 1, 2/3, 1/2, 3/5
    untouched = make_view([0.5] * 3, masked=[True, True, True])
    assert ce.horizon(untouched).tolist() == [3, 0, 0]  # no left context -> no look-ahead


def test_ce_only_adds_commits_to_the_base_rule() -> None:
    prompt, config = [4, 5], DecodeConfig(gen_length=48)
    base = decode(ToyAdapter(), prompt, Pipeline.from_names("fixed_steps", block_length=16), config)
    ce = decode(ToyAdapter(), prompt, Pipeline.from_names("fixed_steps", "fixed", "kalman", block_length=16,
                                                          tau_ce=0.5), config)
    assert ce.nfe <= base.nfe and "kalman_level" in ce.extras


# ---- EOS stop ------------------------------------------------------------------------------
def test_eos_stop_cuts_after_a_committed_confident_eos() -> None:
    view = view_with(make_view([0.9, 0.95, 0.5, 0.5]), is_eos_candidate=np.array([False, True, True, False]))
    committed = np.array([False, True, False, False])
    verdict = EosStop().check(view, np.zeros(4), committed)
    assert verdict.cut == 2 and not verdict.halt
    assert EosStop(eos_confidence=0.99).check(view, np.zeros(4), committed).cut is None
    assert EosStop(eos_mode="halt").check(view, np.zeros(4), committed).halt


def test_eos_stop_predicted_trigger_uses_the_most_confident_masked_eos() -> None:
    view = view_with(make_view([0.2, 0.85, 0.95, 0.1]), is_eos_candidate=np.array([False, True, True, False]))
    verdict = EosStop(eos_trigger="predicted").check(view, np.zeros(4), np.zeros(4, bool))
    assert verdict.cut == 3
    assert EosStop().check(view, np.zeros(4), np.zeros(4, bool)).cut is None


def test_eos_stop_shortens_forward_passes_in_a_decode() -> None:
    pipeline = Pipeline.from_names("threshold", "fixed", None, "eos", threshold=0.5, block_length=16,
                                   eos_trigger="predicted", eos_confidence=0.3)
    trace = decode(ToyAdapter(), [4, 5], pipeline, DecodeConfig(gen_length=64))
    assert trace.query_len.min() < trace.query_len.max() == 2 + 64
    assert (trace.commit_reason == 10).any() and trace.is_complete


# ---- Dream samplers ------------------------------------------------------------------------
def test_dream_floor_schedule_quirk_at_steps_equal_length() -> None:
    policy = DreamPolicy(alg="maskgit_plus", steps=8)
    counts, masked = [], 8
    for t in range(8):
        n = masked if policy.fraction(t, 8) >= 1 else int(np.floor(masked * policy.fraction(t, 8)))
        counts.append(n)
        masked -= n
    assert counts == [0, 1, 1, 1, 1, 1, 1, 2]  # docs/ALGORITHMS.md §4.5: [0, 1, ..., 1, 2]


@pytest.mark.parametrize(("alg", "expected"), [("maskgit_plus", [3]), ("topk_margin", [0]), ("entropy", [1])])
def test_dream_scores(alg: str, expected: list[int]) -> None:
    view = view_with(make_view([0.1, 0.2, 0.3, 0.9], step_in_window=3), margin=np.array([0.9, 0.1, 0.2, 0.3]),
                     entropy=np.array([2.0, 0.1, 1.0, 1.5]))
    decision, _ = DreamPolicy(alg=alg, steps=4).step(view, None)  # last step of 4: all open positions
    assert decision.commit.sum() == 4
    mid = view_with(view, step_in_window=2, is_masked=np.array([True, True, True, True]))
    decision, _ = DreamPolicy(alg=alg, steps=8).step(mid, None)
    assert np.flatnonzero(decision.commit).tolist() == expected or decision.commit.sum() == 0


def test_dream_origin_selects_by_random_draw() -> None:
    view = view_with(make_view([0.5] * 4, step_in_window=0), rand=np.array([0.0, 0.9, 0.05, 0.99]))
    decision, _ = DreamPolicy(alg="origin", steps=10).step(view, None)
    frac = DreamPolicy(alg="origin", steps=10).fraction(0, 10)
    assert np.flatnonzero(decision.commit).tolist() == [i for i, r in enumerate(view.rand) if r < frac]
