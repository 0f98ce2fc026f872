"""Model loading: families, the logits contract, bidirectional attention, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from checkpoints import build_dream, build_llada, llada_state_dict
from llada_reference import LladaReference

from dllm_viz.models import ModelLoadError, load, resolve_device
from dllm_viz.models.bidirectional import bidirectional_logits


@pytest.fixture(scope="module")
def llada_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_llada(tmp_path_factory.mktemp("llada"))


def test_llada_checkpoint_matches_reference_architecture(llada_dir: Path) -> None:
    adapter = load(str(llada_dir), device="cpu", dtype="float32")
    assert adapter.info.family == "llada"
    ids = torch.tensor([5, 9, 17, 33, 2, 2, 2, 40, 2, 11])
    ours = adapter.logits(ids).double()
    ref, _ = LladaReference(llada_dir).forward(ids)
    assert ours.shape == ref.shape
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(adapter.logits(ids, last=4).double(), ref[-4:], rtol=1e-4, atol=1e-4)


def test_llada_attention_is_bidirectional(llada_dir: Path) -> None:
    adapter = load(str(llada_dir), device="cpu")
    ids = torch.tensor([5, 9, 17, 33, 40, 11])
    changed = ids.clone()
    changed[-1] = 12
    first, second = adapter.logits(ids), adapter.logits(changed)
    assert (first[0] - second[0]).abs().max() > 1e-4, "a later token must change position 0"


def test_llada_special_ids_and_chat_template(llada_dir: Path) -> None:
    adapter = load(str(llada_dir), device="cpu")
    vocab = adapter.tokenizer.get_vocab()
    assert adapter.info.mask_token_id == vocab["<|mdm_mask|>"]
    assert adapter.info.eos_token_id == vocab["<|endoftext|>"]
    assert adapter.info.eot_token_id == vocab["<|eot_id|>"]
    text = adapter.format_prompt("What is 2+2?")
    assert text.startswith("<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?")
    assert text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert adapter.encode_prompt("hi", chat=False) == [vocab["h"], vocab["i"]]


def test_llada_unknown_parameter_is_refused(tmp_path: Path) -> None:
    directory = build_llada(tmp_path / "bad")
    from safetensors.torch import save_file

    cfg = json.loads((directory / "config.json").read_text())
    state = llada_state_dict(cfg)
    state["model.transformer.blocks.0.mystery.weight"] = torch.zeros(2)
    save_file(state, str(directory / "model.safetensors"))
    with pytest.raises(ModelLoadError, match="mystery"):
        load(str(directory), device="cpu")


def test_dream_logits_are_shifted_by_one(tmp_path: Path) -> None:
    directory, reference = build_dream(tmp_path / "dream")
    adapter = load(str(directory), device="cpu", dtype="float32")
    assert adapter.info.family == "dream" and adapter.info.shift_logits
    ids = torch.tensor([[4, 8, 15, 16, 23, 42, 3, 3]])
    raw = bidirectional_logits(reference, ids)[0]
    ours = adapter.logits(ids[0])
    torch.testing.assert_close(ours[1:], raw[:-1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours[0], raw[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(adapter.logits(ids[0], last=3), ours[-3:], rtol=1e-5, atol=1e-5)
    changed = ids.clone()
    changed[0, -1] = 9
    assert (adapter.logits(changed[0])[1] - ours[1]).abs().max() > 1e-5, "Dream must be bidirectional"
    assert adapter.info.mask_token_id == adapter.tokenizer.get_vocab()["<|mask|>"]


def test_tiny_family_reads_ids_and_prompt_template(tiny_adapter) -> None:
    info = tiny_adapter.info
    assert info.family == "tiny"
    assert info.mask_token_id == tiny_adapter.tokenizer.mask_token_id
    assert info.eos_token_id == tiny_adapter.tokenizer.eos_token_id
    assert tiny_adapter.format_prompt("2+2") == "Q: 2+2\nA:\n"
    with pytest.raises(ValueError, match="empty"):
        tiny_adapter.encode_prompt("   ")


def test_unknown_architecture_needs_remote_code_flag(tmp_path: Path) -> None:
    directory = build_llada(tmp_path / "other")
    cfg = json.loads((directory / "config.json").read_text())
    cfg.update(model_type="mystery_lm", architectures=["MysteryForMaskedLM"])
    (directory / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="trust_remote_code"):
        load(str(directory), device="cpu")


@pytest.mark.parametrize("name", ["/no/such/dir", "./missing-model", "a/b/c"])
def test_missing_path_is_a_clear_error(name: str) -> None:
    with pytest.raises(ModelLoadError, match="check the path"):
        load(name, device="cpu")


def test_offline_hub_id_says_to_pass_a_local_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="local directory"):
        load("dllm-viz-test/definitely-not-a-model", device="cpu")


def test_device_auto_falls_back_to_cpu_without_accelerators() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    assert resolve_device("auto").type in ("cpu", "mps")
    with pytest.raises(ModelLoadError, match="device"):
        resolve_device("tpu")
