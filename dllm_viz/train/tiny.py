"""Train the bundled tiny dLLM: model construction, LR schedule and the time-budgeted loop.

The loop is budgeted in wall-clock minutes because it runs on shared CPUs against a deadline;
the cosine decay follows the fraction of the budget used, so every session ends at a low
learning rate with its best checkpoint exported. Resuming is exact up to the data stream,
which is a function of the step (see train/checkpoint.py).
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from dllm_viz.models.bidirectional import bidirectional_logits, make_bidirectional
from dllm_viz.tasks import TASKS
from dllm_viz.tasks.parallelbench import NAME_WORDS
from dllm_viz.train import export
from dllm_viz.train.checkpoint import (
    CHECKPOINT_NAME,
    TrainState,
    load_checkpoint,
    parse_trained_on,
    save_checkpoint,
)
from dllm_viz.train.config import ModelConfig, TrainConfig, config_from_dict
from dllm_viz.train.cpu_bf16 import bf16_warning
from dllm_viz.train.data import PROMPT_TEMPLATE, Batch
from dllm_viz.train.grow import check_growth, deepen
from dllm_viz.train.objective import SCORE_VERSION, heldout_batches, heldout_metrics, masked_loss
from dllm_viz.train.prefetch import BatchSource
from dllm_viz.train.threads import ThreadTuner
from dllm_viz.train.tokenizer import add_words, load_tokenizer, special_ids, train_tokenizer

Progress = Callable[[str], None]
TOKENIZER_DIR = "tokenizer"

__all__ = [
    "CHECKPOINT_NAME",
    "ModelConfig",
    "Progress",
    "TrainConfig",
    "build_model",
    "lr_at",
    "train",
]


def build_model(config: ModelConfig, tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    """A freshly initialised bidirectional Llama for `tokenizer`'s vocabulary."""
    ids = special_ids(tokenizer)
    llama = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=ids["eos_token_id"],
        pad_token_id=ids["pad_token_id"],
        use_cache=False,
    )
    llama._attn_implementation = "sdpa"
    return make_bidirectional(LlamaForCausalLM(llama))


def lr_at(config: TrainConfig, *, session_step: int, budget_fraction: float) -> float:
    """Linear warmup over session steps, then cosine over the used fraction of the time budget."""
    warm = min(1.0, (session_step + 1) / max(1, config.warmup_steps))
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, budget_fraction)))
    return config.lr * warm * (config.min_lr_ratio + (1.0 - config.min_lr_ratio) * cosine)


def _tokenizer_for(
    run_dir: Path, config: TrainConfig, progress: Progress
) -> PreTrainedTokenizerFast:
    """Load the run's tokenizer, or train one on a corpus from the training split."""
    path = run_dir / TOKENIZER_DIR
    if (path / "tokenizer.json").is_file():
        return load_tokenizer(str(path))
    problems = TASKS["arith"].generate(
        config.tokenizer_problems, seed=config.seed, split="train", min_ops=1, max_ops=4,
        **config.data.arith_limits(),
    )  # fmt: skip
    num_code = config.tokenizer_problems // 4
    problems += TASKS["code"].generate(num_code, seed=config.seed, split="train")
    texts = [PROMPT_TEMPLATE.format(prompt=p.prompt) for p in problems]
    tokenizer = train_tokenizer(texts + [p.target for p in problems])
    tokenizer.save_pretrained(path)
    progress(f"trained tokenizer: {len(tokenizer)} tokens, specials {special_ids(tokenizer)}")
    return tokenizer


@dataclass
class _Run:
    """Everything one session works on."""

    config: TrainConfig
    model: LlamaForCausalLM
    forward: torch.nn.Module
    opt: torch.optim.Optimizer
    tokenizer: PreTrainedTokenizerFast
    state: TrainState
    ckpt_path: Path
    export_dir: Path | None
    evals: list[tuple[str, float, Batch]]
    batches: BatchSource


