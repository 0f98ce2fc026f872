"""The decoding loop: faithfulness to the reference loops, invariants, caps and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from toy import ToyAdapter

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode, iter_decode
from dllm_viz.policies import FixedBlocks, FixedStepsPolicy, Pipeline, ThresholdPolicy
from dllm_viz.policies.base import is_any_of


def llada_reference(adapter, prompt: list[int], *, steps: int, gen_length: int, block_length: int) -> list[int]:
    """LLaDA's generate() loop as written in docs/ALGORITHMS.md §1.2 (tau=0, low_confidence)."""
    mask = adapter.info.mask_token_id
    x = torch.tensor([prompt + [mask] * gen_length])
    p = len(prompt)
    num_blocks = gen_length // block_length
    per_block = steps // num_blocks
    for k in range(num_blocks):
        block_masked = int((x[0, p + k * block_length : p + (k + 1) * block_length] == mask).sum())
        base, rem = divmod(block_masked, per_block)
        quota = [base + (1 if t < rem else 0) for t in range(per_block)]
        for t in range(per_block):
            is_mask = x[0] == mask
            logits = adapter.logits(x[0])
            x0 = logits.argmax(-1)
            conf = torch.softmax(logits.double(), -1).gather(-1, x0[:, None])[:, 0]
            conf[p + (k + 1) * block_length :] = -np.inf
            x0 = torch.where(is_mask, x0, x[0])
            conf = torch.where(is_mask, conf, torch.tensor(-np.inf, dtype=torch.float64))
            chosen = torch.topk(conf, quota[t]).indices
            x[0, chosen] = x0[chosen]
    return x[0, p:].tolist()


