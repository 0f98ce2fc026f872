"""Build training batches ahead of the optimizer in worker processes.

On a GPU the tiny model's step takes milliseconds while building one masked batch of 256 word
problems (generate, tokenize, lay out, mask) takes ~0.15 s of Python on one core, so an
accelerator would sit idle without this. Batches are a pure function of (data config, seed, step)
(`training_batch`), so workers change nothing but when a batch is made: a run with workers
trains on exactly the batches of a run without (tests/test_train_tiny.py checks the weights).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import torch

from dllm_viz.train.config import DataConfig
from dllm_viz.train.data import Batch, training_batch
from dllm_viz.train.tokenizer import load_tokenizer, special_ids

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

_WORKER: dict[str, object] = {}


def _init_worker(tokenizer_dir: str) -> None:
    """Per-process setup: one torch thread (the workers are the parallelism) and the tokenizer."""
    torch.set_num_threads(1)
    tokenizer = load_tokenizer(tokenizer_dir)
    _WORKER["tokenizer"] = tokenizer
    _WORKER["ids"] = special_ids(tokenizer)


def _build(config: DataConfig, seed: int, step: int) -> Batch:
    tokenizer: PreTrainedTokenizerFast = _WORKER["tokenizer"]  # type: ignore[assignment]
    ids: dict[str, int] = _WORKER["ids"]  # type: ignore[assignment]
    return training_batch(config, tokenizer, ids, seed=seed, step=step)


class BatchSource:
    """`batch(step)` for consecutive steps, built inline (workers=0) or `depth` steps ahead.

    Workers are spawned, not forked: the parent may already hold a CUDA context, which a forked
    child must not inherit.
    """

    def __init__(
        self, config: DataConfig, tokenizer: PreTrainedTokenizerFast, tokenizer_dir: Path, *,
        seed: int, workers: int = 0, depth: int | None = None,
    ) -> None:  # fmt: skip
        if workers < 0:
            raise ValueError(f"`workers` must be >= 0 (0 builds batches inline), got {workers}")
        self._config, self._seed = config, seed
        self._tokenizer, self._ids = tokenizer, special_ids(tokenizer)  # looked up once, not per step
        self._depth = depth if depth is not None else 4 * workers
        self._pending: dict[int, Future[Batch]] = {}
        self._pool: ProcessPoolExecutor | None = None
        if workers:
            self._pool = ProcessPoolExecutor(
                max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker, initargs=(str(tokenizer_dir),),
            )  # fmt: skip

    def batch(self, step: int) -> Batch:
        """Batch number `step`; asks the workers for the next `depth` steps too."""
        if self._pool is None:
            return training_batch(self._config, self._tokenizer, self._ids, seed=self._seed, step=step)
        for ahead in range(step, step + max(1, self._depth)):
            if ahead not in self._pending:
                self._pending[ahead] = self._pool.submit(_build, self._config, self._seed, ahead)
        for stale in [s for s in self._pending if s < step]:  # a caller that skipped steps
            self._pending.pop(stale).cancel()
        return self._pending.pop(step).result()

    def close(self) -> None:
        """Stop the workers (pending batches are dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            self._pending.clear()

    def __enter__(self) -> BatchSource:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
