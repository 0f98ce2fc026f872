"""Build small random checkpoints on disk in each family's format (no downloads).

Used by the model-loading tests and as the engine tests' model. Each builder returns the
checkpoint directory; weights are random but seeded, so tests are deterministic.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

CHARS = list(string.ascii_letters + string.digits + " \n.,:;!?+-*/=#()'\"_")

LLADA_SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|mdm_mask|>", "<|start_header_id|>",
                  "<|end_header_id|>", "<|eot_id|>"]
LLADA_CHAT_TEMPLATE = (
    "{{ '<|startoftext|>' }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
    "<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{{ '' }}"
)
DREAM_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]


def char_tokenizer(specials: list[str], **special_roles: str) -> PreTrainedTokenizerFast:
    """A character-level tokenizer: one token per character, specials first."""
    vocab = {tok: i for i, tok in enumerate([*specials, *CHARS])}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None, ignore_merges=True))
    tok.add_special_tokens(specials)
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, **special_roles)


def build_tiny(directory: Path, *, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """A random checkpoint in our bundled tiny model's format."""
    tokenizer = char_tokenizer(["[MASK]", "<eos>", "<pad>"], mask_token="[MASK]", eos_token="<eos>",
                               pad_token="<pad>")
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=512, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    model = LlamaForCausalLM(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    raw = json.loads((directory / "config.json").read_text())
    raw["dllm_viz"] = {"family": "tiny", "mask_token_id": tokenizer.mask_token_id,
                       "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id,
                       "prompt_template": "Q: {prompt}\nA:\n", "delimiters": ["\n"]}
    (directory / "config.json").write_text(json.dumps(raw, indent=2))
    return directory


def llada_state_dict(cfg: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights under LLaDA's (OLMo) parameter names."""
    g = torch.Generator().manual_seed(seed)
    d, ff, vocab = cfg["d_model"], cfg["mlp_hidden_size"], cfg["embedding_size"]

    def rnd(*shape: int, scale: float = 0.2) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    state = {"model.transformer.wte.weight": rnd(vocab, d, scale=1.0),
             "model.transformer.ln_f.weight": 1 + rnd(d, scale=0.1),
             "model.transformer.ff_out.weight": rnd(vocab, d)}
    for i in range(cfg["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "attn_out"):
            state[p + name + ".weight"] = rnd(d, d)
        state[p + "ff_proj.weight"] = rnd(ff, d)
        state[p + "up_proj.weight"] = rnd(ff, d)
        state[p + "ff_out.weight"] = rnd(d, ff)
        state[p + "attn_norm.weight"] = 1 + rnd(d, scale=0.1)
        state[p + "ff_norm.weight"] = 1 + rnd(d, scale=0.1)
    return state


def build_llada(directory: Path, *, seed: int = 0) -> Path:
    """A random checkpoint in LLaDA's HF format (config, OLMo-named safetensors, tokenizer)."""
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = char_tokenizer(LLADA_SPECIALS, bos_token="<|startoftext|>", eos_token="<|endoftext|>",
                               pad_token="<|endoftext|>", mask_token="<|mdm_mask|>")
    tokenizer.chat_template = LLADA_CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)
    vocab = len(tokenizer)
    cfg = {"model_type": "llada", "architectures": ["LLaDAModelLM"], "d_model": 32, "n_heads": 4,
           "n_kv_heads": 4, "n_layers": 2, "mlp_hidden_size": 48, "mlp_ratio": 4, "rope": True,
           "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "vocab_size": vocab, "embedding_size": vocab,
           "max_sequence_length": 512, "weight_tying": False, "include_bias": False,
           "block_type": "llama", "layer_norm_type": "rms", "activation_type": "silu",
           "mask_token_id": tokenizer.mask_token_id, "eos_token_id": tokenizer.eos_token_id,
           "pad_token_id": tokenizer.pad_token_id}
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    save_file(llada_state_dict(cfg, seed), str(directory / "model.safetensors"))
    return directory


def build_dream(directory: Path, *, seed: int = 0) -> tuple[Path, Qwen2ForCausalLM]:
    """A random checkpoint in Dream's format; also returns the in-memory Qwen2 model."""
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = char_tokenizer(DREAM_SPECIALS, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                               mask_token="<|mask|>")
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    qcfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=512, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(qcfg).eval()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              str(directory / "model.safetensors"))
    cfg = {"model_type": "Dream", "architectures": ["DreamModel"], "hidden_size": 32,
           "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "rope_theta": qcfg.rope_parameters["rope_theta"],
           "rms_norm_eps": qcfg.rms_norm_eps, "vocab_size": len(tokenizer),
           "max_position_embeddings": 512, "tie_word_embeddings": False,
           "mask_token_id": tokenizer.mask_token_id, "eos_token_id": tokenizer.eos_token_id,
           "pad_token_id": tokenizer.pad_token_id}
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    return directory, model


BLOCK_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|MASK|>"]


def _block_tokenizer(directory: Path) -> PreTrainedTokenizerFast:
    tokenizer = char_tokenizer(BLOCK_SPECIALS, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                               mask_token="<|MASK|>")
    tokenizer.save_pretrained(directory)
    return tokenizer


def _save(model: torch.nn.Module, directory: Path) -> None:
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))


