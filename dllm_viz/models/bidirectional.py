"""Run a transformers decoder-only architecture with full (bidirectional) attention.

Masked diffusion LMs are ordinary Llama/Qwen2 stacks without the causal mask. transformers
returns a 4-D mask unchanged, so passing an all-zero additive mask of shape
(1, 1, query, key) gives every query every key under both the SDPA and eager kernels.
This module knows nothing about model families or tokens.
"""

from __future__ import annotations

import torch
from torch import nn


def full_attention_mask(
    query_len: int, key_len: int, *, dtype: torch.dtype, device: torch.device | str
) -> torch.Tensor:
    """Additive mask that hides nothing: zeros of shape (1, 1, query_len, key_len)."""
    return torch.zeros((1, 1, query_len, key_len), dtype=dtype, device=device)


def make_bidirectional(model: nn.Module) -> nn.Module:
    """Mark every attention module and the config as non-causal (in place) and return the model.

    The explicit 4-D mask already removes causality; this is a second guard so that a call
    that forgets the mask fails towards bidirectional attention, not silently causal.
    """
    config = getattr(model, "config", None)
    if config is not None:
        config.is_causal = False
    for module in model.modules():
        if hasattr(module, "is_causal"):
            module.is_causal = False
    return model


def bidirectional_logits(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """Logits of `model` over a batch of token rows with full attention.

    Args:
        model: a transformers *ForCausalLM whose attention honours 4-D masks.
        input_ids: long tensor of shape (batch, seq).

    Returns:
        Float tensor (batch, seq, vocab); row i is the model output at position i (no shift).
    """
    seq = input_ids.shape[1]
    dtype = next(model.parameters()).dtype
    mask = full_attention_mask(seq, seq, dtype=dtype, device=input_ids.device)
    mask = mask.expand(input_ids.shape[0], 1, seq, seq)
    return model(input_ids=input_ids, attention_mask=mask, use_cache=False).logits
