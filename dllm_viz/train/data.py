"""Training rows for the tiny dLLM: problems -> token rows -> LLaDA-style SFT masking.

A row is `template(prompt) + answer + <eos>...` padded with EOS up to a bucketed total length,
so the model learns the EOS tail. Most rows are masked i.i.d. (LLaDA SFT); a share of the
arithmetic rows get *focus* masking (see `focus_pattern`), the state semi-autoregressive decoding
puts the model in when it must compute a result. Every batch is a pure function of (seed, step): resuming at a
step reproduces the exact data stream without storing a data cursor. Nothing here knows about
optimisers or checkpoints.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from dllm_viz.tasks import TASKS, Problem
from dllm_viz.tasks.arith import COMPUTED_ROLES, ArithTask, solution_roles
from dllm_viz.tasks.base import running_count
from dllm_viz.tasks.hard_split import draw_mix
from dllm_viz.tasks.parallelbench import WaitingLineTask, bound_names
from dllm_viz.train.config import DataConfig

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

PROMPT_TEMPLATE = "Question: {prompt}\nAnswer:\n"
# Row lengths are rounded up to a multiple of this, so (compiled or not) few shapes occur.
LENGTH_QUANTUM = 16
# Minimum canvas of a drill batch: a one-operation answer (`60 + 14 = 74\n#### 74`) is at most 16
# tokens; longer chained drills grow the rows to fit (build_rows), with at least one EOS.
DRILL_CANVAS = 16


@dataclass(frozen=True, slots=True)
class Batch:
    """One masked training batch.

    Attributes:
        input_ids: rows with masked answer positions replaced by the mask token.
        labels: the clean rows.
        is_masked: True where the loss applies (masked answer/EOS positions).
        is_content: True on answer tokens before the EOS padding (for answer-token accuracy).
        t: per-row masking probability.
        answer_len: per-row number of answer+EOS positions (LLaDA's 1/t normaliser).
    """

    input_ids: torch.Tensor
    labels: torch.Tensor
    is_masked: torch.Tensor
    is_content: torch.Tensor
    t: torch.Tensor
    answer_len: torch.Tensor

    def to(self, device: torch.device | str) -> Batch:
        """The same batch with every tensor on `device`."""
        return Batch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


def format_prompt(prompt: str) -> str:
    """The exact text the model sees before its answer."""
    return PROMPT_TEMPLATE.format(prompt=prompt)


def encode_pairs(
    tokenizer: PreTrainedTokenizerFast, problems: Sequence[Problem]
) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, answer ids) per problem, tokenized separately as at inference time."""
    prompts = tokenizer([format_prompt(p.prompt) for p in problems], add_special_tokens=False)
    answers = tokenizer([p.target for p in problems], add_special_tokens=False)
    return list(zip(prompts["input_ids"], answers["input_ids"], strict=True))


@dataclass(frozen=True, slots=True)
class AnswerLayout:
    """Per answer token: the unit it starts in and whether it is computed (or bound).

    A unit is a solution line, or one item of a ParallelBench list answer. Computed tokens are an
    arithmetic solution's numbers in COMPUTED_ROLES (results, carries, the final answer) and a
    list answer's last names (`bound_names`: each is bound to the first name before it); a code
    answer has neither, so focus masking never applies to it.
    """

    line: tuple[int, ...]
    computed: tuple[bool, ...]


def _units(problem: Problem) -> tuple[list[int], set[int]]:
    """Per character of the problem's target, its unit; and the characters that are computed."""
    target = problem.target
    if isinstance(TASKS.get(problem.task), WaitingLineTask):
        return bound_names(target)
    roles = solution_roles(target)  # empty for answers without worked lines (code, puzzles)
    return running_count(target, "\n"), {
        c for c, role in roles.items() if role in COMPUTED_ROLES
    }


def answer_layouts(tokenizer: PreTrainedTokenizerFast, problems: Sequence[Problem]) -> list[AnswerLayout]:
    """The AnswerLayout of each problem's target, tokenized exactly as `encode_pairs` does (none for
    no problems: the fast tokenizer raises IndexError on an empty batch)."""
    if not problems:
        return []
    encoded = tokenizer([p.target for p in problems], add_special_tokens=False, return_offsets_mapping=True)
    out = []
    for problem, offsets in zip(problems, encoded["offset_mapping"], strict=True):
        unit, computed = _units(problem)
        out.append(AnswerLayout(
            line=tuple(unit[start] for start, _ in offsets),
            computed=tuple(any(c in computed for c in range(start, end)) for start, end in offsets),
        ))  # fmt: skip
    return out


def focus_pattern(
    prompt_lengths: Sequence[int], layouts: Sequence[AnswerLayout | None], shape: tuple[int, int],
    rng: random.Random, *, last_fraction: float | Sequence[float] = 0.0,
    window_fraction: float | Sequence[float] = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(must_mask, keep) boolean masks that put rows with a layout in the state of decoding.

    Why: under i.i.d. masking a masked result is usually recoverable by copying the next line's
    carry, so a small model learns to copy long before it learns to compute (measured: carry 91%,
    result 70% at half masking, and 11% of problems right when decoding, where the next line is
    still masked). For each row with a layout, a cut line k is drawn uniformly: lines before k
    stay visible (already decoded), every computed number from line k on is masked, and the rest
    (operators, operands, format, EOS tail) keeps its i.i.d. masking. A list answer's units are its
    items and its computed tokens the last names: from item k on every last name is masked, so
    none can be had by elimination (the step-74000 model had learned only that: `diagnose`'s
    binding table).

    `last_fraction` of the rows (one share for all, or one per row) instead cut at the last unit
    but one (a chain's last worked line, a list's last two items), so it is computed with the
    answer line masked too (DataConfig.focus_last_fraction says why). `window_fraction` of the rows
    (drawn after the cut) also mask everything after the cut unit, to the row's end: the state a
    window ending at that unit's newline leaves the canvas in (DataConfig.focus_window_fraction). A
    row at 0 of either makes no extra draw, so the rows of a run without them are unchanged.
    """
    last_shares, window_shares = _per_row(last_fraction, len(layouts)), _per_row(window_fraction, len(layouts))
    must_mask = torch.zeros(shape, dtype=torch.bool)
    keep = torch.zeros(shape, dtype=torch.bool)
    for row, (start, layout, last, window) in enumerate(
            zip(prompt_lengths, layouts, last_shares, window_shares, strict=True)):
        if layout is None or not any(layout.computed):
            continue
        cut = max(layout.line[-1] - 1, 0) if last and rng.random() < last else rng.randrange(layout.line[-1] + 1)
        line = torch.tensor(layout.line)
        end = start + len(layout.line)
        keep[row, start:end] = line < cut
        must_mask[row, start:end] = (line >= cut) & torch.tensor(layout.computed)
        if window and rng.random() < window:
            must_mask[row, start:end] |= line > cut
            must_mask[row, end:] = True
    return must_mask, keep


def _per_row(share: float | Sequence[float], rows: int) -> list[float]:
    """One share for every row, or the rows' own."""
    return [float(share)] * rows if isinstance(share, float | int) else list(share)


def bucket_length(needed: int) -> int:
    """`needed` rounded up to a multiple of LENGTH_QUANTUM."""
    return -(-needed // LENGTH_QUANTUM) * LENGTH_QUANTUM


def build_rows(
    pairs: Sequence[tuple[list[int], list[int]]], canvas: int, eos_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, is_answer, is_content) with every row's canvas (answer + EOS tail) >= `canvas`."""
    needed = max(len(p) + max(canvas, len(a) + 1) for p, a in pairs)
    total = bucket_length(needed)
    ids = torch.full((len(pairs), total), eos_id, dtype=torch.long)
    is_answer = torch.zeros((len(pairs), total), dtype=torch.bool)
    is_content = torch.zeros((len(pairs), total), dtype=torch.bool)
    for row, (prompt, answer) in enumerate(pairs):
        ids[row, : len(prompt)] = torch.tensor(prompt, dtype=torch.long)
        ids[row, len(prompt) : len(prompt) + len(answer)] = torch.tensor(answer, dtype=torch.long)
        is_answer[row, len(prompt) :] = True
        is_content[row, len(prompt) : len(prompt) + len(answer)] = True
    return ids, is_answer, is_content


def mask_rows(
    ids: torch.Tensor,
    is_answer: torch.Tensor,
    is_content: torch.Tensor,
    mask_id: int,
    *,
    generator: torch.Generator,
    t: torch.Tensor | None = None,
    must_mask: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
) -> Batch:
    """Mask each answer position with its row's probability t (stratified U(0,1) when not given).

    Stratified t (one draw per 1/B slice) keeps every batch covering all noise levels, which
    lowers gradient variance at no cost. `must_mask` / `keep` (e.g. from `focus_pattern`) force
    answer positions masked / visible after the draw. At least one position per row is masked.
    """
    num_rows = ids.shape[0]
    if t is None:
        offset = torch.rand((), generator=generator)
        t = ((torch.arange(num_rows) + offset) / num_rows).clamp(1e-3, 1.0)
        t = t[torch.randperm(num_rows, generator=generator)]
    draws = torch.rand(ids.shape, generator=generator)
    is_masked = draws < t[:, None]
    if must_mask is not None:
        is_masked |= must_mask
    if keep is not None:
        is_masked &= ~keep
    is_masked &= is_answer
    # Guarantee a loss term per row: mask the first answer position where nothing got masked.
    empty = ~is_masked.any(dim=1)
    first_answer = is_answer.float().argmax(dim=1)
    is_masked[empty, first_answer[empty]] = True
    input_ids = torch.where(is_masked, torch.full_like(ids, mask_id), ids)
    return Batch(input_ids, ids, is_masked, is_content, t, is_answer.sum(dim=1))


def training_problems(config: DataConfig, *, seed: int, step: int) -> tuple[list[Problem], int]:
    """The problems and canvas length of batch `step` (a pure function of seed and step)."""
    rng = random.Random(f"batch:{seed}:{step}")
    if config.is_drill_step(step):
        drills = ArithTask().drills(
            config.drill_batch_size, seed=rng.getrandbits(62), max_ops=config.drill_max_ops,
            **config.arith_limits(),
        )  # fmt: skip
        return drills, DRILL_CANVAS
    if config.is_list_drill_step(step):
        lists = draw_mix(config.list_drill_batch_size, rng, TASKS.__getitem__, seed=rng.getrandbits(62),
                         split="train", families=config.list_drill_families())
        return lists, DRILL_CANVAS
    num_code = sum(rng.random() < config.code_fraction for _ in range(config.batch_size))
    batch_seed = rng.getrandbits(62)
    problems = TASKS["arith"].generate(
        config.batch_size - num_code,
        seed=batch_seed,
        split="train",
        min_ops=1,
        max_ops=config.max_ops_at(step),
        **config.arith_limits(),
    )
    if num_code:
        problems += TASKS["code"].generate(num_code, seed=batch_seed, split="train")
    if config.hard_fraction > 0:
        problems = _with_hard_rows(problems, config, rng, batch_seed)
    canvas = rng.choices(config.canvas_lengths, weights=config.canvas_weights)[0]
    return problems, canvas


def _with_hard_rows(problems: list[Problem], config: DataConfig, rng: random.Random, seed: int) -> list[Problem]:
    """Replace a `hard_fraction` share of the batch's arithmetic rows by hard-split families, drawn by
    the run's weights (`DataConfig.hard_families`)."""
    arith = [p for p in problems if p.task == "arith"]
    share = config.hard_fraction / (1.0 - config.code_fraction)
    num_hard = min(len(arith), sum(rng.random() < share for _ in arith))
    hard = draw_mix(num_hard, rng, TASKS.__getitem__, seed=seed, split="train", families=config.hard_families())
    return arith[num_hard:] + [p for p in problems if p.task != "arith"] + hard


def training_batch(
    config: DataConfig,
    tokenizer: PreTrainedTokenizerFast,
    ids: dict[str, int],
    *,
    seed: int,
    step: int,
) -> Batch:
    """Masked batch number `step` of the deterministic training stream."""
    problems, canvas = training_problems(config, seed=seed, step=step)
    pairs = encode_pairs(tokenizer, problems)
    rows = build_rows(pairs, canvas, ids["eos_token_id"])
    generator = torch.Generator().manual_seed((seed * 1_000_003 + step) % (2**31 - 1))
    must_mask = keep = None
    if config.focus_fraction > 0:
        rng = random.Random(f"focus:{seed}:{step}")
        chosen = [rng.random() < config.focus_fraction for _ in problems]
        layouts = answer_layouts(tokenizer, problems)
        must_mask, keep = focus_pattern(
            [len(prompt) for prompt, _ in pairs],
            [layout if pick else None for layout, pick in zip(layouts, chosen, strict=True)],
            tuple(rows[0].shape), rng, last_fraction=[config.focus_last_share(p.task) for p in problems],
            window_fraction=[config.focus_window_share(p.task) for p in problems],
        )  # fmt: skip
    return mask_rows(*rows, ids["mask_token_id"], generator=generator, must_mask=must_mask, keep=keep)
