"""Replay a commit rule over a recorded dense trace: which tokens it would accept, and when.

Used by the Tune page's by-eye mode (no Streamlit, no model): it feeds the dense
trace's per-step statistics (candidate, confidence, margin, entropy, window) to the rule and
CE objects as `StepView`s and builds the Trace the rule would have produced, so every figure
works on it unchanged.

The approximation, stated once: the model's statistics are read along the dense run. At each
dense step the replayed canvas holds everything the dense run had committed plus what the rule
accepted earlier (so the engine's forced progress is the dense run's own commit). A block ends
as soon as its last position is committed and the dense steps left in it are skipped, so the
replayed trace's NFE is the estimate of the rule's NFE. A real run sees at least that much
context at each step; the Verify button measures the difference.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from dllm_viz.commit_step import commit_step
from dllm_viz.policies import Pipeline, StepView
from dllm_viz.policies.base import CommitRule, is_any_of
from dllm_viz.step_schema import StepRecord
from dllm_viz.trace import Trace, TraceBuilder
from dllm_viz.whole_numbers import is_whole


def _view(dense: Trace, s: int, k: int, canvas: np.ndarray, in_block: int, stop_ids: np.ndarray,
          rng: np.random.Generator, mask_id: int) -> StepView:
    """The StepView of dense step `s` as the replayed rule's `k`-th step sees it."""
    start, end = (int(v) for v in dense.window[s])
    candidate = dense.candidate[s].astype(np.int64)
    return StepView(
        step=k, step_in_window=in_block, window=(start, end), tokens=canvas.copy(), is_masked=canvas == mask_id,
        candidate=candidate, confidence=dense.confidence[s].astype(np.float64),
        margin=dense.margin[s].astype(np.float64), entropy=dense.entropy[s].astype(np.float64),
        is_eos_candidate=is_any_of(candidate, stop_ids), rand=rng.random(dense.gen_length),
        window_masked_at_start=end - start, canvas_end=dense.gen_length,
    )


def replayable(rule_class: type) -> bool:
    """Whether a rule can be replayed over a dense trace: it takes the engine's candidates (it does
    not override `sampler`, the hook of rules that draw their own, such as block refinement)."""
    return getattr(rule_class, "sampler", CommitRule.sampler) is CommitRule.sampler


def not_replayable_reason(rule_class: type) -> str | None:
    """Why a dense trace cannot replay rule `rule_class` (None when it can: `replayable`).

    One sentence for every place that must say it (the replay's refusal, Tune's rule picker and a
    link asking Tune for such a rule), so a researcher on a block-diffusion model learns why its
    own rule is not offered there and where to run it instead.
    """
    if replayable(rule_class):
        return None
    name = getattr(rule_class, "name", rule_class.__name__)
    return (f"{name} draws its own candidates over each block and edits committed tokens, which a dense "
            "trace's statistics cannot stand in for; decode it for real (the Decode page, or Compare against "
            "other configurations)")


