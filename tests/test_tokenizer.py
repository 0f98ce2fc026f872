"""The tiny model's tokenizer: exact round trip (newlines, indentation), digit tokens, specials."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast

from dllm_viz.tasks import TASKS
from dllm_viz.train.data import format_prompt
from dllm_viz.train.tokenizer import SPECIAL_TOKENS, load_tokenizer, special_ids, train_tokenizer


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    problems = TASKS["arith"].generate(400, seed=0, split="train") + TASKS["code"].generate(
        200, seed=0, split="train"
    )
    return [format_prompt(p.prompt) for p in problems] + [p.target for p in problems]


@pytest.fixture(scope="module")
def tokenizer(corpus: list[str]) -> PreTrainedTokenizerFast:
    return train_tokenizer(corpus, vocab_size=600)


TEXTS = [
    "    if a > b:\n        return a\n    return b",
    "12 + 7 = 19\n19 - 5 = 14\n#### 14",
    "\tx  =  [1,2]\n\n\n  trailing   ",
    "unseen wörds ✓ and émojis 🙂",
    "def f(xs):\n    total = 0\n    for x in xs:\n        total += x * x\n    return total\n",
]


@pytest.mark.parametrize("text", TEXTS)
def test_decode_round_trips_exactly(tokenizer: PreTrainedTokenizerFast, text: str) -> None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text


def test_corpus_round_trips_exactly(tokenizer: PreTrainedTokenizerFast, corpus: list[str]) -> None:
    encoded = tokenizer(corpus, add_special_tokens=False)["input_ids"]
    assert tokenizer.batch_decode(encoded) == corpus


def test_digits_are_one_token_each(tokenizer: PreTrainedTokenizerFast) -> None:
    tokens = tokenizer.convert_ids_to_tokens(
        tokenizer("x 12345 y", add_special_tokens=False)["input_ids"]
    )
    assert [t for t in tokens if any(c.isdigit() for c in t)] == list("12345")


def test_specials_exist_and_are_distinct(tokenizer: PreTrainedTokenizerFast) -> None:
    ids = special_ids(tokenizer)
    assert len(set(ids.values())) == 3
    assert tokenizer.convert_ids_to_tokens(sorted(ids.values())) == sorted(
        SPECIAL_TOKENS, key=lambda t: tokenizer.convert_tokens_to_ids(t)
    )
    assert tokenizer.decode([ids["eos_token_id"]] * 2, skip_special_tokens=True) == ""


def test_save_and_reload_preserves_ids(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    tokenizer.save_pretrained(tmp_path)
    for loaded in (
        load_tokenizer(str(tmp_path)),
        load_tokenizer(str(tmp_path / "tokenizer.json")),
        PreTrainedTokenizerFast.from_pretrained(tmp_path),
    ):
        assert special_ids(loaded) == special_ids(tokenizer)
        assert (
            loaded(TEXTS[0], add_special_tokens=False)["input_ids"]
            == tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"]
        )


def test_too_small_vocab_is_rejected() -> None:
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(["abc"], vocab_size=10)
