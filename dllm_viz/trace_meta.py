"""TraceMeta: what a trace says about itself (model, pipeline, settings, texts), typed and immutable.

Built once when a trace is finished (engine, replay) and read through attributes by figures,
pages, evaluation and the CLI; saved traces store `to_dict()` as JSON and `from_dict` reads it
back. Knows nothing about arrays (trace.py) or policies (the pipeline stays in its JSON form,
so that figures need no policy module).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dllm_viz.config import DecodeConfig
from dllm_viz.model_facts import AdapterInfo


@dataclass(frozen=True)
class TraceMeta:
    """A trace's metadata.

    Attributes:
        label: name in titles and legends (the pipeline's label, or a page's own).
        model: facts of the model that decoded it (None when unknown, e.g. a hand-built trace).
        pipeline: the resolved pipeline as `Pipeline.to_dict()` writes it ({} when unknown).
        decode_config: canvas length, seed, temperature, precision (None when unknown).
        prompt_text: the prompt as typed, when there was one.
        answer_text: the final canvas as text, up to the end of the answer.
        token_text: display text of every token id the trace mentions, keyed by str(id).
        stop_reason: "complete", "eos", "max_steps", "incomplete" or "not_started".
        reason_names: the commit-reason names its int8 codes index (policies.COMMIT_REASONS).
        pass_kind_names: the pass-kind names its pass_kind codes index (cache_modes.PASS_KINDS).
        created_utc: when it was decoded (ISO 8601), if recorded.
        replay_of: label of the dense trace a replayed trace was read from.
        dense_steps: for a replayed trace, the dense step each of its steps read.
        fork_of: for a forked decode (branching.py): the original's label, the fork step and
            any forced position and token.
        other: keys this version does not know (a newer writer's), kept so a save keeps them.
    """

    label: str = "trace"
    model: AdapterInfo | None = None
    pipeline: Mapping[str, Any] = field(default_factory=dict)
    decode_config: DecodeConfig | None = None
    prompt_text: str | None = None
    answer_text: str = ""
    token_text: Mapping[str, str] = field(default_factory=dict)
    stop_reason: str = "not_started"
    reason_names: tuple[str, ...] = ()
    pass_kind_names: tuple[str, ...] = ()
    created_utc: str | None = None
    replay_of: str | None = None
    dense_steps: tuple[int, ...] = ()
    fork_of: Mapping[str, Any] | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("pipeline", "token_text", "other", "fork_of"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        for name in ("reason_names", "pass_kind_names", "dense_steps"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def replace(self, **changes: Any) -> TraceMeta:
        """A copy with `changes` (the metadata itself never changes)."""
        return dataclasses.replace(self, **changes)

    @property
    def mask_token_id(self) -> int | None:
        """The model's mask token id, if the model is known."""
        return None if self.model is None else self.model.mask_token_id

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """The model's EOS/EoT ids (empty if the model is unknown)."""
        return () if self.model is None else self.model.stop_token_ids

    @property
    def seed(self) -> int:
        """The decode's seed (0 when unknown)."""
        return 0 if self.decode_config is None else self.decode_config.seed

    def component(self, part: str) -> Mapping[str, Any]:
        """The recorded pipeline part ("rule", "block", "extrapolate", "stop") as a dict, {} if none."""
        return self.pipeline.get(part) or {}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; `from_dict` inverts it."""
        data: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "other"}
        data["model"] = None if self.model is None else self.model.to_dict()
        data["decode_config"] = None if self.decode_config is None else self.decode_config.to_dict()
        data["pipeline"] = _plain(self.pipeline)
        data["token_text"] = dict(self.token_text)
        data["fork_of"] = _plain(self.fork_of)
        for name in ("reason_names", "pass_kind_names", "dense_steps"):
            data[name] = list(data[name])
        return {**_plain(self.other), **data}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceMeta:
        """Read `to_dict` output (or an older file's metadata); unknown keys go to `other`.

        Raises:
            ValueError: a known key holds a value of the wrong kind.
        """
        names = {f.name for f in dataclasses.fields(cls)} - {"other"}
        values = {k: v for k, v in data.items() if k in names and v is not None}
        if isinstance(values.get("model"), Mapping):
            values["model"] = AdapterInfo.from_dict(values["model"])
        if isinstance(values.get("decode_config"), Mapping):
            values["decode_config"] = DecodeConfig.from_dict(dict(values["decode_config"]))
        other = {k: v for k, v in data.items() if k not in names and k != "schema_version"}
        try:
            return cls(**values, other=other)
        except TypeError as exc:
            raise ValueError(f"trace metadata is malformed: {exc}") from None


def _frozen(value: Any) -> Any:
    """Mappings as read-only proxies and lists as tuples, all the way down."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, tuple | list):
        return tuple(_frozen(v) for v in value)
    return value


def _plain(value: Any) -> Any:
    """Mappings (read-only proxies included) and tuples as JSON-ready dicts and lists."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value
