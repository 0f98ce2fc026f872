"""The policy a model decodes with when the user names none: one rule for the CLI and the app.

A bidirectional masked-diffusion LM (LLaDA, Dream, the tiny model) starts on Fast-dLLM's
threshold rule over fixed blocks; a block-causal model (block diffusion: LLaDA2.x, SDAR,
Fast-dLLM v2) on LLaDA2's block refinement over absolute-aligned blocks of its own block length,
the geometry it was trained with (docs/PARADIGMS.md, "Block refinement"). Pure facts: knows
nothing about models beyond the block length it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dllm_viz.policies.aligned_blocks import AlignedBlocks
from dllm_viz.policies.fixed_steps import FixedStepsPolicy
from dllm_viz.policies.knobs import knobs
from dllm_viz.policies.pipeline import REGISTRIES, Pipeline


@dataclass(frozen=True)
class PolicyDefaults:
    """Component names and field values to start from.

    Attributes:
        rule: the commit rule's registry name.
        block: the block sizer's registry name.
        options: field values (e.g. the block length), by field name.
        stop: the stop rule a page offers first when the user turns an EOS stop on.
    """

    rule: str
    block: str
    options: dict[str, Any] = field(default_factory=dict)
    stop: str = "eos"


BIDIRECTIONAL = PolicyDefaults(rule="threshold", block="fixed")


def policy_defaults(block_causal_length: int | None) -> PolicyDefaults:
    """The defaults for a model attending block-causally over blocks of `block_causal_length`
    (None: a bidirectional model, or a block-diffusion model without a block of its own)."""
    if block_causal_length is None:
        return BIDIRECTIONAL
    return PolicyDefaults(rule="block_refinement", block="aligned", options={"block_length": int(block_causal_length)},
                          stop="eos_first")


def dense_baseline(block_causal_length: int | None, gen_length: int) -> Pipeline:
    """LLaDA's dense baseline (one token per pass) in the geometry the model decodes with.

    A bidirectional model: fixed blocks of 32 (one block of `gen_length` where 32 does not divide
    it), `Pipeline.dense`. A block-causal model: aligned blocks of its own length, the windows its
    configurations start on (`policy_defaults`). Compare's and Tune's "x fewer NFE than dense" and
    "same as dense" measure against this run; on a block-diffusion model it used to decode windows
    of 32 (or the whole canvas) across the model's attention blocks, a geometry it never runs with.
    """
    if block_causal_length is None:
        return Pipeline.dense(gen_length=gen_length)
    return Pipeline(rule=FixedStepsPolicy(), block=AlignedBlocks(int(block_causal_length)))


def calibrated_options(points: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Every family-calibrated knob of every registered component, by field name: the family's
    point from `points` (a model-family table row's, by component name), else the knob's
    published value. What a form starts its knobs at for a loaded model, so that the values shown
    are the ones it decodes with."""
    out: dict[str, Any] = {}
    for registry in REGISTRIES.values():
        for name, cls in registry.items():
            for spec in knobs(cls):
                if spec.published is not None:
                    out[spec.name] = points.get(name, {}).get(spec.name, spec.published)
    return out
