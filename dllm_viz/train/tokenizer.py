"""The tiny model's BPE tokenizer: trained with `tokenizers` on the synthetic corpus.

Digits are split one per token (arithmetic is learnt digit by digit), and a byte-level
pre-tokenizer/decoder pair makes decoding reproduce text exactly, newlines and code indentation
included. Special tokens are looked up by name, never by literal id.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

MASK_TOKEN = "[MASK]"
EOS_TOKEN = "<eos>"
PAD_TOKEN = "<pad>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, EOS_TOKEN, MASK_TOKEN)
DEFAULT_VOCAB_SIZE = 1024


def train_tokenizer(
    texts: Iterable[str], *, vocab_size: int = DEFAULT_VOCAB_SIZE
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE with individual digits on `texts` and wrap it for transformers.

    Args:
        texts: training corpus (prompts with template, and answers).
        vocab_size: total vocabulary including the 256-byte alphabet and the specials.

    Raises:
        ValueError: if `vocab_size` cannot hold the byte alphabet plus the specials.
    """
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(SPECIAL_TOKENS):
        raise ValueError(
            f"`vocab_size` must be >= {len(alphabet) + len(SPECIAL_TOKENS)}, got {vocab_size}"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        mask_token=MASK_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        clean_up_tokenization_spaces=False,
    )


def add_words(tokenizer: PreTrainedTokenizerFast, words: Iterable[str]) -> dict[str, list[int]]:
    """Make each of `words` that `tokenizer` spells in several tokens a token of its own.

    The new tokens match raw text before the byte-level BPE (so decoding still reproduces text
    exactly) and take the next ids: every id so far keeps its meaning, and a warm-started model
    only grows rows. Returns each added word with the ids it was spelled in before (for
    initialising its rows); a word that already is one token, or was added before, is left out.
    """
    spelled = {word: tokenizer.encode(word, add_special_tokens=False) for word in dict.fromkeys(words)}
    added = {word: ids for word, ids in spelled.items() if len(ids) > 1}
    tokenizer.add_tokens([AddedToken(word, normalized=False) for word in added])
    return added


def load_tokenizer(path: str) -> PreTrainedTokenizerFast:
    """Load a tokenizer saved by `save_pretrained` (a directory) or a bare `tokenizer.json`."""
    if path.endswith(".json"):
        return PreTrainedTokenizerFast(
            tokenizer_file=path,
            mask_token=MASK_TOKEN,
            eos_token=EOS_TOKEN,
            pad_token=PAD_TOKEN,
            clean_up_tokenization_spaces=False,
        )
    return PreTrainedTokenizerFast.from_pretrained(path, trust_remote_code=False)  # never a checkpoint's code


def special_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, int]:
    """mask/eos/pad ids read from the tokenizer (the only place ids come from)."""
    ids = {
        "mask_token_id": tokenizer.mask_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    missing = [name for name, value in ids.items() if value is None]
    if missing:
        raise ValueError(
            f"tokenizer lacks special tokens {missing}; expected {list(SPECIAL_TOKENS)}"
        )
    return {name: int(value) for name, value in ids.items()}
