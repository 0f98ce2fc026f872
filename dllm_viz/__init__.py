"""dllm_viz: drive a masked-diffusion LM decoder step by step and record what every policy does.

The library never imports streamlit; figures never import torch. Public entry points are
re-exported here lazily so that `import dllm_viz` stays cheap (figures and traces load without
torch).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DecodeConfig", "Trace", "decode", "iter_decode", "load", "load_trace"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy re-exports: torch is imported only when an engine or model entry point is used.
    if name == "DecodeConfig":
        from dllm_viz.config import DecodeConfig

        return DecodeConfig
    if name in ("decode", "iter_decode"):
        from dllm_viz import engine

        return getattr(engine, name)
    if name == "load":
        from dllm_viz.models import load

        return load
    if name in ("Trace", "load_trace"):
        from dllm_viz import trace

        return {"Trace": trace.Trace, "load_trace": trace.load_trace}[name]
    raise AttributeError(f"module 'dllm_viz' has no attribute {name!r}")
