"""Decoding policies: commit rules and block sizers, composed by `Pipeline`.

Each rule lives in its own module; the registries in `registry.py` name them explicitly.
"""

from __future__ import annotations

from dllm_viz.policies.base import (
    COMMIT_REASONS,
    NO_REASON,
    BlockSizer,
    CommitRule,
    Decision,
    StepView,
    reason_code,
    top_k_mask,
)
from dllm_viz.policies.blocks import FixedBlocks
from dllm_viz.policies.factor import FactorPolicy
from dllm_viz.policies.fixed_steps import FixedStepsPolicy, transfer_schedule
from dllm_viz.policies.pipeline import Pipeline
from dllm_viz.policies.registry import BLOCKS, RULES
from dllm_viz.policies.threshold import ThresholdPolicy

POLICIES = RULES

__all__ = [
    "BLOCKS",
    "COMMIT_REASONS",
    "NO_REASON",
    "POLICIES",
    "RULES",
    "BlockSizer",
    "CommitRule",
    "Decision",
    "FactorPolicy",
    "FixedBlocks",
    "FixedStepsPolicy",
    "Pipeline",
    "StepView",
    "ThresholdPolicy",
    "reason_code",
    "top_k_mask",
    "transfer_schedule",
]
