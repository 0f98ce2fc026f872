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

from dllm_viz.cache_modes import APPROXIMATE, PARTIAL_PASS, PASS_KINDS, PassKind
from dllm_viz.commit_step import commit_step
from dllm_viz.config import DecodeConfig
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies.base import COMMIT_REASONS, BlockSampling, StepView, is_any_of, reason_code
from dllm_viz.policies.pipeline import Pipeline
from dllm_viz.sampling import multinomial_stats, summarize
from dllm_viz.step_schema import StepRecord
from dllm_viz.trace import Trace, TraceBuilder
from dllm_viz.trace_meta import TraceMeta

_SOFTMAX_DTYPES = {"float64": torch.float64, "float32": torch.float32}


def token_ids(values: Any, vocab_size: int, what: str) -> np.ndarray:
    """`values` as a 1-D int64 array of token ids in [0, vocab_size), or ValueError naming `what`.

    Why here: an id outside the vocabulary fails deep inside the model's embedding
    ("IndexError: index out of range in self") or, in a canvas the model never reads, ends up in
    the trace as a token no tokenizer knows; a float id (1.7) would be truncated silently.
    """
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{what} must be a flat sequence of token ids, got shape {array.shape}")
    if array.size and array.dtype.kind not in "iu":
        raise ValueError(f"{what} must hold integer token ids, got {array[0].tolist()!r} (dtype {array.dtype}); "
                         "pass ints, e.g. adapter.encode_prompt(text)")
    outside = (array < 0) | (array >= vocab_size)
    if outside.any():
        raise ValueError(f"{what} holds {int(array[outside][0])}, outside the model's vocabulary "
                         f"[0, {vocab_size}); pass ids of this model's tokenizer")
    return array.astype(np.int64)


def _check_inputs(adapter: ModelAdapter, prompt_ids: Sequence[int], pipeline: Pipeline,
                  config: DecodeConfig) -> None:
    if len(prompt_ids) == 0:
        raise ValueError("the prompt is empty; give at least one prompt token")
    token_ids(prompt_ids, adapter.info.vocab_size, "`prompt_ids`")
    if adapter.info.mask_token_id in prompt_ids:
        raise ValueError("the prompt contains the mask token; remove it (only the canvas is masked)")
    limit = getattr(getattr(adapter.model, "config", None), "max_position_embeddings", None)
    padding = pipeline.block.canvas_padding(len(prompt_ids), config.gen_length)
    total = len(prompt_ids) + config.gen_length + padding
    if limit is not None and total > int(limit):
        # Aligned blocks pad the canvas to whole blocks: name that term, or the sum reads wrong
        # ("19 + 16 = 1000000") and the advice misses the block length that caused it.
        padded = f" + padding to whole blocks of {pipeline.block.block_length} ({padding})" if padding else ""
        raise ValueError(
            f"prompt ({len(prompt_ids)} tokens) + gen_length ({config.gen_length}){padded} = {total} exceeds "
            f"the model's context of {limit}; shorten the prompt or lower "
            + ("gen_length or block_length" if padding else "gen_length")
        )
    check_pipeline(adapter, pipeline, config)


def check_pipeline(adapter: ModelAdapter, pipeline: Pipeline, config: DecodeConfig) -> None:
    """Everything about a resolved pipeline that no prompt changes: the cache and block sizer against
    the model, the windows against gen_length, a learned controller against the model.

    Callers that run many prompts (bench) check each configuration once, before the first decode.

    Raises:
        ValueError: naming the value and the fix.
    """
    check_geometry(adapter, pipeline)
    pipeline.validate(config.gen_length)
    pipeline.validate_model(adapter.info)


