"""Load a checkpoint whose parameter names differ from a transformers architecture.

The model is built on the meta device (no memory for random weights: an 8B model would need
32 GB in float32), the renamed tensors are assigned in place, and the non-persistent rotary
buffers are rebuilt on the target device. Knows nothing about specific families.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from dllm_viz.models.base import ModelLoadError


def safetensors_files(directory: Path) -> list[Path]:
    """The checkpoint's .safetensors shards, in index order when an index exists."""
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()), key=str)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelLoadError(f"{index.name!r} is not a readable shard index ({exc.__class__.__name__}); "
                                 "download the checkpoint again") from None
        # A name outside the folder or a shard not downloaded read as "corrupt or truncated" before.
        outside = [n for n in names if not isinstance(n, str) or Path(n).name != n]
        if outside:
            raise ModelLoadError(f"{index.name!r} names shards {outside[:3]} outside the checkpoint directory; "
                                 "download the checkpoint again")
        absent = [n for n in names if not (directory / n).is_file()]
        if absent:
            raise ModelLoadError(f"{index.name!r} names shards that are not in {str(directory)!r}: {absent[:3]}; "
                                 "finish the download (every shard the index names) or download the checkpoint again")
        return [directory / n for n in names]
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ModelLoadError(
            f"no .safetensors weights in {str(directory)!r}; convert .bin checkpoints with "
            "safetensors or pass a directory saved by save_pretrained"
        )
    return files


def _read_shard(file: Path) -> dict[str, torch.Tensor]:
    """One shard's tensors; a corrupt or truncated file is a ModelLoadError naming it, not a SafetensorError."""
    from safetensors import SafetensorError

    try:
        return load_file(str(file), device="cpu")
    except (SafetensorError, OSError) as exc:
        raise ModelLoadError(f"weights file {file.name!r} is corrupt or truncated ({exc}); download or save the "
                             "checkpoint again") from None


def load_renamed(
    model_cls: type,
    config: Any,
    directory: Path,
    rename: Callable[[str], str],
    *,
    device: torch.device,
    dtype: torch.dtype,
    convert: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] | None = None,
) -> Any:
    """Build `model_cls(config)` with the checkpoint's tensors under renamed keys.

    Args:
        model_cls: a transformers model class (e.g. LlamaForCausalLM).
        config: its config instance.
        directory: checkpoint directory with safetensors shards.
        rename: maps a checkpoint key to the architecture's key (raise ModelLoadError if unknown).
        device: where the weights go.
        dtype: the weights' dtype.
        convert: optional whole-state rewrite after renaming, for layouts that fuse or split
            tensors (LLaDA2's fused QKV and per-expert weights).

    Raises:
        ModelLoadError: missing or unexpected parameters.
    """
    state: dict[str, torch.Tensor] = {}
    source: dict[str, str] = {}
    for file in safetensors_files(directory):
        for key, tensor in _read_shard(file).items():
            name = rename(key)
            if name in source:  # a stray copy ("model (1).safetensors") would silently replace the real tensor
                raise ModelLoadError(
                    f"parameter {key!r} is stored in both {source[name]!r} and {file.name!r} in {str(directory)!r}; "
                    "remove the stray .safetensors file (or keep the shards model.safetensors.index.json names)")
            source[name] = file.name
            state[name] = tensor.to(device=device, dtype=dtype)
    if convert is not None:
        state = convert(state)
    with torch.device("meta"):
        model = model_cls(config)
    if getattr(config, "tie_word_embeddings", False):
        _drop_tied_head(state, directory)
    _check_shapes(model, state, directory)
    result = model.load_state_dict(state, strict=False, assign=True)
    missing = [k for k in result.missing_keys if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or result.unexpected_keys:
        raise ModelLoadError(
            f"checkpoint {str(directory)!r} does not fit {model_cls.__name__}: "
            f"missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}; use the config.json that came "
            "with these weights (check num_hidden_layers) or download the checkpoint again"
        )
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    with torch.device(device):
        model.model.rotary_emb = type(model.model.rotary_emb)(config)
    return model.to(device=device, dtype=dtype).eval()


def _drop_tied_head(state: dict[str, torch.Tensor], directory: Path) -> None:
    """Drop a stored output layer that tying replaces, refusing one that differs from the embeddings.

    Why: a config that says tie_word_embeddings=true over weights trained with a separate output layer
    used to load without a word and decode with the embeddings in its place (nonsense logits).
    """
    head, embed = state.pop("lm_head.weight", None), state.get("model.embed_tokens.weight")
    if head is not None and embed is not None and (head.shape != embed.shape or not torch.equal(head, embed)):
        raise ModelLoadError(f"config.json in {str(directory)!r} ties the output layer to the embeddings "
                             "(tie_word_embeddings), but the weights hold a different output layer; set "
                             "tie_word_embeddings to false (or use the config.json that came with the weights)")


def _check_shapes(model: Any, state: dict[str, torch.Tensor], directory: Path) -> None:
    """Refuse tensors whose shape is not the one config.json implies, naming the first few.

    Why: torch reports them as a RuntimeError listing every mismatch over many lines; the usual cause
    is a config.json from another size of the model (vocab_size, hidden_size, head counts).
    """
    expected = dict(model.state_dict(keep_vars=True))
    wrong = [f"{key} {tuple(tensor.shape)} vs {tuple(expected[key].shape)}" for key, tensor in state.items()
             if key in expected and tuple(tensor.shape) != tuple(expected[key].shape)]
    if wrong:
        raise ModelLoadError(
            f"the weights in {str(directory)!r} do not have the shapes its config.json implies (weights vs config): "
            f"{', '.join(wrong[:3])}{' ...' if len(wrong) > 3 else ''}; use the config.json that came with these "
            "weights (check vocab_size, hidden_size, intermediate_size and the head counts)")