def fast_dllm_threshold_reference(adapter, prompt: list[int], *, tau: float, gen_length: int,
                                  block_length: int) -> tuple[list[int], int]:
    """Fast-dLLM's threshold loop (docs/ALGORITHMS.md §2.1): all c >= tau, else the top-1; per block."""
    mask = adapter.info.mask_token_id
    x = torch.tensor(prompt + [mask] * gen_length)
    p, nfe = len(prompt), 0
    for k in range(gen_length // block_length):
        lo, hi = p + k * block_length, p + (k + 1) * block_length
        while (x[lo:hi] == mask).any():
            logits = adapter.logits(x)
            nfe += 1
            x0 = logits.argmax(-1)
            conf = torch.softmax(logits.double(), -1).gather(-1, x0[:, None])[:, 0]
            open_ = torch.zeros_like(conf, dtype=torch.bool)
            open_[lo:hi] = x[lo:hi] == mask
            conf = torch.where(open_, conf, torch.tensor(-np.inf, dtype=torch.float64))
            take = open_ & (conf >= tau)
            if not take.any():
                take[conf.argmax()] = True
            x[take] = x0[take]
    return x[p:].tolist(), nfe


@pytest.mark.parametrize(("steps", "block_length"), [(32, 8), (32, 32), (16, 8), (64, 16)])
def test_fixed_steps_reproduces_llada_reference_tokens(tiny_adapter, steps: int, block_length: int) -> None:
    prompt = tiny_adapter.encode_prompt("Tom has 3 apples.")
    trace = decode(tiny_adapter, prompt, Pipeline(FixedStepsPolicy(steps=steps), FixedBlocks(block_length)),
                   DecodeConfig(gen_length=32))
    expected = llada_reference(tiny_adapter, prompt, steps=steps, gen_length=32, block_length=block_length)
    assert trace.final_tokens.tolist() == expected
    # Steps beyond a window's masks are idle in LLaDA; we skip them (NFE <= steps).
    assert trace.nfe == min(steps, 32)


def test_fixed_steps_matches_reference_on_the_toy_denoiser() -> None:
    adapter = ToyAdapter()
    prompt = [5, 6, 7, 8]
    trace = decode(adapter, prompt, Pipeline(FixedStepsPolicy(steps=24), FixedBlocks(12)),
                   DecodeConfig(gen_length=48))
    assert trace.final_tokens.tolist() == llada_reference(adapter, prompt, steps=24, gen_length=48,
                                                          block_length=12)
    assert trace.tokens_per_step.tolist() == [2] * 24


@pytest.mark.parametrize("tau", [0.3, 0.6, 0.9])
def test_threshold_reproduces_fast_dllm_reference(tau: float) -> None:
    adapter = ToyAdapter()
    prompt = [3, 4, 5]
    trace = decode(adapter, prompt, Pipeline(ThresholdPolicy(tau), FixedBlocks(16)), DecodeConfig(gen_length=64))
    tokens, nfe = fast_dllm_threshold_reference(adapter, prompt, tau=tau, gen_length=64, block_length=16)
    assert trace.final_tokens.tolist() == tokens
    assert trace.nfe == nfe


def test_threshold_on_toy_commits_several_tokens_per_step() -> None:
    trace = decode(ToyAdapter(), [3, 4], Pipeline(ThresholdPolicy(0.5), FixedBlocks(32)),
                   DecodeConfig(gen_length=64))
    assert trace.nfe < 64 and trace.tokens_per_step.max() > 1 and trace.is_complete


def test_windows_are_semi_autoregressive_blocks(tiny_adapter) -> None:
    prompt = tiny_adapter.encode_prompt("abc")
    trace = decode(tiny_adapter, prompt, Pipeline(ThresholdPolicy(0.9), FixedBlocks(8)), DecodeConfig(gen_length=32))
    assert trace.block_index.tolist() == sorted(trace.block_index.tolist())
    for step in range(trace.num_steps):
        start, end = trace.window[step]
        committed = np.flatnonzero(trace.committed[step])
        assert committed.size >= 1 and ((committed >= start) & (committed < end)).all()
        assert (start, end) == (8 * trace.block_index[step], 8 * trace.block_index[step] + 8)


def test_step_cap_stops_early_and_marks_trace_incomplete(tiny_adapter) -> None:
    prompt = tiny_adapter.encode_prompt("abc")
    trace = decode(tiny_adapter, prompt, Pipeline(FixedStepsPolicy(), FixedBlocks(32)),
                   DecodeConfig(gen_length=32, max_steps=5))
    assert trace.nfe == 5 and not trace.is_complete
    assert trace.meta.stop_reason == "max_steps"
    assert (trace.final_tokens == tiny_adapter.info.mask_token_id).sum() == 27


def test_same_seed_same_trace_with_sampling(tiny_adapter) -> None:
    prompt = tiny_adapter.encode_prompt("abc")
    cfg = DecodeConfig(gen_length=16, temperature=1.0, seed=11)
    pipe = Pipeline(FixedStepsPolicy(remasking="random"), FixedBlocks(8))
    a, b = decode(tiny_adapter, prompt, pipe, cfg), decode(tiny_adapter, prompt, pipe, cfg)
    assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.confidence, b.confidence)
    c = decode(tiny_adapter, prompt, pipe, DecodeConfig(gen_length=16, temperature=1.0, seed=12))
    assert not np.array_equal(a.tokens, c.tokens)


def test_iter_decode_yields_one_record_per_forward_pass(tiny_adapter) -> None:
    prompt = tiny_adapter.encode_prompt("abc")
    records = list(iter_decode(tiny_adapter, prompt, Pipeline(FixedStepsPolicy(steps=8), FixedBlocks(8)),
                               DecodeConfig(gen_length=16)))
    assert [r.nfe for r in records] == list(range(1, 9))
    assert records[-1].stop_reason == "complete" and all(r.stop_reason is None for r in records[:-1])
    assert all(r.forward_seconds <= r.step_seconds for r in records)
    assert all(0 < r.policy_seconds <= r.step_seconds - r.forward_seconds for r in records)
    assert records[0].query_len == len(prompt) + 16


@pytest.mark.parametrize(("prompt", "config", "match"), [
    ([], DecodeConfig(gen_length=8), "prompt is empty"),
    ([4] * 600, DecodeConfig(gen_length=8), "exceeds the model's context"),
])
def test_bad_inputs_raise_clear_errors(tiny_adapter, prompt, config, match) -> None:
    with pytest.raises(ValueError, match=match):
        decode(tiny_adapter, prompt, Pipeline(), config)


