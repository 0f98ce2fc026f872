"""DecodeConfig: the settings of one decode that are not part of a policy.

Block sizing and commit rules are policy objects (dllm_viz.policies); this holds what every
policy shares: canvas length, sampling temperature, the step cap, numerical precision and the
LLaDA EOS flags. It knows nothing about models or tokens.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from numbers import Real
from typing import Any, Literal

from dllm_viz.whole_numbers import is_whole

MAX_GEN_LENGTH = 4096
MAX_SEED = 2**64  # torch.Generator's seed range is [0, 2**64)


@dataclass(frozen=True, slots=True)
class DecodeConfig:
    """Settings shared by every policy.

    Attributes:
        gen_length: number of generated positions (the canvas after the prompt), LLaDA's `L`.
        temperature: Gumbel-max sampling temperature for candidates; 0 is greedy (argmax).
        max_steps: hard cap on forward passes; None means one pass per canvas position (gen_length,
            plus the padding an aligned block sizer adds), or the rule's own bound where it runs more
            passes (block refinement's post-steps): enough, because every step commits at least one
            position.
        softmax_dtype: precision of the softmax behind confidence/margin/entropy. Fast-dLLM and
            AdaBlock use float64; LLaDA's generate.py uses the model dtype.
        suppress_eos: LLaDA `logits_eos_inf`: EOS can never be proposed as a candidate.
        deprioritize_eos: LLaDA `confidence_eos_eot_inf`: confidence is computed with EOS/EoT
            removed from the softmax, so EOS/EoT candidates get confidence 0 (ALGORITHMS §1.7).
        seed: seed of the torch.Generator used for Gumbel noise and random remasking.
    """

    gen_length: int = 128
    temperature: float = 0.0
    max_steps: int | None = None
    softmax_dtype: Literal["float64", "float32"] = "float64"
    suppress_eos: bool = False
    deprioritize_eos: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.gen_length, int) or not 1 <= self.gen_length <= MAX_GEN_LENGTH:
            raise ValueError(
                f"`gen_length` must be an integer in [1, {MAX_GEN_LENGTH}], got {self.gen_length!r}"
            )
        # Type first: a string fails inside math.isfinite / `<` with a message that names no field.
        if (isinstance(self.temperature, bool) or not isinstance(self.temperature, Real)
                or not (math.isfinite(self.temperature) and self.temperature >= 0.0)):
            raise ValueError(f"`temperature` must be a finite number >= 0 (0 = greedy), got {self.temperature!r}")
        # A float cap (2.5) passed here and failed later in the engine's range(); True read as 1.
        if self.max_steps is not None and (not is_whole(self.max_steps) or self.max_steps < 1):
            raise ValueError(f"`max_steps` must be an integer >= 1 or None, got {self.max_steps!r}")
        # Any truthy value ("no", "false") would switch the flag on silently.
        for flag in ("suppress_eos", "deprioritize_eos"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"`{flag}` must be True or False, got {getattr(self, flag)!r}")
        # torch.Generator.manual_seed takes [0, 2**64); outside it torch's own message names no flag.
        if not is_whole(self.seed) or not 0 <= self.seed < MAX_SEED:
            raise ValueError(f"`seed` must be an integer in [0, 2**64), got {self.seed!r}; pass e.g. --seed 0")
        if self.softmax_dtype not in ("float64", "float32"):
            raise ValueError(
                f"`softmax_dtype` must be 'float64' or 'float32', got {self.softmax_dtype!r}"
            )

    @property
    def step_cap(self) -> int:
        """The hard cap on forward passes over an unpadded canvas (the engine raises it to the padded
        canvas's length, or the rule's pass bound, when `max_steps` is None)."""
        return self.gen_length if self.max_steps is None else self.max_steps

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; `from_dict` inverts it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DecodeConfig:
        """Strict inverse of `to_dict`: unknown keys raise."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown DecodeConfig keys {unknown}; valid keys are {sorted(known)}")
        return cls(**data)
