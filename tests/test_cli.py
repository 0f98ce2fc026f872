"""The command line: decode prints text, NFE and time; bad arguments exit 2 with one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dllm_viz.cli import main
from dllm_viz.trace import load_trace


def test_decode_prints_text_nfe_and_time_and_saves(tiny_dir: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "trace.npz"
    status = main(["decode", "--model", str(tiny_dir), "--prompt", "2 + 3", "--policy", "fixed_steps",
                   "--steps", "16", "--gen-length", "32", "--block-length", "8", "--device", "cpu",
                   "--save", str(out_file)])
    out = capsys.readouterr().out
    assert status == 0
    assert "nfe=16" in out and "time=" in out and "policy=fixed8+fixed_steps16" in out
    assert "policy_overhead=" in out and "policy_overhead=nan" not in out
    trace = load_trace(out_file)
    assert trace.nfe == 16 and trace.meta.prompt_text == "2 + 3"


def test_decode_threshold_option_reaches_the_policy(tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", "--model", str(tiny_dir), "--prompt", "hi", "--threshold", "0.5",
                 "--gen-length", "16", "--block-length", "16", "--device", "cpu"]) == 0
    assert "policy=fixed16+threshold0.5" in capsys.readouterr().out


def test_decode_with_block_refinement_reports_its_edits(capsys: pytest.CaptureFixture[str]) -> None:
    # the bundled model: a random one's confidences (about 1 / vocabulary) clear no editing threshold
    assert main(["decode", "--model", "tiny", "--prompt", "Tom has 3 apples. He buys 5 more. How many?",
                 "--rule", "block_refinement", "--block", "aligned", "--block-length", "16", "--commit-threshold",
                 "0.5", "--editing-threshold", "0.3", "--temperature", "0.7", "--gen-length", "64",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "policy=aligned16+block_refinement32(0.5,0.3)" in out and " edits=" in out and " post_steps=" in out


@pytest.mark.parametrize(("argv", "needle"), [
    (["--block-length", "30"], "must divide"),
    (["--threshold", "1.5"], "threshold"),
    (["--gen-length", "0"], "gen_length"),
    (["--model", "/definitely/missing"], "check the path"),
])
def test_bad_values_exit_2_with_one_line(tiny_dir: Path, argv: list[str], needle: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    base = ["decode", "--model", str(tiny_dir), "--prompt", "hi", "--device", "cpu"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_unknown_policy_is_a_one_line_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "dllm_viz", "decode", "--prompt", "x", "--policy", "nope"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "invalid choice" in proc.stderr


def test_help_documents_every_option() -> None:
    proc = subprocess.run([sys.executable, "-m", "dllm_viz", "decode", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0
    for option in ("--model", "--prompt", "--policy", "--threshold", "--gen-length", "--block-length",
                   "--save", "--steps", "--remasking", "--factor", "--temperature", "--seed", "--device"):
        assert option in proc.stdout
    # every component explained with its paper, from dllm_viz.explain (the widgets read the same table)
    from dllm_viz.explain import COMPONENTS

    text = " ".join(proc.stdout.split())
    for entry in COMPONENTS.values():
        assert " ".join(entry.text.split()) in text and entry.paper.split(", ")[-1] in text


@pytest.fixture(scope="module")
def block_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A block-causal checkpoint (a Llama config with block_size 4)."""
    from checkpoints import build_block_llama

    return build_block_llama(tmp_path_factory.mktemp("block_llama"), block_length=4, head_scale=60.0)[0]


def test_a_block_causal_model_defaults_to_block_refinement_on_its_own_blocks(
        block_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "block.npz"
    assert main(["decode", "--model", str(block_dir), "--prompt", "hi", "--gen-length", "12", "--device", "cpu",
                 "--save", str(out_file)]) == 0
    captured = capsys.readouterr()
    assert "block-causal model with block length 4" in captured.err
    assert "--rule block_refinement --block aligned --block-length 4" in captured.err
    pipe = load_trace(out_file).meta.pipeline
    assert pipe["rule"]["name"] == "block_refinement"
    assert pipe["block"] == {"name": "aligned", "block_length": 4}


def test_explicit_choices_win_over_the_block_model_defaults(block_dir: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "explicit.npz"
    assert main(["decode", "--model", str(block_dir), "--prompt", "hi", "--gen-length", "12", "--device", "cpu",
                 "--rule", "threshold", "--block-length", "6", "--save", str(out_file)]) == 0
    err = capsys.readouterr().err
    assert "--block aligned" in err and "--rule" not in err and "--block-length" not in err
    pipe = load_trace(out_file).meta.pipeline
    assert pipe["rule"]["name"] == "threshold" and pipe["block"] == {"name": "aligned", "block_length": 6}


def test_a_bidirectional_model_keeps_threshold_and_says_nothing(tiny_dir: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", "--model", str(tiny_dir), "--prompt", "hi", "--gen-length", "16", "--block-length", "16",
                 "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if line.startswith("note:")]
    assert "policy=fixed16+threshold" in captured.out and all("CPU threads" in line for line in notes)


@pytest.mark.parametrize(("argv", "needle"), [
    (["--block", "adablock", "--rule", "threshold"], "adablock sizes a window from a pass over the whole canvas"),
    (["--cache", "dual", "--rule", "threshold"], "cache='dual' needs a natively supported bidirectional"),
])
def test_the_engines_refusals_on_a_block_model_are_one_line(block_dir: Path, argv: list[str], needle: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", "--model", str(block_dir), "--prompt", "hi", "--gen-length", "16", "--device", "cpu",
                 *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len([line for line in err if not line.startswith("note:")]) == 1 and needle in err[-1], err


def test_block_length_of_reads_the_config_alone(tiny_dir: Path, block_dir: Path, tmp_path: Path) -> None:
    from checkpoints import build_llada2, build_sdar

    from dllm_viz.models import block_length_of

    assert block_length_of(str(tiny_dir)) is None and block_length_of(str(block_dir)) == 4
    assert block_length_of(str(build_sdar(tmp_path / "sdar", block_size=8)[0])) == 8
    assert block_length_of(str(build_llada2(tmp_path / "llada2"))) == 32  # LLaDA2's generate() default
    # what cannot be read now is left to load(), after the caller's own checks; nothing downloads
    assert block_length_of(str(tmp_path / "missing")) is None
    assert block_length_of("someone/not-downloaded-model") is None


def test_bench_help_explains_every_summary_column(capsys: pytest.CaptureFixture[str]) -> None:
    from dllm_viz.bench_columns import SUMMARY_COLUMNS

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for name, meaning in SUMMARY_COLUMNS.items():
        assert f"{name}: {' '.join(meaning.split())}" in text
