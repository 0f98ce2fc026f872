"""Decoding policies: commit rules and block sizers, composed by `Pipeline`.

Each rule lives in its own module; the registries in `registry.py` name them explicitly. The
names below are imported on first use (PEP 562), so importing one leaf module (the extras'
names, the contracts in base.py) does not load every rule: figures read those without the
policies, their weights code or threadpoolctl.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module under dllm_viz.policies that defines it.
_EXPORTS: dict[str, str] = {
    "AdaBlock": "adablock",
    "AlignedBlocks": "aligned_blocks",
    "BlockRefinementRule": "block_refinement",
    "BLOCKS": "registry",
    "BlockSizer": "base",
    "COMMIT_REASONS": "base",
    "CommitRule": "base",
    "CoraPolicy": "cora",
    "Decision": "base",
    "DreamPolicy": "dream",
    "EXTRAPOLATORS": "registry",
    "EosStop": "eos_stop",
    "Extrapolator": "base",
    "FactorPolicy": "factor",
    "FirstEosStop": "eos_stop",
    "FixedBlocks": "blocks",
    "FixedStepsPolicy": "fixed_steps",
    "KalmanExtrapolation": "kalman",
    "Learn2PdPolicy": "learn2pd",
    "NO_REASON": "base",
    "Pipeline": "pipeline",
    "RULES": "registry",
    "STOPS": "registry",
    "StepView": "base",
    "StopDecision": "base",
    "StopRule": "base",
    "ThresholdPolicy": "threshold",
    "TspdPolicy": "tspd",
    "reason_code": "base",
    "top_k_mask": "base",
    "transfer_schedule": "schedule",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dllm_viz.policies' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"dllm_viz.policies.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value
