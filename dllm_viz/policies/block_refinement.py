"""LLaDA2.x block refinement: commit masked positions by confidence, and edit committed ones.

The decision of diffusers' `BlockRefinementScheduler.step` (mask mode) and the block loop's
continue test, as pure numpy over the positions of one block (docs/PARADIGMS.md, "Block
refinement"). It knows nothing about models, logits or the canvas: the engine samples the
candidates, applies the decision and tracks end-of-text; this module says what to change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from dllm_viz.policies.base import top_k_mask
from dllm_viz.policies.schedule import transfer_schedule


@dataclass(frozen=True)
class BlockInputs:
    """One block's positions as the rule sees them at the start of a step.

    Attributes:
        confidence: probability of each position's candidate under the distribution it was
            drawn from (tempered and top-k/top-p filtered when sampling). Compared in its own
            dtype: pass float32 to reproduce diffusers, which thresholds float32 probabilities.
        candidate: the sampled (or argmax) token of each position.
        tokens: the block's current tokens (meaningful where not masked).
        is_masked: True where the position still holds the mask token.
        is_prompt: True for prompt positions (only the first generated block can hold any).
    """

    confidence: np.ndarray
    candidate: np.ndarray
    tokens: np.ndarray
    is_masked: np.ndarray
    is_prompt: np.ndarray

    def __post_init__(self) -> None:
        n = self.confidence.shape[0]
        for name in ("candidate", "tokens", "is_masked", "is_prompt"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"BlockInputs.{name} must have shape ({n},), got {getattr(self, name).shape}")


@dataclass(frozen=True)
class RefinementDecision:
    """What one step changes in the block.

    Attributes:
        commit: masked positions that take their candidate now (mask -> token).
        edit: committed, non-prompt positions whose token is replaced by their candidate.
        new_tokens: the block's tokens after the step (candidate on commit | edit).
    """

    commit: np.ndarray
    edit: np.ndarray
    new_tokens: np.ndarray


@dataclass(frozen=True)
class RefinementState:
    """Where the rule stands inside the current block.

    Attributes:
        step_idx: mask-filling steps taken in this block (post-steps do not count; it indexes
            the commit quota).
        post_steps: passes started with the block already full (bounded by max_post_steps).
    """

    step_idx: int = 0
    post_steps: int = 0


def commit_from_mask(confidence: np.ndarray, is_masked: np.ndarray, quota: int, threshold: float) -> np.ndarray:
    """Masked positions to commit: all above `threshold` if at least `quota` are, else the top `quota`.

    Strictly above, as the reference compares. A zero quota commits only what clears the
    threshold (possibly nothing). Ties in the top-`quota` fallback go to the lower position.
    """
    above = is_masked & (confidence > threshold)
    if int(above.sum()) >= quota:
        return above
    return top_k_mask(confidence, is_masked, quota)


def edits(inputs: BlockInputs, editing_threshold: float | None) -> np.ndarray:
    """Committed, non-prompt positions whose candidate differs with confidence above the threshold.

    `None` or a threshold <= 0 disables editing (the reference's convention).
    """
    if editing_threshold is None or editing_threshold <= 0.0:
        return np.zeros(inputs.confidence.shape[0], dtype=bool)
    editable = ~inputs.is_masked & ~inputs.is_prompt
    return editable & (inputs.confidence > editing_threshold) & (inputs.candidate != inputs.tokens)


def refine(inputs: BlockInputs, quota: int, threshold: float, editing_threshold: float | None) -> RefinementDecision:
    """One step's commits and edits, exactly as diffusers' scheduler decides them (batch of one)."""
    commit = commit_from_mask(inputs.confidence, inputs.is_masked, quota, threshold)
    edit = edits(inputs, editing_threshold)
    new_tokens = np.where(commit | edit, inputs.candidate, inputs.tokens)
    return RefinementDecision(commit=commit, edit=edit, new_tokens=new_tokens)


def eos_finishes(is_eos: np.ndarray, is_masked: np.ndarray, prompt_length: int, changed_to_eos: bool) -> bool:
    """The reference's EOS early stop for one row, over the canvas prefix up to the window end.

    The row finishes when this step committed or edited an EOS (`changed_to_eos`) and the first
    EOS of the prefix, prompt included, lies in the generated part with no mask before it. So an
    EOS inside the prompt blocks the stop for good: the reference searches the whole row.
    """
    if is_eos.shape != is_masked.shape:
        raise ValueError(f"is_eos and is_masked must share one shape, got {is_eos.shape} and {is_masked.shape}")
    if not changed_to_eos:
        return False
    found = np.flatnonzero(is_eos)
    if found.size == 0 or int(found[0]) < prompt_length:
        return False
    return not bool(is_masked[prompt_length : int(found[0])].any())


def _check_threshold(name: str, value: float | None, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"`{name}` must be a finite number, got {value!r}")


@dataclass(frozen=True)
class BlockRefinementRule:
    """LLaDA2.x's rule: commit by confidence with a per-step quota, edit committed tokens.

    Rule: at step t of a block, the masked positions whose confidence clears `threshold` are
    committed if there are at least n[t] of them (n spreads `block_length` over `steps`), else
    the n[t] most confident. With editing on, a committed non-prompt token of the block is
    replaced when the model now prefers another one with confidence above `editing_threshold`;
    once the block is full, extra passes run while edits keep happening (at most
    `max_post_steps` + 1 of them, the reference's bound). `minimal_topk` only caps the steps.
    Paper: "LLaDA2.0: Scaling Up Diffusion Language Models to 100B", arXiv 2512.15745; defaults
    mirror diffusers 0.42.1 `LLaDA2Pipeline.__call__`.
    Unlike `threshold`, the fallback is a quota rather than one position, and tokens can change
    after they are committed.
    """

    name: ClassVar[str] = "block_refinement"
    steps: int = field(default=32, metadata={"help": "refinement steps per block (num_inference_steps)"})
    threshold: float = field(
        default=0.7, metadata={"help": "confidence a masked position needs to be committed; > 1 = quota only"}
    )
    editing_threshold: float | None = field(
        default=0.5, metadata={"help": "confidence an edit needs; None or <= 0 disables editing"}
    )
    minimal_topk: int = field(default=1, metadata={"help": "caps steps at gen_length // minimal_topk"})
    max_post_steps: int = field(default=16, metadata={"help": "bound on extra passes after a block is full"})
    temperature: float = field(default=0.0, metadata={"help": "0 = greedy; else multinomial sampling"})
    top_k: int | None = field(default=None, metadata={"help": "keep the k most likely tokens; None or 0 = all"})
    top_p: float | None = field(default=None, metadata={"help": "nucleus mass in (0, 1]; None = all"})

    def __post_init__(self) -> None:
        for name in ("steps", "minimal_topk", "max_post_steps"):
            value = getattr(self, name)
            low = 0 if name == "max_post_steps" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}")
        _check_threshold("threshold", self.threshold, allow_none=False)
        if self.threshold < 0:
            raise ValueError(f"`threshold` must be >= 0 (use a value > 1 to commit by quota only), "
                             f"got {self.threshold!r}")
        _check_threshold("editing_threshold", self.editing_threshold, allow_none=True)
        _check_threshold("temperature", self.temperature, allow_none=False)
        if self.temperature < 0:
            raise ValueError(f"`temperature` must be >= 0 (0 = greedy), got {self.temperature!r}")
        if self.top_k is not None and (not isinstance(self.top_k, int) or isinstance(self.top_k, bool)
                                       or self.top_k < 0):
            raise ValueError(f"`top_k` must be a non-negative integer, or None / 0 to keep all tokens, "
                             f"got {self.top_k!r}")
        if self.top_p is not None and not (isinstance(self.top_p, int | float) and 0.0 < self.top_p <= 1.0):
            raise ValueError(f"`top_p` must be in (0, 1], or None to keep all tokens, got {self.top_p!r}")

    @property
    def editing_enabled(self) -> bool:
        """Whether edits (and post-steps) happen at all."""
        return self.editing_threshold is not None and self.editing_threshold > 0.0

    def steps_per_block(self, gen_length: int) -> int:
        """Refinement steps per block: `steps` capped at gen_length // minimal_topk (sic: not the block)."""
        capped = min(self.steps, gen_length // self.minimal_topk)
        if capped < 1:
            raise ValueError(f"`minimal_topk`={self.minimal_topk} exceeds gen_length={gen_length}, leaving no "
                             "steps; lower minimal_topk or raise gen_length")
        return capped

    def quota(self, step_idx: int, block_length: int, gen_length: int) -> int:
        """n[t]: commits owed at mask step `step_idx` (the schedule spreads the full block length)."""
        schedule = transfer_schedule(block_length, self.steps_per_block(gen_length))
        return schedule[min(step_idx, len(schedule) - 1)]

    def decide(self, inputs: BlockInputs, state: RefinementState, *, block_length: int,
               gen_length: int) -> tuple[RefinementDecision, RefinementState]:
        """This pass's decision and the state after it (the reference's inner-loop bookkeeping).

        Named apart from the CommitRule protocol's `step(view, state)`, which this rule gains
        when the engine's Decision carries edits (issue #22).
        """
        masks_remaining = bool(inputs.is_masked.any())
        if not masks_remaining:
            state = replace(state, post_steps=state.post_steps + 1)
        decision = refine(inputs, self.quota(state.step_idx, block_length, gen_length), self.threshold,
                          self.editing_threshold)
        if masks_remaining:
            state = replace(state, step_idx=state.step_idx + 1)
        return decision, state

    def should_continue(self, state: RefinementState, *, had_masks: bool, edited: bool, finished: bool,
                        gen_length: int) -> bool:
        """Whether the block takes another pass (diffusers' `check_block_should_continue`).

        `had_masks` is whether the step that just ran *started* with masks in the block: the
        pass that fills the block therefore always buys one more pass (a post-step) unless the
        schedule is used up, even with editing off.
        """
        if finished:
            return False
        if not had_masks:
            return self.editing_enabled and edited and state.post_steps <= self.max_post_steps
        return state.step_idx < self.steps_per_block(gen_length)
