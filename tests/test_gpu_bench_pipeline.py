"""GPU variant of the engine-vs-LLaDA2Pipeline benchmark (marked `gpu`, skipped without CUDA).

The ~20M random block-causal Llama at gen 256 on CUDA: in float32 every configuration must give
the pipeline's tokens; in bf16 (the GPU default) the run is printed with its token agreement,
which is not asserted for the cache: a pass over 32 query rows against cached keys rounds
differently from a pass over the whole prefix, and bf16 confidences tie and flip easily. Prints
the tables (run with -s); asserts behaviour, never timings. Session 28 ran it on an H200 (both dtypes
passed, same tokens in each; BENCHMARKS.md, the pipeline summary).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dllm_viz.bench_pipeline import (
    BASELINE,
    CONFIGS,
    PipelineBenchSettings,
    bench_prompts,
    run_pipeline_bench,
    summarize_pipeline_bench,
)
from dllm_viz.models import load
from dllm_viz.random_block_model import SHAPE_20M, build_random_block_model

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_block_model(tmp_path_factory.mktemp("gpu_bench_pipeline") / "m", SHAPE_20M)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_pipeline_comparison_on_cuda(model_dir: Path, dtype: str) -> None:
    adapter = load(str(model_dir), device="cuda", dtype=dtype)
    settings = PipelineBenchSettings(gen_length=256, block_length=SHAPE_20M.block_length, repeats=3)
    rows = run_pipeline_bench(adapter, bench_prompts(adapter, 2), settings)
    summary = summarize_pipeline_bench(rows)
    print(f"\ncuda {dtype}, gen 256, block 32, 2 prompts x 3 repeats:")
    print(summary.to_string(float_format=lambda v: f"{v:.3f}"))
    assert list(summary.index) == list(CONFIGS) and summary.loc[BASELINE, "ratio"] == 1.0
    fed = rows.groupby("config")["tokens_fed"].sum()
    assert fed["engine+exact"] < fed["engine"]
    if dtype == "float32":
        assert rows["same_tokens"].all()
        assert rows.groupby("prompt")["nfe"].nunique().eq(1).all()
