"""LLaDA2.x checkpoints (LLaDA2.0 / 2.1 mini and flash) on transformers' Glm4MoeForCausalLM.

transformers 5.24 has no LLaDA2 class, but GLM4-MoE computes the same block: per-head QK
RMSNorm before a rotate-half rotary on the first `partial_rotary_factor` of each head, a
sigmoid router choosing experts group-limited on bias-corrected scores and weighting them by
the uncorrected, normalised scores times `routed_scaling_factor`, shared experts, dense first
layers. We rename the published weights (split the fused QKV, stack each layer's experts) and
run GLM4-MoE with a block-causal mask, as LLaDA runs on Llama (docs/PARADIGMS.md).
"""

from __future__ import annotations

import re
from typing import Any

import torch

from dllm_viz.models import config_values as values
from dllm_viz.models.base import ModelLoadError

# LLaDA2 options GLM4-MoE cannot express; a checkpoint using them is refused, naming the key.
_REQUIRED = {"score_function": "sigmoid", "use_bias": False, "norm_topk_prob": True}
_EXPERT = re.compile(r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$")
_RENAMES = (
    ("model.word_embeddings.", "model.embed_tokens."),
    (".attention.dense.", ".self_attn.o_proj."),
    (".attention.query_layernorm.", ".self_attn.q_norm."),
    (".attention.key_layernorm.", ".self_attn.k_norm."),
    (".mlp.gate.expert_bias", ".mlp.gate.e_score_correction_bias"),
)


def glm4_moe_config(raw: dict[str, Any]) -> Any:
    """Glm4MoeConfig equivalent to a LLaDA2.x config.json."""
    from transformers import Glm4MoeConfig

    for key, needed in _REQUIRED.items():
        if raw.get(key, needed) != needed:
            raise ModelLoadError(f"LLaDA2 option {key}={raw[key]!r} is not supported by the GLM4-MoE mapping "
                                 f"(needs {needed!r})")
    if raw.get("rope_scaling"):
        raise ModelLoadError(f"LLaDA2 rope_scaling {raw['rope_scaling']!r} is not supported yet")
    f = "LLaDA2"
    hidden = values.positive_int(raw, "hidden_size", f)
    heads, kv_heads, head_dim = values.heads(raw, hidden, f)
    layers = values.positive_int(raw, "num_hidden_layers", f)
    experts = values.positive_int(raw, "num_experts", f)
    per_token = values.positive_int(raw, "num_experts_per_tok", f)
    groups = values.positive_int(raw, "n_group", f, 1)
    top_groups = values.positive_int(raw, "topk_group", f, 1)
    dense = values.count(raw, "first_k_dense_replace", f)
    rotary = values.positive_float(raw, "partial_rotary_factor", f, 1.0)
    # The router picks top-k experts from the best top_groups of n_group equal groups: any other
    # combination fails at the first forward pass (or routes nothing), far from config.json.
    problems = [f"num_experts_per_tok={per_token} > num_experts={experts}"] * (per_token > experts)
    problems += [f"n_group={groups} does not divide num_experts={experts}"] * (experts % groups != 0)
    problems += [f"topk_group={top_groups} > n_group={groups}"] * (top_groups > groups)
    problems += [f"first_k_dense_replace={dense} > num_hidden_layers={layers}"] * (dense > layers)
    problems += [f"partial_rotary_factor={rotary} > 1"] * (rotary > 1)
    if problems:
        raise ModelLoadError(f"the LLaDA2 config.json is inconsistent: {'; '.join(problems)}; use the config.json "
                             "that came with the checkpoint")
    return Glm4MoeConfig(
        vocab_size=values.positive_int(raw, "vocab_size", f), hidden_size=hidden,
        intermediate_size=values.positive_int(raw, "intermediate_size", f), num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
        max_position_embeddings=values.positive_int(raw, "max_position_embeddings", f, 32768),
        rms_norm_eps=values.positive_float(raw, "rms_norm_eps", f, 1e-6),
        tie_word_embeddings=values.flag(raw, "tie_word_embeddings", f),
        rope_parameters={"rope_type": "default", "rope_theta": values.positive_float(raw, "rope_theta", f, 600000),
                         "partial_rotary_factor": rotary},
        attention_bias=values.flag(raw, "use_qkv_bias", f), use_qk_norm=values.flag(raw, "use_qk_norm", f),
        moe_intermediate_size=values.positive_int(raw, "moe_intermediate_size", f), n_routed_experts=experts,
        num_experts_per_tok=per_token, n_shared_experts=values.count(raw, "num_shared_experts", f),
        n_group=groups, topk_group=top_groups, first_k_dense_replace=dense,
        routed_scaling_factor=values.positive_float(raw, "routed_scaling_factor", f, 1.0), norm_topk_prob=True,
        pad_token_id=raw.get("pad_token_id"), eos_token_id=raw.get("eos_token_id"),
    )


def _split_qkv(key: str, weight: torch.Tensor, config: Any) -> dict[str, torch.Tensor]:
    """The fused projection's output rows are query heads, then key heads, then value heads."""
    q_rows = config.num_attention_heads * config.head_dim
    kv_rows = config.num_key_value_heads * config.head_dim
    prefix, kind = key.split(".attention.query_key_value.")
    if weight.shape[0] != q_rows + 2 * kv_rows:  # torch's split would say only that the sizes do not sum
        raise ModelLoadError(
            f"the LLaDA2 weight {key!r} has {weight.shape[0]} rows, but config.json's num_attention_heads="
            f"{config.num_attention_heads}, num_key_value_heads={config.num_key_value_heads} and head_dim="
            f"{config.head_dim} make {q_rows + 2 * kv_rows}; use the config.json that came with these weights")
    q, k, v = weight.split([q_rows, kv_rows, kv_rows], dim=0)
    return {f"{prefix}.self_attn.{name}_proj.{kind}": part for name, part in zip("qkv", (q, k, v), strict=True)}


def to_glm4_moe(state: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    """Glm4MoeForCausalLM's state dict from a LLaDA2.x one.

    Raises:
        ModelLoadError: a parameter the mapping does not know, or a layer missing experts.
    """
    out: dict[str, torch.Tensor] = {}
    experts: dict[int, dict[int, dict[str, torch.Tensor]]] = {}
    for key, tensor in state.items():
        if ".attention.query_key_value." in key:
            out |= _split_qkv(key, tensor, config)
        elif match := _EXPERT.match(key):
            layer, expert, kind = int(match.group(1)), int(match.group(2)), match.group(3)
            experts.setdefault(layer, {}).setdefault(expert, {})[kind] = tensor
        else:
            for old, new in _RENAMES:
                key = key.replace(old, new)
            if not key.startswith(("model.", "lm_head.")):
                raise ModelLoadError(f"unexpected parameter {key!r} in a LLaDA2 checkpoint")
            out[key] = tensor
    for layer, by_expert in experts.items():
        if sorted(by_expert) != list(range(config.n_routed_experts)):
            raise ModelLoadError(f"LLaDA2 layer {layer} has experts {sorted(by_expert)}, expected "
                                 f"0..{config.n_routed_experts - 1}")
        ordered = [by_expert[e] for e in range(config.n_routed_experts)]
        prefix = f"model.layers.{layer}.mlp.experts."
        out[prefix + "gate_up_proj"] = torch.stack([torch.cat([w["gate"], w["up"]]) for w in ordered])
        out[prefix + "down_proj"] = torch.stack([w["down"] for w in ordered])
    for layer in range(config.first_k_dense_replace, config.num_hidden_layers):
        out.setdefault(f"model.layers.{layer}.mlp.gate.e_score_correction_bias",
                       torch.zeros(config.n_routed_experts))  # a router without expert bias
    return out
