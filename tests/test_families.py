"""The model-family table: every row is complete, detection order is the table's, and a new
family is one row (a fake family added to the table is detected, loaded and given its defaults)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from dllm_viz.models import TINY_DIR, families, load
from dllm_viz.models.families import FAMILIES, Family, SpecialTokens
from dllm_viz.policies import BLOCKS, EXTRAPOLATORS, RULES, STOPS, Pipeline
from dllm_viz.policies.adablock import AdaBlock
from dllm_viz.policies.cora import CoraPolicy
from dllm_viz.policies.knobs import knobs

REGISTERED = {**RULES, **BLOCKS, **EXTRAPOLATORS, **STOPS}  # component name -> class

SAMPLE_CONFIGS = {  # the smallest config.json each row must claim
    "tiny": json.loads((TINY_DIR / "config.json").read_text()),
    "llada": {"model_type": "llada", "architectures": ["LLaDAModelLM"]},
    "dream": {"model_type": "Dream", "architectures": ["DreamModel"]},
}


def test_every_row_is_complete_and_its_class_is_maintained() -> None:
    import transformers

    assert len({f.name for f in FAMILIES}) == len(FAMILIES)
    for family in FAMILIES:
        for field in dataclasses.fields(Family):
            value = getattr(family, field.name)
            assert value is not None, (family.name, field.name)
            if field.type.startswith("Callable"):
                assert callable(value), (family.name, field.name)
        assert isinstance(getattr(transformers, family.transformers_class), type)
        for component, values in family.points.items():  # every point names a family-calibrated knob, in range
            specs = {spec.name: spec for spec in knobs(REGISTERED[component])}
            for name, value in values.items():
                assert specs[name].published is not None, (family.name, component, name)
                specs[name].check(value)
        raw = SAMPLE_CONFIGS[family.name]
        tokens = family.special_tokens(raw)
        assert isinstance(tokens, SpecialTokens) and tokens.mask_token
        delimiters = family.delimiters(raw)
        assert delimiters and all(isinstance(d, str) and d for d in delimiters)


@pytest.mark.parametrize("name", sorted(SAMPLE_CONFIGS))
def test_each_sample_config_is_claimed_by_its_own_row(name: str) -> None:
    claimed = families.detect(SAMPLE_CONFIGS[name], Path("."))
    assert claimed is not None and claimed.name == name


def test_a_config_no_row_claims_is_left_to_remote_code() -> None:
    assert families.detect({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}, Path(".")) is None


def test_family_calibrated_knobs_read_the_table_and_the_user_wins() -> None:
    pipeline = Pipeline(rule=CoraPolicy(), block=AdaBlock())
    for family in FAMILIES:
        resolved = pipeline.resolve(family.name, ("\n",))
        cora, tau = family.points.get("cora", {}), family.points.get("adablock", {}).get("delimiter_threshold")
        assert resolved.block.delimiter_threshold == (0.3 if tau is None else tau)  # else the published value
        assert (resolved.rule.delta_p, resolved.rule.m) == (cora.get("delta_p", 0.97), cora.get("m", 2))
    chosen = Pipeline(rule=CoraPolicy(delta_p=0.5), block=AdaBlock(delimiter_threshold=0.1)).resolve("tiny", ("\n",))
    assert (chosen.rule.delta_p, chosen.block.delimiter_threshold) == (0.5, 0.1)
    assert chosen.rule.m == families.calibrated_points("tiny").get("cora", {}).get("m", 2)
    unknown = pipeline.resolve("remote-code-model", ("\n",))  # no row: the published points
    assert (unknown.rule.delta_p, unknown.rule.m, unknown.block.delimiter_threshold) == (0.97, 2, 0.3)


def _fake_checkpoint(directory: Path) -> Path:
    """The bundled model saved under another family's marker and with prefixed parameter names."""
    shutil.copytree(TINY_DIR, directory)
    config = json.loads((directory / "config.json").read_text())
    config["dllm_viz"]["family"] = "fake"
    (directory / "config.json").write_text(json.dumps(config))
    state = load_file(str(directory / "model.safetensors"))
    save_file({f"fake.{k}": v.contiguous() for k, v in state.items()}, str(directory / "model.safetensors"))
    return directory


def test_a_new_family_is_one_row(tmp_path, monkeypatch) -> None:
    tiny_row = families.by_name("tiny")
    assert tiny_row is not None
    fake = dataclasses.replace(
        tiny_row, name="fake", detect=lambda raw, path: raw.get("dllm_viz", {}).get("family") == "fake",
        rename=lambda key: key.removeprefix("fake."), points={"adablock": {"delimiter_threshold": 0.42}})
    directory = _fake_checkpoint(tmp_path / "fake")
    with pytest.raises(ValueError, match="does not support natively"):
        load(str(directory), device="cpu")  # the unchanged table does not know it
    monkeypatch.setattr(families, "FAMILIES", (*FAMILIES, fake))
    adapter = load(str(directory), device="cpu")
    reference = load("tiny", device="cpu")
    assert adapter.info.family == "fake"
    assert dataclasses.replace(adapter.info, family="tiny", name_or_path="tiny") == reference.info
    tokens = reference.tokenizer("1+2=", return_tensors="pt")["input_ids"][0]
    canvas = torch.cat([tokens, torch.full((4,), reference.info.mask_token_id)])
    assert torch.equal(adapter.logits(canvas), reference.logits(canvas))
    assert Pipeline(block=AdaBlock()).resolve("fake", ("\n",)).block.delimiter_threshold == 0.42
