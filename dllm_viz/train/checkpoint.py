"""Resumable training state: one `checkpoint.pt` with model, optimizer, config, progress, RNG.

The data stream is a pure function of (seed, step), so the step counter is the data position;
no data cursor is stored. Writes go to a temp file that replaces the old checkpoint atomically.
"""

from __future__ import annotations

import pickle
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from dllm_viz.train.config import TrainConfig

CHECKPOINT_NAME = "checkpoint.pt"
# What save_checkpoint writes, and resuming reads.
CHECKPOINT_KEYS = ("model", "optimizer", "config", "state", "torch_rng")


@dataclass
class TrainState:
    """Mutable progress of a run (persisted in the checkpoint).

    Attributes:
        step: global optimizer steps taken.
        minutes: total wall time over all sessions.
        best_score / best_step: best held-out score so far and where (the exported model).
        history: one record per evaluation (step, minutes, train_loss, score).
        trained_on: the devices of the sessions so far, in order (for the model card).
    """

    step: int = 0
    minutes: float = 0.0
    best_score: float = -1.0
    best_step: int = -1
    history: list[dict[str, float]] = field(default_factory=list)
    trained_on: list[str] = field(default_factory=list)

    def trained_on_text(self) -> str:
        """`trained_on` as config.json and the model card write it (inverse: `parse_trained_on`)."""
        return _DEVICE_SEPARATOR.join(self.trained_on) or "cpu"


_DEVICE_SEPARATOR = " + "


def parse_trained_on(text: str) -> list[str]:
    """The device list of a `TrainState.trained_on_text()` string ("" -> [])."""
    return [part for part in text.split(_DEVICE_SEPARATOR) if part]


def save_checkpoint(
    path: Path,
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    config: TrainConfig,
    state: TrainState,
) -> None:
    """Atomically write everything needed to resume."""
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "config": asdict(config),
            "state": asdict(state),
            "torch_rng": torch.get_rng_state(),
        },
        tmp,
    )
    tmp.replace(path)


def _read(path: Path, mapped: bool) -> Any:
    """torch.load, weights only; a file that cannot be memory-mapped is read again unmapped, whose
    error says what is wrong with it (mapping a damaged file only says it is not a zip archive)."""
    if mapped:
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except Exception:  # read it unmapped below: that error is the one to show
            pass
    return torch.load(path, map_location="cpu", weights_only=True)


def load_checkpoint(path: Path, *, mapped: bool = False) -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint`.

    Read with torch's weights-only unpickler: a checkpoint is only tensors and plain dicts, lists
    and numbers, and a full unpickle would run whatever code a .pt file someone shared carries.
    `mapped` memory-maps the tensors instead of reading them: a caller that only wants the
    configuration (train-tiny's check of the flags a resume would ignore) then reads the small
    pickle, not the tens of MB of weights and optimizer state that training reads again after it.

    Raises:
        FileNotFoundError: naming the missing path and the fix.
        ValueError: the file is not one `save_checkpoint` wrote whole (truncated by a full disk or a
            killed copy, another program's .pt, or one lacking a part); torch's own errors
            (UnpicklingError, a KeyError on the first missing part) named neither the file nor the fix.
    """
    if not path.is_file():
        raise FileNotFoundError(f"--resume: no checkpoint at {path}; start without --resume")
    fix = "start a new run with another --out, or restore the checkpoint from a backup"
    try:
        saved = _read(path, mapped)
    except pickle.UnpicklingError as exc:
        why = _refusal(exc)
        if "GLOBAL" in why:  # a class or function to import: running code is how this file loads
            raise ValueError(f"--resume: {path} holds Python objects other than tensors and plain data ({why}), so it "
                             f"is not a checkpoint train-tiny wrote and is not loaded (a pickle can run code as it "
                             f"loads); {fix}") from None
        raise ValueError(f"--resume: {path} is not a readable training checkpoint (UnpicklingError: {why}); "
                         f"{fix}") from None
    except Exception as exc:  # zip and torch errors alike: any of them means an unreadable file
        raise ValueError(f"--resume: {path} is not a readable training checkpoint ({type(exc).__name__}: "
                         f"{exc}); {fix}") from None
    missing = [key for key in CHECKPOINT_KEYS if not isinstance(saved, dict) or key not in saved]
    if missing:
        raise ValueError(f"--resume: {path} is not a train-tiny checkpoint (it lacks {', '.join(missing)}); {fix}")
    return saved


def _refusal(exc: Exception) -> str:
    """The line of torch's weights-only refusal that says what it met (the rest is its general advice)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if "GLOBAL" in line or "Unsupported" in line]
    return (named or lines or [type(exc).__name__])[0][:300]
