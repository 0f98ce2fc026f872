"""The model a tools/ script is pointed at, loaded, or refused in one line as `python -m dllm_viz` does.

Why one place: block_passes, ce_fires, family_token_accuracy and floor_counts each took a model name
and let a mistyped one end in a ModelLoadError traceback; each had grown its own copy of the fix.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dllm_viz.models import ModelAdapter, ModelLoadError, load


def load_or_exit(name: str, **options: Any) -> ModelAdapter:
    """`load(name, **options)`; a name that is no model exits with one line naming it and the fix.

    Raises:
        SystemExit: the loader's message, as `error: ...`.
    """
    try:
        return load(name, **options)
    except ModelLoadError as exc:
        raise SystemExit(f"error: {exc}") from None
