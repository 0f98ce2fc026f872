"""Synthetic, internally consistent Traces built with numpy alone (no model, no torch).

`make_trace(S, L)` decodes left to right in fixed blocks: each block gets a contiguous share of
the steps, every position commits exactly once inside its block's steps (or never, when there
are fewer steps than blocks), candidates wander before settling on the final token, and every
canonical extra is filled where it would be defined (NaN elsewhere).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dllm_viz.config import DecodeConfig
from dllm_viz.policies.base import COMMIT_REASONS
from dllm_viz.policies.extras import (
    CE_EARLY,
    KALMAN_FORECAST,
    KALMAN_HORIZON,
    KALMAN_LEVEL,
    KALMAN_LOWER,
    KALMAN_UPPER,
    KALMAN_VELOCITY,
    PERSISTENCE,
    TSPD_GATE,
    VOLATILITY_REGION,
)
from dllm_viz.trace import Trace

MASK, EOS = 0, 1
VOCAB = 40
TEXTS = {MASK: "[MASK]", EOS: "<eos>", 2: "\n", 3: "<b>&", 4: " ", 5: "x"}


def token_text() -> dict[str, str]:
    """Display text of every vocabulary id (a few awkward ones: newline, HTML, blank)."""
    return {str(i): TEXTS.get(i, f"w{i}") for i in range(VOCAB)}


def _commit_steps(num_steps: int, gen_length: int, block_length: int, rng: np.random.Generator) -> tuple[
        np.ndarray, np.ndarray]:
    """Commit step of each position (-1 = never) and the window of each step."""
    starts = np.arange(0, gen_length, block_length)
    bounds = np.linspace(0, num_steps, len(starts) + 1).astype(int) if num_steps >= len(starts) else None
    commit = np.full(gen_length, -1, dtype=np.int64)
    window = np.zeros((num_steps, 2), dtype=np.int32)
    for b, start in enumerate(starts):
        end = min(start + block_length, gen_length)
        lo, hi = (bounds[b], bounds[b + 1]) if bounds is not None else (b, b + 1)
        if lo >= num_steps:
            continue
        window[lo:hi] = (start, end)
        commit[start:end] = rng.integers(lo, hi, size=end - start)
        commit[start + rng.integers(0, end - start)] = hi - 1  # the block ends on its last step
    return commit, window


def make_trace(num_steps: int, gen_length: int, *, block_length: int = 8, seed: int = 0,
               with_extras: bool = True, label: str = "synthetic") -> Trace:
    """A random but consistent Trace of S = num_steps steps over L = gen_length positions."""
    rng = np.random.default_rng(seed)
    commit, window = _commit_steps(num_steps, gen_length, max(1, block_length), rng)
    final = rng.integers(2, VOCAB, size=gen_length)
    final[gen_length - gen_length // 4:] = EOS
    steps = np.arange(num_steps)[:, None]
    committed = steps == commit[None, :]
    done_after = (commit[None, :] >= 0) & (steps >= commit[None, :])
    tokens = np.vstack([np.full((1, gen_length), MASK), np.where(done_after, final, MASK)]).astype(np.int32)
    settle = np.where(commit >= 0, rng.integers(0, np.maximum(commit, 0) + 1), num_steps)
    noise = rng.integers(2, VOCAB, size=(num_steps, gen_length))
    candidate = np.where(steps >= settle[None, :], final, noise).astype(np.int32)
    confidence = np.clip(rng.random((num_steps, gen_length)) * 0.5 + 0.5 * (steps >= settle), 0, 1)
    reason = np.where(committed, rng.integers(0, len(COMMIT_REASONS), size=committed.shape), -1)
    extras = _extras(tokens, candidate, confidence, committed, rng) if with_extras else {}
    return Trace(
        tokens=tokens, candidate=candidate, confidence=confidence.astype(np.float32),
        entropy=(rng.random((num_steps, gen_length)) * 3).astype(np.float32),
        margin=(confidence * rng.random((num_steps, gen_length))).astype(np.float32),
        committed=committed, reason=reason, window=window,
        block_index=np.searchsorted(np.unique(window[:, 0]), window[:, 0]) if num_steps else np.zeros(0),
        pass_kind=np.zeros(num_steps), query_len=np.full(num_steps, 4 + gen_length),
        step_seconds=np.full(num_steps, 0.01), forward_seconds=np.full(num_steps, 0.008),
        prompt_ids=np.array([5, 6, 7, 8]), extras=extras, meta=meta(label),
    )


def meta(label: str) -> dict[str, Any]:
    """Metadata as the engine records it (model ids, reason names, token texts)."""
    model = {"family": "toy", "name_or_path": "trace_factory", "mask_token_id": MASK, "eos_token_id": EOS,
             "eot_token_id": None, "vocab_size": VOCAB, "device": "cpu", "dtype": "float32"}
    return {"label": label, "model": model,
            "reason_names": list(COMMIT_REASONS), "token_text": token_text(),
            "pipeline": {"rule": {"name": "cora", "delta_p": 0.97, "m": 2},
                         "extrapolate": {"name": "kalman", "tau_ce": 0.9}}}


def _extras(tokens: np.ndarray, candidate: np.ndarray, confidence: np.ndarray, committed: np.ndarray,
            rng: np.random.Generator) -> dict[str, np.ndarray]:
    masked = tokens[:-1] == MASK
    nan = np.float32(np.nan)
    region = np.where(~masked, 0.0, np.where((candidate == EOS) | (confidence < 0.1), 2.0, 1.0))
    level = np.where(masked, confidence * 0.9, nan)
    persistence = np.zeros_like(confidence)
    for s in range(1, confidence.shape[0]):
        persistence[s] = np.where(candidate[s] == candidate[s - 1], persistence[s - 1] + 1, 0)
    return {
        VOLATILITY_REGION: region, PERSISTENCE: np.where(masked, persistence, nan),
        KALMAN_LEVEL: level, KALMAN_VELOCITY: np.where(masked, 0.01, nan), KALMAN_FORECAST: level + 0.02,
        KALMAN_LOWER: level - 0.1, KALMAN_UPPER: level + 0.1, KALMAN_HORIZON: np.where(masked, 1.0, nan),
        CE_EARLY: np.where(masked, committed & (rng.random(committed.shape) < 0.3), nan),
        TSPD_GATE: np.where(masked, rng.random(confidence.shape), nan),
    }


def hand_trace(candidate: list[list[int]], commit_step: list[int], *,
               confidence: list[list[float]] | None = None, window: list[tuple[int, int]] | None = None,
               reason: str = "threshold", extras: dict[str, np.ndarray] | None = None) -> Trace:
    """A Trace from explicit [S][L] candidates and per-position commit steps (-1 = never).

    Each committed position takes its candidate at its commit step as its final token.
    """
    cand = np.asarray(candidate, dtype=np.int32).reshape(len(candidate), len(commit_step))
    commit = np.asarray(commit_step)
    num_steps, gen_length = cand.shape
    steps = np.arange(num_steps)[:, None]
    committed = steps == commit[None, :]
    final = np.array([cand[c, p] if c >= 0 else MASK for p, c in enumerate(commit)])
    after = (commit[None, :] >= 0) & (steps >= commit[None, :])
    tokens = np.vstack([np.full((1, gen_length), MASK), np.where(after, final, MASK)])
    conf = np.full(cand.shape, 0.5) if confidence is None else np.asarray(confidence, dtype=np.float64)
    code = COMMIT_REASONS.index(reason)
    return Trace(
        tokens=tokens, candidate=cand, confidence=conf, entropy=1.0 - conf, margin=conf / 2,
        committed=committed, reason=np.where(committed, code, -1),
        window=np.asarray(window or [(0, gen_length)] * num_steps).reshape(num_steps, 2),
        block_index=np.zeros(num_steps), pass_kind=np.zeros(num_steps),
        query_len=np.full(num_steps, gen_length),
        step_seconds=np.full(num_steps, 0.01), forward_seconds=np.full(num_steps, 0.01),
        prompt_ids=np.zeros(0), extras=dict(extras or {}), meta=meta("hand"),
    )


Step = tuple[dict[int, int], dict[int, int]]  # (commits: position -> token, edits: position -> new token)


def step_trace(steps: list[Step], gen_length: int, *, window: list[tuple[int, int]] | None = None,
               draft: int = 5, label: str = "edits") -> Trace:
    """A Trace from explicit per-step commits and edits (block refinement), with no randomness.

    Each step commits the given masked positions to the given tokens (reason `threshold`, confidence
    0.9) and replaces the given committed positions' tokens (reason `edit`, confidence 0.8); an edit
    to MASK re-opens the position. Masked positions show `draft` as their candidate (confidence
    0.4), committed ones their own token (confidence 1.0).
    """
    canvas = np.full(gen_length, MASK, dtype=np.int32)
    rows, candidate, confidence, committed, edited, reason = [canvas.copy()], [], [], [], [], []
    for commits, edits in steps:
        before = canvas.copy()
        cand, conf = np.where(before == MASK, draft, before), np.where(before == MASK, 0.4, 1.0)
        com, edi, why = np.zeros(gen_length, bool), np.zeros(gen_length, bool), np.full(gen_length, -1)
        for p, token in commits.items():
            assert before[p] == MASK, f"position {p} is not masked"
            canvas[p], cand[p], conf[p], com[p], why[p] = token, token, 0.9, True, COMMIT_REASONS.index("threshold")
        for p, token in edits.items():
            assert before[p] != MASK and before[p] != token, f"position {p} cannot be edited to {token}"
            canvas[p], cand[p], conf[p], edi[p], why[p] = token, token, 0.8, True, COMMIT_REASONS.index("edit")
        rows.append(canvas.copy())
        for out, value in ((candidate, cand), (confidence, conf), (committed, com), (edited, edi), (reason, why)):
            out.append(value)
    num_steps = len(steps)
    conf = np.asarray(confidence, dtype=np.float32).reshape(num_steps, gen_length)
    return Trace(
        tokens=np.asarray(rows), candidate=np.asarray(candidate).reshape(num_steps, gen_length), confidence=conf,
        entropy=1.0 - conf, margin=conf / 2, committed=np.asarray(committed, bool).reshape(num_steps, gen_length),
        reason=np.asarray(reason).reshape(num_steps, gen_length),
        edited=np.asarray(edited, bool).reshape(num_steps, gen_length),
        window=np.asarray(window or [(0, gen_length)] * num_steps).reshape(num_steps, 2),
        block_index=np.zeros(num_steps), pass_kind=np.zeros(num_steps), query_len=np.full(num_steps, gen_length),
        step_seconds=np.full(num_steps, 0.01), forward_seconds=np.full(num_steps, 0.008),
        policy_seconds=np.full(num_steps, 0.001), prompt_ids=np.zeros(0),
        meta={**meta(label), "decode_config": DecodeConfig(gen_length=gen_length).to_dict(),  # what a saved
              "created_utc": "2026-12-01T00:00:00+00:00"},  # file must hold (trace_validation.check_meta)
    )


# Four positions in one window. Step 0 commits 0 and 1; step 1 commits 2 and edits 0 (10 -> 20); step 2
# commits 3, filling the window; steps 3 and 4 are post-steps: 3 edits 1 (11 -> 21) and 0 (20 -> 30),
# 4 edits nothing. Ids 10.. display as "w10"...
EDIT_STEPS: list[Step] = [({0: 10, 1: 11}, {}), ({2: 12}, {0: 20}), ({3: 13}, {}), ({}, {0: 30, 1: 21}), ({}, {})]


def edit_trace() -> Trace:
    """The EDIT_STEPS trace: three edits at two positions, two post-steps."""
    return step_trace(EDIT_STEPS, 4)


def edited_trace(num_steps: int, gen_length: int, *, edit_rate: float = 0.2, block_length: int = 8,
                 seed: int = 0) -> Trace:
    """`make_trace` plus token edits (block refinement): after its commit, every position is edited at
    each later step of its block with probability `edit_rate`, each edit to a different token.

    Built with numpy alone, so a 2000-step, 1024-position trace with ~100k edits takes about a
    second (the large-trace tests). Passes the file checks (`load_trace`).
    """
    base = make_trace(num_steps, gen_length, block_length=block_length, seed=seed)
    rng = np.random.default_rng(seed + 1)
    commit, window = base.commit_step, base.window
    steps = np.arange(num_steps)[:, None]
    # A position's block ends at the last step whose window holds it (its window opens at or before its commit).
    inside = (np.arange(gen_length)[None, :] >= window[:, :1]) & (np.arange(gen_length)[None, :] < window[:, 1:])
    block_end = np.where(inside.any(axis=0), num_steps - 1 - np.argmax(inside[::-1], axis=0), -1)
    edited = ((commit[None, :] >= 0) & (steps > commit[None, :]) & (steps <= block_end[None, :])
              & (rng.random((num_steps, gen_length)) < edit_rate))
    span = VOCAB - 2  # tokens 2..VOCAB-1; each edit moves the token by 1..span-1 places, so it changes
    shift = np.cumsum(np.where(edited, rng.integers(1, span, size=edited.shape), 0), axis=0)
    tokens = base.tokens.copy()
    tokens[1:] = np.where(shift > 0, 2 + (tokens[1:] - 2 + shift) % span, tokens[1:])  # EOS (1) too
    edit = COMMIT_REASONS.index("edit")
    reason = np.where(base.reason == edit, 0, base.reason)  # 'edit' is the reason of edits only
    reason[edited] = edit
    arrays = {name: getattr(base, name) for name in (
        "candidate", "confidence", "entropy", "margin", "committed", "window", "block_index", "pass_kind",
        "query_len", "step_seconds", "forward_seconds")}
    return Trace(**arrays, tokens=tokens, reason=reason, edited=edited, prompt_ids=base.prompt_ids,
                 extras=dict(base.extras),
                 meta={**meta("edited"), "decode_config": DecodeConfig(gen_length=gen_length).to_dict(),
                       "created_utc": "2026-12-01T00:00:00+00:00"})
