"""Shared fixtures: small random checkpoints built on disk once per test session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpoints import build_tiny  # noqa: E402

from dllm_viz.models import ModelAdapter, load  # noqa: E402


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory of a random checkpoint in the tiny family's format."""
    return build_tiny(tmp_path_factory.mktemp("tiny_random"))


@pytest.fixture(scope="session")
def tiny_adapter(tiny_dir: Path) -> ModelAdapter:
    """The random tiny-format model, loaded on CPU."""
    return load(str(tiny_dir), device="cpu")