def check_geometry(adapter: ModelAdapter, pipeline: Pipeline) -> None:
    """The cache, the block sizer and the block-wise sampler against what the model can run."""
    info, cache = adapter.info, pipeline.cache
    if cache == "exact":
        if not adapter.supports_exact_cache:
            raise ValueError(f"cache='exact' needs a block-causal model (block diffusion), not {info.family!r} "
                             f"with {info.attention} attention; use cache='none' (or 'prefix' / 'dual' on LLaDA)")
    elif cache != "none" and not adapter.supports_cache:
        raise ValueError(f"cache={cache!r} needs a natively supported bidirectional model family, not "
                         f"{info.family!r}; use cache='none'" + (" or 'exact'" if info.context == "prefix" else ""))
    if cache in ("prefix", "dual") and pipeline.rule.sampler() is not None:
        raise ValueError(f"{pipeline.rule.name} samples over whole blocks, which Fast-dLLM's {cache!r} cache "
                         "does not compute; use cache='none' (or 'exact' on a block-causal model)")
    if info.context == "prefix" and pipeline.block.reads_pass:
        raise ValueError(f"{pipeline.block.name} sizes a window from a pass over the whole canvas, which a "
                         f"block-diffusion model ({info.family}) never runs; use block='aligned' (or 'fixed')")


class NonFiniteLogitsError(ValueError):
    """The model's logits hold NaN or inf (overflowing weights or dtype): no candidate is meaningful.

    A ValueError, so the app shows it like any other bad setting instead of failing.
    """


def _summarize_rows(adapter: ModelAdapter, logits: torch.Tensor, config: DecodeConfig,
                   generator: torch.Generator | None, sampler: BlockSampling | None = None) -> dict[str, np.ndarray]:
    """Candidate statistics of logits rows as numpy arrays (Gumbel-max, or the rule's sampler)."""
    info = adapter.info
    if sampler is not None:
        stats = multinomial_stats(logits, temperature=config.temperature, top_k=sampler.top_k, top_p=sampler.top_p,
                                  generator=generator)
    else:
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


@dataclass(frozen=True)
class _Pass:
    """What one forward pass covers, in row positions (prompt included).

    Attributes:
        end: rows [0, end) are fed to the model (the canvas, or its prefix up to the window's end).
        rows: [rows, end) are the rows whose candidates are computed.
        valid: keys at or after it are padding (aligned blocks), hidden from every query.
        window: the window's first row (rows of blocks before it are final: the exact cache).
    """

    end: int
    rows: int
    valid: int
    window: int


def _pass_span(adapter: ModelAdapter, pipeline: Pipeline, prompt_len: int, answer_len: int, canvas_end: int,
               window: tuple[int, int], sampled: bool) -> _Pass:
    """The rows of this step's pass: a prefix-context model (block diffusion) sees the row up to the
    window's end, a block-wise sampler draws over the window's whole block (its prompt rows too)."""
    prefix = adapter.info.context == "prefix"
    end = prompt_len + (min(window[1], canvas_end) if prefix else canvas_end)
    start = pipeline.block.block_start(prompt_len, window[0]) if sampled else prompt_len + window[0]
    rows = start if sampled or prefix else prompt_len
    return _Pass(end=end, rows=min(rows, end), valid=prompt_len + answer_len, window=prompt_len + window[0])


def _forward(adapter: ModelAdapter, x: torch.Tensor, prompt_len: int, span: _Pass, tokens: np.ndarray,
             config: DecodeConfig, generator: torch.Generator | None, pipeline: Pipeline, kv: Any,
             window: tuple[int, int] | None) -> tuple[_Forward, Any]:
    """Full pass over `span` (refreshing Fast-dLLM's KV cache when caching), a pass against the exact
    prefix cache, or a Fast-dLLM cached partial pass on `window`. Returns the pass and the cache."""
    seq, cache_mode, sampler = x[: span.end], pipeline.cache, pipeline.rule.sampler()
    valid = span.valid if span.valid < span.end else None
    if cache_mode == "exact":
        logits, kv, query_len = adapter.exact_logits(seq, span.rows, span.window, valid, kv)  # type: ignore[attr-defined]
        stats = _summarize_rows(adapter, logits, config, generator, sampler)
        return _Forward(_place_rows(stats, span.rows - prompt_len, tokens), "exact_cached", query_len), kv
    if window is None:
        if cache_mode == "none":
            padded = {} if valid is None else {"valid": valid}  # adapters without padding need not take it
            logits = adapter.logits(seq, last=span.end - span.rows, **padded)
        else:
            logits, kv = adapter.refresh(seq, last=span.end - span.rows, reuse=kv)
        stats = _summarize_rows(adapter, logits, config, generator, sampler)
        return _Forward(_place_rows(stats, span.rows - prompt_len, tokens), "full", int(seq.shape[0])), kv
    canvas_end = span.end - prompt_len
    start, end = window[0], min(window[1], canvas_end)
    logits = adapter.cached_logits(seq, kv, prompt_len + start, prompt_len + end, cache_mode)  # type: ignore[arg-type]
    stats = _summarize_rows(adapter, logits, config, generator)
    shift = 1 if adapter.info.shift_logits else 0
    return _Forward(_place(stats, start, tokens), PARTIAL_PASS[cache_mode], int(logits.shape[0]) + shift), kv


