"""AdapterInfo: the facts about a loaded model that the engine, traces and figures need.

Torch-free, so a saved trace carries them (Trace.meta.model) and figures read them without a
model. The adapter (models/) fills them in; nothing here loads anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class AdapterInfo:
    """Facts about a loaded model that the engine and the app need.

    Attributes:
        family: "llada", "dream", "tiny" or "remote".
        name_or_path: what the user passed to `load`.
        mask_token_id: the id written into not-yet-decoded positions.
        eos_token_id: end-of-sequence id (LLaDA and Dream pad answers with it).
        eot_token_id: end-of-turn id, or None when the tokenizer has none.
        vocab_size: rows of the output layer.
        device: torch device string.
        dtype: torch dtype name of the weights.
        shift_logits: True for Dream (row i is read from the model output at i - 1).
        delimiters: strings that end a semantic step (AdaBlock's default delimiter set).
        attention: "bidirectional" (LLaDA, Dream), "block_causal" (block diffusion: LLaDA2.x,
            SDAR, Fast-dLLM v2) or "token_causal".
        block_length: the block length a block-causal model was trained with, else None.
        context: what each pass feeds the model: "canvas" (prompt + whole canvas) or
            "prefix" (prompt + canvas up to the current window's end; block diffusion).
    """

    family: str
    name_or_path: str
    mask_token_id: int
    eos_token_id: int
    eot_token_id: int | None
    vocab_size: int
    device: str
    dtype: str
    shift_logits: bool = False
    delimiters: tuple[str, ...] = ("\n",)
    attention: str = "bidirectional"
    block_length: int | None = None
    context: str = "canvas"

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """EOS and, when present, EoT: the ids that end an answer."""
        return (self.eos_token_id,) if self.eot_token_id is None else (
            self.eos_token_id,
            self.eot_token_id,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (recorded in every trace)."""
        data = asdict(self)
        data["delimiters"] = list(self.delimiters)
        data["stop_token_ids"] = list(self.stop_token_ids)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AdapterInfo:
        """Inverse of `to_dict` (the derived `stop_token_ids` is recomputed, unknown keys raise)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"stop_token_ids"})
        if unknown:
            raise ValueError(f"unknown model facts {unknown}; known: {sorted(known)}")
        values = {k: v for k, v in data.items() if k in known}
        if "delimiters" in values:
            values["delimiters"] = tuple(values["delimiters"])
        return cls(**values)
