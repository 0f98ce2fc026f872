"""Bad checkpoints and load options: each ends in one ValueError (ModelLoadError) that names the bad
value and the fix, instead of a KeyError / ZeroDivisionError / torch RuntimeError deep in loading, a
tokenizer error for a config.json fault, or a model that loads and then computes nonsense.

Categories: config.json values (per family), config.json structure, weights vs config, shard files,
the tiny model's `dllm_viz` section, special ids, device / dtype / the model argument, remote code, CLI.
Each case copies a small checkpoint in its family's published layout (tests/checkpoints.py) and breaks it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from checkpoints import (
    build_block_llama,
    build_dream,
    build_fast_dllm_v2,
    build_llada,
    build_llada2,
    build_sdar,
    build_tiny,
)
from safetensors.torch import load_file, save_file

from dllm_viz.cli import main
from dllm_viz.models import ModelLoadError, load

Mutate = Callable[[Path], Any]


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One pristine checkpoint per layout, built once; each test breaks a copy."""
    root = tmp_path_factory.mktemp("bad_models")
    return {"tiny": build_tiny(root / "tiny"), "llada": build_llada(root / "llada"),
            "dream": build_dream(root / "dream")[0], "sdar": build_sdar(root / "sdar")[0],
            "fast_dllm_v2": build_fast_dllm_v2(root / "fast")[0], "block_causal": build_block_llama(root / "blk")[0],
            "llada2": build_llada2(root / "llada2")}


def broken(sources: dict[str, Path], tmp_path: Path, family: str, mutate: Mutate) -> str:
    """A copy of the family's checkpoint with `mutate` applied; returns its path."""
    directory = tmp_path / family
    shutil.copytree(sources[family], directory)
    mutate(directory)
    return str(directory)


def set_config(**values: Any) -> Mutate:
    def mutate(directory: Path) -> None:
        raw = json.loads((directory / "config.json").read_text())
        for key, value in values.items():
            if value is _DELETE:
                raw.pop(key, None)
            else:
                raw[key] = value
        (directory / "config.json").write_text(json.dumps(raw))
    return mutate


_DELETE = object()


def load_cpu(path: str, **kwargs: Any) -> Any:
    return load(path, device="cpu", dtype="float32", **kwargs)


