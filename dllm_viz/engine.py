"""The one decoding loop: every policy, model family and (later) cache mode runs through it.

`iter_decode` yields one StepRecord per forward pass so the app can show progress and step
through a decode; `decode` drains it into a Trace. The loop owns windows, the model call,
candidate statistics, the shared invariants (commits only masked positions of the window, at
least one commit per step, a hard step cap, leaving a window as soon as it is full), the
end-of-text cut and recording. Policies only choose commits; the adapter owns model quirks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import torch

from dllm_viz.cache_modes import PARTIAL_PASS, PASS_KINDS, CacheMode, PassKind
from dllm_viz.commit_step import commit_step
from dllm_viz.config import DecodeConfig
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies.base import COMMIT_REASONS, StepView, is_any_of, reason_code
from dllm_viz.policies.pipeline import Pipeline
from dllm_viz.sampling import summarize
from dllm_viz.step_schema import StepRecord
from dllm_viz.trace import Trace, TraceBuilder
from dllm_viz.trace_meta import TraceMeta

_SOFTMAX_DTYPES = {"float64": torch.float64, "float32": torch.float32}


def _check_inputs(adapter: ModelAdapter, prompt_ids: Sequence[int], pipeline: Pipeline,
                  config: DecodeConfig) -> None:
    if len(prompt_ids) == 0:
        raise ValueError("the prompt is empty; give at least one prompt token")
    if pipeline.cache != "none" and not adapter.supports_cache:
        raise ValueError(f"cache={pipeline.cache!r} needs a natively supported model family, not "
                         f"{adapter.info.family!r}; use cache='none'")
    if adapter.info.mask_token_id in prompt_ids:
        raise ValueError("the prompt contains the mask token; remove it (only the canvas is masked)")
    limit = getattr(getattr(adapter.model, "config", None), "max_position_embeddings", None)
    total = len(prompt_ids) + config.gen_length
    if limit is not None and total > int(limit):
        raise ValueError(
            f"prompt ({len(prompt_ids)} tokens) + gen_length ({config.gen_length}) = {total} exceeds "
            f"the model's context of {limit}; shorten the prompt or lower gen_length"
        )
    pipeline.validate(config.gen_length)


class NonFiniteLogitsError(ValueError):
    """The model's logits hold NaN or inf (overflowing weights or dtype): no candidate is meaningful.

    A ValueError, so the app shows it like any other bad setting instead of failing.
    """


def _summarize_rows(adapter: ModelAdapter, logits: torch.Tensor, config: DecodeConfig,
                   generator: torch.Generator | None) -> dict[str, np.ndarray]:
    """Candidate statistics of logits rows as numpy arrays."""
    info = adapter.info
    stats = summarize(
        logits,
        temperature=config.temperature,
        generator=generator,
        softmax_dtype=_SOFTMAX_DTYPES[config.softmax_dtype],
        suppress_ids=(info.eos_token_id,) if config.suppress_eos else (),
        deprioritize_ids=info.stop_token_ids if config.deprioritize_eos else (),
        never_ids=(info.mask_token_id,),
    )
    confidence = stats.confidence.double().cpu().numpy()
    if not np.isfinite(confidence).all():
        bad = int((~np.isfinite(confidence)).sum())
        raise NonFiniteLogitsError(
            f"the model returned NaN or infinite logits at {bad} of {confidence.size} positions: its "
            f"weights or its dtype ({info.dtype}) overflow. Load it in float32 (CLI: --dtype float32; "
            "Python: load(..., dtype='float32')) or check the checkpoint"
        )
    return {
        "candidate": stats.candidate.cpu().numpy().astype(np.int64),
        "confidence": confidence,
        "margin": stats.margin.double().cpu().numpy(),
        "entropy": stats.entropy.double().cpu().numpy(),
    }


def _place(stats: dict[str, np.ndarray], offset: int, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Put statistics of rows [offset, offset + n) into full-length arrays.

    Positions the pass did not compute (outside a cached query span, or cut by an end-of-text
    stop) get NaN statistics and their current token as candidate.
    """
    count = stats["candidate"].shape[0]
    if offset == 0 and count == tokens.shape[0]:
        return stats
    out = {k: np.full(tokens.shape[0], np.nan) for k in ("confidence", "margin", "entropy")}
    out["candidate"] = tokens.copy()
    for key, values in stats.items():
        out[key][offset : offset + count] = values
    return out


