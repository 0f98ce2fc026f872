"""A checkpoint's own code never runs without --trust-remote-code, and nothing asks on stdin.

The checkpoints here carry an `auto_map` (in tokenizer_config.json and config.json) pointing at
a Python file that writes a marker when imported. stdin is a fake terminal answering "y", which
is what made transformers run such code before: the marker must stay unwritten.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from checkpoints import build_llada, build_tiny

from dllm_viz.models import ModelLoadError, load

EVIL = "from pathlib import Path\nPath({marker!r}).write_text('the checkpoint ran its code')\n"


class YesTty(io.StringIO):
    """A terminal whose user answers yes to every question."""

    def __init__(self) -> None:
        super().__init__("y\n" * 20)

    def isatty(self) -> bool:
        return True


def add_remote_code(directory: Path, marker: Path, *, tokenizer: bool, config: bool) -> Path:
    """Point the checkpoint's auto_map at a module that writes `marker` when imported."""
    (directory / "evil_code.py").write_text(EVIL.format(marker=str(marker)) + "\n"
                                            "from transformers import PreTrainedTokenizerFast, PretrainedConfig\n"
                                            "class EvilTokenizer(PreTrainedTokenizerFast): pass\n"
                                            "class EvilConfig(PretrainedConfig): model_type = 'evil'\n")
    if tokenizer:
        path = directory / "tokenizer_config.json"
        raw = json.loads(path.read_text())
        raw["auto_map"] = {"AutoTokenizer": ["evil_code.EvilTokenizer", "evil_code.EvilTokenizer"]}
        raw["tokenizer_class"] = "EvilTokenizer"
        path.write_text(json.dumps(raw))
    if config:
        path = directory / "config.json"
        raw = json.loads(path.read_text())
        raw["auto_map"] = {"AutoConfig": "evil_code.EvilConfig", "AutoModel": "evil_code.EvilTokenizer"}
        path.write_text(json.dumps(raw))
    return directory


@pytest.fixture
def yes_tty(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("sys.stdin", YesTty())
    # Were the code fetched, transformers would copy it here rather than into ~/.cache.
    from transformers import dynamic_module_utils

    monkeypatch.setattr(dynamic_module_utils, "HF_MODULES_CACHE", str(tmp_path / "hf_modules"))


def test_tokenizer_auto_map_is_refused_in_one_line_naming_the_flag(tmp_path: Path, yes_tty: None) -> None:
    marker = tmp_path / "marker"
    directory = add_remote_code(build_tiny(tmp_path / "ckpt"), marker, tokenizer=True, config=True)
    with pytest.raises(ModelLoadError) as caught:
        load(str(directory), device="cpu")
    message = str(caught.value)
    assert "--trust-remote-code" in message and "\n" not in message
    assert not marker.exists()


def test_unknown_architecture_with_auto_map_is_refused(tmp_path: Path, yes_tty: None) -> None:
    marker = tmp_path / "marker"
    directory = build_tiny(tmp_path / "ckpt")
    raw = json.loads((directory / "config.json").read_text())
    del raw["dllm_viz"]
    raw.update(model_type="evil", architectures=["EvilModel"])
    (directory / "config.json").write_text(json.dumps(raw))
    add_remote_code(directory, marker, tokenizer=False, config=True)
    with pytest.raises(ModelLoadError, match="--trust-remote-code"):
        load(str(directory), device="cpu")
    assert not marker.exists()


def test_native_family_with_auto_map_loads_without_running_it(tmp_path: Path, yes_tty: None) -> None:
    """Real LLaDA checkpoints carry an auto_map for their own classes; ours are used instead."""
    marker = tmp_path / "marker"
    directory = add_remote_code(build_llada(tmp_path / "llada"), marker, tokenizer=False, config=True)
    adapter = load(str(directory), device="cpu")
    assert adapter.info.family == "llada"
    assert not marker.exists()


def test_cli_refuses_with_exit_2(tmp_path: Path, yes_tty: None, capsys: pytest.CaptureFixture[str]) -> None:
    from dllm_viz.cli import main

    marker = tmp_path / "marker"
    directory = add_remote_code(build_tiny(tmp_path / "ckpt"), marker, tokenizer=True, config=False)
    capsys.readouterr()  # the checkpoint builder's progress bars
    assert main(["decode", "--model", str(directory), "--prompt", "1+1", "--gen-length", "32"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--trust-remote-code" in err
    assert not marker.exists()


def test_without_the_guard_transformers_would_run_it(tmp_path: Path, yes_tty: None) -> None:
    """The attack is real: a bare AutoTokenizer call reads the "y" and imports the file."""
    from transformers import AutoTokenizer

    marker = tmp_path / "marker"
    directory = add_remote_code(build_tiny(tmp_path / "ckpt"), marker, tokenizer=True, config=False)
    with contextlib.suppress(Exception):  # the evil class may fail to build; the import is the attack
        AutoTokenizer.from_pretrained(str(directory))
    assert marker.exists()
