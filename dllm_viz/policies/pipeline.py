"""Pipeline: one explicit composition of a block sizer and a commit rule.

DESIGN.md §5: decoding = block sizing x commit rule (x extrapolation x cache x stop, as those
components land). The engine runs any Pipeline; this module only validates and (de)serialises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from dllm_viz.policies.base import BlockSizer, CommitRule, build_component, component_to_dict
from dllm_viz.policies.blocks import FixedBlocks
from dllm_viz.policies.registry import BLOCKS, RULES, lookup
from dllm_viz.policies.threshold import ThresholdPolicy


@dataclass(frozen=True)
class Pipeline:
    """A complete decoding policy.

    Attributes:
        rule: commit rule deciding which open positions to commit at each step.
        block: block sizer deciding where each window ends.
    """

    rule: CommitRule = field(default_factory=ThresholdPolicy)
    block: BlockSizer = field(default_factory=FixedBlocks)

    def validate(self, gen_length: int) -> None:
        """Raise ValueError if this pipeline cannot decode `gen_length` positions."""
        self.block.validate(gen_length)
        check = getattr(self.rule, "validate_blocks", None)
        if check is not None:
            check(gen_length, getattr(self.block, "block_length", None))

    @property
    def label(self) -> str:
        """Short human-readable name, e.g. `fixed32+threshold0.9`."""
        return "+".join(_short(c) for c in (self.block, self.rule))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description; `from_dict` inverts it."""
        return {"block": component_to_dict(self.block), "rule": component_to_dict(self.rule)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pipeline:
        """Rebuild a pipeline from `to_dict` output (unknown names raise ValueError)."""
        block = _component(BLOCKS, "block sizer", data["block"])
        rule = _component(RULES, "commit rule", data["rule"])
        return cls(rule=rule, block=block)

    @classmethod
    def from_names(cls, rule: str, block: str = "fixed", **options: Any) -> Pipeline:
        """Build from registry names and a flat dict of field values (CLI, app widgets).

        Each option goes to whichever chosen component has a field of that name; None means
        the component's default.
        """
        rule_cls = lookup(RULES, "commit rule", rule)
        block_cls = lookup(BLOCKS, "block sizer", block)
        return cls(rule=build_component(rule_cls, options), block=build_component(block_cls, options))


def _component(registry: dict[str, type], kind: str, data: Mapping[str, Any]) -> Any:
    values = dict(data)
    cls = lookup(registry, kind, values.pop("name"))
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def _short(component: Any) -> str:
    """`name` + its first field's value + other non-default fields in parentheses."""
    values = {f.name: getattr(component, f.name) for f in fields(component)}
    defaults = {f.name: f.default for f in fields(component)}
    names = list(values)
    head = "" if not names or values[names[0]] is None else str(values[names[0]])
    rest = [str(values[n]) for n in names[1:] if values[n] != defaults[n]]
    return type(component).name + head + (f"({','.join(rest)})" if rest else "")
