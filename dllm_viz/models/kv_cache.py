"""Fast-dLLM's approximate KV caches for bidirectional models (docs/ALGORITHMS.md §2.3-2.5).

A full pass records every layer's keys and values (after rotary, at absolute positions, which
is equivalent to Fast-dLLM's re-rotating of pre-rotary keys because positions never move).
Partial passes then reuse them:
- prefix: queries are the window and everything after it; they attend to the cached prefix and
  to their own fresh keys/values (nothing is stored, so the cache never grows);
- dual: queries are the window only; their fresh keys/values overwrite the window's slots and
  they attend to the whole cached sequence (stale prefix and suffix, fresh window).
The object is handed to a transformers model as its `cache`: the attention layers call
`update(...)`, which is all the duck-typing this needs. It knows nothing about decoding.
A full pass recorded into a cache that already holds buffers of the same shape copies into them
instead of keeping the pass's own tensors: on CPU, holding each refresh's fresh tensors alive costs
the allocator new pages, 5-10% of a pass on the bundled model (BENCHMARKS.md, session 32).
"""

from __future__ import annotations

from typing import Any, Literal

import torch


class WindowKVCache:
    """Per-layer key/value buffers of one full pass, served to prefix or dual partial passes."""

    is_compileable = False

    def __init__(self, num_layers: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers
        self.mode: Literal["record", "prefix", "dual"] = "record"
        self.query_start = 0
        self.query_end = 0

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys/values the layer's queries attend to (called by transformers' attention)."""
        if self.mode == "record":
            kept, kept_values = self.keys[layer_idx], self.values[layer_idx]
            if kept is not None and kept_values is not None and kept.shape == key_states.shape \
                    and kept.dtype == key_states.dtype and kept.device == key_states.device:
                kept.copy_(key_states)  # a refresh into the same buffers: see `refresh` in models/base.py
                kept_values.copy_(value_states)
                return kept, kept_values
            self.keys[layer_idx], self.values[layer_idx] = key_states, value_states
            return key_states, value_states
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        if keys is None or values is None:
            raise RuntimeError("WindowKVCache used before a full pass recorded it")
        start = self.query_start
        if self.mode == "prefix":
            return torch.cat([keys[:, :, :start], key_states], 2), torch.cat([values[:, :, :start], value_states], 2)
        keys[:, :, start : self.query_end] = key_states
        values[:, :, start : self.query_end] = value_states
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Length of the recorded sequence (0 before the first full pass)."""
        keys = self.keys[layer_idx]
        return 0 if keys is None else int(keys.shape[2])

    def nbytes(self) -> int:
        """Memory held by the buffers."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values) if t is not None)
