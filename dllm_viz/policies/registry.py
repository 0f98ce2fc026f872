"""The explicit registries of policy components, keyed by their snake_case names.

Built by hand (no import-time registration) so the full list is readable in one place.
"""

from __future__ import annotations

from dllm_viz.policies.blocks import FixedBlocks
from dllm_viz.policies.factor import FactorPolicy
from dllm_viz.policies.fixed_steps import FixedStepsPolicy
from dllm_viz.policies.threshold import ThresholdPolicy

RULES: dict[str, type] = {
    FixedStepsPolicy.name: FixedStepsPolicy,
    ThresholdPolicy.name: ThresholdPolicy,
    FactorPolicy.name: FactorPolicy,
}
BLOCKS: dict[str, type] = {
    FixedBlocks.name: FixedBlocks,
}


def lookup(registry: dict[str, type], kind: str, name: str) -> type:
    """The class registered as `name`, or a ValueError listing the valid names."""
    try:
        return registry[name]
    except KeyError:
        raise ValueError(f"unknown {kind} {name!r}; choose one of {sorted(registry)}") from None