class TestConfigValues:
    """Sizes and numbers in config.json, checked where they are read (config_values.py)."""

    @pytest.mark.parametrize(("family", "values", "needle"), [
        # was RuntimeError "Trying to create tensor with negative dimension -32"
        ("dream", {"hidden_size": -32}, "Dream config.json has hidden_size=-32; it must be a positive integer"),
        ("sdar", {"hidden_size": -32}, "sdar config.json has hidden_size=-32"),
        # was TypeError "int() argument must be ... not 'NoneType'"
        ("llada2", {"hidden_size": None}, "LLaDA2 config.json has no 'hidden_size'"),
        # was KeyError
        ("dream", {"vocab_size": _DELETE}, "Dream config.json has no 'vocab_size'"),
        ("sdar", {"hidden_size": _DELETE}, "sdar config.json has no 'hidden_size'"),
        ("llada2", {"num_experts": _DELETE}, "LLaDA2 config.json has no 'num_experts'"),
        # was silently truncated to 32 by int()
        ("dream", {"hidden_size": 32.5}, "hidden_size=32.5; it must be a positive integer"),
        # was ZeroDivisionError
        ("fast_dllm_v2", {"num_attention_heads": 0}, "num_attention_heads=0; it must be a positive integer"),
        ("dream", {"hidden_size": 0}, "hidden_size=0; it must be a positive integer"),
        # was transformers' StrictDataclassClassValidationError (not a ValueError)
        ("llada", {"n_heads": 3}, "n_heads=3, which does not divide its hidden size 32"),
        # were torch size-mismatch walls
        ("dream", {"num_attention_heads": 3}, "num_attention_heads=3, which does not divide its hidden size 32"),
        ("block_causal", {"num_key_value_heads": 3},
         "num_key_value_heads=3, which does not divide num_attention_heads=4"),
        ("llada", {"n_kv_heads": 3}, "n_kv_heads=3, which does not divide n_heads=4"),
        ("sdar", {"head_dim": -8}, "head_dim=-8; it must be a positive integer"),
        ("sdar", {"intermediate_size": -1}, "intermediate_size=-1"),
        # was "could not convert string to float: 'x'", naming neither the key nor the file
        ("dream", {"rms_norm_eps": "x"}, "Dream config.json has rms_norm_eps='x'; it must be a finite number > 0"),
        ("llada2", {"rms_norm_eps": "x"}, "LLaDA2 config.json has rms_norm_eps='x'"),
        # loaded silently: a rotary base <= 0 gives NaN angles
        ("dream", {"rope_theta": -1}, "rope_theta=-1; it must be a finite number > 0"),
        ("sdar", {"rope_theta": -1}, "sdar config.json has rope_theta=-1"),
        ("llada2", {"rope_theta": 0}, "LLaDA2 config.json has rope_theta=0"),
        ("dream", {"max_position_embeddings": 0}, "max_position_embeddings=0"),
        # bool("false") is True: loaded with the output layer tied the wrong way
        ("dream", {"tie_word_embeddings": "false"}, "tie_word_embeddings='false'; it must be true or false"),
        ("llada", {"weight_tying": "false"}, "weight_tying='false'; it must be true or false"),
        # loaded silently, then ran default rotary / full attention
        ("dream", {"rope_scaling": {"type": "linear", "factor": 2.0}}, "Dream config.json states rope_scaling"),
        ("llada", {"rope_scaling": {"type": "linear", "factor": 2.0}}, "LLaDA config.json states rope_scaling"),
        ("dream", {"use_sliding_window": True, "sliding_window": 4}, "use_sliding_window=true"),
        # LLaDA2's router: loaded, then failed (or routed nothing) at the first pass
        ("llada2", {"num_experts_per_tok": 9}, "num_experts_per_tok=9 > num_experts=4"),
        ("llada2", {"n_group": 3}, "n_group=3 does not divide num_experts=4"),
        ("llada2", {"topk_group": 5}, "topk_group=5 > n_group=2"),
        ("llada2", {"first_k_dense_replace": 5}, "first_k_dense_replace=5 > num_hidden_layers=2"),
        ("llada2", {"partial_rotary_factor": 2}, "partial_rotary_factor=2.0 > 1"),
        ("llada2", {"num_experts": 0}, "num_experts=0; it must be a positive integer"),  # was "expected 0..-1"
    ])
    def test_bad_value_is_named(self, sources: dict[str, Path], tmp_path: Path, family: str,
                                values: dict[str, Any], needle: str) -> None:
        path = broken(sources, tmp_path, family, set_config(**values))
        with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
            load_cpu(path)

    def test_nan_in_config_is_named(self, sources: dict[str, Path], tmp_path: Path) -> None:
        """Python's json reads NaN; int(NaN) was "cannot convert float NaN to integer"."""
        def mutate(directory: Path) -> None:
            text = (directory / "config.json").read_text().replace('"hidden_size": 32', '"hidden_size": NaN')
            (directory / "config.json").write_text(text)

        with pytest.raises(ValueError, match=r"Dream config.json has hidden_size=nan"):
            load_cpu(broken(sources, tmp_path, "dream", mutate))

    @pytest.mark.parametrize(("family", "values", "needle"), [
        # were reported as "cannot load the tokenizer ... check that the checkpoint's tokenizer files ..."
        ("tiny", {"hidden_size": "32"}, "tiny config.json has hidden_size='32'"),
        ("block_causal", {"num_attention_heads": 0}, "block_causal config.json has num_attention_heads=0"),
        ("tiny", {"rms_norm_eps": "x"}, "tiny config.json has rms_norm_eps='x'"),
        ("fast_dllm_v2", {"num_hidden_layers": 5},
         r"config.json' is not a valid transformers config .*`num_hidden_layers` \(5\)"),
        # was StrictDataclassClassValidationError: RoPE requires an even rotary dimension
        ("sdar", {"head_dim": 7}, r"sdar config.json does not make a valid model config .*`head_dim`=7"),
    ])
    def test_config_faults_are_not_blamed_on_the_tokenizer(self, sources: dict[str, Path], tmp_path: Path,
                                                            family: str, values: dict[str, Any], needle: str) -> None:
        with pytest.raises(ValueError, match=needle) as caught:
            load_cpu(broken(sources, tmp_path, family, set_config(**values)))
        assert "tokenizer" not in str(caught.value)