@dataclass
class _Forward:
    """One forward pass's result, in generated-position coordinates."""

    stats: dict[str, np.ndarray]
    pass_kind: PassKind
    query_len: int


def _forward(adapter: ModelAdapter, x: torch.Tensor, prompt_len: int, canvas_end: int, tokens: np.ndarray,
             config: DecodeConfig, generator: torch.Generator | None, cache_mode: CacheMode, kv: Any,
             window: tuple[int, int] | None) -> tuple[_Forward, Any]:
    """Full pass (refreshing the KV cache when caching), or a cached partial pass on `window`.

    Returns the pass and the (possibly new) cache.
    """
    seq = x[: prompt_len + canvas_end]
    if window is None:
        if cache_mode == "none":
            logits = adapter.logits(seq, last=canvas_end)
        else:
            logits, kv = adapter.refresh(seq)
            logits = logits[prompt_len:]
        stats = _summarize_rows(adapter, logits, config, generator)
        return _Forward(_place(stats, 0, tokens), "full", int(seq.shape[0])), kv
    start, end = window[0], min(window[1], canvas_end)
    logits = adapter.cached_logits(seq, kv, prompt_len + start, prompt_len + end, cache_mode)  # type: ignore[arg-type]
    stats = _summarize_rows(adapter, logits, config, generator)
    shift = 1 if adapter.info.shift_logits else 0
    return _Forward(_place(stats, start, tokens), PARTIAL_PASS[cache_mode], int(logits.shape[0]) + shift), kv


@dataclass
class _Cursor:
    """The loop's bookkeeping about the current window."""

    window: tuple[int, int] = (0, 0)
    block_index: int = -1
    step_in_window: int = 0
    masked_at_start: int = 0


def iter_decode(
    adapter: ModelAdapter,
    prompt_ids: Sequence[int],
    pipeline: Pipeline | None = None,
    config: DecodeConfig | None = None,
    *,
    generator: torch.Generator | None = None,
    initial_tokens: np.ndarray | None = None,
) -> Iterator[StepRecord]:
    """Decode step by step, yielding one StepRecord per forward pass.

    The inputs are checked when this is called, not at the first `next()`: a plain function
    that validates and then returns the generator, so callers need no checks of their own.

    Args:
        adapter: the model.
        prompt_ids: prompt token ids (template already applied, see adapter.encode_prompt).
        pipeline: block sizer + commit rule (+ extrapolation, stop); default Fast-dLLM
            threshold 0.9 in blocks of 32. Model-family defaults are resolved here.
        config: canvas length, temperature, step cap, precision; default DecodeConfig().
        generator: RNG for Gumbel noise; default a generator seeded with config.seed.
        initial_tokens: the canvas to start from (gen_length ids; the mask id where still open),
            default all masks. A fork of a recorded decode (dllm_viz.branching) starts from its
            canvas at the fork step; filled positions are context and are never committed again.

    Raises:
        ValueError: empty prompt, prompt too long for the model, or a pipeline that cannot
            tile gen_length (the message names the value and the fix).
    """
    config = config or DecodeConfig()
    pipeline = (pipeline or Pipeline()).resolve(adapter.info.family, adapter.info.delimiters)
    _check_inputs(adapter, prompt_ids, pipeline, config)
    if generator is None:
        generator = torch.Generator(device=adapter.device).manual_seed(config.seed)
    length = config.gen_length
    tokens = np.full(length, adapter.info.mask_token_id, dtype=np.int64)
    if initial_tokens is not None:
        if np.shape(initial_tokens) != (length,):
            raise ValueError(f"`initial_tokens` must hold gen_length ({length}) ids, got shape "
                             f"{np.shape(initial_tokens)}")
        tokens[:] = np.asarray(initial_tokens, dtype=np.int64)
    # Initial states are built here too: a rule that reads a weights file fails before any pass.
    states = (pipeline.rule.init_state(length),
              None if pipeline.extrapolate is None else pipeline.extrapolate.init_state(length))
    return _steps(adapter, list(prompt_ids), pipeline, config, generator, tokens, states)


