"""Read the numbers a config.json states about an architecture, each checked where it is read.

Why a module of its own: every family maps its config.json onto a transformers config with
`int(raw[...])` / `float(raw.get(...))`, and a bad value there used to surface far away as a
KeyError, "cannot convert float NaN to integer", a negative tensor dimension from torch, a
ZeroDivisionError in the rotary setup, or (worse) a config silently truncated (`int(32.5)`) or a
rotary base of -1 that loads and then yields NaN logits. Each reader here raises one
ModelLoadError that names the file's family, the key and its value, and says what fits.
Knows nothing about specific families beyond the name it is given for messages.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from dllm_viz.models.base import ModelLoadError

T = TypeVar("T")
_REQUIRED: Any = object()  # sentinel: the key has no default, a config.json without it is refused


def _value(raw: dict[str, Any], key: str, default: Any, family: str) -> Any:
    value = raw.get(key)
    if value is None:
        if default is _REQUIRED:
            raise ModelLoadError(f"the {family} config.json has no {key!r}; use the config.json that came with "
                                 "the checkpoint")
        return default
    return value


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def positive_int(raw: dict[str, Any], key: str, family: str, default: Any = _REQUIRED) -> int:
    """A size (hidden size, head count, layers, vocabulary): an integer >= 1 (32.0 is read as 32).

    A missing or null key takes `default`; without one it is refused by name.
    """
    value = _value(raw, key, default, family)
    if not _is_number(value) or value != int(value) or value < 1:
        raise ModelLoadError(f"the {family} config.json has {key}={value!r}; it must be a positive integer "
                             "(use the config.json that came with the checkpoint)")
    return int(value)


def count(raw: dict[str, Any], key: str, family: str, default: int = 0) -> int:
    """A count that may be zero (shared experts, dense first layers): an integer >= 0."""
    value = _value(raw, key, default, family)
    if not _is_number(value) or value != int(value) or value < 0:
        raise ModelLoadError(f"the {family} config.json has {key}={value!r}; it must be an integer >= 0 "
                             "(use the config.json that came with the checkpoint)")
    return int(value)


def positive_float(raw: dict[str, Any], key: str, family: str, default: float) -> float:
    """A finite number > 0 (rotary base, norm epsilon): a rotary base <= 0 gives NaN angles."""
    value = _value(raw, key, default, family)
    if not _is_number(value) or value <= 0:
        raise ModelLoadError(f"the {family} config.json has {key}={value!r}; it must be a finite number > 0 "
                             "(use the config.json that came with the checkpoint)")
    return float(value)


def flag(raw: dict[str, Any], key: str, family: str, default: bool = False) -> bool:
    """A JSON true / false: `bool("false")` is True, which would tie or untie weights the wrong way."""
    value = _value(raw, key, default, family)
    if not isinstance(value, bool):
        raise ModelLoadError(f"the {family} config.json has {key}={value!r}; it must be true or false")
    return value


def heads(raw: dict[str, Any], hidden: int, family: str, *, heads_key: str = "num_attention_heads",
          kv_key: str = "num_key_value_heads", head_dim_key: str | None = "head_dim") -> tuple[int, int, int]:
    """(query heads, key/value heads, head dimension), consistent with each other and the hidden size.

    Why checked here: a head count that does not divide the hidden size (when no head_dim is stated)
    or a key/value head count that does not divide the query heads builds a model whose projection
    shapes match no checkpoint, reported by torch as a wall of size mismatches.
    """
    n_heads = positive_int(raw, heads_key, family)
    stated = None if head_dim_key is None else raw.get(head_dim_key)
    if stated is not None:
        dim = positive_int(raw, head_dim_key, family)  # type: ignore[arg-type]
    elif hidden % n_heads:
        raise ModelLoadError(f"the {family} config.json has {heads_key}={n_heads}, which does not divide its "
                             f"hidden size {hidden}; use the config.json that came with the checkpoint")
    else:
        dim = hidden // n_heads
    n_kv = positive_int(raw, kv_key, family, default=n_heads)
    if n_heads % n_kv:
        raise ModelLoadError(f"the {family} config.json has {kv_key}={n_kv}, which does not divide "
                             f"{heads_key}={n_heads}; use the config.json that came with the checkpoint")
    return n_heads, n_kv, dim


def no_rope_scaling(raw: dict[str, Any], family: str) -> None:
    """Refuse a stated rope_scaling: the mapping runs default rotary, so a scaled checkpoint would
    load and then read long positions wrongly, without a word."""
    if raw.get("rope_scaling"):
        raise ModelLoadError(f"the {family} config.json states rope_scaling {raw['rope_scaling']!r}, which "
                             "dllm_viz does not support yet; use a checkpoint without it")


def no_sliding_window(raw: dict[str, Any], family: str) -> None:
    """Refuse sliding-window attention: the mapping attends over the whole sequence."""
    if raw.get("use_sliding_window"):
        raise ModelLoadError(f"the {family} config.json sets use_sliding_window=true, which dllm_viz does not "
                             "support; use a checkpoint with full attention")


def build(make: Callable[[], T], family: str) -> T:
    """`make()`, a family's config mapping, with what transformers' config classes refuse turned into
    one ModelLoadError naming config.json.

    Why: those classes validate as strict dataclasses (an odd head_dim, a layer_types list of the
    wrong length) and raise multi-line errors that are not even ValueErrors.
    """
    from huggingface_hub.errors import StrictDataclassError

    try:
        return make()
    except ModelLoadError:
        raise
    except (StrictDataclassError, ValueError, TypeError, ZeroDivisionError) as exc:
        raise ModelLoadError(f"the {family} config.json does not make a valid model config "
                             f"({' '.join(str(exc).split())}); use the config.json that came with the "
                             "checkpoint") from None
