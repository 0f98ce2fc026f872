"""A seeded random block-causal Llama checkpoint on disk, for benchmarks that need no download.

Speed comparisons between decoders (bench_pipeline.py) need a model whose forward costs what a
real one of its size costs, but not a trained one: both decoders run the same passes on the
same weights. The checkpoint is written in the generic block-causal layout
(docs/PARADIGMS.md, "Checkpoint layouts"): a plain Llama config.json plus `block_size` and
`mask_token_id`, safetensors weights, and the bundled tiny model's BPE tokenizer (920 tokens,
`[MASK]`, `<eos>`, `<pad>`), so `dllm_viz.models.load` reads it like any block-diffusion
checkpoint.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from dllm_viz.models.loading import TINY_DIR

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# The bundled tokenizer's special ids (dllm_viz/assets/tiny/config.json states the same).
_PAD_ID, _EOS_ID, _MASK_ID = 0, 1, 2


@dataclass(frozen=True)
class BlockModelShape:
    """Sizes of the random model.

    Attributes:
        hidden, layers, heads, intermediate: the Llama transformer's sizes.
        block_length: the attention block B written as `block_size`.
        max_positions: `max_position_embeddings` (prompt + canvas must fit).
        head_scale: multiplies the output layer. A freshly initialised model's confidences are
            all near 1 / vocab, so every pass would commit only its quota and never edit; a
            larger output layer spreads them over (0, 1), as a trained model's are, so the
            threshold, the quota and the edits of block refinement all run.
        seed: torch seed of the weights.
    """

    hidden: int = 512
    layers: int = 6
    heads: int = 8
    intermediate: int = 1376
    block_length: int = 32
    max_positions: int = 2048
    head_scale: float = 12.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "heads", "intermediate", "block_length", "max_positions"):
            if getattr(self, name) < 1:
                raise ValueError(f"BlockModelShape.{name} must be >= 1, got {getattr(self, name)!r}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads}); change either")


# ~20M parameters (19.9M with the 920-token vocabulary): the benchmark's default model.
SHAPE_20M = BlockModelShape()
# A model that decodes in milliseconds, for tests.
SHAPE_TINY = BlockModelShape(hidden=32, layers=2, heads=4, intermediate=64, block_length=8, max_positions=512,
                             head_scale=60.0)


def parameter_count(directory: Path) -> int:
    """Parameters of a checkpoint written by `build_random_block_model` (from its safetensors header)."""
    from safetensors import safe_open

    with safe_open(str(Path(directory) / "model.safetensors"), framework="pt") as weights:
        return sum(math.prod(weights.get_slice(key).get_shape()) for key in weights.keys())  # noqa: SIM118


def build_random_block_model(directory: Path, shape: BlockModelShape = SHAPE_20M) -> Path:
    """Write the random block-causal checkpoint of `shape` into `directory`; returns it.

    The same shape and seed give the same weights on every machine (drawn on the CPU).

    Raises:
        FileExistsError: `directory` already holds a config.json (nothing is overwritten).
        FileNotFoundError: the bundled tokenizer is missing from the install.
    """
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    directory = Path(directory)
    if (directory / "config.json").exists():
        raise FileExistsError(f"{str(directory)!r} already holds a checkpoint; load it with --model {directory} "
                              "or pick an empty directory")
    missing = [name for name in _TOKENIZER_FILES if not (TINY_DIR / name).is_file()]
    if missing:
        raise FileNotFoundError(f"the bundled tokenizer ({', '.join(missing)}) is missing from {str(TINY_DIR)!r}; "
                                "reinstall dllm_viz")
    directory.mkdir(parents=True, exist_ok=True)
    for name in _TOKENIZER_FILES:
        shutil.copyfile(TINY_DIR / name, directory / name)
    vocab = int(json.loads((TINY_DIR / "config.json").read_text())["vocab_size"])
    config = LlamaConfig(vocab_size=vocab, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
                         num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                         num_key_value_heads=shape.heads, max_position_embeddings=shape.max_positions,
                         tie_word_embeddings=False, eos_token_id=_EOS_ID, pad_token_id=_PAD_ID, bos_token_id=None)
    with torch.random.fork_rng(devices=[]):  # seeded weights without moving the caller's global RNG
        torch.manual_seed(shape.seed)
        model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(shape.head_scale)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
    raw = config.to_dict()
    raw.update(block_size=shape.block_length, mask_token_id=_MASK_ID, architectures=["LlamaForCausalLM"],
               dllm_viz_random_shape=asdict(shape))
    (directory / "config.json").write_text(json.dumps(raw, indent=2))
    return directory
