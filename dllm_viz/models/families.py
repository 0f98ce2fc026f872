"""The model-family table: every fact `load` needs about a natively supported family, in one row.

A family is one module (its config mapping, weight renames and token names: llada.py, dream.py,
tiny.py) plus one `Family` row in `FAMILIES`; `load` and the policies' family-calibrated knobs
(`Pipeline.resolve`) read only this table, so a new family touches neither (docs/DESIGN.md §3).
Rows are tried in table order and the first whose `detect` accepts a config.json wins: the
bundled tiny model first (its config is a plain Llama config with a `dllm_viz` section), then
LLaDA, then Dream.
Block-diffusion layouts are refused before the table is consulted (loading.py) and anything the
table does not claim needs the explicit remote-code opt-in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dllm_viz.models import dream, llada, tiny


@dataclass(frozen=True, slots=True)
class SpecialTokens:
    """Where a family's special ids come from.

    Attributes:
        stated_ids: ids the checkpoint states ("mask_token_id", "eos_token_id"); a key that is
            present wins even when its value is None (then the load fails with a clear message),
            an absent key falls back to the tokenizer.
        mask_token: the mask token's text, looked up in the vocabulary when no id is stated.
        eot_token: the end-of-turn token's text, or None when the family has none.
    """

    stated_ids: Mapping[str, Any]
    mask_token: str | None
    eot_token: str | None


@dataclass(frozen=True, slots=True)
class Family:
    """One natively supported family: how to recognise, build and drive it.

    Attributes:
        name: AdapterInfo.family of its adapters ("llada", "dream", "tiny").
        detect: (config.json dict, checkpoint directory) -> whether this row claims it.
        transformers_class: the maintained transformers class it runs on, by name (imported
            only at load: importing a model class costs seconds).
        config: config.json dict -> that class's config instance.
        rename: checkpoint parameter name -> the class's name (ModelLoadError if unknown).
        special_tokens: config.json dict -> where its mask / EOS / EoT ids come from.
        shift_logits: position i is read from output i - 1 (Dream).
        delimiters: config.json dict -> the strings that end a semantic step.
        prompt_template: config.json dict -> the adapter's prompt template, or None for the
            tokenizer's chat template.
        points: the family's calibrated operating points: component name -> knob -> value, for
            knobs declared family-calibrated (`knob(..., published=...)`: AdaBlock's tau_D,
            CORA's (delta_p, m)); a knob the family leaves out runs at its published value.
    """

    name: str
    detect: Callable[[dict[str, Any], Path], bool]
    transformers_class: str
    config: Callable[[dict[str, Any]], Any]
    rename: Callable[[str], str]
    special_tokens: Callable[[dict[str, Any]], SpecialTokens]
    shift_logits: bool
    delimiters: Callable[[dict[str, Any]], tuple[str, ...]]
    prompt_template: Callable[[dict[str, Any]], str | None]
    points: Mapping[str, Mapping[str, Any]]


def stated_special_ids(raw: dict[str, Any]) -> dict[str, Any]:
    """The mask / EOS ids a published config.json states at its top level (absent keys left out)."""
    return {key: raw[key] for key in ("mask_token_id", "eos_token_id") if key in raw}


def newline(raw: dict[str, Any]) -> tuple[str, ...]:
    """Published checkpoints state no delimiters: a newline ends a reasoning step."""
    return ("\n",)


def chat_template(raw: dict[str, Any]) -> str | None:
    """Published checkpoints are prompted through their tokenizer's chat template."""
    return None


# tau_D (docs/ALGORITHMS.md §5.3): LLaDA, trained from scratch, has a calmer volatility band than
# AR-initialised Dream. CORA's release point (delta_p 0.97, m 2) was validated on LLaDA and Dream,
# so they state none of their own. The tiny model's points are calibrated in tiny.py.
FAMILIES: tuple[Family, ...] = (
    Family(name="tiny", detect=tiny.is_tiny_config, transformers_class="LlamaForCausalLM",
           config=tiny.llama_config, rename=tiny.rename_key,
           special_tokens=lambda raw: SpecialTokens(tiny.stated_ids(raw), tiny.MASK_TOKEN, None),
           shift_logits=False, delimiters=tiny.delimiters, prompt_template=tiny.prompt_template,
           points=tiny.CALIBRATED_POINTS),
    Family(name="llada", detect=lambda raw, path: llada.is_llada_config(raw), transformers_class="LlamaForCausalLM",
           config=llada.llama_config, rename=llada.rename_key,
           special_tokens=lambda raw: SpecialTokens(stated_special_ids(raw), llada.MASK_TOKEN, llada.EOT_TOKEN),
           shift_logits=False, delimiters=newline, prompt_template=chat_template,
           points={"adablock": {"delimiter_threshold": 0.3}}),
    Family(name="dream", detect=lambda raw, path: dream.is_dream_config(raw), transformers_class="Qwen2ForCausalLM",
           config=dream.qwen2_config, rename=dream.rename_key,
           special_tokens=lambda raw: SpecialTokens(stated_special_ids(raw), dream.MASK_TOKEN, dream.EOT_TOKEN),
           shift_logits=True, delimiters=newline, prompt_template=chat_template,
           points={"adablock": {"delimiter_threshold": 0.5}}),
)


def detect(raw: dict[str, Any], directory: Path) -> Family | None:
    """The first row of FAMILIES (read at call time, so a test can add one) that claims the checkpoint."""
    for family in FAMILIES:
        if family.detect(raw, directory):
            return family
    return None


def by_name(name: str) -> Family | None:
    """The row of a family name (AdapterInfo.family), or None for remote-code and unknown models."""
    return next((family for family in FAMILIES if family.name == name), None)


def calibrated_points(name: str) -> Mapping[str, Mapping[str, Any]]:
    """A family's calibrated points by component name ({} for remote-code and unknown models,
    whose family-calibrated knobs run at their published values)."""
    row = by_name(name)
    return {} if row is None else row.points
