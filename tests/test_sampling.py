"""Per-position statistics and the float64 Gumbel-max trick."""

from __future__ import annotations

import math

import pytest
import torch

from dllm_viz.sampling import gumbel_argmax, summarize


def test_one_hot_logits_have_confidence_one_and_zero_entropy() -> None:
    logits = torch.full((3, 10), -1e4)
    logits[torch.arange(3), torch.tensor([2, 5, 7])] = 0.0
    stats = summarize(logits)
    assert stats.candidate.tolist() == [2, 5, 7]
    torch.testing.assert_close(stats.confidence, torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(stats.entropy, torch.zeros(3, dtype=torch.float64), atol=1e-9, rtol=0)
    torch.testing.assert_close(stats.margin, torch.ones(3, dtype=torch.float64))


def test_uniform_logits_have_entropy_log_v() -> None:
    stats = summarize(torch.zeros(2, 16))
    torch.testing.assert_close(stats.entropy, torch.full((2,), math.log(16), dtype=torch.float64))
    torch.testing.assert_close(stats.confidence, torch.full((2,), 1 / 16, dtype=torch.float64))
    assert (stats.margin == 0).all()


def test_gumbel_matches_llada_exp_form_with_the_same_noise() -> None:
    """LLaDA ranks exp(z) / (-log u)^tau in float64; our log form must pick the same token."""
    logits = torch.randn(50, 30, generator=torch.Generator().manual_seed(1))
    for tau in (0.3, 1.0, 2.0):
        ours = gumbel_argmax(logits, tau, torch.Generator().manual_seed(7))
        u = torch.rand(logits.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
        reference = (logits.double().exp() / (-torch.log(u)) ** tau).argmax(-1)
        assert torch.equal(ours, reference)


def test_zero_temperature_is_argmax_and_seeded_sampling_repeats() -> None:
    logits = torch.randn(20, 12, generator=torch.Generator().manual_seed(3))
    assert torch.equal(gumbel_argmax(logits, 0.0, None), logits.argmax(-1))
    a = gumbel_argmax(logits, 1.0, torch.Generator().manual_seed(5))
    b = gumbel_argmax(logits, 1.0, torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


def test_confidence_ignores_temperature() -> None:
    logits = torch.randn(40, 8, generator=torch.Generator().manual_seed(2))
    stats = summarize(logits, temperature=5.0, generator=torch.Generator().manual_seed(0))
    probs = torch.softmax(logits.double(), -1)
    torch.testing.assert_close(stats.confidence, probs.gather(-1, stats.candidate[:, None])[:, 0])


def test_suppressed_ids_are_never_candidates() -> None:
    logits = torch.zeros(4, 6)
    logits[:, 1] = 10.0
    stats = summarize(logits, suppress_ids=(1,))
    assert (stats.candidate != 1).all()


def test_deprioritized_candidates_get_zero_confidence() -> None:
    """LLaDA confidence_eos_eot_inf at tau=0: EOS stays the candidate but scores 0."""
    logits = torch.zeros(2, 6)
    logits[0, 1] = 10.0  # row 0 prefers EOS (id 1)
    logits[1, 3] = 10.0
    stats = summarize(logits, deprioritize_ids=(1, 2))
    assert stats.candidate.tolist() == [1, 3]
    assert stats.confidence[0] == 0.0
    expected = torch.softmax(torch.tensor([0.0, 0.0, 10.0, 0.0], dtype=torch.float64), -1)[2]
    torch.testing.assert_close(stats.confidence[1], expected)


def test_chunked_summary_equals_one_pass(monkeypatch) -> None:
    import dllm_viz.sampling as sampling

    logits = torch.randn(300, 50, generator=torch.Generator().manual_seed(4))
    whole = sampling.summarize_rows(logits)
    monkeypatch.setattr(sampling, "CHUNK_ROWS", 64)
    chunked = sampling.summarize(logits)
    for name in ("candidate", "confidence", "margin", "entropy"):
        torch.testing.assert_close(getattr(chunked, name), getattr(whole, name))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_never_ids_are_not_candidates_but_stay_in_the_softmax(temperature: float) -> None:
    """The mask token: never chosen, yet the confidence is the full-vocabulary probability."""
    logits = torch.randn(5, 8, generator=torch.Generator().manual_seed(1))
    logits[:, 0] = 20.0  # id 0 ranks first everywhere
    stats = summarize(logits, temperature=temperature, generator=torch.Generator().manual_seed(2),
                      never_ids=(0,))
    assert (stats.candidate != 0).all()
    probs = torch.softmax(logits.double(), -1)
    torch.testing.assert_close(stats.confidence, probs.gather(-1, stats.candidate[:, None])[:, 0])
    if temperature == 0.0:
        assert stats.candidate.tolist() == logits[:, 1:].argmax(-1).add(1).tolist()