def _warm_start(init_from: Path, run_dir: Path, config: TrainConfig) -> tuple[TrainConfig, TrainState]:
    """Seed `run_dir` from an exported model: its tokenizer, sizes, step counter and history.

    For sessions whose gitignored checkpoint is gone: the weights come from the export (see
    `_open_run`), the optimizer starts fresh (each session warms its learning rate up anyway),
    and the data stream continues at the exported step because batches are a function of it.
    """
    raw, section = read_export_config(init_from)
    load_tokenizer(str(init_from)).save_pretrained(str(run_dir / TOKENIZER_DIR))
    check_growth(raw["num_hidden_layers"], config.grow_layers)
    model = ModelConfig(hidden_size=raw["hidden_size"], num_layers=raw["num_hidden_layers"] + config.grow_layers,
                        num_heads=raw["num_attention_heads"], intermediate_size=raw["intermediate_size"],
                        max_positions=raw["max_position_embeddings"])
    steps = int(section.get("trained_steps", 0))
    # A best score measured on another arithmetic difficulty or by another definition is not
    # comparable: start over.
    same_task = section.get("arith_limits") == config.data.arith_limits()
    same_score = section.get("score_version", 1) == SCORE_VERSION
    best = float(section.get("best_score", -1.0)) if same_task and same_score else -1.0
    history = list(section.get("history", []))
    state = TrainState(step=steps, minutes=float(section.get("train_minutes", 0.0)),
                       best_score=best, best_step=scored_at(history, best, default=steps),
                       history=history,
                       trained_on=parse_trained_on(str(section.get("trained_on", ""))))
    return replace(config, model=model), state


def scored_at(history: list[dict[str, Any]], score: float, *, default: int) -> int:
    """The last step of `history` whose held-out score is `score`, else `default`.

    Why: a warm start carries the export's best score (the bar a new run must pass to export), but
    the export may be a later snapshot that scored less (a candidate continued from the bundled
    model). Naming the starting step as the best put that snapshot's step beside a score it never
    had, in the model card and in the run's last line.
    """
    steps = [int(entry["step"]) for entry in history if entry.get("score") == score]
    return steps[-1] if steps else default


# The sizes `_warm_start` reads from an export's config.json.
EXPORT_SIZES = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings")
# The files `_warm_start` reads besides config.json.
EXPORT_FILES = ("model.safetensors", "tokenizer.json")


