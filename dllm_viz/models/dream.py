"""Dream checkpoints (Dream-v0-7B Base/Instruct) on transformers' Qwen2ForCausalLM.

Dream keeps Qwen2's parameter names; it differs only in attention (bidirectional) and in
reading position i's distribution from output i - 1 (the adapter's `shift_logits`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # transformers' config classes cost ~0.5 s to import; only load() needs them
    from transformers import Qwen2Config

MASK_TOKEN = "<|mask|>"
EOT_TOKEN = "<|im_end|>"


def is_dream_config(raw: dict[str, Any]) -> bool:
    """True for a Dream config.json."""
    archs = [a.lower() for a in raw.get("architectures") or []]
    return str(raw.get("model_type", "")).lower() == "dream" or any("dream" in a for a in archs)


def qwen2_config(raw: dict[str, Any]) -> Qwen2Config:
    """Qwen2Config equivalent to a Dream config.json."""
    from transformers import Qwen2Config

    heads = int(raw["num_attention_heads"])
    return Qwen2Config(
        vocab_size=int(raw["vocab_size"]),
        hidden_size=int(raw["hidden_size"]),
        intermediate_size=int(raw["intermediate_size"]),
        num_hidden_layers=int(raw["num_hidden_layers"]),
        num_attention_heads=heads,
        num_key_value_heads=int(raw.get("num_key_value_heads") or heads),
        max_position_embeddings=int(raw.get("max_position_embeddings", 32768)),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        rope_parameters={"rope_type": "default", "rope_theta": float(raw.get("rope_theta", 10000.0))},
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        use_sliding_window=False,
        pad_token_id=raw.get("pad_token_id"),
        bos_token_id=raw.get("bos_token_id"),
        eos_token_id=raw.get("eos_token_id"),
    )


def rename_key(key: str) -> str:
    """Dream already uses Qwen2's names."""
    return key
