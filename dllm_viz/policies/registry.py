"""The explicit registries of policy components, keyed by their snake_case names.

Built by hand (no import-time registration) so the full list is readable in one place.
"""

from __future__ import annotations

from dllm_viz.policies.adablock import AdaBlock
from dllm_viz.policies.aligned_blocks import AlignedBlocks
from dllm_viz.policies.block_refinement import BlockRefinementRule
from dllm_viz.policies.blocks import FixedBlocks
from dllm_viz.policies.cora import CoraPolicy
from dllm_viz.policies.dream import DreamPolicy
from dllm_viz.policies.eos_stop import EosStop, FirstEosStop
from dllm_viz.policies.factor import FactorPolicy
from dllm_viz.policies.fixed_steps import FixedStepsPolicy
from dllm_viz.policies.kalman import KalmanExtrapolation
from dllm_viz.policies.learn2pd import Learn2PdPolicy
from dllm_viz.policies.threshold import ThresholdPolicy
from dllm_viz.policies.tspd import TspdPolicy

RULES: dict[str, type] = {
    FixedStepsPolicy.name: FixedStepsPolicy,
    ThresholdPolicy.name: ThresholdPolicy,
    FactorPolicy.name: FactorPolicy,
    CoraPolicy.name: CoraPolicy,
    DreamPolicy.name: DreamPolicy,
    TspdPolicy.name: TspdPolicy,
    Learn2PdPolicy.name: Learn2PdPolicy,
    BlockRefinementRule.name: BlockRefinementRule,
}
BLOCKS: dict[str, type] = {
    FixedBlocks.name: FixedBlocks,
    AdaBlock.name: AdaBlock,
    AlignedBlocks.name: AlignedBlocks,
}
EXTRAPOLATORS: dict[str, type] = {
    KalmanExtrapolation.name: KalmanExtrapolation,
}
STOPS: dict[str, type] = {
    EosStop.name: EosStop,
    FirstEosStop.name: FirstEosStop,
}


def lookup(registry: dict[str, type], kind: str, name: str) -> type:
    """The class registered as `name`, or a ValueError listing the valid names."""
    try:
        return registry[name]
    except KeyError:
        raise ValueError(f"unknown {kind} {name!r}; choose one of {sorted(registry)}") from None
