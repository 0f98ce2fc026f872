"""The bundled tiny model: present, small, loads offline, and really solves held-out problems."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from tool_scripts import tool

from dllm_viz.config import DecodeConfig
from dllm_viz.evaluation import ProblemResult, heldout_problems, run_problem
from dllm_viz.models import TINY_DIR, ModelAdapter, load
from dllm_viz.policies import Pipeline

# The regression slices behind the floors below, declared once in the tool that measures them.
FLOORS = tool("floor_counts")


@pytest.fixture(scope="module")
def bundled() -> Iterator[ModelAdapter]:
    """The bundled model, loaded with the Hugging Face hub forced offline."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        yield load("tiny", device="cpu")


def test_bundled_files_are_complete_and_small() -> None:
    names = {p.name for p in TINY_DIR.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md"} <= names
    assert sum(p.stat().st_size for p in TINY_DIR.iterdir()) <= 40 * 1024 * 1024
    section = json.loads((TINY_DIR / "config.json").read_text())["dllm_viz"]
    assert section["family"] == "tiny" and "{prompt}" in section["prompt_template"]


def test_bundled_model_loads_offline_with_its_special_ids(bundled) -> None:
    vocab = bundled.tokenizer.get_vocab()
    assert bundled.info.family == "tiny"
    assert bundled.info.mask_token_id == vocab["[MASK]"] and bundled.info.eos_token_id == vocab["<eos>"]


def test_bundled_model_loads_the_weights_from_pretrained_would(bundled) -> None:
    """load() fills a meta-built LlamaForCausalLM (faster); it must be the very same model."""
    import torch
    from transformers import LlamaForCausalLM

    reference = LlamaForCausalLM.from_pretrained(str(TINY_DIR), dtype=torch.float32).eval()
    ours = bundled.model.state_dict()
    assert ours.keys() == reference.state_dict().keys()
    assert all(torch.equal(ours[k], v) for k, v in reference.state_dict().items())
    ids = torch.tensor([[5, 17, 40, 2, 2, 2, 2]])
    with torch.inference_mode():
        torch.testing.assert_close(bundled.model(input_ids=ids).logits, reference(input_ids=ids).logits,
                                   rtol=0, atol=0)


@pytest.fixture(scope="module")
def arith_slice(bundled) -> list[ProblemResult]:
    """Threshold 0.9 on the first 20 held-out arithmetic problems (tools/floor_counts.py's slice),
    decoded once for the accuracy floor and both caches' agreement."""
    return FLOORS.threshold_slice(bundled, "arith")


def test_bundled_model_solves_held_out_arithmetic(arith_slice) -> None:
    """Greedy threshold decoding (seed 0) must get the first 20 held-out problems right, but for slack."""
    assert sum(r.correct for r in arith_slice) >= MIN_CORRECT_OF_20, [r.completion for r in arith_slice[:3]]
    assert all(r.complete for r in arith_slice)


def test_bundled_model_writes_held_out_code_that_passes_its_tests(bundled) -> None:
    """Threshold decoding (seed 0) of the first 20 held-out code problems, scored in the sandbox."""
    results = FLOORS.threshold_slice(bundled, "code")
    assert sum(r.correct for r in results) >= MIN_CODE_CORRECT_OF_20, [r.completion for r in results[:3]]


@pytest.mark.parametrize("cache", FLOORS.CACHES)
def test_cached_greedy_outputs_agree_with_uncached_on_held_out_arithmetic(bundled, arith_slice, cache: str) -> None:
    """Issue #5: with a KV cache the greedy output equals the uncached one on >= 90% of problems.

    The first 20 held-out problems at gen 128 (threshold 0.9, blocks of 32); BENCHMARKS.md reports
    the figure on 200 problems at gen 256.
    """
    same = FLOORS.cache_agreement(bundled, cache, arith_slice)
    assert sum(same) >= MIN_CACHE_AGREEMENT_OF_20, same


# Measured on the bundled step-112000 checkpoint (MODEL_CARD.md): 19/20 arithmetic and 20/20 code with
# threshold 0.9 at gen 128 (39/40 on the card's first 40 code problems); on the first 200 held-out
# arithmetic problems 97.0% (threshold 0.9) and 100% (dense). Every bundled model since step 19250 scored
# 17-20 of each 20 (tools/floor_counts.py counts a candidate's; the card's history and BENCHMARKS.md hold
# each). One problem of slack absorbs float differences between machines; a retrained model that scores
# lower than this on the same 20 problems is a regression.
MIN_CORRECT_OF_20 = 18
MIN_CODE_CORRECT_OF_20 = 19
# Measured: prefix 20/20 and dual 20/20 on step 112000, as on every bundled model since step 34000 (step
# 27250: 18/20 each); the floor is the bar, 90%, 18/20.
MIN_CACHE_AGREEMENT_OF_20 = 18


def test_hard_prompts_take_several_passes_a_block_at_threshold_0_9(bundled) -> None:
    """The testbed's point (issue #19): on hard problems the threshold rule cannot commit a block in one
    pass. Measured on tools/floor_counts.py's HARD_SLICE (two chains, two breadth problems: the first
    four of the held-out hard set until session 48) at gen 128, passes a block over the canvas's four
    blocks: 3.25, 1.25, 1.5, 2.25 on step 112000 (mean 2.06), and over the blocks holding answer text
    (tools/block_passes.py) 5.5, 1.5, 1.67, 3.5 (mean 3.04); each earlier model's in BENCHMARKS.md (the
    step-19250 model, trained on the easy split only, committed whole blocks in ~1). Every prompt must
    take more than one pass a block both ways; the answer blocks two on average (the issue's example),
    all blocks 1.5: a block of end-of-text alone commits in one pass once the answer has ended, so that
    mean falls as a model gets surer of where its answer ends (its floor was 2 until step 103000's
    1.94)."""
    per_block, per_answer_block = FLOORS.hard_passes(bundled)
    assert min(per_block) > 1 and sum(per_block) / len(per_block) >= 1.5, per_block
    assert min(per_answer_block) > 1 and sum(per_answer_block) / len(per_answer_block) >= 2, per_answer_block


def test_the_apps_default_sample_shows_a_trade_off(bundled) -> None:
    """The prompt pickers open on DEFAULT_SAMPLE (app_ui/common.py) so that a first visit shows the
    testbed at work: decoded with the Decode page's defaults (threshold 0.9, gen 64, blocks of 32) the
    bundled model answers it right, but in several passes a block, not in one (8 passes on step 112000;
    app_ui/common.py says why the sample moved with the models)."""
    from app_ui.common import DEFAULT_SAMPLE, sample_problems

    problem = sample_problems()[DEFAULT_SAMPLE]
    result, _ = run_problem(bundled, problem, Pipeline.from_names("threshold", threshold=0.9, block_length=32),
                            DecodeConfig(gen_length=64))
    assert result.correct and result.nfe >= 2 * (64 // 32), result


def test_an_answer_longer_than_the_canvas_is_flagged_cut_off(bundled) -> None:
    """A hard held-out problem on a 16-position canvas runs out of room without any EOS (the model
    writes short arithmetic answers to fit, so a long list or chain is needed); an arithmetic
    problem on a roomy canvas ends and is right."""
    import pandas as pd

    from dllm_viz.bench import cut_off_warning
    from dllm_viz.evaluation import summarize

    pipeline = Pipeline.from_names("threshold", block_length=16)
    shorts = (run_problem(bundled, p, pipeline, DecodeConfig(gen_length=16))[0] for p in heldout_problems("hard", 10))
    short = next((r for r in shorts if r.cut_off), None)
    assert short is not None and not short.correct, "none of 10 hard problems ran out of a 16-position canvas"
    roomy, _ = run_problem(bundled, heldout_problems("arith", 1)[0], pipeline, DecodeConfig(gen_length=128))
    assert not roomy.cut_off and roomy.correct
    assert "1 of 2 answers filled the whole canvas" in str(summarize([short, roomy]).warning())
    assert summarize([roomy]).warning() is None
    summary = pd.DataFrame({"cut_off": [2, 0], "n": [5, 5]}, index=["dense", "threshold"])
    assert "(dense 2 of 5)" in str(cut_off_warning(summary))
    assert cut_off_warning(summary.assign(cut_off=0)) is None


def test_cache_drift_compares_cached_passes_with_full_ones_until_the_decodes_part(bundled: ModelAdapter) -> None:
    """tools/cache_drift.py: until the decodes part both passes of a step see one canvas, so the
    confidence change is the cache's alone (the bundled model: a random one's confidences are all ~1/V)."""
    import numpy as np

    from dllm_viz.bench import parse_config
    from dllm_viz.cache_modes import PASS_KINDS

    drift = tool("cache_drift")
    config = DecodeConfig(gen_length=64)
    uncached = parse_config("threshold", {"block_length": 32})
    cached = parse_config("threshold+dual", {"block_length": 32})
    problems = heldout_problems("hard/chain", 3)
    parted_once = False
    for problem in problems:
        _, plain = run_problem(bundled, problem, uncached, config)
        _, again = run_problem(bundled, problem, uncached, config)
        same = drift.drift(plain, again, "dual_cached")  # no cached pass, nothing parts
        assert same.deltas.size == 0 and same.parted_step is None and same.parted_confidences is None
        _, fast = run_problem(bundled, problem, cached, config)
        found = drift.drift(plain, fast, "dual_cached")
        assert np.all((found.deltas >= 0) & (found.deltas <= 1))
        steps = min(plain.num_steps, fast.num_steps)
        differ = np.flatnonzero((plain.tokens[1 : steps + 1] != fast.tokens[1 : steps + 1]).any(axis=1))
        if found.parted_step is None:
            assert differ.size == 0
        else:  # the first step after which the canvases differ: a cached pass (full ones saw the same canvas)
            parted_once = True
            assert found.parted_step == differ[0]
            assert fast.pass_kind[found.parted_step] == PASS_KINDS.index("dual_cached")
            assert found.parted_confidences is not None and all(0 <= c <= 1 for c in found.parted_confidences)
    assert parted_once, "the dual cache never changed a commit on these problems: pick ones where it does"
    assert drift.report("hard/chain", [found], 1).startswith("hard/chain: 1 problems, same output 1")
    with pytest.raises(ValueError, match="same prompt"):
        drift.drift(plain, run_problem(bundled, problems[0], uncached, config)[1], "dual_cached")  # plain: the last
