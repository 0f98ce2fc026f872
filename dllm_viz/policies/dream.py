"""Dream's own samplers as commit rules (docs/ALGORITHMS.md §4.4-4.5).

Mirrors `_sample` of Dream-org's HF `generation_utils.py`. With the time grid
t_j = linspace(1, eps, S + 1): `origin` commits each masked position independently with
probability 1 - s/t; the confidence-ordered algorithms commit n_j = floor(M_j (1 - s/t)) of the
M_j masked positions (all of them at the last step), ranked by the candidate's probability
(maskgit_plus), the top-1 minus top-2 margin (topk_margin) or negative entropy (entropy), or
sampled without replacement from softmax(score / alg_temp) (Gumbel-top-k on the engine's
random draws). Dream has no blocks; inside windows each window gets its share of the steps.
Deviations: our scores come from the untempered softmax (Dream's come after its temperature /
top-p filtering), the same as LLaDA's confidence; and a step whose floor gives n_j = 0 (step 0
when steps == gen_length) is not idle: the engine's at-least-one rule commits the top-1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from dllm_viz.policies.base import CommitRule, Decision, StepView, top_k_mask
from dllm_viz.policies.knobs import check_knobs, knob
from dllm_viz.policies.schedule import steps_for_window, steps_knob


@dataclass(frozen=True)
class DreamPolicy(CommitRule):
    """Dream's origin / maskgit_plus / topk_margin / entropy samplers.

    Paper: "Dream 7B: Diffusion Large Language Models", arXiv 2508.15487. Unlike `threshold`,
    the number of commits follows a time schedule, not the confidences; `origin` even picks
    positions at random at temperature 0.
    """

    name: ClassVar[str] = "dream"
    alg: Literal["origin", "maskgit_plus", "topk_margin", "entropy"] = knob(
        "entropy", "Dream sampler: origin, maskgit_plus, topk_margin or entropy"
    )
    steps: int | None = steps_knob()
    eps: float = knob(1e-3, "Dream: final time of the schedule", within="(0, 1)")
    alg_temp: float | None = knob(
        None, "Dream: sample positions from softmax(score/alg_temp); None = top-k", within=">= 0"
    )

    def __post_init__(self) -> None:
        check_knobs(self)

    def init_state(self, gen_length: int) -> None:
        return None

    def fraction(self, step_in_window: int, num_steps: int) -> float:
        """1 - s/t at this step of the schedule (1.0 at and after the last step)."""
        if step_in_window >= num_steps - 1:
            return 1.0
        grid = np.linspace(1.0, self.eps, num_steps + 1)
        return float(1.0 - grid[step_in_window + 1] / grid[step_in_window])

    def step(self, view: StepView, state: Any) -> tuple[Decision, Any]:
        start, end = view.window
        open_ = view.open_positions
        frac = self.fraction(view.step_in_window, steps_for_window(self.steps, end - start, view.gen_length))
        if self.alg == "origin":
            return Decision.of(open_ & (view.rand < frac), "quota"), state
        n = int(open_.sum()) if frac >= 1.0 else int(np.floor(int(open_.sum()) * frac))
        score = {"maskgit_plus": view.confidence, "topk_margin": view.margin,
                 "entropy": -view.entropy}[self.alg]
        if self.alg_temp:
            gumbel = -np.log(-np.log(np.clip(view.rand, 1e-12, 1 - 1e-12)))
            score = score / self.alg_temp + gumbel
        return Decision.of(top_k_mask(score, open_, n), "quota"), state