def _steps(adapter: ModelAdapter, prompt_ids: list[int], pipeline: Pipeline, config: DecodeConfig,
           generator: torch.Generator, tokens: np.ndarray, states: tuple[Any, Any]) -> Iterator[StepRecord]:
    """The loop itself, over checked inputs, the starting canvas and initial (rule, extrapolator)
    states (see iter_decode)."""
    rng = np.random.default_rng(config.seed)
    info, length, prompt_len = adapter.info, config.gen_length, len(prompt_ids)
    stop_ids = np.array(info.stop_token_ids)
    delimiter_ids = np.array(adapter.delimiter_ids(pipeline.delimiters) if pipeline.delimiters else [], np.int64)
    x = torch.tensor([*prompt_ids, *tokens.tolist()], dtype=torch.long, device=adapter.device)
    rule_state, extra_state = states
    cursor, canvas_end, kv = _Cursor(), length, None

    for step in range(config.step_cap):
        is_masked = tokens == info.mask_token_id
        if not is_masked.any():
            return
        started = time.perf_counter()
        partial = (pipeline.cache != "none" and kv is not None and is_masked[slice(*cursor.window)].any()
                   and not (pipeline.refresh_every and cursor.step_in_window % pipeline.refresh_every == 0))
        fwd, kv = _forward(adapter, x, prompt_len, canvas_end, tokens, config, generator, pipeline.cache, kv,
                           cursor.window if partial else None)
        stats = fwd.stats
        forward_seconds = time.perf_counter() - started
        base = {"step": step, "tokens": tokens.copy(), "is_masked": is_masked, "rand": rng.random(length),
                "is_eos_candidate": is_any_of(stats["candidate"], stop_ids), "canvas_end": canvas_end,
                "is_delimiter_candidate": is_any_of(stats["candidate"], delimiter_ids), **stats}
        sizing_started = time.perf_counter()
        extras = _advance_window(pipeline, cursor, base, is_masked)
        policy_seconds = time.perf_counter() - sizing_started
        view = StepView(step_in_window=cursor.step_in_window, window=cursor.window,
                        window_masked_at_start=cursor.masked_at_start, **base)
        policy_started = time.perf_counter()
        extras.update(pipeline.block.observe(view))
        decision, rule_state = pipeline.rule.step(view, rule_state)
        if pipeline.extrapolate is not None:
            decision, extra_state = pipeline.extrapolate.step(view, decision, extra_state)
        policy_seconds += time.perf_counter() - policy_started
        settled = commit_step(view, decision)
        tokens, commit, reason = settled.tokens, settled.committed, settled.reason
        extras.update(decision.extras)
        stop_started = time.perf_counter()
        halted, new_end = _apply_stop(pipeline, view, tokens, commit, reason, canvas_end, info.eos_token_id)
        policy_seconds += time.perf_counter() - stop_started
        if new_end != canvas_end:
            canvas_end, kv = new_end, None  # a shorter sequence: the next pass refreshes the cache
        x[prompt_len:] = torch.from_numpy(tokens).to(x.device)
        cursor.step_in_window += 1
        stop = _stop_reason(tokens == info.mask_token_id, halted, step == config.step_cap - 1)
        yield StepRecord(
            step=step, block_index=cursor.block_index, step_in_window=cursor.step_in_window - 1,
            window=cursor.window, tokens=tokens.copy(), committed=commit, reason=reason, extras=extras,
            pass_kind=fwd.pass_kind, query_len=fwd.query_len,
            forward_seconds=forward_seconds, step_seconds=time.perf_counter() - started, policy_seconds=policy_seconds,
            stop_reason=stop, cache_bytes=0 if kv is None else kv.nbytes(), **stats,
        )
        if halted:
            return


