"""LLaDA2.x block refinement: commit masked positions by confidence, and edit committed ones.

The decision of diffusers' `BlockRefinementScheduler.step` (mask mode) and the block loop's
continue test, as pure numpy over the positions of one block (docs/PARADIGMS.md, "Block
refinement"), and the commit rule that plugs them into the engine. It knows nothing about
models or logits: the engine samples the candidates (the rule's `sampler`), applies the decision
and tracks end-of-text; this module says what to change.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from dllm_viz.policies.base import (
    NO_REASON,
    BlockSampling,
    CommitRule,
    Decision,
    StepView,
    reason_code,
    top_k_mask,
)
from dllm_viz.policies.knobs import check_knobs, knob
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


@dataclass(frozen=True)
class BlockRefinementRule(CommitRule):
    """LLaDA2.x's rule: commit by confidence with a per-step quota, edit committed tokens.

    Rule: at step t of a block, the masked positions whose confidence clears `commit_threshold`
    are committed if there are at least n[t] of them (n spreads `block_length` over `block_steps`), else
    the n[t] most confident. With editing on, a committed non-prompt token of the block is
    replaced when the model now prefers another one with confidence above `editing_threshold`;
    once the block is full, extra passes run while edits keep happening (at most
    `max_post_steps` + 1 of them, the reference's bound). `minimal_topk` only caps the steps.
    Paper: "LLaDA2.0: Scaling Up Diffusion Language Models to 100B", arXiv 2512.15745; defaults
    mirror diffusers 0.42.1 `LLaDA2Pipeline.__call__` (its `threshold` and `num_inference_steps` are
    `commit_threshold` and `block_steps` here: those names mean something else in other rules).
    Unlike `threshold`, the fallback is a quota rather than one position, candidates are drawn by
    multinomial sampling over the block (`sampler`, at the decode's temperature: 0 = greedy), and
    tokens can change after they are committed. Runs over `aligned` (or `fixed`) blocks.
    """

    name: ClassVar[str] = "block_refinement"
    block_steps: int = knob(32, "refinement steps per block (LLaDA2 num_inference_steps)", within=">= 1")
    commit_threshold: float = knob(0.7, "confidence a masked position needs to be committed (LLaDA2 threshold); "
                                        "> 1 = quota only", within=">= 0")
    editing_threshold: float | None = knob(0.5, "confidence an edit of a committed token needs; None or <= 0 = "
                                                "no editing", within="[-1, 1]")
    minimal_topk: int = knob(1, "caps the steps at gen_length // minimal_topk", within=">= 1")
    max_post_steps: int = knob(16, "bound on extra passes after a block is full, while edits continue",
                               within=">= 0")
    top_k: int | None = knob(None, "sample among the k most likely tokens; None or 0 = all", within=">= 0")
    top_p: float | None = knob(None, "nucleus mass to sample from; None = all", within="(0, 1]")

    def __post_init__(self) -> None:
        check_knobs(self)

    def validate_blocks(self, gen_length: int, block_length: int | None) -> None:
        if block_length is None:
            raise ValueError("block_refinement needs windows of one fixed length for its quota schedule; "
                             "use block='aligned' (or 'fixed'), not a variable-window sizer")
        self.steps_per_block(gen_length)

    def init_state(self, gen_length: int) -> RefinementState:
        return RefinementState()

    def pass_bound(self, canvas_length: int, block_length: int | None) -> int | None:
        """Every block (one more for the prompt's partial one) can take its steps plus the post-steps."""
        blocks = -(-canvas_length // (block_length or canvas_length)) + 1
        return blocks * (self.block_steps + self.max_post_steps + 1)

    def sampler(self) -> BlockSampling:
        return BlockSampling(self.top_k, self.top_p)

    def step(self, view: StepView, state: RefinementState) -> tuple[Decision, RefinementState]:
        """The reference's pass over the current block, as a Decision with edits and the block's
        continue test as `keep_window`."""
        if view.step_in_window == 0:
            state = RefinementState()
        if view.block_length is None:
            raise ValueError("block_refinement needs a fixed block length; use block='aligned'")
        lo, hi = view.window
        inputs = BlockInputs(confidence=np.asarray(view.confidence[lo:hi], dtype=np.float32),
                             candidate=view.candidate[lo:hi], tokens=view.tokens[lo:hi],
                             is_masked=view.is_masked[lo:hi], is_prompt=np.zeros(hi - lo, dtype=bool))
        had_masks = bool(inputs.is_masked.any())
        decided, state = self.decide(inputs, state, block_length=view.block_length, gen_length=view.answer_length)
        commit = np.zeros(view.gen_length, dtype=bool)
        commit[lo:hi] = decided.commit
        edit = np.zeros(view.gen_length, dtype=bool)
        edit[lo:hi] = decided.edit
        more = self.should_continue(state, had_masks=had_masks, edited=bool(decided.edit.any()), finished=False,
                                    gen_length=view.answer_length)
        codes = np.where(commit, reason_code("threshold"), NO_REASON).astype(np.int8)
        above = np.asarray(view.confidence, dtype=np.float32) > self.commit_threshold
        quota_only = commit & ~(view.is_masked & above)
        codes[quota_only] = reason_code("quota")
        return Decision(commit=commit, reason=codes, edit=edit, keep_window=more, allow_empty=True), state

    @property
    def editing_enabled(self) -> bool:
        """Whether edits (and post-steps) happen at all."""
        return self.editing_threshold is not None and self.editing_threshold > 0.0

    def steps_per_block(self, gen_length: int) -> int:
        """Refinement steps per block: `steps` capped at gen_length // minimal_topk (sic: not the block)."""
        capped = min(self.block_steps, gen_length // self.minimal_topk)
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

        The reference's own bookkeeping over one block's arrays; `step` adapts a StepView to it.
        """
        masks_remaining = bool(inputs.is_masked.any())
        if not masks_remaining:
            state = replace(state, post_steps=state.post_steps + 1)
        decision = refine(inputs, self.quota(state.step_idx, block_length, gen_length), self.commit_threshold,
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
