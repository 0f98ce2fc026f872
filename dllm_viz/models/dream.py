"""Dream checkpoints (Dream-v0-7B Base/Instruct) on transformers' Qwen2ForCausalLM.

Dream keeps Qwen2's parameter names; it differs only in attention (bidirectional) and in
reading position i's distribution from output i - 1 (the adapter's `shift_logits`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dllm_viz.models import config_values as values

if TYPE_CHECKING:  # transformers' config classes cost ~0.5 s to import; only load() needs them
    from transformers import Qwen2Config

MASK_TOKEN = "<|mask|>"
EOT_TOKEN = "<|im_end|>"


def is_dream_config(raw: dict[str, Any]) -> bool:
    """True for a Dream config.json."""
    archs = [a.lower() for a in raw.get("architectures") or []]
    return str(raw.get("model_type", "")).lower() == "dream" or any("dream" in a for a in archs)


def qwen2_config(raw: dict[str, Any]) -> Qwen2Config:
    """Qwen2Config equivalent to a Dream config.json (each value checked: config_values.py).

    Raises:
        ModelLoadError: a missing or absurd size, or an option the mapping would silently drop
            (rope_scaling, sliding windows).
    """
    from transformers import Qwen2Config

    hidden = values.positive_int(raw, "hidden_size", "Dream")
    heads, kv_heads, _ = values.heads(raw, hidden, "Dream", head_dim_key=None)
    values.no_rope_scaling(raw, "Dream")
    values.no_sliding_window(raw, "Dream")
    return Qwen2Config(
        vocab_size=values.positive_int(raw, "vocab_size", "Dream"),
        hidden_size=hidden,
        intermediate_size=values.positive_int(raw, "intermediate_size", "Dream"),
        num_hidden_layers=values.positive_int(raw, "num_hidden_layers", "Dream"),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=values.positive_int(raw, "max_position_embeddings", "Dream", 32768),
        rms_norm_eps=values.positive_float(raw, "rms_norm_eps", "Dream", 1e-6),
        rope_parameters={"rope_type": "default",
                         "rope_theta": values.positive_float(raw, "rope_theta", "Dream", 10000.0)},
        tie_word_embeddings=values.flag(raw, "tie_word_embeddings", "Dream"),
        use_sliding_window=False,
        pad_token_id=raw.get("pad_token_id"),
        bos_token_id=raw.get("bos_token_id"),
        eos_token_id=raw.get("eos_token_id"),
    )


def rename_key(key: str) -> str:
    """Dream already uses Qwen2's names."""
    return key
