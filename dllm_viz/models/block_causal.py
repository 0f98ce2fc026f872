"""Block-causal attention over absolute-aligned blocks, as a 4-D additive mask.

Block-diffusion models (LLaDA2.x, SDAR, Fast-dLLM v2) attend bidirectionally inside a block
and causally between blocks, where blocks tile the whole row from position 0, prompt
included: position i sees position j iff j // B <= i // B. transformers passes a 4-D mask to
the attention kernels unchanged, so this mask is the whole of "block-causal" for a maintained
Llama / Qwen2 / Qwen3 / GLM4-MoE class. Knows nothing about tokens or families.
"""

from __future__ import annotations

import torch


def block_causal_visible(query_positions: torch.Tensor, key_positions: torch.Tensor,
                         block_length: int) -> torch.Tensor:
    """Boolean (queries x keys): True where the key's block is not after the query's block."""
    if block_length < 1:
        raise ValueError(f"`block_length` must be >= 1, got {block_length}")
    return (key_positions[None, :] // block_length) <= (query_positions[:, None] // block_length)


def block_causal_mask(
    key_length: int,
    block_length: int,
    *,
    query_start: int = 0,
    query_length: int | None = None,
    key_valid: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Additive mask (1, 1, queries, keys): 0 where visible, the dtype's minimum elsewhere.

    Args:
        key_length: keys are positions [0, key_length) of the row.
        block_length: B; blocks are [kB, (k+1)B) in absolute positions.
        query_start: first query position; a pass over the current block with the finished
            prefix in a KV cache has queries [query_start, key_length).
        query_length: number of queries; default key_length - query_start.
        key_valid: optional boolean (key_length,) of real keys (diffusers' 2-D mask: 0 on the
            padding past prompt + gen_length); invalid keys are hidden from every query.
        dtype: the model's dtype (the minimum, not -inf, keeps fully hidden rows NaN-free).
        device: where the mask lives.
    """
    if query_length is None:
        query_length = key_length - query_start
    if query_start < 0 or query_length < 0 or query_start + query_length > key_length:
        raise ValueError(f"queries [{query_start}, {query_start + query_length}) must lie inside the "
                         f"{key_length} keys")
    queries = torch.arange(query_start, query_start + query_length, device=device)
    visible = block_causal_visible(queries, torch.arange(key_length, device=device), block_length)
    if key_valid is not None:
        if key_valid.shape != (key_length,):
            raise ValueError(f"`key_valid` must have shape ({key_length},), got {tuple(key_valid.shape)}")
        visible = visible & key_valid.to(device=device, dtype=torch.bool)[None, :]
    mask = torch.zeros(visible.shape, dtype=dtype, device=device)
    return mask.masked_fill_(~visible, torch.finfo(dtype).min)[None, None]


def token_causal_mask(key_length: int, *, key_valid: torch.Tensor | None = None, dtype: torch.dtype = torch.float32,
                      device: torch.device | str = "cpu") -> torch.Tensor:
    """Ordinary causal attention: block-causal with blocks of one token."""
    return block_causal_mask(key_length, 1, key_valid=key_valid, dtype=dtype, device=device)
