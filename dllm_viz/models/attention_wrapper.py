"""A transformers causal LM behind the call diffusers' LLaDA2Pipeline makes: model(x, mask, position_ids).

The pipeline hands its model only a 2-D padding mask and absolute position ids and leaves
attention to the model (docs/PARADIGMS.md, "One pass"). A maintained Llama / Qwen2 / Qwen3
class given a 2-D mask attends token-causally, so running the pipeline on one of our
block-diffusion checkpoints needs the 2-D mask turned into the 4-D mask the model was meant to
run with. This wrapper does that, and counts forward passes (the pipeline's NFE), for the
faithfulness oracle (tests/llada2_reference.py) and the pipeline benchmark (bench_pipeline.py).
Pure torch: it does not import diffusers.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Literal

import torch
from torch import nn

from dllm_viz.models.block_causal import block_causal_mask

Attention = Literal["bidirectional", "token_causal", "block_causal"]
ATTENTIONS: tuple[str, ...] = ("bidirectional", "token_causal", "block_causal")


class AttentionWrapper(nn.Module):
    """A *ForCausalLM as LLaDA2Pipeline calls it: model(input_ids, attention_mask, position_ids) -> .logits.

    Args:
        model: a transformers causal LM that honours 4-D additive masks (Llama / Qwen2 / Qwen3).
        attention: which 4-D mask the pipeline's 2-D mask becomes: "block_causal" over blocks of
            `block_length` from absolute position 0, "token_causal", or "bidirectional".
        block_length: B for "block_causal".

    Attributes:
        num_forwards: model calls so far (read it before and after a pipeline call for its NFE).
        tokens_fed: rows passed through the model so far (the pipeline recomputes the prefix).

    Raises:
        ValueError: an unknown attention kind, or block_causal without a block length >= 1.
    """

    def __init__(self, model: nn.Module, attention: Attention, block_length: int) -> None:
        super().__init__()
        if attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {attention!r}; use one of {', '.join(ATTENTIONS)}")
        if attention == "block_causal" and block_length < 1:
            raise ValueError(f"block_causal attention needs a block length >= 1, got {block_length}")
        self.model = model
        self.attention = attention
        self.block_length = block_length
        self.num_forwards = 0
        self.tokens_fed = 0

    @property
    def device(self) -> torch.device:  # DiffusionPipeline._execution_device reads it
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def four_d_mask(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """The (1, 1, L, L) additive mask for a batch-of-one 2-D mask of length L (zeros = padding keys)."""
        length = attention_mask.shape[-1]
        block = {"bidirectional": length, "token_causal": 1, "block_causal": self.block_length}[self.attention]
        return block_causal_mask(length, max(block, 1), key_valid=attention_mask[0].bool(), dtype=self.dtype,
                                 device=attention_mask.device)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor) -> Any:
        if input_ids.shape[0] != 1:
            raise ValueError(f"the wrapper runs one row at a time (the 4-D mask is built for one), got a batch "
                             f"of {input_ids.shape[0]}; call the pipeline once per prompt")
        self.num_forwards += 1
        self.tokens_fed += int(input_ids.shape[-1])
        out = self.model(input_ids=input_ids, attention_mask=self.four_d_mask(attention_mask),
                         position_ids=position_ids, use_cache=False)
        return SimpleNamespace(logits=out.logits)
