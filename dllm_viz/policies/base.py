"""Contracts between the decoding loop and the policies that plug into it.

A commit rule answers "which masked positions of the window do I commit now?"; a block sizer
answers "where does the window that starts here end?". Both see a `StepView` (numpy arrays over
the generated positions, computed once per forward pass by the engine), return their new state
explicitly, and never call the model. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from dllm_viz.model_facts import AdapterInfo

# Why a position was committed (docs/ALGORITHMS.md §0.4), or "edit": a committed token replaced
# (block refinement). Stored as int8 codes in traces; the names travel with every saved trace so
# old files stay readable if the list grows (append only).
COMMIT_REASONS: tuple[str, ...] = (
    "quota",
    "forced_top1",
    "threshold",
    "factor",
    "filter",
    "cora_residual",
    "tspd",
    "ce_lookahead",
    "last_step_flush",
    "first_token",
    "eos_stop",
    "random",
    "edit",
)
NO_REASON = -1


def reason_code(name: str) -> int:
    """Integer code of a commit reason name."""
    try:
        return COMMIT_REASONS.index(name)
    except ValueError:
        raise ValueError(f"unknown commit reason {name!r}; known: {COMMIT_REASONS}") from None


@dataclass(frozen=True)
class StepView:
    """What a policy may look at in one step. Arrays are over the gen_length generated positions.

    Attributes:
        step: global index of this forward pass (0-based).
        step_in_window: index of this pass within the current window (0 = the window's first).
        window: [start, end) of the current window in generated-position coordinates.
        tokens: current tokens before this step's commits.
        is_masked: True where the position is still the mask token.
        candidate: token each position would take now (argmax or sample).
        confidence: probability of the candidate under the un-tempered softmax.
        margin: top-1 minus top-2 probability.
        entropy: entropy of the softmax (nats).
        is_eos_candidate: True where the candidate is an end-of-sequence/turn token.
        rand: uniform [0, 1) draws from the decode's generator (random remasking).
        window_masked_at_start: masked positions in the window when it opened (LLaDA schedule).
        is_delimiter_candidate: True where the candidate is a delimiter (newline by default;
            AdaBlock's semantic step boundaries).
        canvas_end: positions at or after this were cut by an end-of-text stop (not decoded).
        block_length: the block sizer's fixed window length (None for variable windows).
        prompt_length: tokens of prompt before position 0 (aligned blocks count from them).
        padding: trailing positions past the answer: decoded like the others (aligned blocks
            pad the canvas to whole blocks) but hidden from the model and never recorded.
        eos_token_id: the model's end-of-sequence id (stop rules compare tokens with it).
        mask_token_id: the model's mask id (a sampled candidate may be it; see commit_step).
        prompt_has_eos: the prompt holds that id (LLaDA2's early stop never fires then).
    """

    step: int
    step_in_window: int
    window: tuple[int, int]
    tokens: np.ndarray
    is_masked: np.ndarray
    candidate: np.ndarray
    confidence: np.ndarray
    margin: np.ndarray
    entropy: np.ndarray
    is_eos_candidate: np.ndarray
    rand: np.ndarray
    window_masked_at_start: int
    is_delimiter_candidate: np.ndarray | None = None
    canvas_end: int | None = None
    block_length: int | None = None
    prompt_length: int = 0
    padding: int = 0
    eos_token_id: int | None = None
    mask_token_id: int | None = None
    prompt_has_eos: bool = False

    @property
    def gen_length(self) -> int:
        """Number of canvas positions (the arrays' length; padding included)."""
        return int(self.tokens.shape[0])

    @property
    def answer_length(self) -> int:
        """Positions the answer may use: the requested gen_length, padding excluded."""
        return self.gen_length - self.padding

    @cached_property
    def in_window(self) -> np.ndarray:
        """Boolean mask of the current window (read-only; computed once per view)."""
        mask = np.zeros(self.gen_length, dtype=bool)
        mask[self.window[0] : self.window[1]] = True
        mask.flags.writeable = False
        return mask

    @cached_property
    def open_positions(self) -> np.ndarray:
        """Positions a rule may commit now: masked and inside the window (read-only; computed once
        per view, as the engine, the rule and an extrapolator all ask for it every pass)."""
        mask = self.is_masked & self.in_window
        mask.flags.writeable = False
        return mask


@dataclass(frozen=True)
class Decision:
    """A commit rule's answer for one step.

    Attributes:
        commit: positions to commit now (the engine clips it to masked & window).
        reason: per-position commit reason code (see COMMIT_REASONS), NO_REASON elsewhere.
        extras: named per-position float arrays recorded into the trace (e.g. persistence).
        edit: committed positions of the window whose token becomes their candidate (block
            refinement), or None; the engine clips it to committed, in-window, changed tokens
            and records every edit.
        keep_window: True: another pass on this window even if it is full (a post-step);
            False: leave it after this pass even if masks remain (the rule's schedule is
            spent); None: the engine's default (leave once full).
        allow_empty: the step may commit nothing (post-steps, a zero quota); otherwise the
            engine commits the most confident open position to guarantee progress.
    """

    commit: np.ndarray
    reason: np.ndarray
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)
    edit: np.ndarray | None = None
    keep_window: bool | None = None
    allow_empty: bool = False

    @classmethod
    def of(
        cls, commit: np.ndarray, reason: str, extras: Mapping[str, np.ndarray] | None = None
    ) -> Decision:
        """A decision whose committed positions all share one reason."""
        codes = np.where(commit, reason_code(reason), NO_REASON).astype(np.int8)
        return cls(commit=commit.astype(bool), reason=codes, extras=dict(extras or {}))


def forced_or(reason: str, commit: np.ndarray, forced: np.ndarray) -> np.ndarray:
    """Reason codes: `reason` on `commit`, forced_top1 on `forced`, NO_REASON elsewhere."""
    codes = np.full(commit.shape[0], NO_REASON, dtype=np.int8)
    codes[commit] = reason_code(reason)
    codes[forced] = reason_code("forced_top1")
    return codes


@dataclass(frozen=True)
class BlockSampling:
    """A rule's request to draw its own candidates (`CommitRule.sampler`): LLaDA2.x's multinomial
    sampling over the rows of the window's whole block, with these filters (the engine runs it,
    sampling.multinomial_stats; None keeps every token).

    Attributes:
        top_k: sample among the k most likely tokens (None or 0: all).
        top_p: nucleus mass to sample from (None: all).
    """

    top_k: int | None = None
    top_p: float | None = None


@runtime_checkable
class CommitRule(Protocol):
    """Chooses which open positions to commit at each step.

    Rules subclass this explicitly, so they inherit the optional hooks' defaults.
    """

    name: ClassVar[str]

    def validate_blocks(self, gen_length: int, block_length: int | None) -> None:
        """Raise ValueError when the rule cannot run over these windows (None = variable windows).

        Default: any windows work. LLaDA-schedule rules need the steps to split over equal blocks.
        """

    def validate_model(self, info: AdapterInfo) -> None:
        """Raise ValueError when the rule cannot run on this model (checked before any pass).

        Default: any model. Learned rules refuse a controller trained for another model.
        """

    def init_state(self, gen_length: int) -> Any:
        """State before the first step of a decode (None for stateless rules)."""
        ...

    def step(self, view: StepView, state: Any) -> tuple[Decision, Any]:
        """Decide this step's commits and return the next state."""
        ...

    def pass_bound(self, canvas_length: int, block_length: int | None) -> int | None:
        """Most forward passes the rule can take over `canvas_length` positions, when that can exceed
        one per position (DecodeConfig's default step cap); None = one per position suffices."""
        return None

    def sampler(self) -> BlockSampling | None:
        """How candidates are drawn for this rule: None = the engine's Gumbel-max with the
        DecodeConfig temperature; a `BlockSampling` = LLaDA2's multinomial sampling over the
        window's block only, at that temperature with the rule's top-k / top-p."""
        return None


@runtime_checkable
class BlockSizer(Protocol):
    """Chooses where each window (semi-autoregressive block) ends.

    Sizers subclass this explicitly, so they inherit the optional hooks' defaults.

    Attributes:
        block_length: the window length when every window has the same one, else None.
        delimiters: delimiter strings the sizer looks for (the engine flags their candidates),
            or None when it uses none.
    """

    name: ClassVar[str]
    block_length: int | None = None
    delimiters: tuple[str, ...] | None = None
    # Whether window_end reads the window's first pass (AdaBlock). Sizers that do not are asked
    # before the pass, so a prefix-only model (block diffusion) knows how far to run.
    reads_pass: ClassVar[bool] = False

    def canvas_padding(self, prompt_length: int, gen_length: int) -> int:
        """Positions the canvas needs past gen_length to hold whole windows (default none)."""
        return 0

    def block_start(self, prompt_length: int, start: int) -> int:
        """Row (prompt included) where the block of the window opening at `start` begins: the
        rows a block-wise sampler draws over. Default: the window's own first row."""
        return prompt_length + start

    def resolve(self, family: str, delimiters: tuple[str, ...]) -> BlockSizer:
        """This sizer with model-family defaults filled where left unset (default: unchanged)."""
        return self

    def observe(self, view: StepView) -> Mapping[str, np.ndarray]:
        """Named per-position extras to record at every step (default: none)."""
        return {}

    def validate(self, gen_length: int) -> None:
        """Raise ValueError when this sizer cannot tile `gen_length`."""
        ...

    def window_end(self, view: StepView, start: int) -> tuple[int, Mapping[str, np.ndarray]]:
        """End (exclusive) of the window opening at `start`, from the window's first pass.

        Returns the end and named per-position extras to record at this step.
        """
        ...


@runtime_checkable
class Extrapolator(Protocol):
    """Adds look-ahead commits on top of any commit rule's decision (Confidence Extrapolation)."""

    name: ClassVar[str]

    def init_state(self, gen_length: int) -> Any:
        """State before the first step."""
        ...

    def step(self, view: StepView, decision: Decision, state: Any) -> tuple[Decision, Any]:
        """Return the base decision plus early commits, and the next state."""
        ...


@dataclass(frozen=True)
class StopDecision:
    """An end-of-text stop's verdict after a step.

    Attributes:
        cut: positions at or after `cut` are padding: filled with EOS and never decoded.
        halt: stop decoding now, even if masks remain before the cut.
    """

    cut: int | None = None
    halt: bool = False


@runtime_checkable
class StopRule(Protocol):
    """Decides, after each step's commits, whether the answer has ended."""

    name: ClassVar[str]

    def check(self, view: StepView, tokens: np.ndarray, committed: np.ndarray) -> StopDecision:
        """`tokens` is the canvas after this step; `committed` the positions committed in it."""
        ...


def top_k_mask(scores: np.ndarray, allowed: np.ndarray, k: int) -> np.ndarray:
    """Boolean mask of the k highest `scores` among `allowed` positions.

    Ties go to the lower position (stable sort), so the choice is deterministic.
    """
    k = int(min(max(k, 0), int(allowed.sum())))
    mask = np.zeros(scores.shape[0], dtype=bool)
    if k == 0:
        return mask
    ranked = np.where(allowed, scores, -np.inf)
    order = np.argsort(-ranked, kind="stable")
    mask[order[:k]] = True
    return mask


def is_any_of(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """`np.isin(values, ids)` for the few ids of a stop or delimiter set, about 7x faster.

    Why: the engine asks this twice a pass over the whole canvas; `np.isin`'s general path
    (sorting, about 45 us at 256 positions) was a sixth of the engine's own time per pass.
    """
    out = np.zeros(values.shape, dtype=bool)
    for token_id in np.asarray(ids).ravel().tolist():
        out |= values == token_id
    return out


Component = TypeVar("Component")


def build_component(cls: type[Component], options: Mapping[str, Any]) -> Component:
    """Instantiate `cls` from the subset of `options` naming its fields (None = default)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    kwargs = {k: v for k, v in options.items() if k in names and v is not None}
    return cls(**kwargs)


def component_to_dict(component: Any) -> dict[str, Any]:
    """JSON-ready description of a policy component: its registry name and fields."""
    data = asdict(component)
    data = {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}
    return {"name": type(component).name, **data}