def build_sdar(directory: Path, *, block_size: int = 4, seed: int = 0) -> tuple[Path, torch.nn.Module]:
    """A random checkpoint in SDAR's published layout (config keys as in JetLM/SDAR-1.7B-Chat)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _block_tokenizer(directory)
    torch.manual_seed(seed)
    qcfg = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512,
                       tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    model = Qwen3ForCausalLM(qcfg).eval()
    _save(model, directory)
    cfg = {"architectures": ["SDARForCausalLM"], "model_type": "sdar",
           "auto_map": {"AutoConfig": "configuration_sdar.SDARConfig",
                        "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM"},
           "attention_bias": False, "attn_implementation": "flex_attention", "block_size": block_size,
           "mask_token_id": tokenizer.mask_token_id, "eos_token_id": tokenizer.eos_token_id,
           "bos_token_id": tokenizer.eos_token_id, "fuse_cross_entropy": True, "head_dim": 8, "hidden_act": "silu",
           "hidden_size": 32, "intermediate_size": 64, "max_position_embeddings": 512, "num_attention_heads": 4,
           "num_hidden_layers": 2, "num_key_value_heads": 2, "rms_norm_eps": qcfg.rms_norm_eps, "rope_scaling": None,
           "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": False, "use_sliding_window": False,
           "vocab_size": len(tokenizer)}
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    return directory, model


def build_fast_dllm_v2(directory: Path, *, bd_size: int = 8, seed: int = 0) -> tuple[Path, torch.nn.Module]:
    """A random checkpoint in Fast-dLLM v2's published layout (Qwen2 weights, `bd_size`)."""
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _block_tokenizer(directory)
    torch.manual_seed(seed)
    qcfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                       tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    model = Qwen2ForCausalLM(qcfg).eval()
    _save(model, directory)
    cfg = {"architectures": ["Fast_dLLM_QwenForCausalLM"], "model_type": "Fast_dLLM_Qwen", "bd_size": bd_size,
           "auto_map": {"AutoConfig": "configuration.Fast_dLLM_QwenConfig",
                        "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM"},
           "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "max_position_embeddings": 512, "rms_norm_eps": qcfg.rms_norm_eps,
           "rope_theta": 1000000.0, "tie_word_embeddings": False, "use_sliding_window": False,
           "layer_types": ["full_attention", "full_attention"], "vocab_size": len(tokenizer),
           "eos_token_id": tokenizer.eos_token_id}
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    return directory, model


