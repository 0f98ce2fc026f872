"""Decoding policies: commit rules and block sizers, composed by `Pipeline`.

Each rule lives in its own module; the registries in `registry.py` name them explicitly.
"""

from __future__ import annotations

from dllm_viz.policies.adablock import AdaBlock
from dllm_viz.policies.base import (
    COMMIT_REASONS,
    NO_REASON,
    BlockSizer,
    CommitRule,
    Decision,
    Extrapolator,
    StepView,
    StopDecision,
    StopRule,
    reason_code,
    top_k_mask,
)
from dllm_viz.policies.blocks import FixedBlocks
from dllm_viz.policies.cora import CoraPolicy
from dllm_viz.policies.dream import DreamPolicy
from dllm_viz.policies.eos_stop import EosStop
from dllm_viz.policies.factor import FactorPolicy
from dllm_viz.policies.fixed_steps import FixedStepsPolicy
from dllm_viz.policies.kalman import KalmanExtrapolation
from dllm_viz.policies.learn2pd import Learn2PdPolicy
from dllm_viz.policies.pipeline import Pipeline
from dllm_viz.policies.registry import BLOCKS, EXTRAPOLATORS, RULES, STOPS
from dllm_viz.policies.schedule import transfer_schedule
from dllm_viz.policies.threshold import ThresholdPolicy
from dllm_viz.policies.tspd import TspdPolicy

POLICIES = RULES

__all__ = [
    "BLOCKS",
    "COMMIT_REASONS",
    "EXTRAPOLATORS",
    "NO_REASON",
    "POLICIES",
    "RULES",
    "STOPS",
    "AdaBlock",
    "BlockSizer",
    "CommitRule",
    "CoraPolicy",
    "Decision",
    "DreamPolicy",
    "EosStop",
    "Extrapolator",
    "FactorPolicy",
    "FixedBlocks",
    "FixedStepsPolicy",
    "KalmanExtrapolation",
    "Learn2PdPolicy",
    "Pipeline",
    "StepView",
    "StopDecision",
    "StopRule",
    "ThresholdPolicy",
    "TspdPolicy",
    "reason_code",
    "top_k_mask",
    "transfer_schedule",
]