def _place_rows(stats: dict[str, np.ndarray], offset: int, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """`_place` for rows that may begin inside the prompt (offset < 0): those rows are dropped."""
    if offset < 0:
        stats = {key: values[-offset:] for key, values in stats.items()}
        offset = 0
    return _place(stats, offset, tokens)


@dataclass
class _Cursor:
    """The loop's bookkeeping about the current window."""

    window: tuple[int, int] = (0, 0)
    block_index: int = -1
    step_in_window: int = 0
    masked_at_start: int = 0
    keep: bool = False  # the rule asked for another pass on the current window (a post-step)
    leave: bool = False  # the rule left the current window with masks in it


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
        ValueError: empty prompt, prompt too long for the model, prompt or initial_tokens ids
            that are not integers in the vocabulary, a pipeline that cannot tile gen_length, or a
            learned controller trained for another model (the message names the value and the fix).
    """
    config = config or DecodeConfig()
    pipeline = (pipeline or Pipeline()).resolve(adapter.info.family, adapter.info.delimiters)
    _check_inputs(adapter, prompt_ids, pipeline, config)
    if generator is None:
        generator = torch.Generator(device=adapter.device).manual_seed(config.seed)
    length = config.gen_length
    padding = pipeline.block.canvas_padding(len(prompt_ids), length)
    tokens = np.full(length + padding, adapter.info.mask_token_id, dtype=np.int64)
    if initial_tokens is not None:
        if np.shape(initial_tokens) != (length,):
            raise ValueError(f"`initial_tokens` must hold gen_length ({length}) ids, got shape "
                             f"{np.shape(initial_tokens)}")
        tokens[:length] = token_ids(initial_tokens, adapter.info.vocab_size, "`initial_tokens`")
    # Initial states are built here too: a rule that reads a weights file fails before any pass.
    states = (pipeline.rule.init_state(length + padding),
              None if pipeline.extrapolate is None else pipeline.extrapolate.init_state(length + padding))
    return _steps(adapter, list(prompt_ids), pipeline, config, generator, tokens, states)


def _steps(adapter: ModelAdapter, prompt_ids: list[int], pipeline: Pipeline, config: DecodeConfig,
           generator: torch.Generator, tokens: np.ndarray, states: tuple[Any, Any]) -> Iterator[StepRecord]:
    """The loop itself, over checked inputs, the starting canvas (padding included) and initial
    (rule, extrapolator) states (see iter_decode). Records hold the gen_length answer positions."""
    rng = np.random.default_rng(config.seed)
    info, answer, prompt_len = adapter.info, config.gen_length, len(prompt_ids)
    length = tokens.shape[0]
    stop_ids = np.array(info.stop_token_ids)
    delimiter_ids = np.array(adapter.delimiter_ids(pipeline.delimiters) if pipeline.delimiters else [], np.int64)
    x = torch.tensor([*prompt_ids, *tokens.tolist()], dtype=torch.long, device=adapter.device)
    rule_state, extra_state = states
    cursor, canvas_end, kv = _Cursor(), length, None
    sampled = pipeline.rule.sampler() is not None
    fixed = {"block_length": pipeline.block.block_length, "prompt_length": prompt_len, "padding": length - answer,
             "eos_token_id": info.eos_token_id, "mask_token_id": info.mask_token_id,
             "prompt_has_eos": info.eos_token_id in prompt_ids}

    step_cap = _step_cap(config, pipeline, length)
    for step in range(step_cap):
        is_masked = tokens == info.mask_token_id
        if not cursor.keep and not is_masked[cursor.window[0]:].any():
            return
        started = time.perf_counter()
        base = {"step": step, "tokens": tokens.copy(), "is_masked": is_masked, "canvas_end": canvas_end, **fixed}
        extras: dict[str, np.ndarray] = {}
        if not pipeline.block.reads_pass:  # windows known before the pass: a prefix model runs up to its end
            extras = _advance_window(pipeline, cursor, base, is_masked)
        partial = (pipeline.cache in APPROXIMATE and kv is not None
                   and is_masked[slice(*cursor.window)].any() and cursor.step_in_window > 0
                   and not (pipeline.refresh_every and cursor.step_in_window % pipeline.refresh_every == 0))
        span = _pass_span(adapter, pipeline, prompt_len, answer, canvas_end, cursor.window, sampled)
        fwd, kv = _forward(adapter, x, prompt_len, span, tokens, config, generator, pipeline, kv,
                           cursor.window if partial else None)
        stats = fwd.stats
        forward_seconds = time.perf_counter() - started
        base |= {"rand": rng.random(length), "is_eos_candidate": is_any_of(stats["candidate"], stop_ids),
                 "is_delimiter_candidate": is_any_of(stats["candidate"], delimiter_ids), **stats}
        sizing_started = time.perf_counter()
        if pipeline.block.reads_pass:
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
        halted, new_end = _apply_stop(pipeline, view, tokens, commit, settled.edited, reason, canvas_end,
                                      info.eos_token_id)
        policy_seconds += time.perf_counter() - stop_started
        if new_end != canvas_end:
            canvas_end = new_end
            kv = None if pipeline.cache != "exact" else kv  # a shorter sequence: the next pass refreshes the cache
        x[prompt_len:] = torch.from_numpy(tokens).to(x.device)
        cursor.step_in_window += 1
        cursor.keep = bool(decision.keep_window)
        still_masked = tokens == info.mask_token_id
        cursor.leave = decision.keep_window is False and bool(still_masked[slice(*cursor.window)].any())
        ended = not cursor.keep and not still_masked[cursor.window[1] if cursor.leave else cursor.window[0]:].any()
        stop = _stop_reason(still_masked, halted, step == step_cap - 1, ended)
        yield StepRecord(
            step=step, block_index=cursor.block_index, step_in_window=cursor.step_in_window - 1,
            window=(cursor.window[0], min(cursor.window[1], answer)), tokens=tokens[:answer].copy(),
            committed=commit[:answer], reason=reason[:answer], edited=settled.edited[:answer],
            extras={k: v[:answer] for k, v in extras.items()}, pass_kind=fwd.pass_kind, query_len=fwd.query_len,
            forward_seconds=forward_seconds, step_seconds=time.perf_counter() - started, policy_seconds=policy_seconds,
            stop_reason=stop, cache_bytes=0 if kv is None else kv.nbytes(),
            padding_changes=int((commit[answer:] | settled.edited[answer:]).sum()),
            **{k: v[:answer] for k, v in stats.items()},
        )
        if halted or ended:
            return


def _step_cap(config: DecodeConfig, pipeline: Pipeline, canvas_length: int) -> int:
    """The hard cap on forward passes: `config.max_steps` when given, else one pass per canvas
    position (padding included) or the rule's own `pass_bound`, whichever is larger.

    Why the padding: an aligned sizer pads the canvas to whole blocks, and the padding rows are
    masks the rule must commit like any other. A cap of gen_length let every rule that commits one
    position a pass (threshold, cora, fixed_steps: the dense baseline itself) stop at `max_steps`
    with answer positions still masked on a block-causal model whose confidences stay low.
    """
    if config.max_steps is not None:
        return config.max_steps
    return max(canvas_length, pipeline.rule.pass_bound(canvas_length, pipeline.block.block_length) or 0)


def _unseen(tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Candidate statistics before a pass (a window sized before it sees none): NaN, the tokens."""
    nan = np.full(tokens.shape[0], np.nan)
    no = np.zeros(tokens.shape[0], dtype=bool)
    return {"candidate": tokens, "confidence": nan, "margin": nan, "entropy": nan, "rand": nan,
            "is_eos_candidate": no, "is_delimiter_candidate": no}


def _advance_window(pipeline: Pipeline, cursor: _Cursor, base: dict[str, Any],
                    is_masked: np.ndarray) -> dict[str, np.ndarray]:
    """Open the next window(s) once the current one is done, sized from `base` (this step's view
    fields, with the pass's statistics when the sizer reads them); returns extras.

    Done: full, unless the rule asked for another pass on it (`keep`), or the rule left it
    with masks (`leave`: its schedule is spent).
    """
    extras: dict[str, np.ndarray] = {}
    length = is_masked.shape[0]
    while cursor.leave or (not cursor.keep and not is_masked[cursor.window[0] : cursor.window[1]].any()):
        start = cursor.window[1]
        # before the pass (a sizer that does not read it) base holds no statistics yet
        probe = StepView(step_in_window=0, window=(start, length), window_masked_at_start=0,
                         **{**_unseen(base["tokens"]), **base})
        end, block_extras = pipeline.block.window_end(probe, start)
        if not start < end <= length:
            raise RuntimeError(f"{type(pipeline.block).__name__} returned window [{start}, {end})")
        cursor.window, cursor.block_index, cursor.step_in_window = (start, end), cursor.block_index + 1, 0
        cursor.masked_at_start = int(is_masked[start:end].sum())
        cursor.leave = False
        extras.update(block_extras)
    return extras


def _apply_stop(pipeline: Pipeline, view: StepView, tokens: np.ndarray, commit: np.ndarray, edited: np.ndarray,
                reason: np.ndarray, canvas_end: int, eos_id: int) -> tuple[bool, int]:
    """Apply the end-of-text stop in place: fill the cut tail with EOS. Returns (halt, end).

    The stop rule sees this step's commits and edits together (an EOS edited in ends a text too).
    """
    if pipeline.stop is None:
        return False, canvas_end
    verdict = pipeline.stop.check(view, tokens, commit | edited)
    if verdict.cut is not None and verdict.cut < canvas_end:
        tail = np.zeros(tokens.shape[0], dtype=bool)
        tail[verdict.cut : canvas_end] = True
        tail &= view.is_masked & ~commit
        tokens[tail] = eos_id
        commit |= tail
        reason[tail] = reason_code("eos_stop")
        canvas_end = verdict.cut
    return verdict.halt, canvas_end


def _stop_reason(is_masked: np.ndarray, halted: bool, at_cap: bool, ended: bool) -> str | None:
    """Why the decode ends after this step, or None. `ended`: no window is left to decode (masks
    may remain when a rule left its last windows with masks: its step budget ran out)."""
    if not is_masked.any() and ended:
        return "complete"
    if halted:
        return "eos"
    return "max_steps" if at_cap or ended else None


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
    initial_tokens: np.ndarray | None = None,
) -> Trace:
    """Run `iter_decode` to the end and return the Trace (see iter_decode for arguments).

    `on_step` is called after every step (progress bars); `prompt_text` is stored in meta.
    """
    pipeline = pipeline or Pipeline()
    config = config or DecodeConfig()
    # iter_decode checks the inputs when called: before the builder, which would cast them blindly.
    steps = iter_decode(adapter, prompt_ids, pipeline, config, generator=generator, initial_tokens=initial_tokens)
    start = np.full(config.gen_length, adapter.info.mask_token_id) if initial_tokens is None else initial_tokens
    builder = TraceBuilder(config.gen_length, start, np.asarray(prompt_ids))
    for record in steps:
        builder.add(record)
        if on_step is not None:
            on_step(record)
    return finish_trace(builder, adapter, decode_meta(adapter, prompt_ids, pipeline, config, prompt_text))
