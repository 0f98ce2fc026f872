"""Growing an exported model deeper: the new layers start as the identity, the old ones keep their weights."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from dllm_viz.cli import train_tiny as cli
from dllm_viz.models.bidirectional import bidirectional_logits
from dllm_viz.tasks import TASKS
from dllm_viz.train.config import DataConfig
from dllm_viz.train.grow import RESIDUAL_OUTPUTS, deepen, layer_order
from dllm_viz.train.tiny import ModelConfig, TrainConfig, build_model, train
from dllm_viz.train.tokenizer import train_tokenizer

TINY = TrainConfig(minutes=5, max_steps=3, eval_every=3, eval_arith=8, eval_hard=4, eval_code=4, log_every=1,
                   warmup_steps=2, tokenizer_problems=300, data=DataConfig(batch_size=4),
                   model=ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64))


@pytest.mark.parametrize(("old", "added", "order"), [
    (6, 3, [0, 1, None, 2, 3, None, 4, 5, None]),
    (6, 1, [0, 1, 2, 3, 4, 5, None]),
    (6, 4, [0, 1, None, 2, None, 3, 4, None, 5, None]),
    (2, 4, [0, None, None, 1, None, None]),
    (3, 0, [0, 1, 2]),
])
def test_new_layers_are_spread_evenly_and_the_last_follows_the_last_old_layer(
        old: int, added: int, order: list[int | None]) -> None:
    assert layer_order(old, added) == order


@pytest.mark.parametrize("added", [-1, 13])
def test_growth_out_of_range_names_the_range(added: int) -> None:
    with pytest.raises(ValueError, match=r"\[0, 12\] for a model of 6 layers"):
        layer_order(6, added)


def test_a_deepened_model_computes_exactly_what_the_exported_one_did() -> None:
    problems = TASKS["arith"].generate(60, seed=0, split="train")
    tokenizer = train_tokenizer([p.prompt for p in problems] + [p.target for p in problems], vocab_size=300)
    config = ModelConfig(hidden_size=32, num_layers=3, num_heads=2, intermediate_size=64)
    torch.manual_seed(0)
    old = build_model(config, tokenizer).eval()
    for p in old.parameters():  # an exported model's weights are far from their initialisation
        p.data.normal_(0.0, 0.2)
    deep = build_model(replace(config, num_layers=5), tokenizer).eval()
    fresh = {k: v.clone() for k, v in deep.state_dict().items()}
    deep.load_state_dict(deepen(old.state_dict(), fresh, 3, 2))
    ids = torch.tensor([tokenizer.encode(problems[0].prompt)])
    with torch.no_grad():
        assert torch.allclose(bidirectional_logits(deep, ids), bidirectional_logits(old, ids), atol=1e-5)
    order = layer_order(3, 2)
    state = deep.state_dict()
    for index, source in enumerate(order):
        for name, value in old.state_dict().items():
            prefix = f"model.layers.{source}."
            if source is not None and name.startswith(prefix):
                assert torch.equal(state[f"model.layers.{index}.{name[len(prefix):]}"], value)
        if source is None:  # the new layers: zero residual outputs, everything else as initialised
            for suffix in RESIDUAL_OUTPUTS:
                assert not state[f"model.layers.{index}.{suffix}"].any()
            q = f"model.layers.{index}.self_attn.q_proj.weight"
            assert torch.equal(state[q], fresh[q]) and state[q].any()
    # Once trained, the new layers change the output: they are capacity, not dead weight.
    state[f"model.layers.{order.index(None)}.mlp.down_proj.weight"].normal_(0.0, 0.2)
    deep.load_state_dict(state)
    with torch.no_grad():
        assert not torch.allclose(bidirectional_logits(deep, ids), bidirectional_logits(old, ids), atol=1e-3)


def test_deepen_refuses_weights_with_other_layers() -> None:
    with pytest.raises(ValueError, match=r"hold layers \[0\], not 0..1"):
        deepen({"model.layers.0.mlp.down_proj.weight": torch.zeros(1)}, {}, 2, 1)


def test_a_warm_start_grows_the_export_and_the_grown_export_loads(tmp_path: Path) -> None:
    export_dir = tmp_path / "export"
    train(tmp_path / "first", TINY, export_dir=export_dir)
    lines: list[str] = []
    # another arithmetic difficulty forgets the export's best score, so this run exports its own
    grown = replace(TINY, max_steps=4, grow_layers=2, data=replace(TINY.data, max_result=150))
    train(tmp_path / "second", grown, export_dir=tmp_path / "export2", progress=lines.append, init_from=export_dir)
    assert "grown from 2 to 4 layers; the new ones start as the identity" in lines
    assert json.loads((tmp_path / "export2" / "config.json").read_text())["num_hidden_layers"] == 4
    new = AutoModelForCausalLM.from_pretrained(tmp_path / "export2").state_dict()
    assert len({k.split(".")[2] for k in new if k.startswith("model.layers.")}) == 4
    assert "4 layers" in (tmp_path / "export2" / "MODEL_CARD.md").read_text()
    from dllm_viz import decode, load
    from dllm_viz.config import DecodeConfig
    from dllm_viz.policies import Pipeline

    adapter = load(str(tmp_path / "export2"), device="cpu")
    assert decode(adapter, adapter.encode_prompt("2 + 3"), Pipeline.from_names("threshold", block_length=8),
                  DecodeConfig(gen_length=8)).nfe
    # Re-running the same command after a restart resumes the grown checkpoint; it grows nothing more.
    again: list[str] = []
    train(tmp_path / "second", replace(grown, max_steps=5), resume=True, export_dir=None, progress=again.append,
          init_from=export_dir)
    assert not any(line.startswith("grown from") for line in again)


def test_growing_needs_an_export_and_the_cli_passes_the_option(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pass --init-from"):
        train(tmp_path / "run", replace(TINY, grow_layers=2), export_dir=None)
    with pytest.raises(ValueError, match="grow_layers"):
        replace(TINY, grow_layers=-1)
    parser = argparse.ArgumentParser()
    cli._add_arguments(parser)
    args = parser.parse_args(["--init-from", "x", "--grow-layers", "3"])
    assert cli.config_from_args(args).grow_layers == 3