def replay(dense: Trace, pipeline: Pipeline, *, seed: int = 0,
           answer_text: Callable[[Sequence[int]], str] | None = None) -> Trace:
    """The trace `pipeline`'s commit rule (and CE) would produce over `dense`'s statistics.

    Args:
        dense: a recorded trace, ideally LLaDA dense decoding (one token per step).
        pipeline: its rule and extrapolator are replayed; its block sizing is replaced by the
            dense trace's recorded windows, and cache / stop do not apply.
        seed: seed of the uniform draws random remasking reads.
        answer_text: turns final token ids into text (the adapter's `answer_text`); default
            joins the recorded token texts up to the first stop token.

    Returns:
        A Trace on the rule's own clock: `nfe` is the estimated NFE, `meta.dense_steps`
        maps each of its steps to the dense step it read.

    Raises:
        ValueError: the rule samples its own candidates (block refinement), a seed that is not
            an integer >= 0, a rule that cannot run over the recorded blocks (Pipeline.validate), or a
            learned controller trained for another model than the recorded one.
    """
    # numpy's own refusal ("expected non-negative integer") names neither the argument nor the fix.
    if not is_whole(seed) or seed < 0:
        raise ValueError(f"`seed` must be an integer >= 0, got {seed!r}")
    if (reason := not_replayable_reason(type(pipeline.rule))) is not None:
        raise ValueError(reason)
    if dense.meta.model is not None:  # the family's calibrated points, as a decode with the model gets
        pipeline = pipeline.resolve(dense.meta.model.family, dense.meta.model.delimiters)
        pipeline.validate_model(dense.meta.model)  # a learned controller must be the recorded model's
    recorded_block = (dense.meta.pipeline or {}).get("block")
    if isinstance(recorded_block, Mapping) and "name" in recorded_block:
        # The replay runs over the recorded windows, so the rule must fit them as a decode's must fit
        # its own (fixed_steps' steps split over the blocks): else the estimate is of a decode the
        # engine would refuse.
        try:
            over_recorded = Pipeline.from_dict({**pipeline.to_dict(), "block": recorded_block})
        except ValueError:  # a sizer this version cannot rebuild (an older file): the windows are what replay reads
            over_recorded = None
        if over_recorded is not None:
            over_recorded.validate(dense.gen_length)
    mask_id = dense.mask_token_id
    stop_ids = np.array(dense.stop_token_ids)
    rule, extra = pipeline.rule, pipeline.extrapolate
    rule_state = rule.init_state(dense.gen_length)
    extra_state = None if extra is None else extra.init_state(dense.gen_length)
    rng = np.random.default_rng(seed)
    canvas = dense.tokens[0].astype(np.int64).copy()
    builder = TraceBuilder(dense.gen_length, canvas, dense.prompt_ids)
    dense_steps: list[int] = []
    block_start: dict[int, int] = {}
    for s in range(dense.num_steps):
        start, end = (int(v) for v in dense.window[s])
        block = block_start.setdefault(int(dense.block_index[s]), s)
        if not (canvas[start:end] == mask_id).any():
            continue  # the rule already filled this block: the dense steps left in it are not needed
        view = _view(dense, s, len(dense_steps), canvas, s - block, stop_ids, rng, mask_id)
        started = time.perf_counter()
        decision, rule_state = rule.step(view, rule_state)
        if extra is not None:
            decision, extra_state = extra.step(view, decision, extra_state)
        policy_seconds = time.perf_counter() - started
        # The dense run's own commit at this step is carried: the replayed canvas never lags it.
        settled = commit_step(view, decision, carried=(dense.committed[s], dense.reason[s]))
        canvas = settled.tokens
        builder.add(StepRecord(
            **{**dense.step_values(s), "tokens": canvas, "committed": settled.committed,
               "reason": settled.reason, "policy_seconds": policy_seconds},
            step=len(dense_steps), step_in_window=s - block, extras=dict(decision.extras),
            stop_reason=None if (canvas == mask_id).any() else "complete"))
        dense_steps.append(s)
    label = f"replay: {rule.name}" + (f"+{extra.name}" if extra else "")
    final = canvas.tolist()
    meta = dense.meta.replace(
        label=label, pipeline={**pipeline.to_dict(), "block": dense.meta.pipeline.get("block")},
        replay_of=dense.meta.label, dense_steps=dense_steps,
        answer_text=answer_text(final) if answer_text else _joined(dense, final, stop_ids))
    return builder.build(meta)


def replay_signature(virtual: Trace) -> bytes:
    """A digest of what a replay decided: the dense step each replayed step read and, per step,
    the canvas, the reason of every commit and which tokens were edits.

    Two settings that replay alike (a small slider move usually does) give the same digest, so a
    page can keep the figures drawn from the first and skip redrawing them for the second.
    """
    steps = np.asarray(virtual.meta.dense_steps or [], dtype=np.int64)
    parts = [steps, virtual.tokens, virtual.committed, virtual.reason]
    if virtual.edited is not None:
        parts.append(virtual.edited)
    return hashlib.blake2b(b"".join(np.ascontiguousarray(p).tobytes() for p in parts), digest_size=16).digest()


def _joined(trace: Trace, ids: list[int], stop_ids: np.ndarray) -> str:
    """The recorded token texts up to the first stop token."""
    out = []
    for token in ids:
        if token in stop_ids:
            break
        out.append(trace.token_text(token))
    return "".join(out)


def agreement(trace: Trace, reference: Trace) -> int:
    """Positions whose final token equals the reference's (same gen_length)."""
    return int((trace.final_tokens == reference.final_tokens).sum())
