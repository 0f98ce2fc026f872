"""Model adapters: loading, family facts and the logits contract (docs/DESIGN.md §3)."""

from __future__ import annotations

from dllm_viz.models.base import AdapterInfo, ModelAdapter, ModelLoadError
from dllm_viz.models.loading import TINY_DIR, block_length_of, family_of, load, resolve_device, resolve_dtype

__all__ = [
    "TINY_DIR",
    "AdapterInfo",
    "ModelAdapter",
    "ModelLoadError",
    "block_length_of",
    "family_of",
    "load",
    "resolve_device",
    "resolve_dtype",
]