def build_block_llama(directory: Path, *, block_length: int = 4, seed: int = 0,
                      head_scale: float = 1.0) -> tuple[Path, torch.nn.Module]:
    """A generic block-causal conversion: a plain Llama config plus `block_size` and `mask_token_id`.

    `head_scale` multiplies the output layer: a random model's confidences are all near 1/vocab;
    about 60 spreads them over (0, 1) so thresholds, edits and EOS stops all happen.
    """
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _block_tokenizer(directory)
    torch.manual_seed(seed)
    lcfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                       tie_word_embeddings=False, eos_token_id=tokenizer.eos_token_id,
                       pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    model = LlamaForCausalLM(lcfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(head_scale)
    _save(model, directory)
    raw = lcfg.to_dict()
    raw.update(block_size=block_length, mask_token_id=tokenizer.mask_token_id, architectures=["LlamaForCausalLM"])
    (directory / "config.json").write_text(json.dumps(raw, indent=2))
    return directory, model


def build_llada2(directory: Path, *, seed: int = 0) -> Path:
    """A random checkpoint in LLaDA2.x's published layout: config keys and parameter names as released.

    One dense layer then one MoE layer (first_k_dense_replace = 1), fused QKV, QK-norm, sigmoid
    router with expert bias, one shared expert. No modeling code is written (it is theirs).
    """
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _block_tokenizer(directory)
    h, heads, kv, hd, inter, moe_inter, experts = 32, 4, 2, 8, 64, 16, 4
    cfg = {"architectures": ["LLaDA2MoeModelLM"], "model_type": "llada2_moe",
           "auto_map": {"AutoConfig": "configuration_llada2_moe.LLaDA2MoeConfig",
                        "AutoModel": "modeling_llada2_moe.LLaDA2MoeModel",
                        "AutoModelForCausalLM": "modeling_llada2_moe.LLaDA2MoeModelLM"},
           "hidden_size": h, "num_hidden_layers": 2, "num_attention_heads": heads, "num_key_value_heads": kv,
           "head_dim": hd, "intermediate_size": inter, "moe_intermediate_size": moe_inter, "num_experts": experts,
           "num_experts_per_tok": 2, "num_shared_experts": 1, "n_group": 2, "topk_group": 1,
           "first_k_dense_replace": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
           "score_function": "sigmoid", "moe_router_enable_expert_bias": True, "use_qk_norm": True,
           "use_qkv_bias": False, "use_bias": False, "partial_rotary_factor": 0.5, "rope_theta": 600000,
           "rms_norm_eps": 1e-6, "max_position_embeddings": 512, "tie_word_embeddings": False, "hidden_act": "silu",
           "vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id}
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * 0.2

    state = {"model.word_embeddings.weight": rnd(len(tokenizer), h), "model.norm.weight": 1 + rnd(h),
             "lm_head.weight": rnd(len(tokenizer), h)}
    for i in range(2):
        p = f"model.layers.{i}."
        state |= {p + "input_layernorm.weight": 1 + rnd(h), p + "post_attention_layernorm.weight": 1 + rnd(h),
                  p + "attention.query_key_value.weight": rnd((heads + 2 * kv) * hd, h),
                  p + "attention.query_layernorm.weight": 1 + rnd(hd),
                  p + "attention.key_layernorm.weight": 1 + rnd(hd),
                  p + "attention.dense.weight": rnd(h, heads * hd)}
        mlps = [p + "mlp."] if i == 0 else [*(p + f"mlp.experts.{e}." for e in range(experts)),
                                             p + "mlp.shared_experts."]
        width = inter if i == 0 else moe_inter
        for m in mlps:
            state |= {m + "gate_proj.weight": rnd(width, h), m + "up_proj.weight": rnd(width, h),
                      m + "down_proj.weight": rnd(h, width)}
        if i > 0:
            state |= {p + "mlp.gate.weight": rnd(experts, h), p + "mlp.gate.expert_bias": rnd(experts)}
    save_file(state, str(directory / "model.safetensors"))
    return directory
