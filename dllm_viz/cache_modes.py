"""The KV-cache modes a pipeline may ask for, and the kinds of forward pass they produce.

One vocabulary for the pipeline, the engine, the adapters, the trace, the CLI and the app, so a
new mode is one entry here. Knows nothing about how a cache works (that is models/kv_cache.py).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Literal

# Fast-dLLM's caches (docs/ALGORITHMS.md §2): none = a full pass every step; prefix / dual reuse
# the keys and values of the window-opening full pass (approximate: bidirectional models). exact:
# block-causal models (block diffusion) keep the finished blocks' keys and values, which never
# change there, and query only the current block (docs/PARADIGMS.md).
CacheMode = Literal["none", "prefix", "dual", "exact"]
CACHE_MODES: tuple[CacheMode, ...] = typing.get_args(CacheMode)

# What one forward pass was: the whole sequence, or a partial pass against a cache. Traces store
# the index into PASS_KINDS (and the names travel in every saved trace's metadata).
PassKind = Literal["full", "prefix_cached", "dual_cached", "exact_cached"]
PASS_KINDS: tuple[PassKind, ...] = typing.get_args(PassKind)
# Fast-dLLM's approximate caches: the ones a window-opening pass refreshes, and `refresh_every` renews
# inside a window (the exact cache is never stale).
APPROXIMATE: tuple[CacheMode, ...] = ("prefix", "dual")
PARTIAL_PASS: Mapping[CacheMode, PassKind] = {"prefix": "prefix_cached", "dual": "dual_cached",
                                             "exact": "exact_cached"}


def check_cache_mode(mode: str) -> CacheMode:
    """`mode` if it is a known cache mode; ValueError naming the choices otherwise."""
    if mode not in CACHE_MODES:
        raise ValueError(f"`cache` must be one of {', '.join(map(repr, CACHE_MODES))}, got {mode!r}")
    return typing.cast(CacheMode, mode)
