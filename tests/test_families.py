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
from dllm_viz.policies.adablock import AdaBlock

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
        assert 0.0 <= family.adablock_tau_d <= 1.0
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


def test_adablock_reads_the_family_defaults_from_the_table() -> None:
    for family in FAMILIES:
        assert AdaBlock().resolve(family.name, ("\n",)).delimiter_threshold == family.adablock_tau_d


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
        rename=lambda key: key.removeprefix("fake."), adablock_tau_d=0.42)
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
    assert AdaBlock().resolve("fake", ("\n",)).delimiter_threshold == 0.42
