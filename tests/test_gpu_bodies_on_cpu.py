"""The `gpu` tests' bodies on a tiny random LLaDA on the CPU, so that they cannot rot unseen.

tests/test_gpu.py is skipped without CUDA, and a lent GPU is rare: session 28 found its 1B cache
test broken by a cache mode added since it last ran ('exact', which a bidirectional LLaDA refuses).
These run the same helpers (checkpoint building, every cache mode timed, every policy benched) at a
size a CPU decodes in seconds; what they cannot check is CUDA itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from checkpoints import build_llada
from test_gpu import LLADA_CACHES, bench_every_policy, build_random_llada, time_cache_modes

from dllm_viz.models import ModelAdapter, load

TINY_LLADA = {"d_model": 64, "n_heads": 4, "n_layers": 2, "mlp_hidden_size": 128}


@pytest.fixture(scope="module")
def tiny_llada(tmp_path_factory: pytest.TempPathFactory) -> ModelAdapter:
    root = tmp_path_factory.mktemp("gpu_bodies")
    return load(str(build_random_llada(root / "llada", build_llada(root / "tok"), TINY_LLADA)), device="cpu",
                dtype="bfloat16")


def test_every_llada_cache_mode_is_timed(tiny_llada: ModelAdapter, capsys: pytest.CaptureFixture[str]) -> None:
    prompt = tiny_llada.encode_prompt("Tom has 3 apples and buys 4 more.", chat=False)
    time_cache_modes(tiny_llada, prompt, (64,), "tiny")
    printed = capsys.readouterr().out
    assert [f"cache={mode} " in printed for mode in LLADA_CACHES] == [True] * len(LLADA_CACHES)


def test_every_policy_is_benched(tiny_llada: ModelAdapter, tmp_path: Path) -> None:
    bench_every_policy(tiny_llada, gen_length=64, controllers=tmp_path / "controllers")
