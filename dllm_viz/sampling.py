"""Per-position statistics of one forward pass: candidate, confidence, margin, entropy.

Computed once per step by the engine so policies never touch logits. Tensor in, tensor out;
knows nothing about windows, policies or tokenizers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class PositionStats:
    """Statistics over the rows of one logits matrix (one row per position).

    Attributes:
        candidate: the token each position would take (argmax or Gumbel-max sample), long.
        confidence: un-tempered softmax probability of the candidate (LLaDA `low_confidence`).
        margin: top-1 minus top-2 probability.
        entropy: Shannon entropy of the softmax in nats.
    """

    candidate: torch.Tensor
    confidence: torch.Tensor
    margin: torch.Tensor
    entropy: torch.Tensor


def gumbel_argmax(
    logits: torch.Tensor, temperature: float, generator: torch.Generator | None
) -> torch.Tensor:
    """Sample from softmax(logits / temperature) with the Gumbel-max trick in float64.

    LLaDA ranks exp(z) / (-log u)^tau with u ~ U(0,1) in float64; its log, z + tau * g with
    g = -log(-log u), has the same argmax without overflow. float64 matters: low-precision
    Gumbel noise behaves like a lower temperature (arXiv 2409.02908). tau = 0 is argmax.
    """
    if temperature == 0.0:
        return logits.argmax(dim=-1)
    z = logits.to(torch.float64)
    u = torch.rand(z.shape, dtype=torch.float64, device=z.device, generator=generator)
    return (z - temperature * torch.log(-torch.log(u))).argmax(dim=-1)


CHUNK_ROWS = 128  # rows per float64 softmax: bounds memory at ~CHUNK_ROWS x vocab x 16 bytes


def summarize(
    logits: torch.Tensor,
    *,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    softmax_dtype: torch.dtype = torch.float64,
    suppress_ids: tuple[int, ...] = (),
    deprioritize_ids: tuple[int, ...] = (),
    never_ids: tuple[int, ...] = (),
) -> PositionStats:
    """Candidates and their statistics for each row of `logits`, computed in row chunks.

    A float64 softmax over LLaDA's 126k vocabulary costs 1 GB per 1,024 rows; chunking keeps
    the peak at CHUNK_ROWS rows whatever the canvas length. See `summarize_rows`.
    """
    parts = [summarize_rows(logits[i : i + CHUNK_ROWS], temperature=temperature, generator=generator,
                            softmax_dtype=softmax_dtype, suppress_ids=suppress_ids,
                            deprioritize_ids=deprioritize_ids, never_ids=never_ids)
             for i in range(0, max(logits.shape[0], 1), CHUNK_ROWS)]
    if len(parts) == 1:
        return parts[0]
    return PositionStats(*(torch.cat([getattr(p, name) for p in parts]) for name in
                           ("candidate", "confidence", "margin", "entropy")))


def summarize_rows(
    logits: torch.Tensor,
    *,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    softmax_dtype: torch.dtype = torch.float64,
    suppress_ids: tuple[int, ...] = (),
    deprioritize_ids: tuple[int, ...] = (),
    never_ids: tuple[int, ...] = (),
) -> PositionStats:
    """Candidates and their statistics for each row of `logits` (positions x vocab).

    Args:
        logits: raw model logits, row i = distribution of position i.
        temperature: Gumbel-max temperature for the candidate; confidence ignores it (LLaDA).
        generator: RNG for the Gumbel noise.
        softmax_dtype: precision of the softmax behind confidence, margin and entropy.
        suppress_ids: token ids that can never be candidates (LLaDA `logits_eos_inf`).
        deprioritize_ids: ids removed from the softmax *after* the candidate is chosen, so a
            candidate among them gets confidence 0 (LLaDA `confidence_eos_eot_inf` at tau = 0).

    Returns:
        PositionStats with one entry per row.
    """
    if suppress_ids:
        logits = logits.clone()
        logits[:, list(suppress_ids)] = float("-inf")
    if never_ids:
        choosable = logits.clone()
        choosable[:, list(never_ids)] = float("-inf")
        candidate = gumbel_argmax(choosable, temperature, generator)
    else:
        candidate = gumbel_argmax(logits, temperature, generator)
    p, margin, entropy = _spread(logits, softmax_dtype)
    if deprioritize_ids:
        kept = logits.to(softmax_dtype).clone()
        kept[:, list(deprioritize_ids)] = float("-inf")
        confidence = torch.softmax(kept, dim=-1).gather(-1, candidate[:, None])[:, 0]
    else:
        confidence = p.gather(-1, candidate[:, None])[:, 0]
    return PositionStats(candidate=candidate, confidence=confidence, margin=margin, entropy=entropy)


def _spread(logits: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(softmax, top-1 minus top-2 probability, entropy in nats) of each row, in `dtype`."""
    log_p = torch.log_softmax(logits.to(dtype), dim=-1)
    p = log_p.exp()
    top2 = p.topk(2, dim=-1).values if p.shape[-1] > 1 else torch.cat([p, torch.zeros_like(p)], -1)
    entropy = -(p * torch.nan_to_num(log_p, neginf=0.0)).sum(dim=-1)
    return p, top2[:, 0] - top2[:, 1], entropy


