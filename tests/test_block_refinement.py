"""LLaDA2.x block refinement: the pure rule and the multinomial sampler, by hand and against diffusers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers import BlockRefinementScheduler

from dllm_viz.policies.block_refinement import (
    BlockInputs,
    BlockRefinementRule,
    RefinementState,
    commit_from_mask,
    eos_finishes,
    refine,
)
from dllm_viz.sampling import filter_top_k, filter_top_p, multinomial_candidates

F32 = np.float32


def block(confidence, candidate, tokens, is_masked, is_prompt=None) -> BlockInputs:
    n = len(confidence)
    return BlockInputs(confidence=np.asarray(confidence, dtype=F32), candidate=np.asarray(candidate),
                       tokens=np.asarray(tokens), is_masked=np.asarray(is_masked, dtype=bool),
                       is_prompt=np.zeros(n, dtype=bool) if is_prompt is None else np.asarray(is_prompt))


# --- hand-worked decisions -------------------------------------------------------------------


def test_enough_confident_positions_commit_all_of_them() -> None:
    commit = commit_from_mask(np.array([0.9, 0.8, 0.2, 0.95], F32), np.array([1, 1, 1, 0], bool), 1, 0.7)
    assert commit.tolist() == [True, True, False, False]  # position 3 clears it but is not masked


def test_too_few_confident_positions_fall_back_to_the_quota_by_confidence() -> None:
    commit = commit_from_mask(np.array([0.5, 0.6, 0.1, 0.65], F32), np.ones(4, bool), 2, 0.7)
    assert commit.tolist() == [False, True, False, True]


def test_threshold_is_strict_and_a_zero_quota_may_commit_nothing() -> None:
    at_threshold = np.array([0.7, 0.3], F32)
    assert not commit_from_mask(at_threshold, np.ones(2, bool), 0, 0.7).any()
    assert commit_from_mask(at_threshold, np.ones(2, bool), 1, 0.7).tolist() == [True, False]


def test_quota_beyond_the_masked_positions_commits_every_masked_one() -> None:
    commit = commit_from_mask(np.array([0.1, 0.2, 0.3], F32), np.array([1, 0, 1], bool), 5, 0.9)
    assert commit.tolist() == [True, False, True]


def test_threshold_above_one_commits_by_quota_only() -> None:
    commit = commit_from_mask(np.array([0.99, 0.98, 0.5], F32), np.ones(3, bool), 1, 1.5)
    assert commit.tolist() == [True, False, False]


def test_edit_replaces_a_committed_non_prompt_token_only_when_it_changes_confidently() -> None:
    mask = 99
    inputs = block(confidence=[0.99, 0.99, 0.10, 0.60, 0.40], candidate=[9, 6, 3, 8, 1],
                   tokens=[5, 6, mask, 7, 2], is_masked=[0, 0, 1, 0, 0], is_prompt=[1, 0, 0, 0, 0])
    decision = refine(inputs, quota=1, threshold=0.7, editing_threshold=0.5)
    # 0 is prompt, 1 keeps its token, 3 changes at 0.6 > 0.5, 4 changes at 0.4 < 0.5
    assert decision.edit.tolist() == [False, False, False, True, False]
    assert decision.commit.tolist() == [False, False, True, False, False]
    assert decision.new_tokens.tolist() == [5, 6, 3, 8, 2]


@pytest.mark.parametrize("off", [None, 0.0, -1.0])
def test_editing_is_off_for_none_zero_or_negative(off: float | None) -> None:
    inputs = block([0.99, 0.2], [4, 1], [3, 99], [0, 1])
    assert not refine(inputs, 1, 0.7, off).edit.any()
    assert not BlockRefinementRule(editing_threshold=off).editing_enabled


def test_minimal_topk_caps_the_steps_by_gen_length_not_block_length() -> None:
    assert BlockRefinementRule(block_steps=32, minimal_topk=2).steps_per_block(gen_length=32) == 16
    assert BlockRefinementRule(block_steps=8, minimal_topk=2).steps_per_block(gen_length=256) == 8
    with pytest.raises(ValueError, match="minimal_topk"):
        BlockRefinementRule(minimal_topk=16).steps_per_block(gen_length=8)


def test_quota_spreads_the_full_block_length_remainder_first_and_clamps() -> None:
    rule = BlockRefinementRule(block_steps=3)
    assert [rule.quota(t, block_length=8, gen_length=64) for t in range(5)] == [3, 3, 2, 2, 2]
    assert BlockRefinementRule(block_steps=8).quota(7, block_length=4, gen_length=64) == 0


def run_block(rule: BlockRefinementRule, *, block_length: int, gen_length: int, always_edit: bool) -> int:
    """Passes one block takes when each pass commits one position (confidence never clears)."""
    is_masked = np.ones(block_length, bool)
    state, passes = RefinementState(), 0
    while True:
        had_masks = bool(is_masked.any())
        inputs = block(np.full(block_length, 0.6, F32), np.arange(block_length),
                       np.where(is_masked, -1, np.arange(block_length) + (1 if always_edit else 0)), is_masked)
        decision, state = rule.decide(inputs, state, block_length=block_length, gen_length=gen_length)
        is_masked = is_masked & ~decision.commit
        passes += 1
        if not rule.should_continue(state, had_masks=had_masks, edited=bool(decision.edit.any()),
                                    finished=False, gen_length=gen_length):
            return passes


def test_filling_a_block_early_costs_one_extra_pass_even_without_editing() -> None:
    rule = BlockRefinementRule(block_steps=8, commit_threshold=0.9, editing_threshold=None)
    assert run_block(rule, block_length=4, gen_length=64, always_edit=False) == 4 + 1


def test_a_block_filled_on_the_last_scheduled_step_takes_no_extra_pass_even_with_edits() -> None:
    for editing in (None, 0.5):
        rule = BlockRefinementRule(block_steps=4, commit_threshold=0.9, editing_threshold=editing)
        assert run_block(rule, block_length=4, gen_length=64, always_edit=True) == 4


def test_post_steps_run_while_edits_continue_up_to_max_post_steps_plus_one() -> None:
    rule = BlockRefinementRule(block_steps=8, commit_threshold=0.9, editing_threshold=0.5, max_post_steps=2)
    # four mask steps (each also edits the tokens committed before it), then post-steps
    # numbered 1..3: the pass numbered max_post_steps + 1 runs and then stops the block
    assert run_block(rule, block_length=4, gen_length=64, always_edit=True) == 4 + 3


def test_post_steps_stop_at_the_first_pass_without_an_edit() -> None:
    rule = BlockRefinementRule(block_steps=8, commit_threshold=0.9, editing_threshold=0.5, max_post_steps=16)
    assert run_block(rule, block_length=4, gen_length=64, always_edit=False) == 4 + 1


def test_eos_finishes_only_with_no_mask_before_the_first_eos_of_the_row() -> None:
    eos = np.array([0, 0, 0, 1, 0], bool)
    assert eos_finishes(eos, np.array([0, 0, 0, 0, 1], bool), prompt_length=2, changed_to_eos=True)
    assert not eos_finishes(eos, np.array([0, 0, 1, 0, 0], bool), prompt_length=2, changed_to_eos=True)
    assert not eos_finishes(eos, np.zeros(5, bool), prompt_length=2, changed_to_eos=False)
    in_prompt = np.array([1, 0, 0, 1, 0], bool)  # an EOS in the prompt blocks the stop for good
    assert not eos_finishes(in_prompt, np.zeros(5, bool), prompt_length=2, changed_to_eos=True)


@pytest.mark.parametrize(("field", "value", "hint"), [
    ("commit_threshold", -0.1, ">= 0"), ("commit_threshold", float("nan"), ">= 0"),
    ("editing_threshold", float("inf"), "in [-1, 1]"), ("minimal_topk", 0, ">= 1"), ("block_steps", 2.5, "an integer"),
    ("max_post_steps", -1, ">= 0"), ("top_k", -3, ">= 0"), ("top_p", 0.0, "(0, 1]"), ("top_p", 1.5, "(0, 1]"),
])
def test_bad_knobs_name_the_value_and_the_fix(field: str, value: object, hint: str) -> None:
    with pytest.raises(ValueError, match=rf"`{field}`.*") as err:
        BlockRefinementRule(**{field: value})
    assert hint in str(err.value) and repr(value) in str(err.value)


# --- against diffusers' scheduler ------------------------------------------------------------

MASK = 15  # the random tests' mask id: the last id of a 16-token vocabulary


def reference_step(scheduler: BlockRefinementScheduler, logits: torch.Tensor, sample: torch.Tensor,
                   prompt_mask: torch.Tensor, step_idx: int, settings: dict, seed: int):
    return scheduler.step(model_output=logits[None], timestep=step_idx, sample=sample[None], mask_token_id=MASK,
                          prompt_mask=prompt_mask, generator=torch.Generator().manual_seed(seed),
                          sampling_method="multinomial", **settings)


SETTINGS = [
    dict(temperature=0.0, threshold=0.7, editing_threshold=0.5),
    dict(temperature=0.0, threshold=0.95, editing_threshold=None),
    dict(temperature=1.0, threshold=0.7, editing_threshold=0.5),
    dict(temperature=0.7, top_k=4, top_p=0.9, threshold=0.5, editing_threshold=0.3),
    dict(temperature=1.3, top_p=0.8, threshold=1.2, editing_threshold=0.6),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_commits_and_edits_equal_diffusers_scheduler_on_random_blocks(settings: dict) -> None:
    rng = torch.Generator().manual_seed(0)
    block_length, steps = 8, 4
    scheduler = BlockRefinementScheduler()
    scheduler.set_timesteps(steps, block_length=block_length)
    rule = BlockRefinementRule(block_steps=steps, commit_threshold=settings["threshold"],
                               editing_threshold=settings["editing_threshold"])
    seen = {"threshold": 0, "quota": 0, "edit": 0}
    for trial in range(60):
        logits = torch.randn(block_length, 16, generator=rng) * 3.0
        sample = torch.randint(0, MASK, (block_length,), generator=rng)
        sample[torch.rand(block_length, generator=rng) < 0.6] = MASK
        prompt_mask = torch.arange(block_length) < int(torch.randint(0, 3, (1,), generator=rng))
        sample[prompt_mask] = 1
        step_idx = trial % steps
        ref = reference_step(scheduler, logits, sample, prompt_mask, step_idx, settings, seed=trial)

        candidate, confidence = multinomial_candidates(
            logits, temperature=settings["temperature"], top_k=settings.get("top_k"), top_p=settings.get("top_p"),
            generator=torch.Generator().manual_seed(trial))
        assert torch.equal(candidate, ref.sampled_tokens[0])
        assert torch.equal(confidence, ref.sampled_probs[0])
        inputs = BlockInputs(confidence=confidence.numpy(), candidate=candidate.numpy(), tokens=sample.numpy(),
                             is_masked=(sample == MASK).numpy(), is_prompt=prompt_mask.numpy())
        ours = refine(inputs, rule.quota(step_idx, block_length, gen_length=64), rule.commit_threshold,
                      rule.editing_threshold)
        assert ours.commit.tolist() == ref.transfer_index[0].tolist()
        assert ours.edit.tolist() == ref.editing_transfer_index[0].tolist()
        assert ours.new_tokens.tolist() == ref.prev_sample[0].tolist()
        quota = rule.quota(step_idx, block_length, 64)
        above = int((inputs.is_masked & (inputs.confidence > rule.commit_threshold)).sum())
        seen["threshold" if above >= quota and ours.commit.any() else "quota"] += 1
        seen["edit"] += int(ours.edit.any())
    assert seen["quota"] > 0 and (seen["threshold"] > 0 or rule.commit_threshold > 1)
    assert (seen["edit"] > 0) == rule.editing_enabled


def test_block_continue_rule_equals_diffusers_on_every_combination() -> None:
    scheduler = BlockRefinementScheduler()
    scheduler.set_timesteps(4, block_length=8)
    for editing in (None, 0.5):
        rule = BlockRefinementRule(block_steps=4, editing_threshold=editing, max_post_steps=3)
        for step_idx in range(6):
            for post_steps in range(6):
                for had_masks in (False, True):
                    for edited in (False, True):
                        for finished in (False, True):
                            expected = scheduler.check_block_should_continue(
                                step_idx=step_idx, masks_remaining=had_masks, editing_enabled=rule.editing_enabled,
                                editing_transfer_index=torch.tensor([edited]), post_steps=post_steps,
                                max_post_steps=3, finished=torch.tensor([finished]))
                            ours = rule.should_continue(RefinementState(step_idx, post_steps), had_masks=had_masks,
                                                        edited=edited, finished=finished, gen_length=64)
                            assert ours == expected, (editing, step_idx, post_steps, had_masks, edited, finished)


def test_eos_rule_equals_diffusers_on_random_rows() -> None:
    rng = np.random.default_rng(3)
    eos_id, mask_id, prompt_length = 2, 3, 3
    for _ in range(300):
        row = rng.integers(0, 5, size=10)
        changed = rng.random(10) < 0.3
        sampled = rng.integers(0, 5, size=10)
        expected = BlockRefinementScheduler.check_eos_finished(
            cur_x=torch.tensor(row)[None], sampled_tokens=torch.tensor(sampled)[None],
            final_transfer=torch.tensor(changed)[None], finished=torch.tensor([False]), eos_token_id=eos_id,
            mask_token_id=mask_id, prompt_length=prompt_length)
        ours = eos_finishes(row == eos_id, row == mask_id, prompt_length, bool((sampled[changed] == eos_id).any()))
        assert ours == bool(expected[0])


# --- the sampler -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("temperature", "top_k", "top_p"),
                         [(0.0, None, None), (0.0, 3, 0.5), (1.0, None, None), (0.6, 5, None), (1.0, None, 0.7),
                          (2.0, 8, 0.95), (1.0, 0, 1.0)])
def test_sampled_tokens_and_confidences_equal_diffusers_with_a_seeded_generator(
        dtype: torch.dtype, temperature: float, top_k: int | None, top_p: float | None) -> None:
    logits = (torch.randn(2, 32, 50, generator=torch.Generator().manual_seed(11)) * 2).to(dtype)
    ours = multinomial_candidates(logits, temperature=temperature, top_k=top_k, top_p=top_p,
                                  generator=torch.Generator().manual_seed(5))
    ref = BlockRefinementScheduler._sample_from_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p,
                                                       generator=torch.Generator().manual_seed(5),
                                                       use_multinomial=True)
    assert torch.equal(ours[0], ref[0])
    assert torch.equal(ours[1], ref[1])
    assert ours[1].dtype == torch.float32 and ours[0].shape == (2, 32)


def test_confidence_is_under_the_tempered_filtered_distribution() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    token, prob = multinomial_candidates(logits, temperature=0.5, top_k=2, generator=torch.Generator().manual_seed(0))
    kept = torch.softmax(logits[0, :2] / 0.5, -1)
    assert prob.item() == pytest.approx(kept[token.item()].item())


def test_filters_equal_diffusers_and_keep_the_crossing_token() -> None:
    logits = torch.randn(64, 40, generator=torch.Generator().manual_seed(2))
    for k in (None, 0, 1, 7, 40, 99):
        assert torch.equal(filter_top_k(logits, k), BlockRefinementScheduler._top_k_filtering(logits, k))
    for p in (None, 0.05, 0.5, 0.9, 1.0):
        assert torch.equal(filter_top_p(logits, p), BlockRefinementScheduler._top_p_filtering(logits, p))
    probs = torch.tensor([[0.5, 0.3, 0.2]]).log()
    kept = filter_top_p(probs, 0.6) > torch.finfo(torch.float32).min
    assert kept.tolist() == [[True, True, False]]  # 0.5 < 0.6 so 0.3 crosses and stays


def test_greedy_ignores_the_generator_and_seeded_draws_repeat() -> None:
    logits = torch.randn(10, 20, generator=torch.Generator().manual_seed(4))
    greedy = multinomial_candidates(logits, temperature=0.0)
    assert torch.equal(greedy[0], logits.argmax(-1))
    a = multinomial_candidates(logits, temperature=1.0, generator=torch.Generator().manual_seed(9))
    b = multinomial_candidates(logits, temperature=1.0, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a[0], b[0])
    with pytest.raises(ValueError, match="temperature"):
        multinomial_candidates(logits, temperature=-0.5)


# --- canvas geometry -------------------------------------------------------------------------


def test_blocks_are_aligned_to_absolute_positions_with_the_prompt_inside_the_first() -> None:
    from dllm_viz.policies.aligned_blocks import AlignedCanvas

    canvas = AlignedCanvas(prompt_length=5, gen_length=24, block_length=8)
    assert (canvas.total_length, canvas.padding) == (32, 3)
    assert canvas.windows == ((0, 8), (8, 16), (16, 24), (24, 32))
    assert [canvas.prompt_in_window(w) for w in canvas.windows] == [5, 0, 0, 0]
    whole_blocks_of_prompt = AlignedCanvas(prompt_length=16, gen_length=8, block_length=8)
    assert whole_blocks_of_prompt.windows == ((16, 24),) and whole_blocks_of_prompt.padding == 0
    long_prompt = AlignedCanvas(prompt_length=19, gen_length=4, block_length=8)
    assert long_prompt.windows == ((16, 24),) and long_prompt.prompt_in_window((16, 24)) == 3
    with pytest.raises(ValueError, match="block_length"):
        AlignedCanvas(prompt_length=3, gen_length=4, block_length=0)
