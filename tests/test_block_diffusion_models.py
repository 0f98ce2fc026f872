"""Block-diffusion checkpoints: layout detection, block length, config mapping, block-causal passes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from checkpoints import build_block_llama, build_fast_dllm_v2, build_llada2, build_sdar

from dllm_viz.models import ModelLoadError
from dllm_viz.models import block_diffusion as bd
from dllm_viz.models.block_causal import block_causal_mask, token_causal_mask

HIDDEN = torch.finfo(torch.float32).min


def visible(mask: torch.Tensor) -> list[list[int]]:
    return (mask[0, 0] == 0).int().tolist()


def test_block_causal_mask_tiles_absolute_blocks_from_position_zero() -> None:
    # 3 prompt + 3 generated positions with B = 4: blocks are [0, 4) and [4, 8), prompt included
    assert visible(block_causal_mask(6, 4)) == [
        [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]
    assert (block_causal_mask(6, 4)[0, 0] != 0).eq(block_causal_mask(6, 4)[0, 0] == HIDDEN).all()


def test_block_of_one_is_token_causal_and_one_block_is_bidirectional() -> None:
    assert visible(token_causal_mask(4)) == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert all(all(row) for row in visible(block_causal_mask(5, 8)))


def test_query_window_rows_equal_the_full_masks_rows_and_invalid_keys_are_hidden() -> None:
    full = block_causal_mask(12, 4)
    assert torch.equal(block_causal_mask(12, 4, query_start=8), full[:, :, 8:])
    valid = torch.tensor([True] * 10 + [False] * 2)  # diffusers' 2-D mask: 0 past prompt + gen_length
    rows = visible(block_causal_mask(12, 4, key_valid=valid))
    assert rows[11] == [1] * 10 + [0, 0] and rows[3] == [1] * 4 + [0] * 8
    with pytest.raises(ValueError, match="block_length"):
        block_causal_mask(4, 0)
    with pytest.raises(ValueError, match="inside"):
        block_causal_mask(4, 2, query_start=3, query_length=2)


def raw_config(directory: Path) -> dict:
    return json.loads((directory / "config.json").read_text())


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, torch.nn.Module | None]]:
    root = tmp_path_factory.mktemp("block_diffusion")
    return {"sdar": build_sdar(root / "sdar", block_size=4),
            "fast_dllm_v2": build_fast_dllm_v2(root / "fast", bd_size=8),
            "block_causal": build_block_llama(root / "llama", block_length=4),
            "llada2": (build_llada2(root / "llada2"), None)}


@pytest.mark.parametrize(("family", "base", "length", "source", "shift"), [
    ("sdar", "qwen3", 4, "block_size", False), ("fast_dllm_v2", "qwen2", 8, "bd_size", True),
    ("block_causal", "llama", 4, "block_size", False), ("llada2", "glm4_moe", 32, "family default", False)])
def test_each_published_layout_is_detected_with_its_block_length(checkpoints, family, base, length, source,
                                                                 shift) -> None:
    spec = bd.detect(raw_config(checkpoints[family][0]))
    assert spec is not None
    assert (spec.family, spec.base, spec.block_length, spec.block_length_source, spec.shift_logits) == (
        family, base, length, source, shift)


def test_configs_without_a_block_layout_are_not_block_diffusion(checkpoints) -> None:
    raw = raw_config(checkpoints["block_causal"][0])
    del raw["block_size"]
    assert bd.detect(raw) is None  # a plain autoregressive Llama
    assert bd.detect({"model_type": "llada", "architectures": ["LLaDAModelLM"]}) is None
    assert bd.detect({"model_type": "Dream", "architectures": ["DreamModel"]}) is None


def test_malformed_or_missing_block_lengths_say_which_key() -> None:
    with pytest.raises(ModelLoadError, match="`block_size` must be a positive integer"):
        bd.detect({"model_type": "sdar", "block_size": 0})
    with pytest.raises(ModelLoadError, match="bd_size"):
        bd.detect({"model_type": "Fast_dLLM_Qwen"})
    assert bd.detect({"model_type": "llada2_moe", "block_length": 16}).block_length == 16


@pytest.mark.parametrize("family", ["sdar", "fast_dllm_v2", "block_causal"])
def test_config_mapping_reproduces_the_saved_architecture(checkpoints, family) -> None:
    directory, reference = checkpoints[family]
    mapped = bd.base_config(raw_config(directory), bd.detect(raw_config(directory)))
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "rms_norm_eps", "tie_word_embeddings"):
        assert getattr(mapped, key) == getattr(reference.config, key), key
    assert mapped.rope_parameters["rope_theta"] == reference.config.rope_parameters["rope_theta"]
    assert type(mapped) is type(reference.config)


@pytest.mark.parametrize("family", ["sdar", "fast_dllm_v2", "block_causal"])
def test_block_causal_pass_on_the_loaded_model(checkpoints, family) -> None:
    directory, reference = checkpoints[family]
    spec = bd.detect(raw_config(directory))
    model = bd.load_model(directory, raw_config(directory), spec, device=torch.device("cpu"), dtype=torch.float32)
    length, block = 3 * spec.block_length - 1, spec.block_length
    ids = torch.randint(4, 60, (1, length), generator=torch.Generator().manual_seed(0))
    mask = block_causal_mask(length, block)

    def logits(x: torch.Tensor, m: torch.nn.Module = model) -> torch.Tensor:
        with torch.no_grad():
            return m(input_ids=x, attention_mask=mask[..., : x.shape[1], : x.shape[1]], use_cache=False).logits[0]

    out = logits(ids)
    torch.testing.assert_close(out, logits(ids, reference), rtol=0, atol=0)  # the weights loaded as saved
    later = ids.clone()
    later[0, 2 * block :] = 3
    torch.testing.assert_close(logits(later)[: 2 * block], out[: 2 * block], rtol=0, atol=1e-6)  # causal between
    same_block = ids.clone()
    same_block[0, 2 * block - 1] = 3
    assert not torch.allclose(logits(same_block)[block], out[block])  # bidirectional within a block
    torch.testing.assert_close(logits(ids[:, : 2 * block]), out[: 2 * block], rtol=0, atol=1e-5)  # prefix-only pass


def test_llada2_maps_onto_glm4_moe_and_matches_an_independent_reference(checkpoints) -> None:
    from llada2_moe_reference import Llada2Reference
    from transformers import CONFIG_MAPPING

    # re-check on a transformers upgrade: a LLaDA2 class of its own would replace the mapping
    assert "llada2_moe" not in CONFIG_MAPPING
    directory, _ = checkpoints["llada2"]
    raw = raw_config(directory)
    spec = bd.detect(raw)
    config = bd.base_config(raw, spec)
    assert (config.n_routed_experts, config.n_group, config.topk_group, config.first_k_dense_replace) == (4, 2, 1, 1)
    assert config.rope_parameters["partial_rotary_factor"] == 0.5 and config.use_qk_norm
    model = bd.load_model(directory, raw, spec, device=torch.device("cpu"), dtype=torch.float64)
    ids = torch.randint(4, 60, (1, 10), generator=torch.Generator().manual_seed(1))
    mask = block_causal_mask(10, 4, dtype=torch.float64)
    with torch.no_grad():
        ours = model(input_ids=ids, attention_mask=mask, use_cache=False).logits[0]
    expected = Llada2Reference(directory).forward(ids[0], mask[0, 0])
    # GLM4-MoE (like LLaDA2's own code) routes in float32 and builds rotary tables in float32
    torch.testing.assert_close(ours, expected, rtol=0, atol=1e-5)
    with torch.no_grad():
        float32 = bd.load_model(directory, raw, spec, device=torch.device("cpu"), dtype=torch.float32)
        fast = float32(input_ids=ids, attention_mask=mask.float(), use_cache=False).logits[0]
    torch.testing.assert_close(fast.double(), expected, rtol=0, atol=1e-4)  # the default (grouped) experts


@pytest.mark.parametrize(("key", "value"), [("score_function", "softmax"), ("use_bias", True),
                                            ("norm_topk_prob", False)])
def test_llada2_options_glm4_moe_cannot_express_are_refused_by_name(checkpoints, key, value) -> None:
    raw = raw_config(checkpoints["llada2"][0]) | {key: value}
    with pytest.raises(ModelLoadError, match=rf"{key}={value!r}"):
        bd.base_config(raw, bd.detect(raw))


BLOCKS = {"sdar": 4, "fast_dllm_v2": 8, "block_causal": 4, "llada2": 32}


@pytest.mark.parametrize("family", ["sdar", "fast_dllm_v2", "block_causal", "llada2"])
@pytest.mark.parametrize("trust_remote_code", [False, True])
def test_load_opens_every_layout_block_causally_on_its_maintained_class(checkpoints, family,
                                                                      trust_remote_code) -> None:
    from dllm_viz.models import load
    from dllm_viz.models.block_adapter import BlockDiffusionAdapter

    adapter = load(str(checkpoints[family][0]), device="cpu", trust_remote_code=trust_remote_code)
    assert isinstance(adapter, BlockDiffusionAdapter) and not adapter.uses_remote_code  # never their own code
    info = adapter.info
    assert (info.family, info.attention, info.block_length, info.context) == (
        family, "block_causal", BLOCKS[family], "prefix")
    assert info.shift_logits == (family == "fast_dllm_v2")
    assert adapter.tokenizer.convert_ids_to_tokens(info.mask_token_id) == adapter.tokenizer.mask_token


@pytest.mark.parametrize("family", ["sdar", "fast_dllm_v2", "block_causal", "llada2"])
def test_every_layout_decodes_with_block_refinement_and_its_exact_cache_agrees(checkpoints, family) -> None:
    """The published layouts through the one engine: aligned blocks of the model's own length, the
    LLaDA2 rule with editing, and the exact prefix cache giving the same tokens for fewer query rows."""
    from dllm_viz.config import DecodeConfig
    from dllm_viz.engine import decode
    from dllm_viz.models import load
    from dllm_viz.policies import AlignedBlocks, BlockRefinementRule, Pipeline

    adapter = load(str(checkpoints[family][0]), device="cpu", dtype="float32")
    prompt = [10, 11, 12, 13, 14, 15]
    block = adapter.info.block_length
    rule, sizer = BlockRefinementRule(block_steps=4), AlignedBlocks(block)
    traces = {cache: decode(adapter, prompt, Pipeline(rule=rule, block=sizer, cache=cache),  # type: ignore[arg-type]
                            DecodeConfig(gen_length=2 * block + 3))
              for cache in ("none", "exact")}
    plain, cached = traces["none"], traces["exact"]
    assert plain.final_tokens.tolist() == cached.final_tokens.tolist() and plain.nfe == cached.nfe
    assert np.array_equal(plain.edited, cached.edited)
    assert cached.query_len.sum() < plain.query_len.sum()
    # aligned windows: the first ends at the first block boundary after the prompt
    assert tuple(plain.window[0]) == (0, block - len(prompt) % block)


@pytest.mark.parametrize("family", ["sdar", "block_causal", "llada2"])
def test_finished_blocks_keys_and_values_make_an_exact_prefix_cache(checkpoints, family) -> None:
    """Block-causal + prefix-only context: a pass over the current block alone, attending to keys and
    values recorded by an earlier pass, equals a fresh full pass, however the block changed since.

    The queries are all in the last block, so their block-causal rows see every key (the mask is
    all-visible there); only the recording pass needs real block-causal masking.
    """
    from dllm_viz.models.kv_cache import WindowKVCache

    directory = checkpoints[family][0]
    raw = raw_config(directory)
    spec = bd.detect(raw)
    model = bd.load_model(directory, raw, spec, device=torch.device("cpu"), dtype=torch.float32)
    block = 4
    ids = torch.randint(4, 60, (1, 3 * block), generator=torch.Generator().manual_seed(2))
    full_mask = block_causal_mask(3 * block, block)
    cache = WindowKVCache(model.config.num_hidden_layers)
    with torch.no_grad():
        model(input_ids=ids, attention_mask=full_mask, cache=cache, use_cache=False)  # records every layer
        changed = ids.clone()
        changed[0, 2 * block :] = torch.tensor([3, 7, 3, 9])  # the current block moved on (commits, edits)
        cache.mode, cache.query_start, cache.query_end = "prefix", 2 * block, 3 * block
        window_mask = block_causal_mask(3 * block, block, query_start=2 * block)
        partial = model(input_ids=changed[:, 2 * block :], attention_mask=window_mask,
                        position_ids=torch.arange(2 * block, 3 * block)[None], cache=cache, use_cache=False).logits[0]
        fresh = model(input_ids=changed, attention_mask=full_mask, use_cache=False).logits[0, 2 * block :]
    torch.testing.assert_close(partial, fresh, rtol=0, atol=1e-5)