def read_export_config(init_from: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config.json of exported model `init_from` and its dllm_viz section, checked whole.

    Why before anything is written: an unreadable config.json raised a bare JSONDecodeError, one
    without a size a KeyError, and a folder without weights failed only after its tokenizer had
    been copied into the run directory, where a later fresh run would silently have reused it.

    Raises:
        ValueError: naming the folder, what it lacks and the fix.
    """
    fix = "pass an exported tiny model directory such as dllm_viz/assets/tiny"
    try:
        raw = json.loads((init_from / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--init-from {str(init_from)!r}: its config.json is not readable JSON ({exc}); "
                         f"{fix}") from None
    section = raw.get("dllm_viz") if isinstance(raw, dict) else None
    if not isinstance(section, dict) or section.get("family") != "tiny":
        raise ValueError(f"{str(init_from)!r} is not an exported tiny model (no dllm_viz family 'tiny'); {fix}")
    bad = [key for key in EXPORT_SIZES
           if isinstance(raw.get(key), bool) or not isinstance(raw.get(key), int) or raw[key] < 1]
    if bad:
        raise ValueError(f"--init-from {str(init_from)!r}: its config.json lacks a positive whole {', '.join(bad)}; "
                         f"{fix}")
    missing = [name for name in EXPORT_FILES if not (init_from / name).is_file()]
    if missing:
        raise ValueError(f"--init-from {str(init_from)!r} lacks {', '.join(missing)}; {fix}")
    return raw, section


def check_device(device: str) -> None:
    """Refuse a training device torch cannot use here, before the run directory and tokenizer are
    made: a malformed name ('cuda:x') raised torch's RuntimeError, and 'cuda' on a machine without
    CUDA an AssertionError, both only when the model moved there. The rules are the model loader's
    (`resolve_device`), so decoding and training accept the same devices.

    Raises:
        ValueError: naming the device and the fix.
    """
    from dllm_viz.models.loading import resolve_device

    try:  # TrainConfig has refused names other than cpu, cuda, cuda:N and mps (auto, meta) already
        resolve_device(device)
    except ValueError as exc:
        raise ValueError(f"--device {device!r}: {exc}") from None


def _open_run(
    run_dir: Path, config: TrainConfig, resume: bool, export_dir: Path | None, progress: Progress,
    init_from: Path | None = None,
) -> _Run:
    """Build a fresh run, restore one from its checkpoint, or warm-start from an export."""
    if run_dir.exists() and not run_dir.is_dir():  # mkdir's own error names neither --out nor the fix
        raise ValueError(f"--out {str(run_dir)!r} is a file; the run needs a directory, e.g. runs/tiny")
    check_device(config.device)
    if init_from is not None and not (init_from / "config.json").is_file():
        raise ValueError(f"--init-from {str(init_from)!r} is not an exported model directory (no config.json); "
                         "pass one such as dllm_viz/assets/tiny")
    ckpt_path = run_dir / CHECKPOINT_NAME
    saved = load_checkpoint(ckpt_path) if resume else None
    if saved is None and init_from is not None:
        read_export_config(init_from)  # before the run directory is made
    run_dir.mkdir(parents=True, exist_ok=True)
    if saved is not None:
        try:
            old = config_from_dict(saved["config"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"--resume: the configuration in {ckpt_path} cannot be read ({type(exc).__name__}: "
                             f"{exc}); was it written by another version? start a new run with another --out") from None
        if not (run_dir / TOKENIZER_DIR / "tokenizer.json").is_file():
            # a new tokenizer would be trained, and the checkpoint's embedding rows would not fit it
            raise ValueError(f"--resume: {run_dir / TOKENIZER_DIR} is missing, and the checkpoint's weights belong to "
                             "the tokenizer that was there; restore that folder, or start a new run with another --out")
        config = replace(config, model=old.model, data=old.data, seed=old.seed)
    elif ckpt_path.exists():
        raise FileExistsError(
            f"{ckpt_path} exists; pass --resume to continue it or choose another --out"
        )
    state = TrainState()
    if saved is None and init_from is None and config.grow_layers:
        raise ValueError(f"`--grow-layers {config.grow_layers}` grows an exported model: pass --init-from "
                         "(e.g. dllm_viz/assets/tiny), or --num-layers for a new model of that depth")
    if saved is None and init_from is not None:
        config, state = _warm_start(init_from, run_dir, config)
    tokenizer = _tokenizer_for(run_dir, config, progress)
    added: dict[str, list[int]] = {}
    if all(len(tokenizer.encode(word, add_special_tokens=False)) == 1 for word in NAME_WORDS):
        config = replace(config, name_tokens=True)  # the tokenizer has them: the model card says so
    elif saved is None and config.name_tokens:
        added = add_words(tokenizer, NAME_WORDS)
        tokenizer.save_pretrained(str(run_dir / TOKENIZER_DIR))  # the batch workers read it from there
        progress(f"name tokens: {len(added)} added, {len(tokenizer)} tokens")
    torch.manual_seed(config.seed)  # a fresh run's initial weights are a function of its seed
    model = build_model(config.model, tokenizer)
    if saved is None and init_from is not None:
        from safetensors.torch import load_file

        weights = grown_rows(load_file(str(init_from / "model.safetensors")), added, len(tokenizer))
        if config.grow_layers:
            exported = config.model.num_layers - config.grow_layers
            weights = deepen(weights, model.state_dict(), exported, config.grow_layers)
            progress(f"grown from {exported} to {config.model.num_layers} layers; the new ones start as the identity")
        model.load_state_dict(weights)
        progress(f"warm start from {init_from} at step {state.step}")
    if saved is not None:
        try:
            model.load_state_dict(saved["model"])
        except RuntimeError as exc:  # torch lists every mismatched tensor over many lines
            last = str(exc).strip().splitlines()[-1].strip()
            last = last if len(last) <= 200 else last[:200] + "..."  # a missing-keys line names every tensor
            raise ValueError(f"--resume: the weights in {ckpt_path} do not fit the model of its own configuration and "
                             f"the tokenizer in {run_dir / TOKENIZER_DIR} ({len(tokenizer)} tokens): {last}; restore "
                             "the tokenizer folder the run was made with, or start a new run with another "
                             "--out") from None
    model.to(config.device)
    opt = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(0.9, 0.98), weight_decay=config.weight_decay
    )
    if saved is not None:
        opt.load_state_dict(saved["optimizer"])  # moves its state onto the parameters' device
        state = TrainState(**saved["state"])
        torch.set_rng_state(saved["torch_rng"])
    forward = torch.compile(model, dynamic=False) if config.use_compile else model
    evals = [(task, ratio, batch.to(config.device)) for task, ratio, batch in heldout_batches(
        tokenizer, num_arith=config.eval_arith, num_code=config.eval_code,
        limits=config.data.arith_limits(), num_hard=config.eval_hard,
    )]  # fmt: skip
    if saved is None and init_from is not None and state.best_score < 0 and state.history:
        # The export's scores are of another score version or difficulty (`_warm_start`), so the
        # run's evaluations would be read against them: measure the starting weights once (session
        # 50 read 0.9708 -> 0.9620 as a fall; both weights score 0.962 under version 5).
        start = heldout_metrics(model, evals)["score"]
        progress(f"warm start's weights score {start:.4f} under score version {SCORE_VERSION}; the export's "
                 f"{state.history[-1]['score']:.4f} is of another version or difficulty, so compare with {start:.4f}")
    batches = BatchSource(config.data, tokenizer, run_dir / TOKENIZER_DIR, seed=config.seed,
                          workers=config.data_workers)
    return _Run(config, model, forward, opt, tokenizer, state, ckpt_path, export_dir, evals, batches)


# The parameters with one row per token (the model does not tie them).
VOCAB_ROWS = ("model.embed_tokens.weight", "lm_head.weight")


def grown_rows(weights: dict[str, torch.Tensor], added: dict[str, list[int]], vocab: int) -> dict[str, torch.Tensor]:
    """`weights` with the per-token rows grown to `vocab` for the words `add_words` added (in its
    order, so at the next ids): each new row the mean of the rows that spelled its word, so the
    model starts by reading and writing the word about as it read its pieces."""
    if not added:
        return weights
    grown = dict(weights)
    for name in VOCAB_ROWS:
        rows = weights[name]
        new = torch.stack([rows[ids].mean(dim=0) for ids in added.values()])
        grown[name] = torch.cat([rows, new])
        if grown[name].shape[0] != vocab:
            raise ValueError(f"{name} has {grown[name].shape[0]} rows for {len(added)} added words, "
                             f"but the tokenizer has {vocab} tokens: was this export made with another tokenizer?")
    return grown


def device_label(device: str, num_threads: int) -> str:
    """How the model card names where a session trained, e.g. "cpu (2 cores)"."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    if device == "cpu":
        return f"cpu ({min(num_threads, os.cpu_count() or 1)} cores)"
    return device


def _train_step(run: _Run, lr: float) -> tuple[float, int]:
    """One optimizer step on batch number `run.state.step`; returns (loss, tokens in batch)."""
    for group in run.opt.param_groups:
        group["lr"] = lr
    batch = run.batches.batch(run.state.step).to(run.config.device)
    device_type = torch.device(run.config.device).type
    with torch.autocast(device_type, dtype=torch.bfloat16, enabled=run.config.precision == "bf16"):
        logits = bidirectional_logits(run.forward, batch.input_ids)
    loss = masked_loss(logits.float(), batch, run.config.loss_weighting)
    run.opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.config.grad_clip)
    run.opt.step()
    run.state.step += 1
    return loss.item(), batch.input_ids.numel()