def filter_top_k(logits: torch.Tensor, top_k: int | None) -> torch.Tensor:
    """Logits outside each row's `top_k` largest set to the dtype's minimum (ties at the k-th kept).

    None, 0 or k >= vocabulary keeps every token. The dtype minimum rather than -inf matches
    diffusers' BlockRefinementScheduler, so a later softmax sees exactly the same numbers.
    """
    if top_k is None or top_k <= 0 or top_k >= logits.shape[-1]:
        return logits
    kth_largest = logits.topk(top_k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth_largest, torch.finfo(logits.dtype).min)


def filter_top_p(logits: torch.Tensor, top_p: float | None) -> torch.Tensor:
    """Nucleus filtering: keep each row's most likely tokens until their mass first exceeds `top_p`.

    The token that crosses `top_p` is kept (the mask is shifted right by one), the top token
    always is; None or 1 keeps every token.
    """
    if top_p is None or top_p >= 1.0:
        return logits
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"`top_p` must be in (0, 1], got {top_p!r}")
    ordered, order = torch.sort(logits, dim=-1, descending=True)
    beyond = torch.softmax(ordered, dim=-1).cumsum(dim=-1) > float(top_p)
    drop = torch.zeros_like(beyond)
    drop[..., 1:] = beyond[..., :-1]
    ordered = ordered.masked_fill(drop, torch.finfo(ordered.dtype).min)
    return logits.scatter(-1, order, ordered)


def multinomial_candidates(
    logits: torch.Tensor,
    *,
    temperature: float,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Candidates and their confidence the way LLaDA2.x's reference sampler draws them.

    temperature 0 is greedy: the argmax of the raw logits, with its float32 softmax probability
    (top-k / top-p are ignored, as in the reference). Otherwise the logits are divided by the
    temperature, filtered by top-k then top-p, and one token per row is drawn by a single
    `torch.multinomial` call over all rows from `generator`; the confidence is the drawn token's
    probability under that tempered, filtered distribution, not under the raw softmax.
    Reproducing the reference draw for draw needs the same rows in the same order (the whole
    block, one call per pass) and the same vocabulary size: each row consumes vocabulary-many
    exponential variates from the generator.

    Args:
        logits: rows x vocabulary (any leading shape; flattened to rows in C order).
        temperature: >= 0.
        top_k: keep the k largest logits per row; None or 0 keeps all.
        top_p: nucleus mass in (0, 1]; None keeps all.
        generator: the RNG the draws come from (only used when temperature > 0).

    Returns:
        (candidate long tensor, confidence float32 tensor), both of the logits' leading shape.
    """
    if not temperature >= 0.0:
        raise ValueError(f"`temperature` must be >= 0 (0 = greedy), got {temperature!r}")
    rows = logits.reshape(-1, logits.shape[-1])
    if temperature == 0.0:
        probs = torch.softmax(rows.float(), dim=-1)
        candidate = rows.argmax(dim=-1)
    else:
        scaled = rows if temperature == 1.0 else rows / temperature
        probs = torch.softmax(filter_top_p(filter_top_k(scaled, top_k), top_p).float(), dim=-1)
        candidate = torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]
    confidence = probs.gather(-1, candidate[:, None])[:, 0]
    shape = logits.shape[:-1]
    return candidate.view(shape), confidence.view(shape)


def multinomial_stats(logits: torch.Tensor, *, temperature: float, top_k: int | None, top_p: float | None,
                      generator: torch.Generator | None) -> PositionStats:
    """LLaDA2.x's sampling mode (a rule's `policies.BlockSampling`): `multinomial_candidates` over
    the rows given (the engine passes one block's, prompt rows of the first block included, as the
    reference draws them, so the generator's draws match), plus margin and entropy of the raw
    softmax (float64) for the views. The mask token is not excluded (nor is it in the reference):
    an untrained model may draw it."""
    candidate, confidence = multinomial_candidates(logits, temperature=temperature, top_k=top_k, top_p=top_p,
                                                   generator=generator)
    _, margin, entropy = _spread(logits, torch.float64)
    return PositionStats(candidate=candidate, confidence=confidence, margin=margin, entropy=entropy)
