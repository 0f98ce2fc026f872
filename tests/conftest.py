"""Shared fixtures: small random checkpoints built on disk once per test session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpoints import build_tiny  # noqa: E402

from dllm_viz.models import ModelAdapter, load  # noqa: E402

# The test models are tiny: one thread is as fast as two, and it keeps OpenMP from
# spinning against a concurrent job (a training run, a second pytest) on a 2-core box.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory of a random checkpoint in the tiny family's format."""
    return build_tiny(tmp_path_factory.mktemp("tiny_random"))


@pytest.fixture(scope="session")
def tiny_adapter(tiny_dir: Path) -> ModelAdapter:
    """The random tiny-format model, loaded on CPU."""
    return load(str(tiny_dir), device="cpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu`-marked tests where CUDA is absent, so one command runs everywhere."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
