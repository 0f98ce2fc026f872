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
# AdaBlock's tau_D, measured by CORA-Diff's protocol on the bundled step-27250 model (BENCHMARKS.md,
# "Summary: the hard split", session 19): hard chains + breadth, gen 256, B0 = 32, threshold 0.9,
# problems 0-49 of each to calibrate: tau_D 0.1 / 0.3 / 0.5 / 0.7 / 0.9 gave 22 / 22 / 23 / 28 / 27%
# at mean NFE 26.2 / 26.2 / 25.9 / 25.1 / 24.3 against dense's 40% at 256, so no point is within a
# point of dense; the most accurate, 0.7, matched dense on the disjoint check (33% vs 33%). 0.9 stays:
# it and 0.7 are one problem apart on the calibration slice (within noise), it has the fewest passes,
# and it was the calibrated point on the step-24380 model (session 17: 42% vs dense 41%, check 39% vs
# 37%). Low tau_D ends windows at newlines the model is unsure of, which costs passes and accuracy.
ADABLOCK_TAU_D = 0.9


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
