"""Train the learned controllers (TSPD's LSTM gate, Learn2PD's filter) by oracle imitation.

Trajectories come from dense decoding (LLaDA fixed steps, one token per step) of a prompt set;
the label of a masked position at a step is 1 iff its current candidate equals the token the
dense run finally wrote there (the "extremely greedy parallel" oracle of Learn2PD, TSPD's
oracle). Features are computed by the same functions the policies use at decode time
(policies/controller_features.py). Loss: binary cross-entropy on masked in-window positions,
with positives re-weighted to balance the classes for TSPD (decision at 0.5) and unweighted
for Learn2PD (decision at 0.96, which needs calibrated probabilities).

The seed's straight-through gate ("forward uses the hard decision, which changes the simulated
trajectory; backward uses dsigma/dlogit") is realised with on-policy rounds (`rollouts`, DAgger):
after fitting on the dense trajectories, every prompt is decoded again with the controller in
the loop, so its own hard decisions choose what is committed and which tokens become context;
those trajectories are labelled against the *dense* endpoint and added to the data, and the
controller is refitted. The gradient is BCE's on the logit, i.e. the estimator's backward.
With `rollouts=0` training is teacher-forced on the dense trajectories only.

Only the decodes use the model: `train_controller` runs each one inside a `model_turn` (the app's
shared model lock), so the fitting, minutes on a big prompt set, leaves the model to other
sessions. A save told not to overwrite (the app's Train) claims its file for the whole run, so a
second training to the same file in this process is refused at once rather than after its work,
and its final save refuses an existing file atomically (writable.place_file).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models.base import ModelAdapter
from dllm_viz.policies.blocks import FixedBlocks
from dllm_viz.policies.controller_features import (
    FILTER_WIDTH,
    TSPD_FEATURES,
    filter_input,
    initial_feature_state,
    tspd_features,
)
from dllm_viz.policies.fixed_steps import FixedStepsPolicy
from dllm_viz.policies.pipeline import Pipeline
from dllm_viz.trace import Trace
from dllm_viz.train.trajectory_store import TrajectoryStore
from dllm_viz.writable import check_writable, partial_path, place_file, write_synced

# Where the model is used, the caller's turn on it: the app's model lock (app_ui.common.model_turn),
# which also sets the session's thread count; by default no lock (the CLI owns its model).
ModelTurn = Callable[[], AbstractContextManager[object]]


@dataclass(frozen=True)
class ControllerConfig:
    """Settings of one controller training run."""

    kind: Literal["tspd", "learn2pd"] = "tspd"
    gen_length: int = 128
    block_length: int = 32
    epochs: int = 5
    lr: float = 1e-3
    hidden: int = 64
    layers: int = 2
    beta: float = 0.7
    val_fraction: float = 0.2
    batch_size: int = 256
    seed: int = 0
    rollouts: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("tspd", "learn2pd"):
            raise ValueError(f"`kind` must be 'tspd' or 'learn2pd', got {self.kind!r}")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"`val_fraction` must be in (0, 1), got {self.val_fraction!r}")
        if self.epochs < 1:
            raise ValueError(f"`epochs` must be >= 1, got {self.epochs!r}")
        if self.rollouts < 0:
            raise ValueError(f"`rollouts` must be >= 0, got {self.rollouts!r}")


def collect_trajectories(adapter: ModelAdapter, prompts: Sequence[str], config: ControllerConfig,
                         on_progress: Callable[[int, int], None] | None = None,
                         store: TrajectoryStore | None = None, *, model_turn: ModelTurn = nullcontext) -> list[Trace]:
    """Dense-decode every prompt (one token per step) and keep the traces.

    With a `store`, traces already in it are reused and each new one is saved as it finishes.
    Each decode runs inside its own `model_turn()`, so other users of the model take turns in between.
    """
    pipeline = Pipeline(FixedStepsPolicy(), FixedBlocks(config.block_length))
    return _decode_all(adapter, prompts, pipeline, config.gen_length, on_progress, store, model_turn)


def rollout_trajectories(adapter: ModelAdapter, prompts: Sequence[str], config: ControllerConfig, weights: Path,
                         on_progress: Callable[[int, int], None] | None = None, *,
                         model_turn: ModelTurn = nullcontext) -> list[Trace]:
    """Decode every prompt with the controller at `weights` in the loop (its hard gate commits),
    each decode inside its own `model_turn()`."""
    option = {"tspd": "controller_weights", "learn2pd": "filter_weights"}[config.kind]
    pipeline = Pipeline.from_names(config.kind, block_length=config.block_length, **{option: str(weights)})
    return _decode_all(adapter, prompts, pipeline, config.gen_length, on_progress, model_turn=model_turn)


def _decode_all(adapter: ModelAdapter, prompts: Sequence[str], pipeline: Pipeline, gen_length: int,
                on_progress: Callable[[int, int], None] | None, store: TrajectoryStore | None = None,
                model_turn: ModelTurn = nullcontext) -> list[Trace]:
    """Decode `prompts` one by one, one model turn each: a turn per prompt, not per prompt set, so
    another session's Decode waits for one decode, not for the whole collection. The store's disk
    writes and `on_progress` (where the app's Stop lands) run between turns."""
    traces = []
    for index, prompt in enumerate(prompts):
        trace = store.get(index) if store is not None else None
        if trace is None:
            with model_turn():
                trace = decode(adapter, adapter.encode_prompt(prompt), pipeline, DecodeConfig(gen_length=gen_length))
            if store is not None:
                store.put(index, trace)
        traces.append(trace)
        if on_progress is not None:
            on_progress(index + 1, len(prompts))
    return traces


def _labels(trace: Trace, target: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """[S, L] oracle labels (candidate == target, default the trace's own final tokens) and the
    mask of masked in-window cells."""
    masked = trace.tokens[:-1] == trace.tokens[0]
    in_window = np.zeros_like(masked)
    for step, (start, end) in enumerate(trace.window):
        in_window[step, start:end] = True
    final = trace.final_tokens if target is None else target
    return (trace.candidate == final[None, :]).astype(np.float32), masked & in_window


def tspd_sequences(traces: Sequence[Trace], vocab_size: int, beta: float,
                   targets: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (trace, window, position) sequences over that window's steps: features [N, S, F],
    labels [N, S], mask [N, S].

    A position's sequence starts when its window opens (the controller runs "per masked position
    within the current block", docs/ALGORITHMS.md §6.2, with a fresh LSTM state), exactly as TspdPolicy
    runs it at decode time. `targets` (one per trace) are the oracle endpoints; by default each
    trace's own final tokens.
    """
    xs, ys, ms = [], [], []
    for index, trace in enumerate(traces):
        state = initial_feature_state(trace.gen_length)
        steps = []  # [window positions, F] per step
        for step in range(trace.num_steps):
            start, end = trace.window[step]
            in_window = int(step - np.flatnonzero(trace.block_index == trace.block_index[step])[0])
            feats, state = tspd_features(trace.confidence[step].astype(np.float64), trace.entropy[step],
                                         trace.candidate[step], (int(start), int(end)), in_window, vocab_size,
                                         state, beta)
            steps.append(feats)
        labels, mask = _labels(trace, None if targets is None else targets[index])
        for block in np.unique(trace.block_index):
            block_steps = np.flatnonzero(trace.block_index == block)
            start, end = (int(v) for v in trace.window[block_steps[0]])
            xs.append(np.stack([steps[step] for step in block_steps], axis=1))  # [window, S, F]
            ys.append(labels[block_steps, start:end].T)
            ms.append(mask[block_steps, start:end].T)
    return _concat_sequences(xs, ys, ms)


def _concat_sequences(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], ms: Sequence[np.ndarray]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate example arrays along axis 0 after padding axis 1 (TSPD's steps) to a common
    width; Learn2PD's fixed-width window arrays need no padding and pass through unchanged."""
    width = max(x.shape[1] for x in xs)
    return tuple(np.concatenate([_pad_steps(a, width) for a in arrays]) for arrays in (xs, ys, ms))  # type: ignore[return-value]


def _pad_steps(array: np.ndarray, width: int) -> np.ndarray:
    """Zero-pad axis 1 (steps) to `width`; padded steps carry mask 0, so they never count."""
    return np.pad(array, [(0, 0), (0, width - array.shape[1])] + [(0, 0)] * (array.ndim - 2))


def filter_examples(traces: Sequence[Trace], targets: Sequence[np.ndarray] | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step: window confidences [N, 32], labels [N, 32], mask of masked slots [N, 32]."""
    xs, ys, ms = [], [], []
    for index, trace in enumerate(traces):
        labels, mask = _labels(trace, None if targets is None else targets[index])
        for step in range(trace.num_steps):
            window = (int(trace.window[step, 0]), int(trace.window[step, 1]))
            xs.append(filter_input(trace.confidence[step].astype(np.float64), window))
            ys.append(filter_input(labels[step].astype(np.float64), window))
            ms.append(filter_input(mask[step].astype(np.float64), window) > 0)
    return np.stack(xs), np.stack(ys), np.stack(ms)


class TspdNet(nn.Module):
    """Stacked LSTM over steps, one sequence per position, and a linear fix head."""

    def __init__(self, hidden: int, layers: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(TSPD_FEATURES, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0])[..., 0]


class FilterNet(nn.Module):
    """Learn2PD's 32 -> 32 -> 32 MLP (2,112 parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(FILTER_WIDTH, FILTER_WIDTH)
        self.fc2 = nn.Linear(FILTER_WIDTH, FILTER_WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _metrics(logits: torch.Tensor, y: torch.Tensor, m: torch.Tensor, threshold: float) -> dict[str, float]:
    pred = (torch.sigmoid(logits) > threshold) & m
    truth = (y > 0.5) & m
    tp = float((pred & truth).sum())
    precision = tp / max(float(pred.sum()), 1.0)
    recall = tp / max(float(truth.sum()), 1.0)
    return {"precision": precision, "recall": recall, "positives": float(truth.sum()), "cells": float(m.sum())}


def validation_split(rng: np.random.Generator, examples: int, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """The validation and training example indices train() uses: `fraction` of a permutation drawn
    from `rng` (at least one example) held out, the rest trained on."""
    order = rng.permutation(examples)
    n_val = max(1, int(fraction * examples))
    return order[:n_val], order[n_val:]


def train(x: np.ndarray, y: np.ndarray, m: np.ndarray, config: ControllerConfig, *, gate_threshold: float,
          on_epoch: Callable[[int, float, dict[str, float]], None] | None = None
          ) -> tuple[nn.Module, list[float], dict[str, float]]:
    """Fit the controller; returns the model of the epoch with the lowest validation loss, the
    per-epoch training losses and that epoch's validation metrics (with its `epoch`, from 1, and
    `loss`).

    Why the best epoch and not the last: the TSPD gate's validation recall swings between epochs
    (session 44's retrain for the bundled model: 0.46-0.89 over one round's last four epochs at a
    precision of 0.99-1.00), so keeping the last epoch shipped whichever swing it ended on (recall
    0.57 there). The validation loss is the objective itself on held-out sequences, so it picks by
    neither precision nor recall alone.
    """
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    val, tr = validation_split(rng, x.shape[0], config.val_fraction)  # rng goes on to shuffle each epoch
    tensors = [torch.from_numpy(a) for a in (x, y, m.astype(np.bool_))]
    model: nn.Module = TspdNet(config.hidden, config.layers) if config.kind == "tspd" else FilterNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    pos = float(tensors[1][tr][tensors[2][tr]].sum())
    neg = float(tensors[2][tr].sum()) - pos
    # TSPD decides at 0.5, so positives are re-weighted to balance the classes. Learn2PD accepts
    # at 0.96: that needs calibrated probabilities, which re-weighting would bias downwards
    # (measured: with balancing no validation cell ever cleared 0.96).
    weight = max(neg, 1.0) / max(pos, 1.0) if config.kind == "tspd" else 1.0
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(weight), reduction="none")
    losses = []
    batch = config.batch_size
    vi = torch.from_numpy(val)
    best: tuple[dict[str, torch.Tensor], dict[str, float]] | None = None  # the kept epoch's weights and metrics
    for epoch in range(config.epochs):
        perm = tr[rng.permutation(tr.shape[0])]
        total, count = 0.0, 0
        for i in range(0, perm.shape[0], batch):
            idx = torch.from_numpy(perm[i : i + batch])
            xb, yb, mb = (t[idx] for t in tensors)
            loss = (loss_fn(model(xb), yb) * mb).sum() / mb.sum().clamp(min=1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, count = total + loss.item() * len(idx), count + len(idx)
        losses.append(total / max(count, 1))
        with torch.no_grad():
            logits, yv, mv = model(tensors[0][vi]), tensors[1][vi], tensors[2][vi]
            val_loss = float((loss_fn(logits, yv) * mv).sum() / mv.sum().clamp(min=1))
            metrics = {**_metrics(logits, yv, mv, gate_threshold), "epoch": float(epoch + 1), "loss": val_loss}
        if best is None or val_loss < best[1]["loss"]:
            best = ({k: v.detach().clone() for k, v in model.state_dict().items()}, metrics)
        if on_epoch is not None:
            on_epoch(epoch, losses[-1], metrics)
    assert best is not None  # epochs >= 1 (ControllerConfig)
    model.load_state_dict(best[0])
    return model, losses, best[1]


@dataclass(frozen=True, slots=True)
class TrainProgress:
    """One progress event of train_controller, typed so a UI reads fields instead of parsing text.

    stage: "trajectory" (done/total decodes collected), "epoch" (done/total epochs of a fit;
    `fit_round` 0 is the fit on dense trajectories, k the fit after on-policy round k, with
    training loss, validation loss and validation precision/recall; each fit keeps its epoch of
    lowest validation loss) or "rollout" (round done/total, with mean NFE).
    """

    stage: Literal["trajectory", "epoch", "rollout"]
    done: int
    total: int
    fit_round: int = 0
    loss: float | None = None
    precision: float | None = None
    recall: float | None = None
    val_loss: float | None = None
    mean_nfe: float | None = None
    dense_nfe: float | None = None

    def message(self) -> str:
        """The line the CLI prints for this event."""
        if self.stage == "trajectory":
            return f"trajectory {self.done}/{self.total}"
        if self.stage == "rollout":
            return f"rollout {self.done}/{self.total}: mean NFE {self.mean_nfe:.1f} (dense {self.dense_nfe:.1f})"
        label = f"round {self.fit_round} " if self.fit_round else ""
        held_out = "" if self.val_loss is None else f" val loss {self.val_loss:.4f}"
        return (f"{label}epoch {self.done}/{self.total} loss {self.loss:.4f}{held_out} val precision "
                f"{self.precision:.3f} recall {self.recall:.3f}")


# |precision - share of positives| below this, with recall 1, means the gate accepts every cell.
TRIVIAL_TOLERANCE = 0.005


def trivial_controller(metrics: dict[str, float]) -> str | None:
    """Why validation `metrics` (from train) show a controller that learned a constant, or None.

    A gate that always commits has recall 1.0 and precision equal to the share of positive cells
    (it accepts every cell); one that never commits has recall 0. Either makes the learned rule
    equal to "commit everything" (wrong tokens in parallel) or to the at-least-one fallback
    (dense speed), whatever its loss says. The sentence says what to change.
    """
    cells, positives = metrics.get("cells", 0.0), metrics.get("positives", 0.0)
    if cells <= 0 or positives <= 0:
        return None
    share, precision, recall = positives / cells, metrics.get("precision", 0.0), metrics.get("recall", 0.0)
    if recall >= 1.0 and abs(precision - share) < TRIVIAL_TOLERANCE:
        return (f"the controller always commits (validation precision {precision:.3f} equals the share "
                f"of positive cells, {share:.3f}, at recall 1.0): it learned no more than the class balance. "
                "Train on more prompts (hundreds, not a handful) and for more epochs; with few examples, "
                "lower the learning rate or the hidden size.")
    if recall <= 0.0:
        return ("the controller never commits (validation recall 0): decoding falls back to one token per step. "
                "Train on more prompts and for more epochs, or raise the learning rate.")
    return None


class ControllerExistsError(ValueError):
    """A save or training told not to overwrite found its weights file taken; nothing was written.

    `training` is True when the file does not exist yet but another training of this process is
    working towards it (see `claim_weights`), False when the file is there already. The app turns
    either into a sentence about the controller's name.
    """

    def __init__(self, path: Path, *, training: bool = False) -> None:
        self.path, self.training = Path(path), training
        if training:
            message = (f"another training is already writing controller weights {str(path)!r}; choose another "
                       "name (or wait for it to finish)")
        else:
            message = (f"controller weights {str(path)!r} already exist; choose another name (a training replaces "
                       "weights only when told to overwrite them)")
        super().__init__(message)


def save_controller(model: nn.Module, path: Path, card: dict[str, object], *, overwrite: bool = True) -> Path:
    """Write `path` (.safetensors) and its JSON card beside it: both, or neither.

    Both are written to hidden partial files in the folder first, so a full disk (or any failure)
    leaves nothing half-written under the real names. The weights then move into place and the
    card after them: listings and loads need both, so the instant between the two moves shows no
    controller rather than a wrong one; if the card's move fails, the weights are taken back.
    Without `overwrite`, the weights' move refuses an existing file atomically (a hard link,
    writable.place_file): of two sessions saving one name at once, one saves and the other gets
    ControllerExistsError, and that one's card is never placed.

    Raises:
        ControllerExistsError: `path` exists and `overwrite` is False.
        ValueError: the folder or the files cannot be written (the message names the path and the fix).
    """
    from safetensors.torch import save as safetensors_bytes

    path = Path(path).with_suffix(".safetensors")
    card_path = path.with_suffix(".json")
    tmp_weights, tmp_card = partial_path(path), partial_path(card_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        write_synced(tmp_weights, safetensors_bytes(tensors))
        write_synced(tmp_card, json.dumps(card, indent=2).encode())
        try:
            place_file(tmp_weights, path, overwrite=overwrite)
        except FileExistsError:
            raise ControllerExistsError(path) from None
        try:
            os.replace(tmp_card, card_path)
        except OSError:
            path.unlink(missing_ok=True)  # weights without their card are no controller: neither, then
            raise
    except OSError as exc:
        raise ValueError(f"cannot write controller weights {str(path)!r} ({exc.strerror or exc}); free space or "
                         "choose another path") from None
    finally:
        tmp_weights.unlink(missing_ok=True)
        tmp_card.unlink(missing_ok=True)
    return path


_claimed: set[str] = set()  # weights paths a training of this process is working towards (overwrite=False)
_claimed_lock = threading.Lock()


@contextmanager
def claim_weights(path: Path) -> Iterator[None]:
    """Reserve `path` for one training of this process until the block ends, however it ends.

    App sessions are threads of one process: without this, two sessions training one name would
    both run for minutes and the second learn at its save that the name was taken. The claim lives
    in memory, so a crash or a Stop leaves nothing on disk that blocks the name; a writer in another
    process is still refused by the final save's atomic no-overwrite move.

    Raises:
        ControllerExistsError: `path` exists already, or another training holds its claim.
    """
    key = os.path.abspath(path)
    with _claimed_lock:
        if key in _claimed:
            raise ControllerExistsError(path, training=True)
        if Path(path).exists():
            raise ControllerExistsError(path)
        _claimed.add(key)
    try:
        yield
    finally:
        with _claimed_lock:
            _claimed.discard(key)


def _examples(traces: Sequence[Trace], targets: Sequence[np.ndarray], vocab_size: int, config: ControllerConfig
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if config.kind == "tspd":
        return tspd_sequences(traces, vocab_size, config.beta, targets)
    return filter_examples(traces, targets)


def train_controller(adapter: ModelAdapter, prompts: Sequence[str], config: ControllerConfig, out: Path, *,
                     on_progress: Callable[[TrainProgress], None] | None = None,
                     store: TrajectoryStore | None = None, model_turn: ModelTurn = nullcontext,
                     overwrite: bool = True, tasks: str | None = None) -> tuple[Path, dict[str, object]]:
    """Collect trajectories (kept in `store` as they finish, when given), train (plus
    `config.rollouts` on-policy rounds), save. `tasks` names the tasks whose training problems
    `prompts` are, for the card (None: a prompt set of the caller's), so the recipe can be rerun.

    Each decode runs inside `model_turn()` (the app passes its model lock); the fits, the
    features and the save run outside it, as does `on_progress`. The fits run in the calling
    thread, at its torch thread count. With `overwrite` False the weights file is claimed for the
    run (claim_weights), checked again at every model turn (a file that appeared meanwhile stops
    the run then, not after the fit), and the final save refuses an existing file atomically.
    Whatever ends the run early (an error, a Stop raised in `on_progress` or in a turn), the
    claim is released and no file of the controller is left behind.

    Returns the weights path and the card; the card's "trivial" is trivial_controller's
    sentence when the final controller always or never commits (else None).

    Raises:
        ControllerExistsError: `overwrite` is False and the weights file exists, appears during
            the run, or is being trained by another run of this process.
    """
    out = Path(out).with_suffix(".safetensors")
    check_writable(out, "controller weights")  # before, not after, the work
    if overwrite:
        return _train_controller(adapter, prompts, config, out, on_progress, store, model_turn, overwrite, tasks)

    @contextmanager
    def checked_turn() -> Iterator[None]:
        with model_turn():
            if out.exists():  # saved meanwhile (a session that waited for the model, another process)
                raise ControllerExistsError(out)
            yield

    with claim_weights(out):
        return _train_controller(adapter, prompts, config, out, on_progress, store, checked_turn, overwrite, tasks)


def _train_controller(adapter: ModelAdapter, prompts: Sequence[str], config: ControllerConfig, out: Path,
                      on_progress: Callable[[TrainProgress], None] | None, store: TrajectoryStore | None,
                      model_turn: ModelTurn, overwrite: bool, tasks: str | None
                      ) -> tuple[Path, dict[str, object]]:
    say = on_progress or (lambda progress: None)
    started = time.perf_counter()
    traces = collect_trajectories(adapter, prompts, config,
                                  lambda i, n: say(TrainProgress("trajectory", i, n)) if i % 10 == 0 or i == n
                                  else None, store, model_turn=model_turn)
    targets = [trace.final_tokens for trace in traces]
    vocab_size = adapter.info.vocab_size
    threshold = 0.5 if config.kind == "tspd" else 0.96
    x, y, m = _examples(traces, targets, vocab_size, config)

    def fit(fit_round: int, x: np.ndarray, y: np.ndarray, m: np.ndarray
            ) -> tuple[nn.Module, list[float], dict[str, float]]:
        return train(x, y, m, config, gate_threshold=threshold,
                     on_epoch=lambda e, loss, met: say(TrainProgress(
                         "epoch", e + 1, config.epochs, fit_round, loss=loss, precision=met["precision"],
                         recall=met["recall"], val_loss=met["loss"])))

    model, losses, metrics = fit(0, x, y, m)
    card: dict[str, object] = {
        "kind": config.kind, "layers": config.layers, "hidden": config.hidden, "vocab_size": vocab_size,
        "features": TSPD_FEATURES if config.kind == "tspd" else FILTER_WIDTH,
        "model": adapter.info.name_or_path, "prompts": len(prompts), "tasks": tasks, "config": asdict(config),
        "gate_threshold": threshold,
    }
    rounds: list[dict[str, object]] = []
    dense_nfe = float(np.mean([t.nfe for t in traces]))
    for round_index in range(1, config.rollouts + 1):
        with tempfile.TemporaryDirectory() as tmp:
            weights = save_controller(model, Path(tmp) / f"round{round_index}.safetensors", card)
            rollout = rollout_trajectories(adapter, prompts, config, weights, model_turn=model_turn)
        mean_nfe = float(np.mean([t.nfe for t in rollout]))
        rounds.append({"round": round_index, "mean_nfe": mean_nfe, "dense_nfe": dense_nfe})
        say(TrainProgress("rollout", round_index, config.rollouts, round_index, mean_nfe=mean_nfe,
                          dense_nfe=dense_nfe))
        more_x, more_y, more_m = _examples(rollout, targets, vocab_size, config)
        x, y, m = _concat_sequences([x, more_x], [y, more_y], [m, more_m])
        model, losses, metrics = fit(round_index, x, y, m)
    card.update({"examples": int(x.shape[0]), "train_loss": losses, "validation": metrics, "rollouts": rounds,
                 "trivial": trivial_controller(metrics),
                 "train_seconds": round(time.perf_counter() - started, 1)})
    return save_controller(model, out, card, overwrite=overwrite), card
