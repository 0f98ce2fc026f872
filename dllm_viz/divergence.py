"""Where a decode parted from a reference decode of the same prompt: the positions whose final
token differs, when each was committed, how sure the model was and how many positions it
committed in the same pass.

This is what a teacher points at when a low threshold breaks an answer that one token per step
gets right (the "curse of parallel decoding"): the wrong token went in early, in a crowded pass,
at a confidence that cleared the bar. Pure numpy on two Traces; the Learn page and the figures'
heatmap flags read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dllm_viz.trace import Trace


@dataclass(frozen=True, slots=True)
class PartedCommit:
    """One position whose final token differs between `trace` and the reference.

    position: generated-position index; step: the step at which `trace` committed it (-1: it
    never did, a stopped decode); token / reference: the two final tokens as text; confidence:
    `trace`'s confidence in its candidate at that step (NaN if never committed); crowd: positions
    `trace` committed in that same pass, this one included (0 if never committed).
    """

    position: int
    step: int
    token: str
    reference: str
    confidence: float
    crowd: int


def _check_comparable(reference: Trace, trace: Trace) -> None:
    if reference.gen_length != trace.gen_length:
        raise ValueError(f"the decodes have different canvases ({reference.gen_length} and {trace.gen_length} "
                         "positions): decode both with the same gen length")
    if not np.array_equal(reference.prompt_ids, trace.prompt_ids):
        raise ValueError("the decodes have different prompts: compare two decodes of the same prompt")


def differs(reference: Trace, trace: Trace) -> np.ndarray:
    """[L] True where the two decodes' final canvases hold different tokens.

    Raises:
        ValueError: the decodes have different prompts or canvas lengths.
    """
    _check_comparable(reference, trace)
    return np.asarray(reference.final_tokens != trace.final_tokens)


def parted_cells(reference: Trace, trace: Trace) -> np.ndarray:
    """[S, L] True at the (step, position) where `trace` committed a token the reference does not
    have there: the cells to mark on `trace`'s heatmap."""
    return np.asarray(trace.committed & differs(reference, trace)[None, :])


def parted_commits(reference: Trace, trace: Trace) -> list[PartedCommit]:
    """Every position whose final token differs, in the order `trace` committed them (positions
    it never committed last).

    Raises:
        ValueError: the decodes have different prompts or canvas lengths.
    """
    positions = np.flatnonzero(differs(reference, trace))
    steps = trace.commit_step
    crowd = trace.tokens_per_step
    out: list[PartedCommit] = []
    for p in positions:
        step = int(steps[p])
        out.append(PartedCommit(
            position=int(p), step=step, token=trace.token_text(int(trace.final_tokens[p])),
            reference=reference.token_text(int(reference.final_tokens[p])),
            confidence=float(trace.confidence[step, p]) if step >= 0 else float("nan"),
            crowd=int(crowd[step]) if step >= 0 else 0))
    return sorted(out, key=lambda c: (c.step < 0, c.step, c.position))
