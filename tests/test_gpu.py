"""GPU checks (marked `gpu`, skipped without CUDA): a LLaDA-shaped model in bf16 on CUDA.

Builds randomly initialised LLaDA-format checkpoints on disk (no download): ~1B parameters, and
LLaDA-8B's transformer (~13 GB of bf16, needs ~30 GB of disk and GPU memory), loads them through
our LLaDA path, and compares no cache / prefix / dual cache wall-clock in one process (the 8B one
with a short and a ~1k-token prompt), then runs the policy bench on the 1B one. Prints ratios;
asserts only behaviour, never timings. Run with `python -m pytest tests/test_gpu.py -s` on a CUDA
machine (about 5 minutes on an H200).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import torch

from dllm_viz.bench_pipeline import timed
from dllm_viz.cache_modes import CACHE_MODES
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models import ModelAdapter, load
from dllm_viz.policies import Pipeline

pytestmark = pytest.mark.gpu


LLADA_1B = {"d_model": 2048, "n_heads": 16, "n_layers": 16, "mlp_hidden_size": 5632}
# LLaDA-8B's transformer (32 layers, d=4096, 32 heads, FFN 12288); the vocabulary stays the small
# test tokenizer's, so this is ~6.5B parameters rather than 8B (the 126k-row embedding and head
# add ~1B parameters but almost no per-position work).
LLADA_8B = {"d_model": 4096, "n_heads": 32, "n_layers": 32, "mlp_hidden_size": 12288}
# Fast-dLLM's caches, the ones a bidirectional LLaDA runs ('exact' needs a block-causal model).
LLADA_CACHES = tuple(mode for mode in CACHE_MODES if mode != "exact")


def build_random_llada(directory: Path, tokenizer_source: Path, shape: dict[str, int]) -> Path:
    """A LLaDA-format checkpoint of the given shape with random bf16 weights, built on disk.

    The weights are drawn on the GPU when there is one (drawing 7B normals on the CPU takes
    minutes) and written in one safetensors file, so the model loads through our LLaDA path
    exactly as a downloaded checkpoint would.
    """
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tokenizer_source / name).is_file():
            (directory / name).write_bytes((tokenizer_source / name).read_bytes())
    cfg = json.loads((tokenizer_source / "config.json").read_text())
    cfg.update(shape, n_kv_heads=shape["n_heads"],
               max_sequence_length=4096)  # LLaDA 8B's context; the small source has 512
    (directory / "config.json").write_text(json.dumps(cfg))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=device).manual_seed(0)
    d, ff, vocab = shape["d_model"], shape["mlp_hidden_size"], cfg["embedding_size"]

    def rnd(*size: int, scale: float = 0.02) -> torch.Tensor:
        return (torch.randn(*size, generator=g, device=device) * scale).bfloat16().cpu()

    state = {"model.transformer.wte.weight": rnd(vocab, d, scale=1.0),
             "model.transformer.ln_f.weight": torch.ones(d).bfloat16(),
             "model.transformer.ff_out.weight": rnd(vocab, d)}
    for i in range(shape["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        for name, size in (("q_proj", (d, d)), ("k_proj", (d, d)), ("v_proj", (d, d)), ("attn_out", (d, d)),
                           ("ff_proj", (ff, d)), ("up_proj", (ff, d)), ("ff_out", (d, ff))):
            state[p + name + ".weight"] = rnd(*size)
        state[p + "attn_norm.weight"] = torch.ones(d).bfloat16()
        state[p + "ff_norm.weight"] = torch.ones(d).bfloat16()
    save_file(state, str(directory / "model.safetensors"))
    return directory


def time_cache_modes(adapter: ModelAdapter, prompt: list[int], gen_lengths: tuple[int, ...],
                     label: str) -> None:
    """Wall-clock of one threshold decode per cache mode and gen length, after a warm-up each.

    Prints seconds, passes and ms per pass by pass kind, and the speedup against no cache in the
    same process; asserts only that every decode completes.
    """
    from dllm_viz.cache_modes import PASS_KINDS

    results = {}
    for gen_length in gen_lengths:
        for cache in LLADA_CACHES:
            pipeline = Pipeline.from_names("threshold", block_length=32, cache=cache, threshold=0.9)
            decode(adapter, prompt, pipeline, DecodeConfig(gen_length=64))  # warm-up
            run = partial(decode, adapter, pipeline=pipeline, config=DecodeConfig(gen_length=gen_length))
            seconds, _, trace = timed(run, prompt, adapter.device)
            results[(gen_length, cache)] = (seconds, trace)
            assert trace.is_complete
    for gen_length in gen_lengths:
        base = results[(gen_length, "none")][0]
        for cache in LLADA_CACHES:
            seconds, trace = results[(gen_length, cache)]
            per_kind = " ".join(
                f"{PASS_KINDS[k]}:{int((trace.pass_kind == k).sum())}x"
                f"{1e3 * float(trace.step_seconds[trace.pass_kind == k].mean()):.1f}ms"
                for k in sorted(set(trace.pass_kind.tolist())))
            print(f"{label} prompt={len(prompt)} gen_length={gen_length} cache={cache} nfe={trace.nfe} "
                  f"seconds={seconds:.3f} speedup={base / seconds:.2f}x passes[{per_kind}]")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_llada_1b_cache_modes_on_cuda(tmp_path: Path) -> None:
    from checkpoints import build_llada

    small = build_llada(tmp_path / "tok")
    adapter = load(str(build_random_llada(tmp_path / "llada1b", small, LLADA_1B)), device="cuda")
    assert adapter.info.dtype == "bfloat16" and adapter.device.type == "cuda"
    prompt = adapter.encode_prompt("Tom has 3 apples and buys 4 more.", chat=False)
    time_cache_modes(adapter, prompt, (256, 512), "llada-1b")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_llada_8b_shape_cache_modes_on_cuda(tmp_path: Path) -> None:
    """The cache where a pass is compute-bound: LLaDA-8B's shape, short and few-shot-long prompts.

    A 1B model's pass is launch-bound on a big GPU (the same ~10 ms for 32 or 545 positions), so
    caching cannot show there; at 8B width a full pass over ~1k positions is tens of ms of matrix
    work and the cached 32-query passes are not. The random model is never confident, so the
    threshold rule commits about one token a pass: the cache's best case, like Fast-dLLM's
    "+Cache" column.
    """
    from checkpoints import build_llada

    small = build_llada(tmp_path / "tok")
    adapter = load(str(build_random_llada(tmp_path / "llada8b", small, LLADA_8B)), device="cuda")
    short = adapter.encode_prompt("Tom has 3 apples and buys 4 more. How many apples does he have?", chat=False)
    shots = " ".join(f"Question {i}: Tom has {i} apples and buys {i + 4} more, then gives away 2. How "
                     f"many are left? Answer: {i} + {i + 4} = {2 * i + 4}, minus 2 is {2 * i + 2}." for i in range(8))
    long = adapter.encode_prompt(shots + " Question: Tom has 3 apples and buys 4 more. How many?", chat=False)
    assert len(long) > 800
    for prompt in (short, long):
        time_cache_modes(adapter, prompt, (256, 512), "llada-8b-shape")


GPU_BENCH_CONFIGS = ("dense", "threshold", "cora", "adablock+threshold", "threshold+kalman", "cora+kalman",
                     "tspd", "tspd+kalman")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_policy_bench_on_cuda(tmp_path: Path) -> None:
    """Issue #7's table on CUDA: every policy with and without dual cache against dense, one run.

    A random model is never confident, so NFE barely moves; what this measures is the policies'
    per-step overhead against a 1B forward pass and the cache's wall-clock effect at scale.
    """
    from checkpoints import build_llada

    small = build_llada(tmp_path / "tok")
    adapter = load(str(build_random_llada(tmp_path / "llada1b", small, LLADA_1B)), device="cuda")
    bench_every_policy(adapter, gen_length=256, controllers=tmp_path / "controllers")


def bench_every_policy(adapter: ModelAdapter, gen_length: int, controllers: Path) -> None:
    """`GPU_BENCH_CONFIGS` with and without dual cache on two arithmetic problems, printed; asserts
    that every decode completes and that dense agrees with itself. TSPD runs a controller trained
    for this model into `controllers` first (a controller trained for another model is refused)."""
    import pandas as pd
    from controller_factory import train_test_controllers

    from dllm_viz.bench import parse_config, run_bench, summarize_bench
    from dllm_viz.evaluation import task_problems

    problems = task_problems("arith", 2)
    controllers.mkdir(parents=True, exist_ok=True)
    prompts = [adapter.encode_prompt(text, chat=False) for text in ("Tom has 3 apples.", "Ann has 2 pens.")]
    weights = train_test_controllers(adapter, controllers, prompts)["tspd"]
    names = [*GPU_BENCH_CONFIGS, *(f"{name}+dual" for name in GPU_BENCH_CONFIGS)]
    configs = {name: parse_config(name, {"block_length": 32, "controller_weights": weights}) for name in names}
    config = DecodeConfig(gen_length=gen_length)
    run_bench(adapter, problems[:1], {"dense": configs["dense"]}, config)  # warm-up (CUDA's start)
    rows = run_bench(adapter, problems, configs, config)
    summary = summarize_bench(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary)
    assert list(summary.index) == names
    assert summary.loc["dense", "agreement"] == 1.0
    assert bool(rows["complete"].all())
