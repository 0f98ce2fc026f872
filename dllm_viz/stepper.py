"""Step-through decoding state for one session: the engine iterator plus its TraceBuilder.

The app keeps one in its session state between reruns, so a Step click runs exactly one
forward pass and a Run that is interrupted still has every step it recorded. Knows nothing
about Streamlit: the caller decides when to step, holds the model lock, and reports progress.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import StepRecord, decode_meta, finish_trace, iter_decode
from dllm_viz.models import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.trace import Trace, TraceBuilder
from dllm_viz.trace_meta import TraceMeta


@dataclass
class Stepper:
    """One decode in progress.

    Attributes:
        adapter: the model it runs on.
        signature: what it was started with (compared to the current widgets).
        builder: the steps recorded so far.
        meta: trace metadata (model, pipeline, config, prompt).
        done: the engine has stopped (complete, step cap or EOS stop).
    """

    adapter: ModelAdapter
    signature: tuple[Any, ...]
    builder: TraceBuilder
    meta: TraceMeta
    iterator: Iterator[StepRecord]
    done: bool = False
    masked: int = field(default=0)

    @classmethod
    def start(cls, adapter: ModelAdapter, prompt_text: str, pipeline: Pipeline, config: DecodeConfig,
              signature: tuple[Any, ...]) -> Stepper:
        """A fresh decode; raises ValueError for a pipeline that cannot tile gen_length or a bad prompt."""
        prompt_ids = adapter.encode_prompt(prompt_text)
        builder = TraceBuilder(config.gen_length, np.full(config.gen_length, adapter.info.mask_token_id),
                               np.asarray(prompt_ids))
        meta = decode_meta(adapter, prompt_ids, pipeline, config, prompt_text)
        iterator = iter_decode(adapter, prompt_ids, pipeline, config)
        return cls(adapter, signature, builder, meta, iterator, masked=config.gen_length)

    @property
    def nfe(self) -> int:
        """Forward passes run so far."""
        return self.builder.num_steps

    @property
    def progress(self) -> float:
        """Fraction of the canvas committed so far (1.0 once done)."""
        return 1.0 if self.done else 1.0 - self.masked / max(self.builder.gen_length, 1)

    def step(self) -> StepRecord | None:
        """Run one forward pass; None when the decode has already finished."""
        if self.done:
            return None
        record = next(self.iterator, None)
        if record is None:
            self.done = True
            return None
        self.builder.add(record)
        self.masked = int((record.tokens == self.adapter.info.mask_token_id).sum())
        self.done = record.stop_reason is not None
        return record

    def trace(self) -> Trace:
        """The trace of the steps so far (partial until done)."""
        return finish_trace(self.builder, self.adapter, self.meta)
