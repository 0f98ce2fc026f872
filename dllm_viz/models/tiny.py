"""The bundled tiny model (docs/DESIGN.md §4) as a family: a LlamaForCausalLM saved by save_pretrained.

Its config.json is a plain Llama config plus a `dllm_viz` section that states what a published
checkpoint would get from its tokenizer or its paper: the mask and EOS ids, the delimiters and the
prompt template.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # transformers' config classes cost ~0.5 s to import; only load() needs them
    from transformers import LlamaConfig

MASK_TOKEN = "[MASK]"
# AdaBlock's tau_D, measured by CORA-Diff's protocol on the bundled step-34000 model (BENCHMARKS.md,
# "Summary: the hard split", session 22): hard chains + breadth, gen 256, B0 = 32, threshold 0.9,
# problems 0-49 of each to calibrate: tau_D 0.1 / 0.3 / 0.5 / 0.7 / 0.9 gave 44 / 44 / 47 / 48 / 44%
# at mean NFE 23.2 / 23.2 / 23.0 / 22.7 / 21.9 against dense's 56% at 256, so no point is within a
# point of dense; the most accurate, 0.7, fell under dense on the disjoint check too (44% vs 47%).
# 0.9 stays: 0.7's lead is 4 problems of 100, it has the fewest passes, and it was the calibrated or
# kept point on the step-24380 and step-27250 models (sessions 17 and 19). Low tau_D ends windows at
# newlines the model is unsure of, which costs passes and accuracy.
ADABLOCK_TAU_D = 0.9
# The family-calibrated knobs' values for this family (dllm_viz/models/families.py, `points`).
CALIBRATED_POINTS: dict[str, dict[str, Any]] = {"adablock": {"delimiter_threshold": ADABLOCK_TAU_D}}


def is_tiny_config(raw: dict[str, Any], directory: Path) -> bool:
    """True for a config.json written by our exporter (train/export.py): its section says so."""
    return (raw.get("dllm_viz") or {}).get("family") == "tiny"


def llama_config(raw: dict[str, Any]) -> LlamaConfig:
    """The saved LlamaConfig itself (the `dllm_viz` section rides along unused)."""
    from transformers import LlamaConfig

    return LlamaConfig.from_dict(raw)


def rename_key(key: str) -> str:
    """Saved by save_pretrained: its keys are LlamaForCausalLM's own."""
    return key


def stated_ids(raw: dict[str, Any]) -> dict[str, Any]:
    """The section's ids (both keys always stated); EOS falls back to the Llama config's."""
    section = raw["dllm_viz"]
    return {"mask_token_id": section.get("mask_token_id"),
            "eos_token_id": section.get("eos_token_id", raw.get("eos_token_id"))}


def delimiters(raw: dict[str, Any]) -> tuple[str, ...]:
    """The delimiters the model was trained with, newline by default."""
    return tuple(raw["dllm_viz"].get("delimiters", ["\n"]))


def prompt_template(raw: dict[str, Any]) -> str | None:
    """The plain-text template the model was trained on (it has no chat template)."""
    return raw["dllm_viz"].get("prompt_template")
