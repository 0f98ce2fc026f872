"""Shared fixtures: small random checkpoints built on disk once per test session."""

from __future__ import annotations

import sys
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
    """Small TSPD and Learn2PD controllers trained on toy-denoiser trajectories (for every-policy tests)."""
    from toy import ToyAdapter

    from dllm_viz.config import DecodeConfig
    from dllm_viz.engine import decode
    from dllm_viz.policies import Pipeline
    from dllm_viz.train.controller import ControllerConfig, filter_examples, save_controller, train, tspd_sequences

    adapter = ToyAdapter()
    dense = Pipeline.from_names("fixed_steps", block_length=8)
    traces = [decode(adapter, [3 + i, 4], dense, DecodeConfig(gen_length=32)) for i in range(6)]
    out = tmp_path_factory.mktemp("controllers")
    files = {}
    datasets = (("tspd", tspd_sequences(traces, 24, 0.7), 0.5), ("learn2pd", filter_examples(traces), 0.96))
    for kind, data, threshold in datasets:
        config = ControllerConfig(kind=kind, epochs=2, hidden=16, layers=2)  # type: ignore[arg-type]
        model, _, _ = train(*data, config, gate_threshold=threshold)
        card = {"kind": kind, "layers": 2, "hidden": 16, "vocab_size": 24}
        files[kind] = str(save_controller(model, out / f"{kind}.safetensors", card))
    return files


@pytest.fixture
def controller_options(controller_files: dict[str, str]) -> dict[str, str]:
    """Pipeline options that point the learned policies at the test controllers."""
    return {"controller_weights": controller_files["tspd"], "filter_weights": controller_files["learn2pd"]}
