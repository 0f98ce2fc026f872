"""Small TSPD and Learn2PD controllers trained on a test model's own dense trajectories.

Decoding refuses a controller whose card names another vocabulary than the model's
(controller_weights.check_trained_for), so each test model gets controllers of its own.
"""

from __future__ import annotations

from pathlib import Path

from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.train.controller import ControllerConfig, filter_examples, save_controller, train, tspd_sequences


def train_test_controllers(adapter: ModelAdapter, out: Path, prompts: list[list[int]] | None = None) -> dict[str, str]:
    """{"tspd": weights path, "learn2pd": weights path}, fitted for two epochs on six 32-token dense decodes."""
    dense = Pipeline.from_names("fixed_steps", block_length=8)
    prompts = prompts or [[3 + i, 4] for i in range(6)]
    traces = [decode(adapter, prompt, dense, DecodeConfig(gen_length=32)) for prompt in prompts]
    vocab = adapter.info.vocab_size
    files = {}
    datasets = (("tspd", tspd_sequences(traces, vocab, 0.7), 0.5), ("learn2pd", filter_examples(traces), 0.96))
    for kind, data, threshold in datasets:
        config = ControllerConfig(kind=kind, epochs=2, hidden=16, layers=2)  # type: ignore[arg-type]
        model, _, _ = train(*data, config, gate_threshold=threshold)
        card = {"kind": kind, "layers": 2, "hidden": 16, "vocab_size": vocab, "model": adapter.info.name_or_path}
        files[kind] = str(save_controller(model, out / f"{kind}.safetensors", card))
    return files


def controller_options(files: dict[str, str]) -> dict[str, str]:
    """Pipeline options that point the learned policies at `files`."""
    return {"controller_weights": files["tspd"], "filter_weights": files["learn2pd"]}
