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
