"""ModelAdapter: the one object the engine talks to, whatever the model family.

The adapter owns every model quirk: special token ids, the chat or prompt template, the
device and dtype, and Dream's one-position logits shift, so that row i of `logits` is always
the distribution of position i. Family-specific construction lives in the sibling modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch

from dllm_viz.model_facts import AdapterInfo
from dllm_viz.models.bidirectional import full_attention_mask
from dllm_viz.models.block_causal import block_causal_mask
from dllm_viz.models.kv_cache import WindowKVCache


class ModelLoadError(ValueError):
    """A model could not be loaded; the message names the path or id and what to do."""


class ModelAdapter:
    """A bidirectional masked-diffusion LM behind a uniform, batch-size-1 interface.

    Args:
        model: a transformers model returning `.logits`; used with a 4-D all-visible mask
            unless `uses_remote_code` (remote code handles its own attention).
        tokenizer: the matching transformers tokenizer.
        info: the model's facts.
        prompt_template: optional format string with a `{prompt}` field (our tiny model's
            chat-free format); applied when the tokenizer has no chat template.
        uses_remote_code: the model came from `trust_remote_code`; call it plainly.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        info: AdapterInfo,
        *,
        prompt_template: str | None = None,
        uses_remote_code: bool = False,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.info = info
        self.prompt_template = prompt_template
        self.uses_remote_code = uses_remote_code
        self._delimiter_ids: dict[tuple[str, ...], list[int]] = {}

    @property
    def device(self) -> torch.device:
        """Device of the weights."""
        return torch.device(self.info.device)

    def attention_mask(self, query_start: int, key_length: int, valid: int | None) -> torch.Tensor:
        """Additive 4-D mask for queries [query_start, key_length): every key visible, except keys
        at or after `valid` (the padding aligned blocks add past the answer)."""
        dtype = next(self.model.parameters()).dtype
        if valid is None or valid >= key_length:
            return full_attention_mask(key_length - query_start, key_length, dtype=dtype, device=self.device)
        key_valid = torch.arange(key_length, device=self.device) < valid
        return block_causal_mask(key_length, key_length, query_start=query_start, key_valid=key_valid, dtype=dtype,
                                 device=self.device)

    @torch.inference_mode()
    def logits(self, tokens: torch.Tensor, *, last: int | None = None, valid: int | None = None) -> torch.Tensor:
        """Logits for a 1-D sequence of token ids: row i is the distribution of position i.

        Args:
            tokens: long tensor (seq,) on any device.
            last: return only the rows of the last `last` positions (the canvas); the LM head
                then skips the prompt rows, which saves memory and time on large vocabularies.
            valid: positions at or after it are padding: hidden as keys from every query.

        Returns:
            Tensor (last or seq, vocab) in the model dtype on the model's device.
        """
        ids = tokens.to(self.device).view(1, -1)
        n = ids.shape[1]
        keep, extra = self._rows_to_keep(n, last)
        if self.uses_remote_code:
            if valid is not None and valid < n:
                raise ValueError("a remote-code model takes no attention mask, so the padding of aligned blocks "
                                 "cannot be hidden from it; pick a gen_length that makes prompt + gen_length a "
                                 "multiple of the block length, or use block='fixed'")
            out = self.model(input_ids=ids).logits[0][-keep:]
        else:
            out = self.model(input_ids=ids, attention_mask=self.attention_mask(0, n, valid), use_cache=False,
                             logits_to_keep=keep).logits[0]
        return self._kept_rows(out, extra)

    def _rows_to_keep(self, n: int, last: int | None) -> tuple[int, bool]:
        """Rows the LM head computes for the last `last` of `n` positions (None: all), and whether one
        extra row leads them: a shifted-logits model (Dream) predicts each position from the one before."""
        last = n if last is None else last
        extra = self.info.shift_logits and last < n
        return last + int(extra), extra

    def _kept_rows(self, out: torch.Tensor, extra: bool) -> torch.Tensor:
        """The rows `_rows_to_keep` asked for, one per position. With the extra row, row j of out[:-1]
        is the output at the position before row j's."""
        return out[:-1] if extra else self._shift(out)

    @property
    def context_length(self) -> int | None:
        """Positions the model can attend over, prompt included (None when its config does not say).

        The engine refuses a prompt + gen_length beyond it; the app offers only lengths that fit.
        """
        limit = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        return None if limit is None else int(limit)

    @property
    def supports_cache(self) -> bool:
        """True when prefix/dual KV caching is available (native families, not remote code)."""
        return not self.uses_remote_code and hasattr(self.model, "config")

    @property
    def supports_exact_cache(self) -> bool:
        """True when finished blocks' keys and values are final, so cache="exact" reuses them
        (block-causal attention: block_adapter.py); never for full bidirectional attention."""
        return False

    def _run(self, ids: torch.Tensor, *, cache: WindowKVCache | None, position_start: int,
             key_length: int, keep: int = 0) -> torch.Tensor:
        """Forward `ids` (1-D) at absolute positions from `position_start`; raw (unshifted) logits of
        the last `keep` positions (0: all)."""
        ids = ids.to(self.device).view(1, -1)
        dtype = next(self.model.parameters()).dtype
        mask = full_attention_mask(ids.shape[1], key_length, dtype=dtype, device=self.device)
        positions = torch.arange(position_start, position_start + ids.shape[1], device=self.device).view(1, -1)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache,
                         use_cache=False, logits_to_keep=keep)
        return out.logits[0]

    @torch.inference_mode()
    def refresh(self, tokens: torch.Tensor, *, last: int | None = None,
                reuse: WindowKVCache | None = None) -> tuple[torch.Tensor, WindowKVCache]:
        """A full pass that also records every layer's keys/values for later partial passes.

        Returns the same logits as `logits(tokens, last=last)` and the recorded cache. Why `last`:
        the LM head over the prompt's rows is work no caller reads, and the refresh is most of what a
        cached decode costs (it opens every block), so it skips them as the uncached pass does.
        `reuse`: the previous refresh's cache, recorded into again (its buffers overwritten where the
        shapes match) and returned; the decoder passes it because a refresh that keeps fresh tensors
        alive runs 5-10% slower than a plain pass on CPU (models.kv_cache). Its old contents are gone.
        """
        if not self.supports_cache:
            raise ValueError(f"KV caching needs a natively supported family, not {self.info.family!r}; "
                             "use cache='none'")
        layers = int(self.model.config.num_hidden_layers)
        cache = reuse if reuse is not None and len(reuse.keys) == layers else WindowKVCache(layers)
        keep, extra = self._rows_to_keep(tokens.shape[0], last)
        out = self._run(tokens, cache=cache, position_start=0, key_length=tokens.shape[0], keep=keep)
        return self._kept_rows(out, extra), cache

    @torch.inference_mode()
    def cached_logits(self, tokens: torch.Tensor, cache: WindowKVCache, start: int, end: int,
                      mode: Literal["prefix", "dual"]) -> torch.Tensor:
        """Logits rows from `start` from a partial pass against `cache` (see models.kv_cache).

        prefix mode queries every position from `start` to the end of `tokens` and returns
        those rows; dual mode queries and returns only [start, end). With shifted logits
        (Dream) the query span starts one position earlier so that row `start` gets its own
        prediction (instead of Fast-dLLM's unconditional first token of each block).
        """
        shift = 1 if self.info.shift_logits and start > 0 else 0
        q0 = start - shift
        q1 = tokens.shape[0] if mode == "prefix" else end
        cache.mode, cache.query_start, cache.query_end = mode, q0, q1
        try:
            keys = q1 if mode == "prefix" else cache.get_seq_length()
            out = self._run(tokens[q0:q1], cache=cache, position_start=q0, key_length=keys)
        finally:
            cache.mode = "record"
        if shift:
            return out[: q1 - start]  # row j is the output at position start + j - 1
        return self._shift(out)

    def _shift(self, out: torch.Tensor) -> torch.Tensor:
        if self.info.shift_logits:
            # Dream keeps next-token prediction: position i is predicted by output i - 1.
            return torch.cat([out[:1], out[:-1]], dim=0)
        return out

    def has_chat_template(self) -> bool:
        """True when the tokenizer carries a chat template."""
        return bool(getattr(self.tokenizer, "chat_template", None))

    def format_prompt(self, text: str, *, chat: bool | None = None) -> str:
        """The text the model sees for a user prompt (template applied, not tokenized)."""
        use_chat = self.has_chat_template() if chat is None else chat
        if use_chat:
            if not self.has_chat_template():
                raise ValueError(
                    f"model {self.info.name_or_path!r} has no chat template; pass chat=False"
                )
            return str(
                self.tokenizer.apply_chat_template(
                    [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
                )
            )
        if self.prompt_template:
            return self.prompt_template.format(prompt=text)
        return text

    def encode_prompt(self, text: str, *, chat: bool | None = None) -> list[int]:
        """Token ids of a user prompt, with the chat or prompt template applied.

        Raises:
            ValueError: the prompt is not a string, or is empty.
        """
        if not isinstance(text, str):
            raise ValueError(f"the prompt must be a string, got {type(text).__name__} {text!r:.40}")
        if not text or not text.strip():
            raise ValueError("the prompt is empty; type a question or pick a sample prompt")
        # Chat templates already insert BOS; never add special tokens twice.
        return self.encode_text(self.format_prompt(text, chat=chat))

    def encode_text(self, text: str) -> list[int]:
        """Token ids of `text` as it stands: no template, no special tokens (e.g. a reference answer)."""
        return [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """Text of token ids; the mask and EOS/EoT tokens are dropped by default."""
        return str(self.tokenizer.decode(list(map(int, ids)), skip_special_tokens=skip_special_tokens))

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """A display label for each id (its own decoded text, special tokens kept)."""
        return [self.tokenizer.decode([int(i)], skip_special_tokens=False) for i in ids]

    def delimiter_ids(self, delimiters: Sequence[str]) -> list[int]:
        """Ids of vocabulary tokens made only of delimiter characters (spaces aside).

        With "\n" this is every newline token ("\n", "\n\n", " \n"), as AdaBlock's Dream
        port lists; a token that merges text with a newline does not count. Cached per set.
        """
        key = tuple(delimiters)
        if key not in self._delimiter_ids:
            chars = set("".join(key))
            vocab = getattr(self.tokenizer, "get_vocab", dict)()
            ids = sorted(vocab.values())
            texts = self.tokenizer.batch_decode([[i] for i in ids]) if ids else []
            self._delimiter_ids[key] = [
                i for i, text in zip(ids, texts, strict=True)
                if text.replace(" ", "") and set(text.replace(" ", "")) <= chars
            ]
        return self._delimiter_ids[key]

    def answer_text(self, ids: Sequence[int]) -> str:
        """Generated text up to the first EOS/EoT, special tokens removed (what is scored)."""
        stop = set(self.info.stop_token_ids)
        out: list[int] = []
        for i in ids:
            if int(i) in stop:
                break
            out.append(int(i))
        return self.decode(out)
