"""Pick the torch thread count that trains fastest right now, by measuring it.

On a shared 2-core machine another busy process turns 2 torch threads into a straggler race
(every parallel op waits for the descheduled thread): measured steps went from 1.4 s to 4.5-7 s,
while 1 thread keeps running at about 2.4 s. Neither setting is always best, so the tuner
alternates short probes of each and runs the faster one, re-probing as the load changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

PROBE_STEPS = 10
EXPLOIT_STEPS = 150


@dataclass
class ThreadTuner:
    """Chooses between 1 and `max_threads` torch threads from measured seconds per token.

    Call `observe(seconds, tokens)` after every step; it sets torch's thread count itself.
    The schedule repeats: probe max_threads, probe 1, then run the faster for EXPLOIT_STEPS.
    """

    max_threads: int
    choices: tuple[int, ...] = ()
    cost: dict[int, float] = field(default_factory=dict)
    _phase: int = 0
    _steps: int = 0
    _seconds: float = 0.0
    _tokens: int = 0

    def __post_init__(self) -> None:
        if self.max_threads < 1:
            raise ValueError(f"`max_threads` must be >= 1, got {self.max_threads}")
        self.choices = tuple(sorted({self.max_threads, 1}, reverse=True))
        torch.set_num_threads(self.current)

    @property
    def current(self) -> int:
        """Thread count in use now."""
        if self._phase < len(self.choices):
            return self.choices[self._phase]
        return min(self.cost, key=self.cost.__getitem__)

    def observe(self, seconds: float, tokens: int) -> None:
        """Record one step; advance the probe/exploit schedule when a phase is complete."""
        self._steps += 1
        self._seconds += seconds
        self._tokens += tokens
        probing = self._phase < len(self.choices)
        if self._steps < (PROBE_STEPS if probing else EXPLOIT_STEPS):
            return
        self.cost[self.current] = self._seconds / max(1, self._tokens)
        self._steps, self._seconds, self._tokens = 0, 0.0, 0
        self._phase = (self._phase + 1) % (len(self.choices) + 1)
        torch.set_num_threads(self.current)
