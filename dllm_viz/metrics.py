"""The field's speed-accuracy metrics: tokens per forward (TPF), AUP, and a frontier verdict.

Definitions follow d3LLM (hao-ai-lab/d3LLM, `AUP_leaderboard/aup_utils.py`; docs/TESTBED.md,
"Metrics"), so our numbers read like the leaderboard's:

- TPF = generated answer tokens (end-of-text padding excluded) / forward passes, summed over a
  prompt set before dividing.
- AUP of one method's (TPF rho_i, accuracy y_i in percent) points, sorted by rho: with y_1 the
  accuracy at the smallest rho, points below y_1 - 5 are dropped, and
  AUP = rho_1 * y_1 + sum_i (rho_i - rho_{i-1}) * (y_i W(y_i) + y_{i-1} W(y_{i-1})) / 2,
  W(y) = min(exp(-alpha (1 - y / y_max)), 1), alpha = 3, y_max the best accuracy of any method
  on the task. d3LLM refuses a curve whose fastest point lost more than 5 points; we drop such
  points as its filter does for the others and report how many were dropped. Points that share a
  TPF count as one, at the best of their accuracies (as `frontier_position` does): d3LLM's sort by
  rho alone is stable, so there the area of tied points depends on the order they were listed in.

Beside them, the paired comparison a difference in accuracy needs before it means anything: on the
same problems, how many a configuration lost against the baseline (right there, wrong here) and
gained (the reverse), and the exact two-sided sign test on those discordant problems. On a few
hundred problems two configurations a point or two apart are usually not told apart (session 19,
BENCHMARKS.md), and "within 1 point of dense" says nothing without it.

A single configuration is one point; its AUP is taken over the curve from the dense baseline to
it (dense, then the configuration), so a configuration that loses more than 5 points scores only
dense's area and one that keeps accuracy is credited for its extra parallelism.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

AUP_ALPHA = 3.0
AUP_DROP_POINTS = 5.0
# Within this many accuracy points of the frontier a configuration is "on" it.
FRONTIER_TOLERANCE = 1.0


def tokens_per_forward(tokens: float, nfe: float) -> float:
    """Answer tokens per forward pass (NaN without a pass)."""
    return tokens / nfe if nfe > 0 else float("nan")


@dataclass(frozen=True, slots=True)
class Aup:
    """An AUP value and how many points d3LLM's 5-point filter left out."""

    value: float
    dropped: int


