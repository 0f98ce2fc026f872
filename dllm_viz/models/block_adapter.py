"""The adapter of block-diffusion models: block-causal attention, prefix-only passes, an exact cache.

A block-diffusion model (LLaDA2.x, SDAR, Fast-dLLM v2; block_diffusion.py) attends
bidirectionally inside an absolute-aligned block and causally between blocks, so a pass needs
only the rows up to the current window's end (info.context "prefix") and the keys and values of
every block before the window's block never change once that block is finished: the exact
prefix cache (`exact_logits`) keeps them and queries only the current block. The engine decides
which rows to pass; this module builds the mask and the position ids and owns the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from dllm_viz.models.base import ModelAdapter
from dllm_viz.models.block_causal import block_causal_mask


@dataclass
class PrefixCache:
    """transformers' DynamicCache over rows [0, length) whose keys and values are final.

    Attributes:
        cache: the DynamicCache (None before the first pass).
        length: rows it holds.
    """

    cache: Any = None
    length: int = 0

    def nbytes(self) -> int:
        """Memory held by the keys and values."""
        if self.cache is None:
            return 0
        total = 0
        for layer in getattr(self.cache, "layers", []):
            for name in ("keys", "values"):
                tensor = getattr(layer, name, None)
                if isinstance(tensor, torch.Tensor):
                    total += tensor.numel() * tensor.element_size()
        return total


class BlockDiffusionAdapter(ModelAdapter):
    """A block-causal masked-diffusion LM: each pass feeds a prefix of the row (info.context "prefix").

    Args: as for ModelAdapter; info.attention says how the model attends: "block_causal" over
    absolute-aligned blocks of info.block_length, "token_causal", or "bidirectional" over the
    prefix (what diffusers' LLaDA2Pipeline does with a bidirectional model; tests use it).
    """

    def __init__(self, model: Any, tokenizer: Any, info: Any, *, prompt_template: str | None = None) -> None:
        super().__init__(model, tokenizer, info, prompt_template=prompt_template)
        if info.context != "prefix":
            raise ValueError(f"a block-diffusion adapter feeds prefixes; its info.context must be 'prefix', "
                             f"got {info.context!r}")
        blocks = {"block_causal": info.block_length, "token_causal": 1, "bidirectional": None}
        if info.attention not in blocks or (info.attention == "block_causal" and not info.block_length):
            raise ValueError(f"unknown attention {info.attention!r} (block length {info.block_length}); use "
                             f"{', '.join(blocks)} (block_causal with a block length >= 1)")
        self.attention_block: int | None = blocks[info.attention]

    @property
    def supports_cache(self) -> bool:
        """Fast-dLLM's approximate caches assume bidirectional attention over the whole canvas."""
        return False

    @property
    def supports_exact_cache(self) -> bool:
        """Finished blocks' keys and values are final only when attention is (block-)causal."""
        return self.attention_block is not None

    def attention_mask(self, query_start: int, key_length: int, valid: int | None) -> torch.Tensor:
        """Additive 4-D mask for queries [query_start, key_length) over keys [0, key_length):
        block-causal over absolute-aligned blocks of `attention_block`, padding hidden."""
        dtype = next(self.model.parameters()).dtype
        key_valid = None
        if valid is not None and valid < key_length:
            key_valid = torch.arange(key_length, device=self.device) < valid
        block = self.attention_block or key_length
        return block_causal_mask(key_length, block, query_start=query_start, key_valid=key_valid, dtype=dtype,
                                 device=self.device)

    @torch.inference_mode()
    def exact_logits(self, tokens: torch.Tensor, row_start: int, window_start: int, valid: int | None,
                     cache: PrefixCache | None) -> tuple[torch.Tensor, PrefixCache, int]:
        """Logits rows [row_start, n) of `tokens`, reusing the cached keys and values of final rows.

        Args:
            tokens: the row's prefix (1-D), prompt included.
            row_start: first row whose logits are returned.
            window_start: first row of the window being decoded; rows of attention blocks
                before its block are final for good, so their keys and values are kept after
                this pass, and later rows are recomputed every pass.
            valid: keys at or after it are padding, hidden from every query.
            cache: the previous pass's cache, or None.

        Returns:
            (logits, the cache now holding rows [0, min(safe, n)), query rows computed).
        """
        from transformers import DynamicCache

        if not self.supports_exact_cache:
            raise ValueError("the exact prefix cache needs block-causal or causal attention; this model attends "
                             "bidirectionally over the prefix, use cache='none'")
        cache = cache or PrefixCache()
        n = int(tokens.shape[0])
        block = self.attention_block or 1
        safe = window_start // block * block
        lead = 1 if self.info.shift_logits and row_start > 0 else 0  # the output before row_start
        start = min(cache.length, row_start - lead, safe)
        if cache.cache is None:
            cache.cache, start = DynamicCache(config=self.model.config), 0
        else:
            _crop_to(cache.cache, start)
        ids = tokens[start:n].to(self.device).view(1, -1)
        positions = torch.arange(start, n, device=self.device).view(1, -1)
        out = self.model(input_ids=ids, attention_mask=self.attention_mask(start, n, valid), position_ids=positions,
                         cache=cache.cache, use_cache=True).logits[0]
        kept = min(safe, n)
        _crop_to(cache.cache, kept)
        cache.length = kept
        rows = out[row_start - start - lead:]
        if lead:
            rows = rows[:-1]  # row j is the output at the position before row_start + j
        elif self.info.shift_logits:
            rows = self._shift(rows)  # from row 0: as `logits` shifts a whole row
        return rows, cache, n - start


def _crop_to(cache: Any, length: int) -> None:
    """Keep the first `length` rows of a DynamicCache (its `crop` takes how many rows to drop)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)
