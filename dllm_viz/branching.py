"""Counterfactual branching: fork a recorded decode at step k and continue it another way.

The fork starts the one decoding loop (engine.iter_decode) from the recorded canvas after k
steps, optionally with one position forced to a chosen token, and runs it under another
policy (rule, threshold, ...) to the end. Both branches then share the first k steps, so they
can be drawn on one step axis: the fork's step i is step k + i of the shared axis.
What is deliberately not replayed: a stateful rule's memory (CORA's persistence runs, CE's
Kalman state) starts fresh at the fork, as it would after a block boundary; the
sampling RNG is re-seeded from the fork's DecodeConfig.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dllm_viz import divergence
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.trace import Trace
from dllm_viz.whole_numbers import is_whole


@dataclass(frozen=True, slots=True)
class Fork:
    """How to branch: at which step, under which policy, with which forced token (if any).

    step: forward passes of the recorded decode kept (0 = from the empty canvas).
    pipeline: the policy the fork continues with.
    force_position / force_token: a generated position and the token id it is set to at the
        fork (it must still be masked there); None for no forced token.
    """

    step: int
    pipeline: Pipeline
    force_position: int | None = None
    force_token: int | None = None


@dataclass(frozen=True)
class Branches:
    """A recorded decode and its fork, aligned on the shared step axis.

    original: the recorded trace; fork: the continuation's own trace (its row 0 is the canvas
    it started from, so positions decided before the fork never commit in it); at: the fork step.
    """

    original: Trace
    fork: Trace
    at: int

    @property
    def fork_nfe(self) -> int:
        """Forward passes of the forked branch in all: the shared steps plus its own."""
        return self.at + self.fork.nfe

    def canvases(self) -> tuple[np.ndarray, np.ndarray]:
        """Both branches' canvases on the shared axis, [T+1, L] each (the shorter one holds its end)."""
        a = self.original.tokens
        b = np.vstack([a[: self.at], self.fork.tokens])
        rows = max(a.shape[0], b.shape[0])
        return _hold(a, rows), _hold(b, rows)

    def divergence(self) -> np.ndarray:
        """[T+1] positions whose canvas differs between the branches after each shared-axis step."""
        a, b = self.canvases()
        return (a != b).sum(axis=1).astype(np.int32)

    def first_divergence(self) -> int | None:
        """The first shared-axis step after which the canvases differ (None if they never do)."""
        differs = np.flatnonzero(self.divergence() > 0)
        return int(differs[0]) if differs.size else None

    def final_difference(self) -> np.ndarray:
        """[L] True where the two finished canvases hold different tokens."""
        return divergence.differs(self.original, self.fork)


def _hold(canvas: np.ndarray, rows: int) -> np.ndarray:
    """`canvas` extended to `rows` rows by repeating its last row (a finished decode stays put)."""
    if canvas.shape[0] >= rows:
        return canvas
    return np.vstack([canvas, np.repeat(canvas[-1:], rows - canvas.shape[0], axis=0)])


def fork_canvas(original: Trace, fork: Fork, mask_token_id: int) -> np.ndarray:
    """The canvas the fork starts from: the recorded one after `fork.step` steps, plus the forced token.

    Raises:
        ValueError: a step outside [0, S - 1], a forced position outside the canvas or already
            committed at the fork, a forced token that is the mask, a step, position or token that
            is not an integer, or only one of position / token given.
    """
    _check_whole("fork step", fork.step)
    if not 0 <= fork.step < max(original.num_steps, 1):
        raise ValueError(f"the fork step must be in [0, {max(original.num_steps - 1, 0)}] (a step before the "
                         f"recorded decode ended), got {fork.step}")
    canvas = original.tokens[fork.step].astype(np.int64).copy()
    if (fork.force_position is None) != (fork.force_token is None):
        raise ValueError("give both a position and a token to force, or neither")
    if fork.force_position is not None and fork.force_token is not None:
        position, token = fork.force_position, fork.force_token
        _check_whole("forced position", position)
        _check_whole("forced token", token)
        if not 0 <= position < original.gen_length:
            raise ValueError(f"the forced position must be in [0, {original.gen_length - 1}], got {position}")
        if canvas[position] != mask_token_id:
            raise ValueError(f"position {position} is already committed at step {fork.step}; force a position "
                             "that is still masked there, or fork earlier")
        if token == mask_token_id:  # it would leave the position open: a fork that forces nothing
            raise ValueError(f"the forced token {token} is the mask token; force a real token id")
        canvas[position] = token
    return canvas


def _check_whole(what: str, value: object) -> None:
    """ValueError unless `value` is an integer: a float step or position failed as a numpy IndexError,
    and a float token (5.7) was truncated into the canvas silently."""
    if not is_whole(value):
        raise ValueError(f"the {what} must be an integer, got {value!r}")


def check_same_model(adapter: ModelAdapter, original: Trace) -> None:
    """ValueError unless `adapter` reads token ids as the model that recorded `original` did.

    Why: a fork continues the recorded canvas and prompt ids; under another model's mask id the
    old masks read as committed tokens (and its masks as real ones), so the fork "decodes" a
    canvas that is not the one recorded and returns a silently wrong answer. Traces without
    model facts (hand-made) are not checked.
    """
    recorded = original.meta.model
    if recorded is None:
        return
    here = adapter.info
    keys = ("family", "mask_token_id", "eos_token_id", "vocab_size")
    differ = [f"{key} {getattr(recorded, key)!r} vs {getattr(here, key)!r}" for key in keys
              if getattr(recorded, key) != getattr(here, key)]
    if differ:
        # Families and ids only: a name_or_path may be a server path, and the app shows this message.
        raise ValueError(f"the trace was recorded with another model than the loaded one (recorded vs loaded: "
                         f"{'; '.join(differ)}); load the model it was recorded with")


def fork_decode(adapter: ModelAdapter, original: Trace, fork: Fork, *,
                config: DecodeConfig | None = None) -> Branches:
    """Continue `original` from `fork.step` under `fork.pipeline` through the engine's one loop.

    Args:
        adapter: the model the original was recorded with.
        original: a recorded decode with its prompt ids and decode config in meta.
        fork: where and how to branch.
        config: the fork's DecodeConfig; default the original's (same gen length and seed).

    Raises:
        ValueError: a bad fork (see fork_canvas), a trace recorded with another model
            (`check_same_model`), a forced token outside the vocabulary, or a pipeline that cannot
            tile the canvas.
    """
    check_same_model(adapter, original)
    base = replace(config or original.meta.decode_config or DecodeConfig(), gen_length=original.gen_length)
    canvas = fork_canvas(original, fork, adapter.info.mask_token_id)
    if fork.force_token is not None and not 0 <= fork.force_token < adapter.info.vocab_size:
        raise ValueError(f"the forced token {fork.force_token} is outside the model's vocabulary "
                         f"[0, {adapter.info.vocab_size}); force an id of its tokenizer")
    prompt_ids = original.prompt_ids.astype(np.int64).tolist()
    trace = decode(adapter, prompt_ids, fork.pipeline, base, prompt_text=original.meta.prompt_text,
                   initial_tokens=canvas)
    meta = trace.meta.replace(fork_of={"label": original.meta.label, "step": fork.step,
                                       "force_position": fork.force_position, "force_token": fork.force_token})
    return Branches(original=original, fork=replace(trace, meta=meta), at=fork.step)
