"""What every page shares: the cached model, the model lock and the sidebar widgets.

One model per process (st.cache_resource) behind a lock, so two browser sessions never run
the model at once; per-session choices live in st.session_state.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import streamlit as st

from dllm_viz.models import ModelAdapter, ModelLoadError, load
from dllm_viz.tasks import load_problems

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_prompts"


def default_model() -> str:
    """The model the sidebar starts with: $DLLM_VIZ_MODEL, else the bundled tiny model."""
    return os.environ.get("DLLM_VIZ_MODEL", "tiny")


@st.cache_resource(show_spinner="Loading model…")
def cached_model(name_or_path: str, device: str) -> ModelAdapter:
    """The shared adapter for (model, device); loaded once per process."""
    return load(name_or_path, device=device)


@st.cache_resource
def model_lock() -> threading.Lock:
    """Serialises model use across sessions (one GPU, one decode at a time)."""
    return threading.Lock()


@st.cache_data
def sample_prompts() -> dict[str, str]:
    """Display label -> prompt text of the bundled demo prompts (empty if none are bundled)."""
    path = SAMPLE_DIR / "demo.jsonl"
    if not path.is_file():
        return {}
    return {f"{p.task}: {p.prompt[:60]}": p.prompt for p in load_problems(path)}


def sidebar() -> None:
    """Model, device and seed controls shared by every page."""
    with st.sidebar:
        st.header("Model")
        st.text_input("Model (tiny, a checkpoint directory or a hub id)", value=default_model(), key="model")
        st.selectbox("Device", ["auto", "cpu", "cuda", "mps"], key="device")
        st.number_input("Seed", min_value=0, max_value=2**31 - 1, value=0, step=1, key="seed")


def current_model() -> ModelAdapter | None:
    """The adapter chosen in the sidebar, or None after showing why it failed to load."""
    try:
        return cached_model(st.session_state.get("model", default_model()), st.session_state.get("device", "auto"))
    except ModelLoadError as exc:
        st.error(f"Could not load the model: {exc}")
        return None
