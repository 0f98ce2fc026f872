"""A deterministic toy denoiser: peaked, context-dependent logits without a transformer.

Position i prefers token TARGET[i]; its confidence rises with the number of committed
positions near it, and a few positions oscillate between two candidates. This gives every
policy varied confidences (a random transformer's are all near 1/V) at microsecond cost.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from dllm_viz.models.base import AdapterInfo, ModelAdapter

VOCAB = 24
MASK, EOS, NEWLINE = 0, 1, 2


class ToyCache:
    """Stand-in for a KV cache: remembers the canvas of the last full pass."""

    def __init__(self, tokens: torch.Tensor) -> None:
        self.tokens = tokens

    def nbytes(self) -> int:
        return int(self.tokens.numel() * self.tokens.element_size())


class ToyAdapter(ModelAdapter):
    """ModelAdapter whose logits are a closed-form function of the current tokens."""

    def __init__(self, prompt_len_hint: int = 4) -> None:
        info = AdapterInfo(family="toy", name_or_path="toy", mask_token_id=MASK, eos_token_id=EOS,
                           eot_token_id=None, vocab_size=VOCAB, device="cpu", dtype="float32")
        model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=4096))
        super().__init__(model, tokenizer=None, info=info)

    def logits(self, tokens: torch.Tensor, *, last: int | None = None, valid: int | None = None) -> torch.Tensor:
        # `valid` (aligned blocks' padding) is ignored: the toy is a function of the whole row.
        return self._toy_logits(tokens)[-(last or tokens.shape[0]) :]

    def _toy_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[0]
        pos = torch.arange(n)
        target = 3 + (pos * 7) % (VOCAB - 3)
        target = torch.where(pos % 9 == 8, torch.full_like(target, NEWLINE), target)
        target = torch.where(pos > 0.75 * n, torch.full_like(target, EOS), target)
        committed = (tokens != MASK).float()
        kernel = torch.ones(1, 1, 7)
        near = torch.nn.functional.conv1d(committed.view(1, 1, -1), kernel, padding=3).view(-1)
        strength = 0.5 + 1.2 * near + 0.3 * (pos % 5).float()
        # Oscillation: every 6th position flips its preferred token with the committed count.
        flip = ((pos % 6) == 3) & (int(committed.sum().item()) % 2 == 1)
        target = torch.where(flip, 3 + (target + 1) % (VOCAB - 3), target)
        out = torch.zeros(n, VOCAB)
        out[pos, target] = strength
        out[:, MASK] = -30.0
        return out

    def refresh(self, tokens: torch.Tensor, *, last: int | None = None, reuse=None):  # type: ignore[no-untyped-def]
        """The toy has no keys/values: a 'cache' is just the tokens of the full pass (a new one each time)."""
        return self._toy_logits(tokens)[-(last or tokens.shape[0]) :], ToyCache(tokens.clone())

    def cached_logits(self, tokens, cache, start, end, mode):  # type: ignore[no-untyped-def]
        """Emulates a stale cache: the toy sees the refresh-time canvas outside the query span."""
        mixed = cache.tokens.clone()
        q1 = tokens.shape[0] if mode == "prefix" else end
        mixed[start:q1] = tokens[start:q1]
        return self._toy_logits(mixed)[start:q1]

    def delimiter_ids(self, delimiters) -> list[int]:  # type: ignore[no-untyped-def]
        return [NEWLINE]

    def token_strings(self, ids: list[int]) -> list[str]:
        return [f"t{int(i)}" for i in ids]

    def decode(self, ids, *, skip_special_tokens: bool = True) -> str:  # type: ignore[override]
        return " ".join(f"t{int(i)}" for i in ids if not (skip_special_tokens and int(i) in (MASK, EOS)))
