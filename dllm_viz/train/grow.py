"""Deepen an exported model without changing what it computes: new layers that start as the identity.

Why: the bundled model's forward pass leaves room under the CI budget (one pass at gen 256 in
about 50 ms of the 100 ms allowed with 6 layers on one core, about 63 ms with 9), and on a GPU a
step of this model is bound by building batches, not by its arithmetic, so capacity there is
nearly free. Training a deeper model from scratch would throw away every earlier session's
training; a warm start that grows instead keeps it. A Llama layer adds its attention output
(`o_proj`) and its MLP output (`down_proj`) to the residual stream, so a layer whose two output
projections are zero passes its input through unchanged: inserted between the exported layers,
such layers leave the model's function exactly as it was (the tests check the logits), and their
other weights keep a fresh random initialisation so that gradients reach them as soon as the
output projections move off zero (as LoRA's zero-initialised B and ReZero do).

New layers are spread evenly: with 6 layers and 3 new ones, a new layer follows old layers 1, 3
and 5, so no stretch of the network is more than two old layers without new capacity.
"""

from __future__ import annotations

import re

import torch

# What a Llama layer adds to the residual stream; zero, and the layer is the identity.
RESIDUAL_OUTPUTS = ("self_attn.o_proj.weight", "mlp.down_proj.weight")
_LAYER_KEY = re.compile(r"model\.layers\.(\d+)\.(.+)")
# Deeper than this many layers per exported layer is not "growing" any more: train a new model.
MAX_GROWTH_FACTOR = 2


def check_growth(old_layers: int, added: int) -> None:
    """Raises ValueError unless `added` new layers may be inserted among `old_layers`."""
    if added < 0 or added > MAX_GROWTH_FACTOR * old_layers:
        raise ValueError(f"`--grow-layers` must be in [0, {MAX_GROWTH_FACTOR * old_layers}] for a model of "
                         f"{old_layers} layers, got {added}; pass e.g. --grow-layers {max(1, old_layers // 2)}")


def layer_order(old_layers: int, added: int) -> list[int | None]:
    """The deeper model's layers in order: an old layer's index, or None for a new one.

    New layer j (0-based) follows old layer ceil((j + 1) * old / added) - 1, so the new ones are
    spread evenly and the last follows the last old layer."""
    check_growth(old_layers, added)
    after = [-(-(j + 1) * old_layers // added) - 1 for j in range(added)]
    order: list[int | None] = []
    for i in range(old_layers):
        order.append(i)
        order.extend(None for a in after if a == i)
    return order


def deepen(old: dict[str, torch.Tensor], fresh: dict[str, torch.Tensor], old_layers: int,
           added: int) -> dict[str, torch.Tensor]:
    """The deeper model's weights: the exported layers moved to their new places, new layers
    from `fresh` (the deeper model's own initialisation) with their residual outputs zeroed, and
    everything outside the layers (embeddings, final norm, head) from `old`.

    Args:
        old: the exported model's state dict (`old_layers` layers).
        fresh: a freshly built model's state dict with `old_layers + added` layers.

    Raises:
        ValueError: the counts do not match the state dicts, or `added` is out of range.
    """
    order = layer_order(old_layers, added)
    found = {int(m.group(1)) for key in old if (m := _LAYER_KEY.fullmatch(key))}
    if found != set(range(old_layers)):
        raise ValueError(f"the exported weights hold layers {sorted(found)}, not 0..{old_layers - 1}")
    out: dict[str, torch.Tensor] = {}
    for key, value in fresh.items():
        match = _LAYER_KEY.fullmatch(key)
        if match is None:
            out[key] = old[key]
            continue
        source = order[int(match.group(1))]
        name = match.group(2)
        if source is not None:
            out[key] = old[f"model.layers.{source}.{name}"]
        elif name in RESIDUAL_OUTPUTS:
            out[key] = torch.zeros_like(value)
        else:
            out[key] = value
    return out
