"""Shared fixtures: small random checkpoints built on disk once per test session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpoints import build_tiny

from dllm_viz.models import ModelAdapter, load

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


@pytest.fixture(scope="session")
def controller_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Small TSPD and Learn2PD controllers trained for the toy denoiser (for every-policy tests)."""
    from controller_factory import train_test_controllers
    from toy import ToyAdapter

    return train_test_controllers(ToyAdapter(), tmp_path_factory.mktemp("controllers"))


@pytest.fixture
def controller_options(controller_files: dict[str, str]) -> dict[str, str]:
    """Pipeline options that point the learned policies at the toy denoiser's test controllers."""
    from controller_factory import controller_options

    return controller_options(controller_files)


@pytest.fixture(scope="session")
def tiny_controller_files(tiny_adapter: ModelAdapter, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Small TSPD and Learn2PD controllers trained for the random tiny-format model."""
    from controller_factory import train_test_controllers

    return train_test_controllers(tiny_adapter, tmp_path_factory.mktemp("tiny_controllers"))


@pytest.fixture
def tiny_controller_options(tiny_controller_files: dict[str, str]) -> dict[str, str]:
    """Pipeline options that point the learned policies at the random tiny model's test controllers."""
    from controller_factory import controller_options

    return controller_options(tiny_controller_files)


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique string to put in spawned processes' argv; kills leftovers after the test."""
    import os
    import uuid

    from processes import alive_with

    mark = f"dllm-viz-sandbox-test-{uuid.uuid4().hex}"
    yield mark
    for pid in alive_with(mark):
        os.kill(pid, 9)