def train(
    run_dir: str | Path,
    config: TrainConfig,
    *,
    resume: bool = False,
    export_dir: str | Path | None = export.ASSETS_DIR,
    progress: Progress = lambda line: None,
    init_from: str | Path | None = None,
) -> dict[str, Any]:
    """Train (or resume) the tiny model in `run_dir` for `config.minutes` of wall time.

    Args:
        run_dir: checkpoint and tokenizer directory.
        config: this session's settings; on resume, model, data and seed come from the
            checkpoint and everything else (budget, LR, eval cadence) from `config`.
        resume: continue from `run_dir/checkpoint.pt`.
        init_from: without a checkpoint, warm-start from this exported model directory.
        export_dir: where the best model is exported on every improvement (None: never).
        progress: receives one human-readable line per log event.

    Returns:
        Summary: final step, total minutes, best step and score, last metrics.

    Raises:
        FileNotFoundError: `resume` without a checkpoint.
        FileExistsError: a fresh run into a directory that already has a checkpoint.
    """
    run = _open_run(
        Path(run_dir), config, resume, None if export_dir is None else Path(export_dir), progress,
        None if init_from is None else Path(init_from),
    )
    try:  # the batch workers are processes: close them whatever happens from here on
        return _run_session(run, progress)
    finally:
        run.batches.close()


