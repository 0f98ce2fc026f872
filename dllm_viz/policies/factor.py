"""Fast-dLLM's factor rule (docs/ALGORITHMS.md §2.2).

Mirrors the `factor` branch of later github.com/NVlabs/Fast-dLLM `get_transfer_index`: sort
the open positions by confidence and accept the longest prefix whose n-th entry satisfies
(n + 1)(1 - c_(n)) <= f, i.e. c_(n) >= 1 - f / (n + 1); the first is always accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dllm_viz.policies.base import CommitRule, Decision, StepView, forced_or
from dllm_viz.policies.knobs import check_knobs, knob


@dataclass(frozen=True)
class FactorPolicy(CommitRule):
    """Accept the n most confident open positions while (n + 1)(1 - c_(n)) <= factor.

    Paper: Fast-dLLM, arXiv 2505.22618 (factor version; f = 1.0 in the reference scripts).
    Unlike `threshold`, the bar rises with the number already accepted in this step, from
    Theorem 1's (n + 1) * eps <= 1 condition.
    `faithful` keeps the reference quirk: when the first failing rank is the last open
    position (and there are at least two), all of them are accepted anyway.
    """

    name: ClassVar[str] = "factor"
    factor: float = knob(1.0, "f in (n+1)(1-c_n) <= f", within="> 0")
    faithful: bool = knob(True, "reproduce Fast-dLLM's last-rank acceptance quirk")

    def __post_init__(self) -> None:
        check_knobs(self)

    def init_state(self, gen_length: int) -> None:
        return None

    def step(self, view: StepView, state: Any) -> tuple[Decision, Any]:
        open_idx = np.flatnonzero(view.open_positions)
        commit = np.zeros(view.gen_length, dtype=bool)
        forced = np.zeros(view.gen_length, dtype=bool)
        if open_idx.size == 0:
            return Decision(commit=commit, reason=forced_or("factor", commit, forced)), state
        order = open_idx[np.argsort(-view.confidence[open_idx], kind="stable")]
        ranks = np.arange(1, order.size + 1)
        bar = 1.0 - self.factor / (ranks + 1.0)
        bar[0] = -1.0  # the most confident position is always accepted
        failing = np.flatnonzero(view.confidence[order] < bar)
        accepted = order.size if failing.size == 0 else int(failing[0])
        if self.faithful and failing.size and failing[0] == order.size - 1 and order.size >= 2:
            accepted = order.size
        commit[order[:accepted]] = True
        if accepted == 1 and view.confidence[order[0]] < 1.0 - self.factor / 2.0:
            forced[order[0]] = True
            commit[order[0]] = False
        return Decision(commit=commit | forced, reason=forced_or("factor", commit, forced)), state
