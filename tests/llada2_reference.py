"""diffusers' LLaDA2Pipeline run on a tiny transformers model, step by step (the faithfulness oracle).

The pipeline hands the model only a 2-D mask and position_ids and leaves attention to it, so
`AttentionWrapper` (dllm_viz.models.attention_wrapper, shared with the pipeline benchmark) turns
the 2-D mask into a 4-D one of the chosen kind (bidirectional, token-causal or block-causal over
absolute-aligned blocks) and counts forward passes.
`run_reference` drives the pipeline with `callback_on_step_end` and records, per forward pass,
the window, the commits (mask -> token) and the edits (token -> token) in canvas positions.
Issue #22's engine must reproduce these records token for token (docs/PARADIGMS.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from diffusers import BlockRefinementScheduler, LLaDA2Pipeline

from dllm_viz.models.attention_wrapper import Attention, AttentionWrapper

__all__ = ["SETTINGS", "Attention", "AttentionWrapper", "ReferenceRun", "ReferenceStep", "run_reference"]

# The settings issue #22 asks the engine to match, as LLaDA2Pipeline keyword arguments.
SETTINGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "no_editing": {"editing_threshold": None},
    "high_threshold": {"threshold": 0.95},
    "temperature_1": {"temperature": 1.0},
    "top_k_top_p": {"temperature": 0.8, "top_k": 5, "top_p": 0.9},
    "minimal_topk": {"minimal_topk": 6},
    "eos_early_stop": {"eos_early_stop": True},
}


@dataclass(frozen=True)
class ReferenceStep:
    """One forward pass of the pipeline, in canvas positions (prompt included).

    Attributes:
        global_step: index of the pass over the whole run (NFE - 1 at the last one).
        step_idx: the pipeline's in-block step counter (it stops advancing in post-steps).
        window: [start, end) of the block this pass refined.
        is_post_step: the block held no mask when the pass started.
        commits: {position: token} committed from mask.
        edits: {position: (old token, new token)} replaced after being committed.
        sampled_tokens, sampled_probs: the block's candidates and their confidences.
    """

    global_step: int
    step_idx: int
    window: tuple[int, int]
    is_post_step: bool
    commits: dict[int, int]
    edits: dict[int, tuple[int, int]]
    sampled_tokens: list[int]
    sampled_probs: list[float]


@dataclass
class ReferenceRun:
    """Everything one pipeline call did."""

    prompt_length: int
    gen_length: int
    block_length: int
    sequence: list[int]  # the pipeline's output: gen_length tokens after the prompt (masks may remain)
    steps: list[ReferenceStep] = field(default_factory=list)
    nfe: int = 0

    @property
    def num_edits(self) -> int:
        return sum(len(s.edits) for s in self.steps)


def _recorder(run: ReferenceRun, canvas: torch.Tensor, block_length: int):
    """A callback_on_step_end that appends one ReferenceStep per pass and keeps `canvas` current."""

    def on_step_end(pipe: Any, global_step: int, step_idx: int, kwargs: dict[str, torch.Tensor]) -> dict:
        block_x = kwargs["block_x"][0]
        end = block_x.shape[0]
        start = end - block_length
        before = canvas[start:end].clone()
        commit, edit = kwargs["transfer_index"][0], kwargs["editing_transfer_index"][0]
        new = block_x[start:end]
        run.steps.append(ReferenceStep(
            global_step=global_step, step_idx=step_idx, window=(start, end),
            is_post_step=not bool(kwargs["active_block"][0].any()),
            commits={start + i: int(new[i]) for i in torch.nonzero(commit).flatten().tolist()},
            edits={start + i: (int(before[i]), int(new[i])) for i in torch.nonzero(edit).flatten().tolist()},
            sampled_tokens=kwargs["sampled_tokens"][0].tolist(), sampled_probs=kwargs["sampled_probs"][0].tolist()))
        canvas[:end] = block_x
        return {}

    return on_step_end


def run_reference(model: AttentionWrapper, prompt_ids: list[int], *, gen_length: int, block_length: int,
                  mask_token_id: int, eos_token_id: int, steps: int = 32, seed: int = 0,
                  **settings: Any) -> ReferenceRun:
    """Run LLaDA2Pipeline once and record every pass.

    `settings` are LLaDA2Pipeline keyword arguments (see SETTINGS); `eos_early_stop` defaults
    to False here so that only the EOS setting stops early (the pipeline's own default is True).
    The generator is a CPU torch.Generator seeded with `seed`, as the engine's will be.
    """
    settings = {"eos_early_stop": False, **settings}
    pipe = LLaDA2Pipeline(model=model, scheduler=BlockRefinementScheduler(block_length=block_length))
    pipe.set_progress_bar_config(disable=True)
    prompt = torch.tensor([prompt_ids], dtype=torch.long)
    total = -(-(len(prompt_ids) + gen_length) // block_length) * block_length
    canvas = torch.full((total,), mask_token_id, dtype=torch.long)
    canvas[: len(prompt_ids)] = prompt[0]
    run = ReferenceRun(prompt_length=len(prompt_ids), gen_length=gen_length, block_length=block_length, sequence=[])
    start_forwards = model.num_forwards
    out = pipe(input_ids=prompt, gen_length=gen_length, block_length=block_length, num_inference_steps=steps,
               mask_token_id=mask_token_id, eos_token_id=eos_token_id, output_type="seq",
               generator=torch.Generator().manual_seed(seed),
               callback_on_step_end=_recorder(run, canvas, block_length),
               callback_on_step_end_tensor_inputs=["block_x", "transfer_index", "editing_transfer_index",
                                                   "sampled_tokens", "sampled_probs", "active_block"],
               **settings)
    run.sequence = out.sequences[0].tolist()
    run.nfe = model.num_forwards - start_forwards
    return run