def _best_at_each(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(x, best y) for each distinct x, sorted by x: a curve's one value where several points share an x."""
    best: dict[float, float] = {}
    for x, y in points:
        best[x] = max(y, best.get(x, y))
    return sorted(best.items())


def aup(points: Sequence[tuple[float, float]], y_max: float, *, alpha: float = AUP_ALPHA,
        drop: float = AUP_DROP_POINTS) -> Aup:
    """d3LLM's area under the accuracy-parallelism curve.

    Args:
        points: (TPF, accuracy in percent) pairs of one method, any order; pairs that share a TPF
            count as one at the best of their accuracies (a curve has one value per TPF; the area
            does not depend on the order the pairs come in).
        y_max: the best accuracy (percent) of any method on the task, for the weight W.
        alpha: the weight's sharpness (d3LLM: 3).
        drop: points more than this many accuracy points below the slowest point's are left out.

    Raises:
        ValueError: no point, a non-finite value, a negative TPF, an accuracy outside 0..100, y_max
            not in (0, 100], or alpha / drop not finite and >= 0.
    """
    if not points:
        raise ValueError("AUP needs at least one (TPF, accuracy) point")
    if not all(math.isfinite(r) and math.isfinite(y) for r, y in points):
        raise ValueError(f"AUP points must be finite, got {list(points)}")
    bad = [(r, y) for r, y in points if r < 0 or not 0 <= y <= 100]
    if bad:
        raise ValueError(f"AUP points must be (TPF >= 0, accuracy in percent 0..100), got {bad}")
    if not 0 < y_max <= 100:
        raise ValueError(f"`y_max` must be in (0, 100] (the best accuracy in percent), got {y_max}")
    for name, value in (("alpha", alpha), ("drop", drop)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"`{name}` must be a finite number >= 0, got {value}")
    ordered = _best_at_each(points)
    first = ordered[0][1]
    kept = [(r, y) for r, y in ordered if y >= first - drop]

    def weight(y: float) -> float:
        return min(math.exp(-alpha * (1.0 - y / y_max)), 1.0)

    area = kept[0][0] * kept[0][1]
    for (r0, y0), (r1, y1) in pairwise(kept):
        area += 0.5 * (r1 - r0) * (y1 * weight(y1) + y0 * weight(y0))
    return Aup(area, len(ordered) - len(kept))


def frontier_position(nfe: float, accuracy: float, frontier: Sequence[tuple[float, float]], *,
                      tolerance: float = FRONTIER_TOLERANCE) -> str:
    """Where a configuration sits against a sweep's NFE-accuracy frontier.

    The frontier's accuracy at `nfe` is interpolated linearly between its points (sorted by
    NFE); "above" / "below" when the configuration's accuracy is more than `tolerance` points
    (accuracy in percent) above / below it, "on" otherwise, and "outside" when `nfe` lies
    beyond the frontier's NFE range (no sweep point to compare with). Sweep points that share an
    NFE count as one, at the best of their accuracies (the frontier is the best reached there).

    Raises:
        ValueError: a non-finite NFE or accuracy, of the configuration or of a frontier point
            (a NaN compares false both ways and would read as "on"), or a tolerance not finite and >= 0.
    """
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"`tolerance` must be a finite number of accuracy points >= 0, got {tolerance}")
    if not (math.isfinite(nfe) and math.isfinite(accuracy)):
        raise ValueError(f"cannot place a configuration with NFE {nfe} and accuracy {accuracy} against the "
                         "frontier: both must be finite numbers")
    if not all(math.isfinite(n) and math.isfinite(a) for n, a in frontier):
        raise ValueError(f"frontier points (NFE, accuracy) must be finite, got {list(frontier)}")
    ordered = _best_at_each(frontier)
    if not ordered or not ordered[0][0] <= nfe <= ordered[-1][0]:
        return "outside"
    for (n0, a0), (n1, a1) in pairwise(ordered):
        if n0 <= nfe <= n1:
            expected = a0 + (a1 - a0) * (nfe - n0) / (n1 - n0)  # NFEs are distinct
            break
    else:
        expected = ordered[0][1]
    if accuracy > expected + tolerance:
        return "above"
    if accuracy < expected - tolerance:
        return "below"
    return "on"


def sign_test_p(lost: int, gained: int) -> float:
    """Exact two-sided sign test on paired outcomes: the probability, were both configurations
    equally good, of a split of the `lost + gained` discordant problems at least this uneven.

    p = min(1, 2 * sum_{i <= min(lost, gained)} C(n, i) / 2^n), n = lost + gained; 1.0 with no
    discordant problem (nothing tells the two apart). Problems both got right or both got wrong
    carry no evidence either way and do not enter.

    Raises:
        ValueError: a count that is not a whole number >= 0.
    """
    for name, count in (("lost", lost), ("gained", gained)):
        try:
            whole = operator.index(count)
        except TypeError:
            whole = None
        if whole is None and not (isinstance(count, float) and count.is_integer()):
            raise ValueError(f"counts of problems must be whole numbers, got {name}={count!r}; pass the "
                             "number of discordant problems")
    lost, gained = int(lost), int(gained)
    if lost < 0 or gained < 0:
        raise ValueError(f"counts of problems must be >= 0, got lost={lost}, gained={gained}")
    n = lost + gained
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(lost, gained) + 1))
    return min(1.0, 2 * tail / 2**n)  # int / int: exact for any n, no float overflow


def format_p(p: float) -> str:
    """A sign test's p for a printed table: three decimals, and "<0.001" below that, so a tiny p
    never reads as 0.000 (which would claim certainty the test does not give)."""
    return "<0.001" if p < 0.001 else f"{p:.3f}"
