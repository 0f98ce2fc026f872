"""Our engine against diffusers' LLaDA2Pipeline: same model, same prompts, one run, wall-time ratios.

Issue #22 asks whether driving a block-diffusion model through our step-by-step engine (which
records every pass for the views) costs more than diffusers' own loop, and what the exact
prefix cache buys. Three configurations decode every prompt:

- `pipeline`: `LLaDA2Pipeline` + `BlockRefinementScheduler`, the model behind AttentionWrapper
  (block-causal 4-D mask), no callback, its own defaults except `eos_early_stop` off so that
  every run fills the whole canvas. The baseline of every ratio.
- `engine`: `decode` with `block_refinement` over `aligned` blocks, cache "none": the same
  passes (tests/test_llada2_reference.py checks them token for token).
- `engine+exact`: the same with the exact prefix cache: each pass queries only the current block.

Runs are interleaved (every configuration on a prompt before the next prompt, the order rotated
each time) and repeated, after one untimed warm-up of each, so drift and load hit all three
alike. Each run's tokens are compared with the pipeline's: a speedup that changes the output
is not one. Knows nothing about printing; diffusers is imported only when the pipeline runs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models.attention_wrapper import AttentionWrapper
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies.aligned_blocks import AlignedBlocks
from dllm_viz.policies.block_refinement import BlockRefinementRule
from dllm_viz.policies.pipeline import Pipeline

BASELINE = "pipeline"
CONFIGS: dict[str, str] = {BASELINE: "none", "engine": "none", "engine+exact": "exact"}  # label -> our cache
ROW_COLUMNS = ("config", "prompt", "repeat", "seconds", "cpu_seconds", "nfe", "tokens_fed", "same_tokens")
SUMMARY_COLUMNS = ("median_s", "spread", "ratio", "ratio_min", "ratio_max", "cpu_ratio", "nfe", "tokens_fed",
                   "same_tokens", "runs")

# Prompts of a few lengths, so that the first block holds a different number of prompt rows each time.
_PROMPT_TEXTS = (
    "Tom has 3 apples and buys 4 more. How many apples does he have?",
    "def add(a, b):",
    "A train leaves at 9 and arrives at 11. The trip takes how many hours? Explain each step of the sum.",
    "List three prime numbers.",
    "Sara reads 12 pages a day for 5 days, then 7 pages on the sixth day. How many pages in all?",
    "Write a function that returns the largest of three numbers.",
)


@dataclass(frozen=True)
class PipelineBenchSettings:
    """What both decoders are asked to do (the pipeline's keyword arguments, in our names).

    Attributes:
        gen_length: generated positions per prompt.
        block_length: B, the absolute-aligned block; the model's own attention block.
        steps: refinement steps per block (the pipeline's `num_inference_steps`).
        threshold, editing_threshold, max_post_steps: the pipeline's commit and edit knobs
            (defaults: diffusers 0.42.1 `LLaDA2Pipeline.__call__`'s).
        repeats: timed runs of every configuration on every prompt.
    """

    gen_length: int = 256
    block_length: int = 32
    steps: int = 32
    threshold: float = 0.7
    editing_threshold: float | None = 0.5
    max_post_steps: int = 16
    repeats: int = 3

    def __post_init__(self) -> None:
        for name, flag in (("gen_length", "--gen-length"), ("block_length", "--block-length"),
                           ("steps", "--steps"), ("repeats", "--repeats")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{flag}` must be a whole number >= 1, got {value!r}")
        if self.max_post_steps < 0:
            raise ValueError(f"`max_post_steps` must be >= 0, got {self.max_post_steps!r}")

    def engine_pipeline(self, cache: str) -> Pipeline:
        """Our policy for these settings, with `cache` "none" or "exact"."""
        rule = BlockRefinementRule(block_steps=self.steps, commit_threshold=self.threshold,
                                   editing_threshold=self.editing_threshold, max_post_steps=self.max_post_steps)
        return Pipeline(rule=rule, block=AlignedBlocks(self.block_length), cache=cache)  # type: ignore[arg-type]

    def pipeline_kwargs(self) -> dict[str, Any]:
        """LLaDA2Pipeline keyword arguments for these settings (greedy; no early stop)."""
        return {"gen_length": self.gen_length, "block_length": self.block_length, "num_inference_steps": self.steps,
                "threshold": self.threshold, "editing_threshold": self.editing_threshold,
                "max_post_steps": self.max_post_steps, "temperature": 0.0, "eos_early_stop": False}


def bench_prompts(adapter: ModelAdapter, n: int) -> list[list[int]]:
    """The first `n` benchmark prompts as token ids (the texts repeat, numbered, past the built-in ones).

    Raises:
        ValueError: n < 1.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"`--n` must be a whole number of prompts >= 1, got {n!r}")
    texts = [_PROMPT_TEXTS[i % len(_PROMPT_TEXTS)] + ("" if i < len(_PROMPT_TEXTS) else f" ({i})")
             for i in range(n)]
    return [adapter.encode_text(text) for text in texts]


def check_model(adapter: ModelAdapter, block_length: int) -> None:
    """Refuse a model the comparison would not be fair or exact on.

    Raises:
        ValueError: not a block-causal model, or a block length other than the model's own.
    """
    info = adapter.info
    if info.context != "prefix" or info.attention != "block_causal" or info.shift_logits:
        raise ValueError(f"the pipeline comparison needs a block-causal checkpoint without a logits shift (a "
                         f"generic block-causal Llama / Qwen conversion, SDAR or LLaDA2.x), not {info.family!r} "
                         f"with {info.attention} attention; omit --model to use the random one")
    if info.block_length != block_length:
        raise ValueError(f"--block-length {block_length} differs from the model's attention block "
                         f"({info.block_length}); pass --block-length {info.block_length} or omit it")


class _PipelineRunner:
    """LLaDA2Pipeline built once on the wrapped model; `run` decodes one prompt and returns (tokens, nfe, fed)."""

    def __init__(self, adapter: ModelAdapter, settings: PipelineBenchSettings) -> None:
        from diffusers import BlockRefinementScheduler, LLaDA2Pipeline

        self.model = AttentionWrapper(adapter.model, "block_causal", settings.block_length)
        self.pipe = LLaDA2Pipeline(model=self.model,
                                   scheduler=BlockRefinementScheduler(block_length=settings.block_length))
        self.pipe.set_progress_bar_config(disable=True)
        self.kwargs = {**settings.pipeline_kwargs(), "mask_token_id": adapter.info.mask_token_id,
                       "eos_token_id": adapter.info.eos_token_id, "output_type": "seq"}
        self.device = adapter.device

    def run(self, prompt: list[int]) -> tuple[list[int], int, int]:
        forwards, fed = self.model.num_forwards, self.model.tokens_fed
        ids = torch.tensor([prompt], dtype=torch.long, device=self.device)
        out = self.pipe(input_ids=ids, **self.kwargs)
        return out.sequences[0].tolist(), self.model.num_forwards - forwards, self.model.tokens_fed - fed


def _engine_run(adapter: ModelAdapter, prompt: list[int], pipeline: Pipeline,
                config: DecodeConfig) -> tuple[list[int], int, int]:
    trace = decode(adapter, prompt, pipeline, config)
    return trace.final_tokens.tolist(), int(trace.nfe), int(np.asarray(trace.query_len).sum())


def run_pipeline_bench(
    adapter: ModelAdapter,
    prompts: Sequence[list[int]],
    settings: PipelineBenchSettings,
    *,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> pd.DataFrame:
    """One row per (configuration, prompt, repeat); columns ROW_COLUMNS.

    `seconds` is the wall time of one decode call (CUDA synchronised around it), `cpu_seconds`
    the CPU time this process spent in it (on a shared, overloaded machine wall time also counts
    the waits for a core; CPU time does not, so the two ratios bracket the cost); `tokens_fed`
    the rows passed through the model over the run (the prefix cache's saving); `same_tokens`
    whether the run's gen_length output equals the pipeline's on that prompt. `on_row` gets each
    row as soon as it is measured (progress; `same_tokens` is filled in at the end).

    Raises:
        ValueError: no prompts, or a model `check_model` refuses.
    """
    if not prompts:
        raise ValueError("no prompts to benchmark; pass --n 1 or more")
    check_model(adapter, settings.block_length)
    pipe = _PipelineRunner(adapter, settings)
    config = DecodeConfig(gen_length=settings.gen_length, temperature=0.0)
    runners: dict[str, Callable[[list[int]], tuple[list[int], int, int]]] = {BASELINE: pipe.run}
    for label, cache in CONFIGS.items():
        if label != BASELINE:
            policy = settings.engine_pipeline(cache)
            runners[label] = lambda prompt, policy=policy: _engine_run(adapter, prompt, policy, config)
    for label in CONFIGS:  # warm-up: first-call costs (kernels, allocator) out of the timed runs
        runners[label](prompts[0])
    rows: list[dict[str, Any]] = []
    outputs: dict[tuple[str, int, int], list[int]] = {}
    labels = list(CONFIGS)
    for repeat in range(settings.repeats):
        for index, prompt in enumerate(prompts):
            turn = (repeat + index) % len(labels)
            for label in labels[turn:] + labels[:turn]:
                seconds, cpu, (tokens, nfe, fed) = timed(runners[label], prompt, adapter.device)
                outputs[label, index, repeat] = tokens
                row = {"config": label, "prompt": index, "repeat": repeat, "seconds": seconds, "cpu_seconds": cpu,
                       "nfe": nfe, "tokens_fed": fed}
                rows.append(row)
                if on_row is not None:
                    on_row(row)
    # against the pipeline's run on the same prompt in the same repeat (its own: against its first)
    for row in rows:
        against = (BASELINE, row["prompt"], 0 if row["config"] == BASELINE else row["repeat"])
        row["same_tokens"] = outputs[row["config"], row["prompt"], row["repeat"]] == outputs[against]
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))


def timed(run: Callable[[list[int]], Any], prompt: list[int], device: torch.device) -> tuple[float, float, Any]:
    """(wall seconds, this process's CPU seconds, result) of one run; on CUDA the clocks start and
    stop with the device idle, so the work queued on it counts."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started, cpu_started = time.perf_counter(), time.process_time()
    result = run(prompt)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started, time.process_time() - cpu_started, result


def summarize_pipeline_bench(rows: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (index), columns SUMMARY_COLUMNS.

    Per repeat, a configuration's time is its total over the prompts. median_s: the median of
    those totals; spread: their (max - min) / median; nfe and tokens_fed: means per prompt;
    ratio: the median over repeats of the pipeline's total / this configuration's total in the
    same repeat (> 1: faster than the pipeline), with its min and max; cpu_ratio: the pipeline's
    total CPU seconds over this configuration's (all runs); same_tokens: share of runs
    whose output equals the pipeline's; runs: timed runs.
    """
    if rows.empty:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    totals = rows.pivot_table(index="repeat", columns="config", values="seconds", aggfunc="sum")
    cpu = rows.groupby("config")["cpu_seconds"].sum()
    out = {}
    for label in dict.fromkeys(rows["config"]):
        mine = rows[rows["config"] == label]
        per_repeat = totals[label].dropna()
        ratios = (totals[BASELINE] / totals[label]).dropna()
        median = float(statistics.median(per_repeat))
        out[label] = {
            "median_s": median, "spread": float((per_repeat.max() - per_repeat.min()) / median),
            "nfe": float(mine["nfe"].mean()), "tokens_fed": float(mine["tokens_fed"].mean()),
            "ratio": float(statistics.median(ratios)), "ratio_min": float(ratios.min()),
            "ratio_max": float(ratios.max()), "cpu_ratio": float(cpu[BASELINE] / cpu[label]),
            "same_tokens": float(mine["same_tokens"].mean()), "runs": len(mine),
        }
    order = [label for label in CONFIGS if label in out] + [label for label in out if label not in CONFIGS]
    return pd.DataFrame.from_dict(out, orient="index").loc[order, list(SUMMARY_COLUMNS)]
