"""Fast-dLLM prefix and dual KV caches: exactness where it must hold, and every policy end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from checkpoints import build_dream, build_llada
from llada_reference import LladaReference

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode, iter_decode
from dllm_viz.models import load
from dllm_viz.policies import RULES, Pipeline

MODES = ("prefix", "dual")


@pytest.fixture(scope="module")
def llada_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_llada(tmp_path_factory.mktemp("llada_cache"))


@pytest.fixture(scope="module")
def dream_adapter(tmp_path_factory: pytest.TempPathFactory):
    return load(str(build_dream(tmp_path_factory.mktemp("dream_cache"))[0]), device="cpu", dtype="float64")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("family", ["tiny", "llada", "dream"])
def test_partial_pass_after_an_unchanged_refresh_reproduces_it(family: str, mode: str, tiny_dir: Path,
                                                               llada_dir: Path, dream_adapter) -> None:
    """docs/ALGORITHMS.md §9.2: if nothing was committed, a cached pass must equal the refresh pass."""
    adapter = {"tiny": lambda: load(str(tiny_dir), device="cpu", dtype="float64"),
               "llada": lambda: load(str(llada_dir), device="cpu", dtype="float64"),
               "dream": lambda: dream_adapter}[family]()
    ids = torch.randint(10, 60, (40,), generator=torch.Generator().manual_seed(0))
    full, cache = adapter.refresh(ids)
    torch.testing.assert_close(full, adapter.logits(ids))
    rows = adapter.cached_logits(ids, cache, 16, 24, mode)
    expected = full[16:] if mode == "prefix" else full[16:24]
    torch.testing.assert_close(rows, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("family", ["tiny", "dream"])
def test_a_refresh_of_the_last_rows_gives_those_rows_and_the_whole_cache(family: str, tiny_dir: Path,
                                                                        dream_adapter) -> None:
    """The engine's refresh skips the prompt's rows (the LM head's work nobody reads), as `logits` does;
    the keys and values it records are the whole sequence's all the same. Dream's rows are shifted."""
    adapter = load(str(tiny_dir), device="cpu", dtype="float64") if family == "tiny" else dream_adapter
    ids = torch.randint(10, 60, (40,), generator=torch.Generator().manual_seed(2))
    full, whole = adapter.refresh(ids)
    rows, cache = adapter.refresh(ids, last=24)
    assert rows.shape[0] == 24
    torch.testing.assert_close(rows, full[16:], rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(rows, adapter.logits(ids, last=24), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(adapter.cached_logits(ids, cache, 16, 24, "dual"),
                               adapter.cached_logits(ids, whole, 16, 24, "dual"), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("family", ["tiny", "dream"])
def test_a_refresh_into_a_used_cache_records_what_a_fresh_one_does(family: str, tiny_dir: Path,
                                                                   dream_adapter) -> None:
    """The engine refreshes into the previous cache (its buffers are copied into, not replaced): after
    a dual pass wrote the window's slots, the next refresh must leave exactly what a new cache holds,
    in the same buffers; a refresh of another length records its own tensors."""
    adapter = load(str(tiny_dir), device="cpu", dtype="float64") if family == "tiny" else dream_adapter
    gen = torch.Generator().manual_seed(3)
    old, new = torch.randint(10, 60, (40,), generator=gen), torch.randint(10, 60, (40,), generator=gen)
    _, used = adapter.refresh(old, last=24)
    buffers = [t.data_ptr() for t in (*used.keys, *used.values)]  # type: ignore[union-attr]
    adapter.cached_logits(new, used, 16, 24, "dual")  # writes the window's keys/values into the buffers
    rows, again = adapter.refresh(new, last=24, reuse=used)
    fresh_rows, fresh = adapter.refresh(new, last=24)
    assert again is used and [t.data_ptr() for t in (*again.keys, *again.values)] == buffers  # type: ignore[union-attr]
    torch.testing.assert_close(rows, fresh_rows, rtol=0, atol=0)
    for mine, theirs in zip((*again.keys, *again.values), (*fresh.keys, *fresh.values), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    torch.testing.assert_close(adapter.cached_logits(old, again, 16, 24, "dual"),
                               adapter.cached_logits(old, fresh, 16, 24, "dual"), rtol=0, atol=0)
    shorter = new[:32]
    rows, resized = adapter.refresh(shorter, last=16, reuse=again)
    torch.testing.assert_close(rows, adapter.logits(shorter, last=16), rtol=1e-9, atol=1e-9)
    assert resized.get_seq_length() == 32
    torch.testing.assert_close(adapter.cached_logits(shorter, resized, 16, 24, "dual"), rows[:8],
                               rtol=1e-9, atol=1e-9)


def test_dual_cache_matches_a_hand_written_stale_cache_attention(llada_dir: Path) -> None:
    """Fresh window keys/values mixed with refresh-time keys/values elsewhere, in float64."""
    adapter = load(str(llada_dir), device="cpu", dtype="float64")
    mask = adapter.info.mask_token_id
    old = torch.tensor([5, 9, 17, 33, 40, 11] + [mask] * 16)
    new = old.clone()
    new[6:9] = torch.tensor([20, 21, 22])  # commits inside the window [6, 14)
    _, cache = adapter.refresh(old)
    ours = adapter.cached_logits(new, cache, 6, 14, "dual")
    reference = LladaReference(llada_dir)
    _, old_layers = reference.forward(old)
    expected, _ = reference.forward(new, window=(6, 14), cached=old_layers)
    torch.testing.assert_close(ours, expected, rtol=0, atol=2e-6)  # HF rotary tables are float32
    assert not torch.allclose(ours, reference.forward(new)[0][6:14]), "the cache must be stale outside the window"


def test_prefix_cache_queries_the_window_and_everything_after(llada_dir: Path) -> None:
    adapter = load(str(llada_dir), device="cpu", dtype="float64")
    mask = adapter.info.mask_token_id
    old = torch.tensor([5, 9, 17, 33] + [mask] * 12)
    new = old.clone()
    new[4:6] = torch.tensor([20, 21])
    _, cache = adapter.refresh(old)
    ours = adapter.cached_logits(new, cache, 4, 8, "prefix")
    reference = LladaReference(llada_dir)
    _, old_layers = reference.forward(old)
    # prefix: keys [0, 4) from the refresh, keys [4, 16) fresh; queries [4, 16)
    expected, _ = reference.forward(new, window=(4, 16), cached=old_layers)
    torch.testing.assert_close(ours, expected, rtol=0, atol=2e-6)  # HF rotary tables are float32


def test_dream_shift_survives_windowed_passes(dream_adapter) -> None:
    ids = torch.randint(10, 60, (30,), generator=torch.Generator().manual_seed(1))
    full, cache = dream_adapter.refresh(ids)
    rows = dream_adapter.cached_logits(ids, cache, 12, 20, "dual")
    torch.testing.assert_close(rows, full[12:20], rtol=1e-9, atol=1e-9)  # row 12 = output at 11


@pytest.mark.parametrize("mode", ["none", *MODES])
@pytest.mark.parametrize("rule", sorted(set(RULES) - {"block_refinement"}))  # its own tests: test_block_engine.py
def test_every_rule_runs_with_every_cache_mode(tiny_adapter, rule: str, mode: str,
                                              tiny_controller_options: dict[str, str]) -> None:
    pipeline = Pipeline.from_names(rule, "fixed", cache=mode, block_length=8, threshold=0.05, **tiny_controller_options)
    trace = decode(tiny_adapter, tiny_adapter.encode_prompt("Tom has 3 apples."), pipeline,
                   DecodeConfig(gen_length=32))
    assert trace.is_complete
    kinds = [trace.meta.pass_kind_names[k] for k in trace.pass_kind]
    first_of_block = np.r_[True, trace.block_index[1:] != trace.block_index[:-1]]
    assert all(kinds[i] == "full" for i in np.flatnonzero(first_of_block))
    if mode == "none":
        assert set(kinds) == {"full"}
    elif trace.nfe > trace.block_index.max() + 1:
        assert f"{mode}_cached" in kinds
        assert trace.query_len[~first_of_block].max() < trace.query_len.max()


def test_cache_none_is_unchanged_and_refresh_every_forces_full_passes(tiny_adapter) -> None:
    prompt = tiny_adapter.encode_prompt("abc")
    config = DecodeConfig(gen_length=32)
    plain = decode(tiny_adapter, prompt, Pipeline.from_names("fixed_steps", block_length=8), config)
    explicit = decode(tiny_adapter, prompt, Pipeline.from_names("fixed_steps", block_length=8, cache="none"), config)
    assert np.array_equal(plain.tokens, explicit.tokens)
    every2 = decode(tiny_adapter, prompt, Pipeline.from_names("fixed_steps", block_length=8, cache="dual",
                                                              refresh_every=2), config)
    assert (every2.pass_kind == 0).sum() == 16  # steps 0, 2, 4, 6 of each 8-step block


def test_cache_memory_does_not_grow_across_blocks(tiny_adapter) -> None:
    records = list(iter_decode(tiny_adapter, tiny_adapter.encode_prompt("abc"),
                               Pipeline.from_names("fixed_steps", block_length=8, cache="dual"),
                               DecodeConfig(gen_length=64)))
    sizes = {r.cache_bytes for r in records}
    assert len(sizes) == 1 and sizes.pop() > 0
    trace = decode(tiny_adapter, tiny_adapter.encode_prompt("abc"),
                   Pipeline.from_names("fixed_steps", block_length=8, cache="dual"), DecodeConfig(gen_length=64))
    assert trace.cache_bytes.tolist() == [r.cache_bytes for r in records]  # recorded, not dropped


def test_cache_needs_a_native_family() -> None:
    from toy import ToyAdapter

    adapter = ToyAdapter()
    adapter.uses_remote_code = True
    with pytest.raises(ValueError, match="natively supported"):
        decode(adapter, [4, 5], Pipeline(cache="dual"), DecodeConfig(gen_length=32))
