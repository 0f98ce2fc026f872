"""Block-diffusion checkpoints: which published layout a config.json is, and its block length.

Block-diffusion models attend block-causally over absolute-aligned blocks (block_causal.py).
Published layouts recognised here (their config.json as released):
- LLaDA2.x (inclusionAI/LLaDA2.0 / 2.1 mini and flash): model_type "llada2_moe", architecture
  "LLaDA2MoeModelLM", a sigmoid-routed MoE with fused QKV. transformers 5.24 has no class for
  it; it runs on Glm4MoeForCausalLM, which computes the same block (llada2.py). Its config has
  no block length; 32 is the one its own generate(), SGLang and diffusers' examples use.
- SDAR / TraDo (JetLM): model_type "sdar", Qwen3 weights under Qwen3's names, "block_size".
- Fast-dLLM v2 (Efficient-Large-Model): model_type "Fast_dLLM_Qwen", Qwen2 weights (QKV bias),
  "bd_size"; its sampler reads position i from output i - 1 within a block (token shift).
- any Llama / Qwen2 / Qwen3 config carrying "block_size", "bd_size" or "block_length"
  (d3LLM-style conversions): run on the maintained class with the block-causal mask.
Knows nothing about decoding; the adapter and engine take the block length from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from dllm_viz.models import config_values as values
from dllm_viz.models import llada2
from dllm_viz.models.base import ModelLoadError
from dllm_viz.models.weights import load_renamed

Base = Literal["llama", "qwen2", "qwen3", "glm4_moe"]
BLOCK_KEYS = ("block_size", "bd_size", "block_length")  # the keys published configs use, in lookup order
LLADA2_BLOCK_LENGTH = 32  # LLaDA2.x configs carry none; its generate() default and model card use 32


@dataclass(frozen=True, slots=True)
class BlockDiffusionSpec:
    """What a block-diffusion config.json says about the model.

    Attributes:
        family: "llada2", "sdar", "fast_dllm_v2" or "block_causal" (a generic conversion).
        base: the maintained transformers architecture it runs on, or None (remote code only; no
            recognised layout needs that today).
        block_length: B, the absolute-aligned block size.
        block_length_source: the config key B came from, or "family default".
        mask_token_id: from the config when it states one, else None (ask the tokenizer).
        shift_logits: True when position i is read from output i - 1 (Fast-dLLM v2).
    """

    family: str
    base: Base | None
    block_length: int
    block_length_source: str
    mask_token_id: int | None
    shift_logits: bool = False


def _block_length(raw: dict[str, Any], default: int | None) -> tuple[int, str]:
    for key in BLOCK_KEYS:
        if raw.get(key) is not None:
            value = raw[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ModelLoadError(f"config.json `{key}` must be a positive integer block length, got {value!r}")
            return value, key
    if default is None:
        raise ModelLoadError(f"config.json names no block length (one of {', '.join(BLOCK_KEYS)})")
    return default, "family default"


def _mask_id(raw: dict[str, Any]) -> int | None:
    """The stated mask id when it is an integer; anything else is left for `_info` to refuse by name
    (a JSON `true` is a Python int: read as id 1 it would mask with an ordinary token)."""
    value = raw.get("mask_token_id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def detect(raw: dict[str, Any]) -> BlockDiffusionSpec | None:
    """The block-diffusion layout of a config.json, or None for anything else.

    Raises:
        ModelLoadError: a recognised layout whose block length is malformed or missing.
    """
    model_type = str(raw.get("model_type", "")).lower()
    archs = [str(a) for a in raw.get("architectures") or []]
    if model_type == "llada2_moe" or "LLaDA2MoeModelLM" in archs:
        length, source = _block_length(raw, LLADA2_BLOCK_LENGTH)
        return BlockDiffusionSpec("llada2", "glm4_moe", length, source, _mask_id(raw))
    if model_type == "sdar" or "SDARForCausalLM" in archs:
        length, source = _block_length(raw, None)
        return BlockDiffusionSpec("sdar", "qwen3", length, source, _mask_id(raw))
    if model_type == "fast_dllm_qwen" or "Fast_dLLM_QwenForCausalLM" in archs:
        length, source = _block_length(raw, None)
        return BlockDiffusionSpec("fast_dllm_v2", "qwen2", length, source, _mask_id(raw), shift_logits=True)
    if model_type in ("llama", "qwen2", "qwen3") and any(raw.get(k) is not None for k in BLOCK_KEYS):
        length, source = _block_length(raw, None)
        return BlockDiffusionSpec("block_causal", model_type, length, source, _mask_id(raw))  # type: ignore[arg-type]
    return None


def _rope(raw: dict[str, Any], default_theta: float, family: str) -> dict[str, Any]:
    if raw.get("rope_scaling"):
        raise ModelLoadError(f"rope_scaling {raw['rope_scaling']!r} is not supported for block-diffusion "
                             "checkpoints yet; use a checkpoint without it")
    return {"rope_type": "default", "rope_theta": values.positive_float(raw, "rope_theta", family, default_theta)}


def base_config(raw: dict[str, Any], spec: BlockDiffusionSpec) -> Any:
    """The maintained transformers config equivalent to the checkpoint's config.json.

    Raises:
        ModelLoadError: the family has no maintained class (LLaDA2.x), or sliding windows.
    """
    if spec.base is None:
        raise ModelLoadError(f"{spec.family} has no maintained transformers class (checked 5.24); "
                             "pass trust_remote_code=True (CLI: --trust-remote-code) to run its own code")
    if spec.base == "glm4_moe":
        return llada2.glm4_moe_config(raw)
    if raw.get("use_sliding_window"):
        raise ModelLoadError("sliding-window attention is not supported for block-diffusion checkpoints")
    family = spec.family
    hidden = values.positive_int(raw, "hidden_size", family)
    # Qwen2 has no head_dim field (it is hidden / heads); Llama and Qwen3 take a stated one.
    heads, kv_heads, head_dim = values.heads(raw, hidden, family,
                                             head_dim_key=None if spec.base == "qwen2" else "head_dim")
    common = dict(
        vocab_size=values.positive_int(raw, "vocab_size", family), hidden_size=hidden,
        intermediate_size=values.positive_int(raw, "intermediate_size", family),
        num_hidden_layers=values.positive_int(raw, "num_hidden_layers", family),
        num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=values.positive_int(raw, "max_position_embeddings", family, 32768),
        rms_norm_eps=values.positive_float(raw, "rms_norm_eps", family, 1e-6),
        tie_word_embeddings=values.flag(raw, "tie_word_embeddings", family),
        pad_token_id=raw.get("pad_token_id"), bos_token_id=raw.get("bos_token_id"),
        eos_token_id=raw.get("eos_token_id"),
    )
    if spec.base == "qwen3":
        from transformers import Qwen3Config

        return Qwen3Config(**common, head_dim=head_dim, use_sliding_window=False,
                           attention_bias=values.flag(raw, "attention_bias", family),
                           rope_parameters=_rope(raw, 1e6, family))
    if spec.base == "qwen2":
        from transformers import Qwen2Config

        return Qwen2Config(**common, use_sliding_window=False, rope_parameters=_rope(raw, 1e6, family))
    from transformers import LlamaConfig

    return LlamaConfig(**common, head_dim=head_dim, attention_bias=values.flag(raw, "attention_bias", family),
                       mlp_bias=values.flag(raw, "mlp_bias", family), rope_parameters=_rope(raw, 10000.0, family))


def model_class(spec: BlockDiffusionSpec) -> type:
    """The maintained *ForCausalLM class of the spec's base architecture."""
    import transformers

    names = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
             "glm4_moe": "Glm4MoeForCausalLM"}
    if spec.base is None:
        raise ModelLoadError(f"{spec.family} has no maintained transformers class; it needs trust_remote_code")
    return getattr(transformers, names[spec.base])


def _same_key(key: str) -> str:
    """SDAR, Fast-dLLM v2 and generic conversions keep their base names; LLaDA2 converts whole."""
    return key


def load_model(directory: Path, raw: dict[str, Any], spec: BlockDiffusionSpec, *, device: torch.device,
               dtype: torch.dtype, config: Any = None) -> Any:
    """The checkpoint on its maintained class (eval mode); attention is whatever mask the caller passes.

    `config` is `base_config(raw, spec)` when the caller has built it already (load() does, to check
    config.json before the tokenizer loads).

    Raises:
        ModelLoadError: no maintained class, unsupported options, or weights that do not fit.
    """
    if config is None:
        config = values.build(lambda: base_config(raw, spec), spec.family)
    convert = (lambda state: llada2.to_glm4_moe(state, config)) if spec.family == "llada2" else None
    model = load_renamed(model_class(spec), config, directory, _same_key, device=device, dtype=dtype, convert=convert)
    if spec.base == "glm4_moe" and dtype == torch.float64:
        model.config._experts_implementation = "eager"  # grouped_mm, the default, has no float64 kernel
    return model