@pytest.mark.parametrize(("prompt", "pipeline", "match"), [
    ([], Pipeline(), "prompt is empty"),
    ([4, 5], Pipeline(block=FixedBlocks(12)), "must divide"),
    ([4, 5], Pipeline.from_names("fixed_steps", steps=6, block_length=8), "steps"),
])
def test_iter_decode_checks_its_inputs_when_called_not_at_the_first_step(tiny_adapter, prompt, pipeline,
                                                                         match) -> None:
    with pytest.raises(ValueError, match=match):
        iter_decode(tiny_adapter, prompt, pipeline, DecodeConfig(gen_length=32))  # no next()


def test_dense_pipeline_is_one_token_per_step_in_blocks_that_tile_the_canvas(tiny_adapter) -> None:
    trace = decode(tiny_adapter, [4, 5], Pipeline.dense(8), DecodeConfig(gen_length=32))
    assert trace.nfe == 32 and (trace.tokens_per_step == 1).all() and trace.block_index.max() == 3
    assert Pipeline.dense(gen_length=48).block == FixedBlocks(48)  # 32 does not divide 48: one block
    assert Pipeline.dense(gen_length=64).block == FixedBlocks(32)


def test_mask_token_in_prompt_is_refused(tiny_adapter) -> None:
    with pytest.raises(ValueError, match="mask token"):
        decode(tiny_adapter, [4, tiny_adapter.info.mask_token_id], Pipeline(), DecodeConfig(gen_length=32))


def test_block_length_must_divide_gen_length(tiny_adapter) -> None:
    with pytest.raises(ValueError, match="must divide"):
        decode(tiny_adapter, [4, 5], Pipeline(block=FixedBlocks(12)), DecodeConfig(gen_length=32))


@pytest.mark.parametrize("bad", [{"gen_length": 0}, {"gen_length": 10**6}, {"temperature": -1.0},
                                 {"max_steps": 0}, {"softmax_dtype": "float16"}])
def test_decode_config_validation(bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        DecodeConfig(**bad)


@given(st.lists(st.integers(0, 40), max_size=64), st.lists(st.integers(0, 40), max_size=5))
def test_is_any_of_equals_np_isin(values: list[int], ids: list[int]) -> None:
    array, id_array = np.array(values, dtype=np.int64), np.array(ids, dtype=np.int64)
    np.testing.assert_array_equal(is_any_of(array, id_array), np.isin(array, id_array))


class _MaskLovingToy(ToyAdapter):
    """An untrained model's failure mode: [MASK] is every position's top logit."""

    def _toy_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        out = super()._toy_logits(tokens)
        out[:, 0] = 50.0  # toy.MASK
        return out


@pytest.mark.parametrize(("rule", "cache"), [("fixed_steps", "none"), ("threshold", "none"),
                                             ("threshold", "dual"), ("cora", "prefix")])
def test_a_model_that_ranks_mask_first_still_decodes_every_position_once(rule: str, cache: str) -> None:
    """Found on a random LLaDA-8B-shaped model on CUDA: committing the [MASK] candidate left the
    position masked, so it was committed again and the trace was refused. The mask token is never a
    candidate now; confidences keep the full softmax."""
    adapter = _MaskLovingToy()
    pipeline = Pipeline.from_names(rule, block_length=8, cache=cache)
    trace = decode(adapter, [5, 6, 7], pipeline, DecodeConfig(gen_length=32))
    assert trace.is_complete
    assert int(trace.committed.sum(axis=0).max()) == 1
    assert 0 not in trace.tokens[-1].tolist()


class _OverflowingToy(ToyAdapter):
    """What fp16 overflow looks like: some rows of the logits are NaN or inf."""

    def __init__(self, bad: float) -> None:
        super().__init__()
        self.bad = bad

    def _toy_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        out = super()._toy_logits(tokens)
        out[4:6, 7] = self.bad
        return out


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("cache", ["none", "dual"])
def test_nan_or_inf_logits_stop_the_decode_with_the_fix(bad: float, cache: str) -> None:
    """Without the check the NaN rows produced a corrupt trace ("commits some position more than once")."""
    from dllm_viz.engine import NonFiniteLogitsError

    with pytest.raises(NonFiniteLogitsError, match=r"NaN or infinite logits at 2 of \d+ positions.*--dtype float32"):
        decode(_OverflowingToy(bad), [5, 6, 7], Pipeline.from_names("threshold", block_length=8, cache=cache),
               DecodeConfig(gen_length=32))