def _run_session(run: _Run, progress: Progress) -> dict[str, Any]:
    """Train an opened run for its time budget; evaluate, checkpoint and export as it goes."""
    config, state = run.config, run.state
    num_params = sum(p.numel() for p in run.model.parameters())
    progress(
        f"model {num_params / 1e6:.2f}M params, start step {state.step}, "
        f"budget {config.minutes:.1f} min, loss weighting {config.loss_weighting}, {config.precision}"
    )
    if config.device == "cpu" and config.precision == "bf16" and (warning := bf16_warning()):
        progress(warning)
    label = device_label(config.device, config.num_threads)  # recorded for the model card
    if not state.trained_on or state.trained_on[-1] != label:
        state.trained_on.append(label)
    on_cpu = config.device == "cpu"
    tuner = ThreadTuner(config.num_threads) if config.adaptive_threads and on_cpu else None
    if tuner is None:
        torch.set_num_threads(config.num_threads)
    stop = {"now": False}
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    start, first_step, minutes_before = time.time(), state.step, state.minutes
    losses: list[float] = []
    last_log, metrics = start, {}
    try:
        while True:
            fraction = (time.time() - start) / (60 * config.minutes)
            capped = bool(config.max_steps) and state.step >= config.max_steps
            done = fraction >= 1.0 or stop["now"] or capped
            if state.step > first_step and (state.step % config.eval_every == 0 or done):
                state.minutes = minutes_before + (time.time() - start) / 60
                metrics = _evaluate_and_save(run, losses, progress)
                losses = []
            if done:
                break
            lr = lr_at(config, session_step=state.step - first_step, budget_fraction=fraction)
            step_start = time.time()
            loss, tokens = _train_step(run, lr)
            losses.append(loss)
            if tuner is not None:
                tuner.observe(time.time() - step_start, tokens)
            if state.step % config.log_every == 0:
                now = time.time()
                recent = losses[-config.log_every :]
                progress(
                    f"step {state.step} | loss {sum(recent) / len(recent):.4f} | lr {lr:.2e} | "
                    f"{(now - last_log) / config.log_every:.2f} s/step | "
                    f"max_ops {config.data.max_ops_at(state.step)} | "
                    f"threads {torch.get_num_threads()} | "
                    f"{minutes_before + (now - start) / 60:.1f} min"
                )
                last_log = now
    finally:
        signal.signal(signal.SIGTERM, previous)
    return {
        "step": state.step, "minutes": state.minutes, "best_step": state.best_step,
        "best_score": state.best_score, "metrics": metrics,
    }  # fmt: skip


def _snapshot_due(every: int, history: list[dict[str, Any]]) -> bool:
    """Whether the evaluation just recorded (the last of `history`) is the first at or past a
    multiple of `every` steps: evaluations fall every `eval_every` steps and at a session's end,
    so a multiple may fall between two of them."""
    if every <= 0 or not history:
        return False
    step = history[-1]["step"]
    before = history[-2]["step"] if len(history) > 1 else step - 1
    return step // every > before // every


def _export_to(run: _Run, directory: Path) -> None:
    """Export the model as it is now, with its card, into `directory` (the best export or a snapshot)."""
    state = run.state
    export.export_model(
        run.model, run.tokenizer, directory, steps=state.step, minutes=state.minutes,
        card=export.training_card(run.model, run.config, state), state=state,
        arith_limits=run.config.data.arith_limits(),
    )  # fmt: skip


def _evaluate_and_save(run: _Run, losses: list[float], progress: Progress) -> dict[str, float]:
    """Evaluate on the held-out batches, export on improvement, and checkpoint."""
    state = run.state
    metrics = heldout_metrics(run.model, run.evals)
    train_loss = sum(losses) / len(losses) if losses else float("nan")
    state.history.append(
        {"step": state.step, "minutes": state.minutes, "train_loss": train_loss,
         "score": metrics["score"]}
    )  # fmt: skip
    improved = metrics["score"] > state.best_score
    if improved:
        state.best_score, state.best_step = metrics["score"], state.step
    shown = " ".join(
        f"{k}={v:.3f}" for k, v in sorted(metrics.items()) if "@0.5" in k or "@1.0" in k
    )
    progress(
        f"eval step {state.step} | score {metrics['score']:.4f}"
        f"{' (best)' if improved else ''} | {shown}"
    )
    if improved and run.export_dir is not None:
        _export_to(run, run.export_dir)
        progress(f"exported step {state.step} to {run.export_dir}")
    if _snapshot_due(run.config.snapshot_every, state.history):
        snapshot = run.ckpt_path.parent / "snapshots" / f"step_{state.step}"
        _export_to(run, snapshot)
        progress(f"snapshot of step {state.step} in {snapshot}")
    save_checkpoint(run.ckpt_path, run.model, run.opt, run.config, state)
    return metrics
