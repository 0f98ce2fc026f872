"""GPU checks (marked `gpu`, skipped without CUDA): a LLaDA-shaped model in bf16 on CUDA.

Builds a randomly initialised LLaDA-format checkpoint of about 1B parameters on disk (no
download), loads it through our LLaDA path, and compares no cache / prefix / dual cache
wall-clock in one process. Prints ratios; asserts only behaviour, never timings. Run with
`python -m pytest tests/test_gpu.py -s` on a CUDA machine.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models import load
from dllm_viz.policies import Pipeline

pytestmark = pytest.mark.gpu


def build_llada_1b(directory: Path, tokenizer_source: Path) -> Path:
    """LLaDA config (d=2048, 16 layers, 16 heads, FFN 5632) with random bf16 weights."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tokenizer_source / name).is_file():
            (directory / name).write_bytes((tokenizer_source / name).read_bytes())
    cfg = json.loads((tokenizer_source / "config.json").read_text())
    cfg.update(d_model=2048, n_heads=16, n_kv_heads=16, n_layers=16, mlp_hidden_size=5632,
               max_sequence_length=4096)  # LLaDA 8B's context; the small source has 512
    (directory / "config.json").write_text(json.dumps(cfg))
    g = torch.Generator().manual_seed(0)
    d, ff, vocab = 2048, 5632, cfg["embedding_size"]
    state = {"model.transformer.wte.weight": torch.randn(vocab, d, generator=g).bfloat16(),
             "model.transformer.ln_f.weight": torch.ones(d).bfloat16(),
             "model.transformer.ff_out.weight": (torch.randn(vocab, d, generator=g) * 0.02).bfloat16()}
    for i in range(16):
        p = f"model.transformer.blocks.{i}."
        for name, shape in (("q_proj", (d, d)), ("k_proj", (d, d)), ("v_proj", (d, d)), ("attn_out", (d, d)),
                            ("ff_proj", (ff, d)), ("up_proj", (ff, d)), ("ff_out", (d, ff))):
            state[p + name + ".weight"] = (torch.randn(*shape, generator=g) * 0.02).bfloat16()
        state[p + "attn_norm.weight"] = torch.ones(d).bfloat16()
        state[p + "ff_norm.weight"] = torch.ones(d).bfloat16()
    save_file(state, str(directory / "model.safetensors"))
    return directory


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_llada_1b_cache_modes_on_cuda(tmp_path: Path) -> None:
    from checkpoints import build_llada

    small = build_llada(tmp_path / "tok")
    adapter = load(str(build_llada_1b(tmp_path / "llada1b", small)), device="cuda")
    assert adapter.info.dtype == "bfloat16" and adapter.device.type == "cuda"
    prompt = adapter.encode_prompt("Tom has 3 apples and buys 4 more.", chat=False)
    results = {}
    for gen_length in (256, 512):
        for cache in ("none", "prefix", "dual"):
            pipeline = Pipeline.from_names("threshold", block_length=32, cache=cache, threshold=0.9)
            config = DecodeConfig(gen_length=gen_length)
            decode(adapter, prompt, pipeline, config)  # warm-up
            torch.cuda.synchronize()
            started = time.perf_counter()
            trace = decode(adapter, prompt, pipeline, config)
            torch.cuda.synchronize()
            results[(gen_length, cache)] = (time.perf_counter() - started, trace.nfe)
            assert trace.is_complete
    for gen_length in (256, 512):
        base = results[(gen_length, "none")][0]
        for cache in ("none", "prefix", "dual"):
            seconds, nfe = results[(gen_length, cache)]
            print(f"gen_length={gen_length} cache={cache} nfe={nfe} seconds={seconds:.3f} "
                  f"speedup={base / seconds:.2f}x")


GPU_BENCH_CONFIGS = ("dense", "threshold", "cora", "adablock+threshold", "threshold+kalman", "cora+kalman",
                     "tspd", "tspd+kalman")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_policy_bench_on_cuda(tmp_path: Path) -> None:
    """Issue #7's table on CUDA: every policy with and without dual cache against dense, one run.

    A random model is never confident, so NFE barely moves; what this measures is the policies'
    per-step overhead against a 1B forward pass and the cache's wall-clock effect at scale.
    """
    import pandas as pd
    from checkpoints import build_llada

    from dllm_viz.bench import parse_config, run_bench, summarize_bench
    from dllm_viz.evaluation import task_problems

    small = build_llada(tmp_path / "tok")
    adapter = load(str(build_llada_1b(tmp_path / "llada1b", small)), device="cuda")
    problems = task_problems("arith", 2)
    names = [*GPU_BENCH_CONFIGS, *(f"{name}+dual" for name in GPU_BENCH_CONFIGS)]
    configs = {name: parse_config(name, {"block_length": 32}) for name in names}
    config = DecodeConfig(gen_length=256)
    run_bench(adapter, problems[:1], {"dense": configs["dense"]}, config)  # CUDA warm-up
    rows = run_bench(adapter, problems, configs, config)
    summary = summarize_bench(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary)
    assert list(summary.index) == names
    assert summary.loc["dense", "agreement"] == 1.0
    assert bool(rows["complete"].all())
