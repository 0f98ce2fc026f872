"""Typed, frozen configuration of a tiny-model training run: data mix, model shape, optimisation.

Checkpoints store `dataclasses.asdict(TrainConfig)`; `config_from_dict` is its strict inverse.
Deliberately free of torch/transformers imports so the CLI's `--help` stays instant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from dllm_viz.tasks.arith import DEFAULT_MAX_MULTIPLIER, DEFAULT_MAX_OPERAND, DEFAULT_MAX_RESULT
from dllm_viz.tasks.hard_split import HARD_FAMILIES, Families, parallelbench_only, reweighted

LossWeighting = Literal["none", "inv_t", "inv_t_clipped"]
LOSS_WEIGHTINGS: tuple[str, ...] = get_args(LossWeighting)
Precision = Literal["fp32", "bf16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)


@dataclass(frozen=True, slots=True)
class DataConfig:
    """What a training batch is made of.

    Attributes:
        batch_size: rows per step.
        code_fraction: share of code problems (the rest is arithmetic); 0.3 until session 3,
            when code was at 99% token accuracy and arithmetic needed the rows.
        hard_fraction: share of rows drawn from the hard split's families (tasks/hard_split.py
            `HARD_FAMILIES`, by their weights); 0 before session 10.
        canvas_lengths / canvas_weights: minimum generation canvas per batch, biased short
            because long canvases are mostly EOS and cost quadratic attention.
        curriculum: (start_step, max_ops) stages for arithmetic; min_ops is always 1.
        max_operand: largest starting / added / subtracted number in arithmetic.
        max_result: no intermediate arithmetic result exceeds this.
        max_multiplier: largest factor / divisor in arithmetic.
        focus_fraction: share of rows given focus masking (train/data.py `focus_pattern`: a
            decoded prefix, then every computed number masked); rows with worked lines or a
            list answer have computed tokens, code rows none. 0 is plain LLaDA SFT masking, which
            runs before session 3 used.
        focus_last_fraction: share of the focus rows whose cut is the answer's last worked unit
            instead of a uniform draw: that unit's results and the answer line are masked together,
            the state a one-line window (AdaBlock's on the long chains) reaches at a chain's end.
            Why (session 49, `diagnose --lines-n`): the step-109000 model copied the last line's
            operation right 57% of the time so, 75% with the answer line visible, and 88-93% on
            earlier lines; a uniform cut puts a long chain's rows there about 1 time in 13.
        focus_last_families: the task families whose focus rows take `focus_last_fraction`; ()
            means every family. Why (session 50): at 0.3 for all rows the long chains' last line
            rose 57% -> 75% but the story chains lost 4-6 points dense, so a run can aim the cut
            at `hard/long` alone and leave the other families' uniform cuts as they were (session
            51: aimed so, AdaBlock's gain stayed and so did the chains' loss, which came with the
            stage's `--lr 4e-4`, not the cut).
        focus_window_fraction: share of the focus rows of `focus_last_families` (every family when
            ()) whose positions after the cut unit are all masked (every later line or item, the
            answer line, the EOS tail), as a semi-autoregressive window ending at that unit's
            newline (AdaBlock's one-line windows) leaves them. Why (session
            55): the i.i.d. masking of the other focus rows shows some of what follows (later
            operators, the `####`, where the EOS tail begins, so the answer's length), which a
            one-line window never sees; after sessions 50-54's last-line cut AdaBlock on the long
            chains still trailed dense by 13 points, half of its wrong answers first wrong at the
            last worked line. One stage at 0.5 on `hard/long` took it there 82% -> 95%, level with
            dense (BENCHMARKS.md, session 55).
        drill_every / drill_batch_size: every `drill_every`-th step (0 = never) is a batch of
            `drill_batch_size` bare-expression drills (`ArithTask.drills`) on a short canvas
            instead of word problems: about the same tokens, several times the computed results
            (session 3 trained with 1 step in 2).
        drill_max_ops: operations per drill, drawn from 1..drill_max_ops; above 1 the later
            lines compute from a carried result, as lines 2+ of a word problem do (session 3's
            one-operation drills, 1, taught only computing from numbers in the prompt).
        list_drill_every / list_drill_batch_size: every `list_drill_every`-th step (0 = never)
            that is not an arithmetic drill step is a batch of `list_drill_batch_size`
            ParallelBench problems (`list_drill_families`) on a short
            canvas. Why (session 13): in the hard mix a batch of 32 holds ~4 list rows over ten
            operations, and after ~1,000 steps the model still read names out of the prompt at
            ~0.3 answer-token accuracy with three quarters of the answer shown: copying from the
            prompt, which every list operation needs, had not formed.
        hard_weights: (family, weight) pairs replacing those families' weights in the training
            rows and list drills (tasks/hard_split.py `reweighted`); () keeps `HARD_FAMILIES`.
            The held-out score always uses `HARD_FAMILIES`, so runs of different mixes compare.
    """

    batch_size: int = 32
    code_fraction: float = 0.15
    hard_fraction: float = 0.0
    canvas_lengths: tuple[int, ...] = (64, 96, 128, 192, 256)
    canvas_weights: tuple[float, ...] = (0.6, 0.2, 0.1, 0.06, 0.04)
    curriculum: tuple[tuple[int, int], ...] = ((0, 2), (1000, 3), (2000, 4))
    max_operand: int = DEFAULT_MAX_OPERAND
    max_result: int = DEFAULT_MAX_RESULT
    max_multiplier: int = DEFAULT_MAX_MULTIPLIER
    focus_fraction: float = 0.5
    focus_last_fraction: float = 0.0
    focus_last_families: tuple[str, ...] = ()
    focus_window_fraction: float = 0.0
    drill_every: int = 2
    drill_batch_size: int = 64
    drill_max_ops: int = 4
    list_drill_every: int = 0
    list_drill_batch_size: int = 32
    hard_weights: Families = ()

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"`batch_size` must be >= 1, got {self.batch_size}")
        if not 0.0 <= self.code_fraction <= 1.0:
            raise ValueError(f"`code_fraction` must be in [0, 1], got {self.code_fraction}")
        if not 0.0 <= self.hard_fraction <= 1.0 - self.code_fraction:
            raise ValueError(
                f"`hard_fraction` must be in [0, 1 - code_fraction = {1.0 - self.code_fraction:g}], "
                f"got {self.hard_fraction}"
            )
        if not 0.0 <= self.focus_fraction <= 1.0:
            raise ValueError(f"`focus_fraction` must be in [0, 1], got {self.focus_fraction}")
        for name in ("focus_last_fraction", "focus_window_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"`{name}` must be in [0, 1] (a share of the focus rows), got {getattr(self, name)}")
        known = ("arith", *(name for name, _ in HARD_FAMILIES))
        unknown = [name for name in self.focus_last_families if name not in known]
        if unknown:
            raise ValueError(
                f"`focus_last_families` names {', '.join(map(repr, unknown))}, not a family with worked lines or "
                f"list answers; pick from {', '.join(known)}"
            )
        if self.drill_every < 0 or self.drill_batch_size < 1 or self.drill_max_ops < 1:
            raise ValueError(
                f"need `drill_every` >= 0, `drill_batch_size` >= 1 and `drill_max_ops` >= 1, got "
                f"{self.drill_every}, {self.drill_batch_size} and {self.drill_max_ops}"
            )
        if self.list_drill_every < 0 or self.list_drill_batch_size < 1:
            raise ValueError(
                f"need `list_drill_every` >= 0 (0 = never) and `list_drill_batch_size` >= 1, got "
                f"{self.list_drill_every} and {self.list_drill_batch_size}"
            )
        families = self.hard_families()  # raises on an unknown family or a bad weight
        if self.list_drill_every and not any(weight for _, weight in parallelbench_only(families)):
            raise ValueError(
                f"list drills (`list_drill_every` = {self.list_drill_every}) need a ParallelBench family "
                f"of positive weight, but `hard_weights` {self.hard_weights} sets them all to 0"
            )
        if len(self.canvas_lengths) != len(self.canvas_weights):
            raise ValueError(
                f"`canvas_lengths` and `canvas_weights` must have equal length, got "
                f"{len(self.canvas_lengths)} and {len(self.canvas_weights)}"
            )
        if not self.curriculum or self.curriculum[0][0] != 0:
            raise ValueError(f"`curriculum` must start at step 0, got {self.curriculum}")

    def focus_last_share(self, task: str) -> float:
        """`focus_last_fraction` for a focus row of family `task` (0 outside `focus_last_families`)."""
        return self.focus_last_fraction if self._aimed_at(task) else 0.0

    def focus_window_share(self, task: str) -> float:
        """`focus_window_fraction` for a focus row of family `task` (0 outside `focus_last_families`)."""
        return self.focus_window_fraction if self._aimed_at(task) else 0.0

    def _aimed_at(self, task: str) -> bool:
        return not self.focus_last_families or task in self.focus_last_families

    def hard_families(self) -> Families:
        """The hard families and weights this run's training rows are drawn by."""
        return reweighted(self.hard_weights)

    def list_drill_families(self) -> Families:
        """The ParallelBench families and weights of this run's list drills."""
        return parallelbench_only(self.hard_families())

    def is_drill_step(self, step: int) -> bool:
        """Whether batch `step` is a drill batch."""
        return self.drill_every > 0 and step % self.drill_every == self.drill_every - 1

    def is_list_drill_step(self, step: int) -> bool:
        """Whether batch `step` is a batch of ParallelBench problems (arithmetic drills take precedence)."""
        return self.list_drill_every > 0 and step % self.list_drill_every == 0 and not self.is_drill_step(step)

    def max_ops_at(self, step: int) -> int:
        """Arithmetic max operations for `step` under the curriculum."""
        return max(ops for start, ops in self.curriculum if start <= step)

    def arith_limits(self) -> dict[str, int]:
        """Number-range keyword arguments of `ArithTask.generate` for this run."""
        return {
            "max_operand": self.max_operand,
            "max_result": self.max_result,
            "max_multiplier": self.max_multiplier,
        }


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Llama shape of the tiny model (vocab comes from the tokenizer)."""

    hidden_size: int = 192
    num_layers: int = 6
    num_heads: int = 6
    intermediate_size: int = 512
    max_positions: int = 512

    def __post_init__(self) -> None:
        # Each size is checked before the division below and before a tokenizer is trained: 0
        # heads divided by zero, a 0 or negative size failed inside torch's layer constructors,
        # and 0 layers or a 0-wide MLP built a model that trained without learning anything.
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size", "max_positions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                flag = "--" + name.replace("_", "-")
                raise ValueError(f"`{name}` must be a whole number >= 1, got {value!r}; pass {flag} 1 or more")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"`hidden_size` must be divisible by `num_heads`, "
                f"got {self.hidden_size} and {self.num_heads}"
            )
        head_dim = self.hidden_size // self.num_heads
        if head_dim % 2:  # rotary position embeddings rotate pairs of a head's dimensions
            raise ValueError(
                f"`hidden_size` / `num_heads` (the head width) must be even for rotary position embeddings, "
                f"got {self.hidden_size} / {self.num_heads} = {head_dim}; pass e.g. --hidden-size "
                f"{(head_dim + 1) * self.num_heads}"
            )


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """Optimisation and bookkeeping settings for one training session.

    Attributes:
        minutes: wall-clock budget of this session (the cosine decay spans it).
        max_steps: optional hard cap on the global step (0 = none).
        lr / min_lr_ratio / warmup_steps: AdamW peak LR, floor as a fraction, linear warmup
            (repeated at the start of every resumed session).
        loss_weighting: "none" (default, measured fastest), "inv_t" (LLaDA) or "inv_t_clipped".
        eval_every: steps between held-out evaluations (each also checkpoints).
        snapshot_every: also export the model at the first evaluation at or past every multiple of
            this many steps, into `<run dir>/snapshots/step_<N>` (0 = never). Why: the held-out
            score picks the export, and session 26 found its best (0.966) worse on dense hard
            decoding than the bundled 0.963 model; snapshots let a stage be chosen by a bench.
        eval_arith / eval_hard / eval_code: held-out problems of each set in that evaluation
            (`hard` is the hard split's mix, scored since score version 3).
        tokenizer_problems: arithmetic problems in the tokenizer corpus (plus a quarter as many
            code problems); only used when the run has no tokenizer yet.
        num_threads / adaptive_threads: torch threads; when adaptive, the loop measures 1 vs
            `num_threads` and uses the faster (see train/threads.py).
        use_compile: torch.compile the model forward. Off by default: on the 2-core dev box a
            compiled step measured slower than eager (4.6 s vs 3.5 s) after a 105 s compile.
        device: "cpu" (default), "cuda", "cuda:N" or "mps". Batches are built on the CPU and
            moved; on an accelerator the thread tuner is off and larger batches pay off.
        data_workers: processes that build batches ahead of the optimizer (train/prefetch.py);
            0 builds them inline, right for 2 CPU cores; on a GPU use most of the host's cores.
        precision: "fp32", or "bf16" to run the training forward and backward under bfloat16
            autocast (weights, optimizer state and the held-out evaluation stay fp32). On the
            2-core Zen 5 dev box (AVX512-BF16) a bf16 step took 1.3 s against 2.5 s in fp32
            (session 13, one thread, the hard recipe's batches).
        name_tokens: give each ParallelBench first name and (space-led) last name a token of its
            own when the run's tokenizer is made or warm-started (`tasks.parallelbench.NAME_WORDS`;
            a warm start's new embedding rows start as the mean of the rows that spelled the
            word). The bundled tokenizer spells a name in ~4 tokens, a two-name line in 21; with
            them, 12. A run keeps the tokenizer it was made with (resuming changes nothing).
        grow_layers: a warm start inserts this many layers among the exported model's, each
            starting as the identity (train/grow.py), so the deeper model begins exactly where the
            export was. Only a warm start grows; resuming a grown run's checkpoint changes nothing.
    """

    minutes: float = 120.0
    max_steps: int = 0
    lr: float = 2e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 200
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    loss_weighting: LossWeighting = "none"
    eval_every: int = 250
    snapshot_every: int = 0
    eval_arith: int = 192
    eval_hard: int = 96
    eval_code: int = 64
    log_every: int = 25
    seed: int = 0
    num_threads: int = 2
    use_compile: bool = False
    adaptive_threads: bool = True
    tokenizer_problems: int = 6000
    device: str = "cpu"
    data_workers: int = 0
    precision: Precision = "fp32"
    name_tokens: bool = False
    grow_layers: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)

    def __post_init__(self) -> None:
        if self.loss_weighting not in LOSS_WEIGHTINGS:
            raise ValueError(
                f"`loss_weighting` must be one of {LOSS_WEIGHTINGS}, got {self.loss_weighting!r}"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(f"`precision` must be one of {PRECISIONS}, got {self.precision!r}")
        # Not finite is refused too: a NaN budget never runs out (`fraction >= 1.0` is always
        # False) and an infinite one never decays the learning rate, so either trained until
        # --max-steps or forever; a NaN or infinite learning rate failed in torch's AdamW only
        # after the run directory and its tokenizer were made.
        if not (math.isfinite(self.minutes) and self.minutes > 0):
            raise ValueError(f"`minutes` must be a finite number > 0, got {self.minutes}; pass e.g. --minutes 30 "
                             "(and --max-steps N to stop at a step)")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"`lr` must be a finite number > 0, got {self.lr}; pass e.g. --lr 2e-3")
        # Cadences are step moduli (0 would divide by zero mid-run) and the step counts are counts:
        # refused here, before a run directory and tokenizer are made.
        for name, low in (("eval_every", 1), ("log_every", 1), ("max_steps", 0), ("warmup_steps", 0),
                          ("num_threads", 1)):
            if getattr(self, name) < low:
                flag = "--" + name.removeprefix("num_").replace("_", "-")
                hint = " (0 = no cap)" if name == "max_steps" else ""
                raise ValueError(f"`{name}` must be >= {low}{hint}, got {getattr(self, name)}; pass {flag} {low} "
                                 "or more")
        if self.snapshot_every < 0:
            raise ValueError(f"`snapshot_every` must be >= 0 (0 takes no snapshots), got {self.snapshot_every}")
        if self.grow_layers < 0:
            raise ValueError(f"`grow_layers` must be >= 0 (0 keeps the exported depth), got {self.grow_layers}")
        if self.data_workers < 0:
            raise ValueError(f"`data_workers` must be >= 0 (0 builds batches inline), got {self.data_workers}")
        if self.device.split(":")[0] not in ("cpu", "cuda", "mps"):
            raise ValueError(f"`device` must be cpu, cuda, cuda:N or mps, got {self.device!r}")


def config_from_dict(raw: dict[str, Any]) -> TrainConfig:
    """Inverse of `dataclasses.asdict(TrainConfig)` (checkpoints store configs as dicts)."""
    raw = dict(raw)
    data = dict(raw.pop("data"))
    # checkpoints from before focus masking and drills existed
    data.setdefault("focus_fraction", 0.0)
    data.setdefault("focus_last_fraction", 0.0)  # before session 50
    data["focus_last_families"] = tuple(data.get("focus_last_families", ()))  # before session 51; JSON lists
    data.setdefault("focus_window_fraction", 0.0)  # before session 55
    data.setdefault("drill_every", 0)
    data.setdefault("drill_max_ops", 1)  # session 3's drills were one operation
    data.setdefault("hard_fraction", 0.0)  # before the hard split (session 10)
    data.setdefault("list_drill_every", 0)  # before list drills (session 13)
    data["curriculum"] = tuple(tuple(stage) for stage in data["curriculum"])
    data["hard_weights"] = tuple((name, weight) for name, weight in data.get("hard_weights", ()))
    for key in ("canvas_lengths", "canvas_weights"):
        data[key] = tuple(data[key])
    model = ModelConfig(**raw.pop("model"))
    return TrainConfig(**raw, data=DataConfig(**data), model=model)
