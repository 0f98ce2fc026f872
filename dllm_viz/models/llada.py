"""LLaDA checkpoints (LLaDA-8B-Base/Instruct, LLaDA-1.5) on transformers' LlamaForCausalLM.

LLaDA is a Llama block (RMSNorm, rotary, SwiGLU) without the causal mask, saved under OLMo
parameter names. We rename the weights and run Llama bidirectionally instead of the remote
code (which breaks on transformers 5). Mapping per docs/DESIGN.md §3; in LLaDA's block the SiLU
is applied to `ff_proj`, so `ff_proj` is Llama's gate_proj and `up_proj` its up_proj.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # transformers' config classes cost ~0.5 s to import; only load() needs them
    from transformers import LlamaConfig

from dllm_viz.models import config_values as values
from dllm_viz.models.base import ModelLoadError

_BLOCK_NAMES = {
    "q_proj": "self_attn.q_proj",
    "k_proj": "self_attn.k_proj",
    "v_proj": "self_attn.v_proj",
    "attn_out": "self_attn.o_proj",
    "ff_proj": "mlp.gate_proj",
    "up_proj": "mlp.up_proj",
    "ff_out": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ff_norm": "post_attention_layernorm",
}
_TOP_NAMES = {
    "transformer.wte.weight": "model.embed_tokens.weight",
    "transformer.ln_f.weight": "model.norm.weight",
    "transformer.ff_out.weight": "lm_head.weight",
}
_BLOCK_KEY = re.compile(r"transformer\.blocks\.(\d+)\.(\w+)\.(weight|bias)$")
# LLaDA options our Llama mapping cannot express; a checkpoint using them is refused.
_UNSUPPORTED = {"alibi": True, "input_emb_norm": True, "scale_logits": True, "include_bias": True,
                "include_qkv_bias": True, "attention_layer_norm": True}

MASK_TOKEN = "<|mdm_mask|>"
EOT_TOKEN = "<|eot_id|>"


def is_llada_config(raw: dict[str, Any]) -> bool:
    """True for a LLaDA config.json (model_type 'llada' or an LLaDA architecture)."""
    archs = [a.lower() for a in raw.get("architectures") or []]
    return str(raw.get("model_type", "")).lower() == "llada" or any("llada" in a for a in archs)


def llama_config(raw: dict[str, Any]) -> LlamaConfig:
    """LlamaConfig equivalent to a LLaDA config.json."""
    from transformers import LlamaConfig

    for key, bad in _UNSUPPORTED.items():
        if raw.get(key) == bad:
            raise ModelLoadError(f"LLaDA option {key}={bad!r} is not supported by the Llama mapping")
    d_model = _size(raw, "d_model")
    n_heads, n_kv_heads, _ = values.heads(raw, d_model, "LLaDA", heads_key="n_heads", kv_key="n_kv_heads",
                                          head_dim_key=None)
    values.no_rope_scaling(raw, "LLaDA")
    mlp = _size(raw, "mlp_hidden_size") if raw.get("mlp_hidden_size") else _size(raw, "mlp_ratio", 4) * d_model
    return LlamaConfig(
        vocab_size=_size(raw, "embedding_size") if raw.get("embedding_size") else _size(raw, "vocab_size"),
        hidden_size=d_model,
        intermediate_size=mlp,
        num_hidden_layers=_size(raw, "n_layers"),
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads,
        max_position_embeddings=_size(raw, "max_sequence_length", 4096),
        rms_norm_eps=_number(raw, "rms_norm_eps", 1e-5),
        rope_parameters={"rope_type": "default", "rope_theta": _number(raw, "rope_theta", 10000.0)},
        tie_word_embeddings=values.flag(raw, "weight_tying", "LLaDA"),
        attention_bias=False,
        mlp_bias=False,
        pad_token_id=raw.get("pad_token_id"),
        bos_token_id=raw.get("bos_token_id"),
        eos_token_id=raw.get("eos_token_id"),
    )


def _size(raw: dict[str, Any], key: str, default: int | None = None) -> int:
    """A positive integer of config.json; a missing or bad one names the key (not a KeyError)."""
    if default is None:
        return values.positive_int(raw, key, "LLaDA")
    return values.positive_int(raw, key, "LLaDA", default)


def _number(raw: dict[str, Any], key: str, default: float) -> float:
    return values.positive_float(raw, key, "LLaDA", default)


def rename_key(key: str) -> str:
    """Llama parameter name of a LLaDA checkpoint key."""
    bare = key[len("model.") :] if key.startswith("model.") else key
    if bare in _TOP_NAMES:
        return _TOP_NAMES[bare]
    match = _BLOCK_KEY.match(bare)
    if match and match.group(2) in _BLOCK_NAMES:
        layer, name, kind = match.groups()
        return f"model.layers.{layer}.{_BLOCK_NAMES[name]}.{kind}"
    raise ModelLoadError(f"unexpected parameter {key!r} in a LLaDA checkpoint")