def _advance_window(pipeline: Pipeline, cursor: _Cursor, base: dict[str, Any],
                    is_masked: np.ndarray) -> dict[str, np.ndarray]:
    """Open the next window(s) at the end of a full one, sized from this pass; returns extras."""
    extras: dict[str, np.ndarray] = {}
    length = is_masked.shape[0]
    while not is_masked[cursor.window[0] : cursor.window[1]].any():
        start = cursor.window[1]
        probe = StepView(step_in_window=0, window=(start, length), window_masked_at_start=0, **base)
        end, block_extras = pipeline.block.window_end(probe, start)
        if not start < end <= length:
            raise RuntimeError(f"{type(pipeline.block).__name__} returned window [{start}, {end})")
        cursor.window, cursor.block_index, cursor.step_in_window = (start, end), cursor.block_index + 1, 0
        cursor.masked_at_start = int(is_masked[start:end].sum())
        extras.update(block_extras)
    return extras


def _apply_stop(pipeline: Pipeline, view: StepView, tokens: np.ndarray, commit: np.ndarray,
                reason: np.ndarray, canvas_end: int, eos_id: int) -> tuple[bool, int]:
    """Apply the end-of-text stop in place: fill the cut tail with EOS. Returns (halt, end)."""
    if pipeline.stop is None:
        return False, canvas_end
    verdict = pipeline.stop.check(view, tokens, commit)
    if verdict.cut is not None and verdict.cut < canvas_end:
        tail = np.zeros(tokens.shape[0], dtype=bool)
        tail[verdict.cut : canvas_end] = True
        tail &= view.is_masked & ~commit
        tokens[tail] = eos_id
        commit |= tail
        reason[tail] = reason_code("eos_stop")
        canvas_end = verdict.cut
    return verdict.halt, canvas_end


def _stop_reason(is_masked: np.ndarray, halted: bool, at_cap: bool) -> str | None:
    if not is_masked.any():
        return "complete"
    if halted:
        return "eos"
    return "max_steps" if at_cap else None


def decode_meta(adapter: ModelAdapter, prompt_ids: Sequence[int], pipeline: Pipeline,
                config: DecodeConfig, prompt_text: str | None) -> TraceMeta:
    """Trace metadata: everything needed to reproduce and label the decode (texts come at the end)."""
    resolved = pipeline.resolve(adapter.info.family, adapter.info.delimiters)
    return TraceMeta(
        label=resolved.label, model=adapter.info, pipeline=resolved.to_dict(), decode_config=config,
        prompt_text=prompt_text, reason_names=COMMIT_REASONS, pass_kind_names=PASS_KINDS,
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def finish_trace(builder: TraceBuilder, adapter: ModelAdapter, meta: TraceMeta) -> Trace:
    """Build the trace with display texts for every token id it mentions and the answer's text."""
    trace = builder.build(meta)
    ids = np.unique(np.concatenate([trace.tokens.ravel(), trace.candidate.ravel(), trace.prompt_ids])).tolist()
    texts = dict(zip(map(str, ids), adapter.token_strings(ids), strict=True))
    return replace(trace, meta=trace.meta.replace(token_text=texts,
                                                  answer_text=adapter.answer_text(trace.final_tokens.tolist())))


def decode(
    adapter: ModelAdapter,
    prompt_ids: Sequence[int],
    pipeline: Pipeline | None = None,
    config: DecodeConfig | None = None,
    *,
    generator: torch.Generator | None = None,
    prompt_text: str | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
) -> Trace:
    """Run `iter_decode` to the end and return the Trace (see iter_decode for arguments).

    `on_step` is called after every step (progress bars); `prompt_text` is stored in meta.
    """
    pipeline = pipeline or Pipeline()
    config = config or DecodeConfig()
    builder = TraceBuilder(config.gen_length, np.full(config.gen_length, adapter.info.mask_token_id),
                           np.asarray(prompt_ids))
    for record in iter_decode(adapter, prompt_ids, pipeline, config, generator=generator):
        builder.add(record)
        if on_step is not None:
            on_step(record)
    return finish_trace(builder, adapter, decode_meta(adapter, prompt_ids, pipeline, config, prompt_text))
