"""The CPU thread policy: one intra-op thread for small models, torch's default otherwise."""

from __future__ import annotations

import pytest
import torch

from dllm_viz.threads import SMALL_MODEL_PARAMETERS, apply_inference_threads, inference_threads


def test_a_small_model_on_the_cpu_gets_one_thread() -> None:
    assert inference_threads(3_000_000, "cpu", default_threads=8).threads == 1


@pytest.mark.parametrize(("params", "device"), [(SMALL_MODEL_PARAMETERS, "cpu"), (3_000_000, "cuda:0"),
                                                (3_000_000, "mps")])
def test_large_models_and_accelerators_keep_the_default(params: int, device: str) -> None:
    assert inference_threads(params, device, default_threads=8).threads == 8


def test_a_user_override_wins_and_must_be_positive() -> None:
    assert inference_threads(3_000_000, "cpu", default_threads=8, override=4).threads == 4
    with pytest.raises(ValueError, match="thread count"):
        inference_threads(3_000_000, "cpu", default_threads=8, override=0)


def test_apply_sets_torchs_thread_count() -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        choice = apply_inference_threads(torch.nn.Linear(4, 4), "cpu")
        assert choice.threads == 1 and torch.get_num_threads() == 1
        assert "1" in choice.reason
    finally:
        torch.set_num_threads(before)