class TestConfigStructure:
    @pytest.mark.parametrize(("values", "needle"), [
        ({"architectures": 5}, "has architectures 5; it must be a list of class names"),  # was TypeError
        ({"architectures": [5]}, r"has architectures \[5\]"),  # was AttributeError
        ({"architectures": "DreamModel"}, "has architectures 'DreamModel'"),  # was read character by character
        ({"model_type": 5}, "has model_type 5; it must be a string"),
    ])
    def test_model_type_and_architectures_must_be_text(self, sources: dict[str, Path], tmp_path: Path,
                                                       values: dict[str, Any], needle: str) -> None:
        with pytest.raises(ValueError, match=needle):
            load_cpu(broken(sources, tmp_path, "dream", set_config(**values)))

    def test_binary_config_is_named(self, sources: dict[str, Path], tmp_path: Path) -> None:
        """Was a bare UnicodeDecodeError."""
        path = broken(sources, tmp_path, "tiny", lambda d: (d / "config.json").write_bytes(b"\xff\xfe\x00"))
        with pytest.raises(ValueError, match=r"cannot read '.*config.json': 'utf-8' codec .*came with the checkpoint"):
            load_cpu(path)


class TestWeights:
    @pytest.mark.parametrize("family", ["tiny", "llada", "dream", "sdar", "block_causal", "llada2"])
    def test_vocab_size_that_does_not_fit_the_weights(self, sources: dict[str, Path], tmp_path: Path,
                                                      family: str) -> None:
        """Was a RuntimeError listing every size mismatch over many lines."""
        key = "embedding_size" if family == "llada" else "vocab_size"
        path = broken(sources, tmp_path, family, set_config(**{key: 1000}))
        with pytest.raises(ValueError, match=r"do not have the shapes its config.json implies .*"
                                             r"embed_tokens.weight \(\d+, 32\) vs \(1000, 32\).*vocab_size"):
            load_cpu(path)

    def test_llada2_moe_size_that_does_not_fit(self, sources: dict[str, Path], tmp_path: Path) -> None:
        path = broken(sources, tmp_path, "llada2", set_config(moe_intermediate_size=8))
        with pytest.raises(ValueError, match=r"shared_experts.down_proj.weight \(32, 16\) vs \(32, 8\)"):
            load_cpu(path)

    def test_llada2_fused_qkv_that_does_not_fit_the_head_counts(self, sources: dict[str, Path],
                                                                tmp_path: Path) -> None:
        """Was torch's "split_with_sizes expects split_sizes to sum exactly to 64"."""
        path = broken(sources, tmp_path, "llada2", set_config(num_key_value_heads=1))
        with pytest.raises(ValueError, match=r"query_key_value.weight' has 64 rows, but config.json's "
                                             r"num_attention_heads=4, num_key_value_heads=1 and head_dim=8 make 48"):
            load_cpu(path)

    def test_tied_config_over_a_separate_output_layer(self, sources: dict[str, Path], tmp_path: Path) -> None:
        """Loaded silently with the embeddings in place of the trained output layer."""
        path = broken(sources, tmp_path, "dream", set_config(tie_word_embeddings=True))
        with pytest.raises(ValueError, match=r"ties the output layer .* set tie_word_embeddings to false"):
            load_cpu(path)

    def test_stray_copy_of_a_tensor_in_another_file(self, sources: dict[str, Path], tmp_path: Path) -> None:
        """A second .safetensors file silently replaced the real tensors (here the final norm)."""
        def mutate(directory: Path) -> None:
            save_file({"model.norm.weight": torch.ones(32)}, str(directory / "extra.safetensors"))

        with pytest.raises(ValueError, match=r"'model.norm.weight' is stored in both 'extra.safetensors' and "
                                             r"'model.safetensors'.*remove the stray"):
            load_cpu(broken(sources, tmp_path, "tiny", mutate))

    def test_index_naming_a_shard_not_downloaded(self, sources: dict[str, Path], tmp_path: Path) -> None:
        """Was reported as a corrupt or truncated file."""
        def mutate(directory: Path) -> None:
            names = {key: "model-00002-of-00002.safetensors" for key in load_file(str(directory / "model.safetensors"))}
            (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": names}))

        with pytest.raises(ValueError, match=r"names shards that are not in .*\['model-00002-of-00002.safetensors'\]"):
            load_cpu(broken(sources, tmp_path, "tiny", mutate))

    def test_index_naming_a_shard_outside_the_directory(self, sources: dict[str, Path], tmp_path: Path) -> None:
        def mutate(directory: Path) -> None:
            (directory / "model.safetensors.index.json").write_text(
                json.dumps({"weight_map": {"lm_head.weight": "../model.safetensors"}}))

        with pytest.raises(ValueError, match=r"names shards \['../model.safetensors'\] outside the checkpoint"):
            load_cpu(broken(sources, tmp_path, "tiny", mutate))

    def test_layers_that_do_not_fit_say_which_key(self, sources: dict[str, Path], tmp_path: Path) -> None:
        with pytest.raises(ValueError, match=r"missing \[\], unexpected \['model.layers.1.*check num_hidden_layers"):
            load_cpu(broken(sources, tmp_path, "tiny", set_config(num_hidden_layers=1)))


class TestTinySection:
    def _section(self, **values: Any) -> Mutate:
        def mutate(directory: Path) -> None:
            raw = json.loads((directory / "config.json").read_text())
            if "whole" in values:
                raw["dllm_viz"] = values["whole"]
            else:
                raw["dllm_viz"].update(values)
            (directory / "config.json").write_text(json.dumps(raw))
        return mutate

    @pytest.mark.parametrize(("values", "needle"), [
        ({"whole": "tiny"}, "dllm_viz section is 'tiny'; it must be an object"),  # was AttributeError
        ({"delimiters": "ab"}, "dllm_viz.delimiters is 'ab'; it must be a list"),  # was split into 'a', 'b'
        ({"delimiters": [1]}, r"dllm_viz.delimiters is \[1\]"),
        ({"prompt_template": 5}, "dllm_viz.prompt_template is 5; it must be a string with one {prompt} field"),
        ({"prompt_template": "Q: {x}"}, "dllm_viz.prompt_template is 'Q: {x}'"),  # KeyError at the first decode
        ({"prompt_template": "Q: {prompt"}, "dllm_viz.prompt_template is 'Q: {prompt'"),
    ])
    def test_bad_section_is_named(self, sources: dict[str, Path], tmp_path: Path, values: dict[str, Any],
                                  needle: str) -> None:
        with pytest.raises(ValueError, match=needle.replace("{", r"\{").replace("}", r"\}")):
            load_cpu(broken(sources, tmp_path, "tiny", self._section(**values)))


class TestSpecialIds:
    @pytest.mark.parametrize("family", ["dream", "sdar", "llada2"])
    def test_empty_eos_list(self, sources: dict[str, Path], tmp_path: Path, family: str) -> None:
        """Was IndexError: list index out of range."""
        with pytest.raises(ValueError, match="eos_token_id is an empty list"):
            load_cpu(broken(sources, tmp_path, family, set_config(eos_token_id=[])))

    def test_boolean_mask_id_is_not_token_one(self, sources: dict[str, Path], tmp_path: Path) -> None:
        """JSON true was read as mask id 1, an ordinary token."""
        with pytest.raises(ValueError, match="the mask token id True is not an integer; fix mask_token_id"):
            load_cpu(broken(sources, tmp_path, "sdar", set_config(mask_token_id=True)))

    def test_text_mask_id_is_not_called_out_of_range(self, sources: dict[str, Path], tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="the mask token id 'x' is not an integer"):
            load_cpu(broken(sources, tmp_path, "dream", set_config(mask_token_id="x")))


class TestOptions:
    @pytest.mark.parametrize(("device", "needle"), [
        ("cpu:7", "device 'cpu:7' names a CPU index"),  # was accepted and ignored
        ("meta", "device 'meta' is not one dllm_viz runs on"),  # loaded without weights
        ("xla", "device 'xla' is not one dllm_viz runs on"),  # was RuntimeError
    ])
    def test_devices_torch_names_but_dllm_viz_cannot_run(self, tiny_dir: Path, device: str, needle: str) -> None:
        with pytest.raises(ValueError, match=needle):
            load(str(tiny_dir), device=device)

    @pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS is available here")
    def test_mps_without_mps(self, tiny_dir: Path) -> None:
        """Was RuntimeError: PyTorch is not linked with support for mps devices."""
        with pytest.raises(ValueError, match="device 'mps' requested but MPS is not available; use cpu"):
            load(str(tiny_dir), device="mps")

    def test_cuda_index_past_the_devices(self, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        from dllm_viz.models import resolve_device

        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        with pytest.raises(ValueError, match=r"device 'cuda:3' requested but this machine has 1 CUDA device"):
            resolve_device("cuda:3")
        assert resolve_device("cuda:0") == torch.device("cuda:0")

    @pytest.mark.parametrize("dtype", [torch.int64, torch.complex64])
    def test_torch_dtypes_that_are_not_weights_dtypes(self, tiny_dir: Path, dtype: torch.dtype) -> None:
        """int64 was a RuntimeError in torch's copy; complex64 loaded and decoded nonsense."""
        with pytest.raises(ValueError, match=f"unsupported dtype {dtype}"):
            load(str(tiny_dir), device="cpu", dtype=dtype)

    def test_a_path_object_loads_and_a_number_is_refused(self, tiny_dir: Path) -> None:
        """A pathlib.Path was "'PosixPath' object has no attribute 'strip'"."""
        assert load(tiny_dir, device="cpu").info.family == "tiny"
        with pytest.raises(ValueError, match=r"the model must be 'tiny', a checkpoint directory or a hub id .* got 5"):
            load(5, device="cpu")  # type: ignore[arg-type]

    def test_remote_code_that_cannot_load_is_one_line(self, sources: dict[str, Path], tmp_path: Path) -> None:
        """Was transformers' multi-line "does not recognize this architecture" ValueError."""
        path = broken(sources, tmp_path, "dream", set_config(model_type="foo", architectures=["FooModel"]))
        with pytest.raises(ModelLoadError, match="could not be loaded through its own code") as caught:
            load_cpu(path, trust_remote_code=True)
        assert "\n" not in str(caught.value)


def test_cli_reports_a_bad_config_value_in_one_line(sources: dict[str, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`decode --model` on a Dream config with zero heads: was a ZeroDivisionError traceback."""
    path = broken(sources, tmp_path, "dream", set_config(num_attention_heads=0))
    status = main(["decode", "--model", path, "--prompt", "hi", "--gen-length", "16", "--block-length", "8",
                   "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert "Traceback" not in err and "num_attention_heads=0" in err, err
