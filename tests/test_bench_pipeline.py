"""The engine-vs-LLaDA2Pipeline benchmark runs, compares equal decodes, and reports the right table.

No timing is asserted (DESIGN.md §7): only that the three configurations decode the same tokens
in the same NFE, that the exact cache feeds fewer rows, and the table's shape; bad values get
one-line errors naming the fix.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch

from dllm_viz.bench_pipeline import (
    BASELINE,
    CONFIGS,
    ROW_COLUMNS,
    SUMMARY_COLUMNS,
    PipelineBenchSettings,
    bench_prompts,
    run_pipeline_bench,
    summarize_pipeline_bench,
)
from dllm_viz.cli import main
from dllm_viz.models import load
from dllm_viz.models.attention_wrapper import AttentionWrapper
from dllm_viz.random_block_model import SHAPE_TINY, build_random_block_model, parameter_count

GEN, BLOCK, STEPS = 40, SHAPE_TINY.block_length, 8


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_block_model(tmp_path_factory.mktemp("bench_pipeline") / "m", SHAPE_TINY)


@pytest.fixture(scope="module")
def rows(model_dir: Path) -> pd.DataFrame:
    adapter = load(str(model_dir), device="cpu", dtype="float32")
    settings = PipelineBenchSettings(gen_length=GEN, block_length=BLOCK, steps=STEPS, repeats=2)
    return run_pipeline_bench(adapter, bench_prompts(adapter, 3), settings)


def test_the_random_model_is_a_seeded_block_causal_checkpoint(model_dir: Path, tmp_path: Path) -> None:
    adapter = load(str(model_dir), device="cpu", dtype="float32")
    assert adapter.info.attention == "block_causal" and adapter.info.block_length == BLOCK
    assert adapter.info.mask_token_id == adapter.tokenizer.mask_token_id
    again = build_random_block_model(tmp_path / "again", SHAPE_TINY)
    assert (again / "model.safetensors").read_bytes() == (model_dir / "model.safetensors").read_bytes()
    assert parameter_count(model_dir) == sum(p.numel() for p in adapter.model.parameters())
    with pytest.raises(FileExistsError, match="already holds a checkpoint"):
        build_random_block_model(model_dir, SHAPE_TINY)


def test_every_configuration_decodes_the_pipelines_tokens(rows: pd.DataFrame) -> None:
    assert list(rows.columns) == list(ROW_COLUMNS)
    assert len(rows) == len(CONFIGS) * 3 * 2
    assert rows["same_tokens"].all()
    per_prompt = rows.groupby(["prompt", "config"])["nfe"].unique()
    assert all(len(nfe) == 1 for nfe in per_prompt)  # deterministic: every repeat the same NFE
    assert rows.groupby("prompt")["nfe"].nunique().eq(1).all()  # and every configuration the same passes
    fed = rows.groupby("config")["tokens_fed"].sum()
    assert fed["engine"] == fed[BASELINE] > fed["engine+exact"]  # the cache queries only the current block
    assert (rows["seconds"] > 0).all() and (rows["cpu_seconds"] >= 0).all()


def test_the_summary_has_one_row_per_configuration_and_ratios_against_the_pipeline(rows: pd.DataFrame) -> None:
    summary = summarize_pipeline_bench(rows)
    assert list(summary.index) == list(CONFIGS) and list(summary.columns) == list(SUMMARY_COLUMNS)
    assert summary.loc[BASELINE, ["ratio", "ratio_min", "ratio_max", "cpu_ratio"]].tolist() == [1.0] * 4
    assert (summary["ratio_min"] <= summary["ratio"]).all() and (summary["ratio"] <= summary["ratio_max"]).all()
    assert (summary["same_tokens"] == 1.0).all() and (summary["runs"] == 6).all()
    totals = rows.groupby(["config", "repeat"])["seconds"].sum()
    assert summary.loc["engine", "median_s"] == pytest.approx(totals["engine"].median())
    assert summary.loc["engine", "ratio"] == pytest.approx((totals[BASELINE] / totals["engine"]).median())


def test_a_changed_output_shows_in_the_table(rows: pd.DataFrame) -> None:
    changed = rows.copy()
    changed.loc[(changed["config"] == "engine") & (changed["prompt"] == 0), "same_tokens"] = False
    assert summarize_pipeline_bench(changed).loc["engine", "same_tokens"] == pytest.approx(4 / 6)


def test_the_cli_prints_the_table(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["bench-pipeline", "--model", str(model_dir), "--gen-length", "24", "--steps", "4", "--n", "1",
                   "--repeats", "1", "--threads", "1", "--out", str(tmp_path / "runs.csv")])
    out = capsys.readouterr().out
    assert status == 0, out
    header, *table = out.strip().splitlines()
    assert "gen_length=24" in header and f"block_length={BLOCK}" in header and "load_avg=" in header
    assert table[0].split() == list(SUMMARY_COLUMNS)
    assert [line.split()[0] for line in table[1:4]] == list(CONFIGS)
    assert table[-1] == "every run produced the pipeline's tokens"
    written = pd.read_csv(tmp_path / "runs.csv")
    assert list(written.columns) == list(ROW_COLUMNS) and len(written) == len(CONFIGS)


@pytest.mark.parametrize(("argv", "needle"), [
    (["--n", "0"], "`--n` must be >= 1"),
    (["--repeats", "0"], "`--repeats` must be >= 1"),
    (["--gen-length", "-4"], "`--gen-length` must be >= 1"),
    (["--threads", "0"], "omit it for torch's default"),
    (["--model", "/definitely/missing"], "neither 'random' nor a checkpoint directory"),
    (["--block-length", "16"], "pass --block-length 8 or omit it"),
    (["--out", "/"], "already exists"),
])
def test_bad_values_get_one_line_errors(model_dir: Path, argv: list[str], needle: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    model = [] if "--model" in argv else ["--model", str(model_dir)]
    assert main(["bench-pipeline", *model, *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_a_bidirectional_model_is_refused(tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench-pipeline", "--model", str(tiny_dir), "--n", "1", "--repeats", "1"]) == 2
    assert "needs a block-causal checkpoint" in capsys.readouterr().err


def test_the_wrapper_names_bad_attention_and_batches(model_dir: Path) -> None:
    adapter = load(str(model_dir), device="cpu", dtype="float32")
    with pytest.raises(ValueError, match="unknown attention 'sliding'"):
        AttentionWrapper(adapter.model, "sliding", BLOCK)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="block length >= 1"):
        AttentionWrapper(adapter.model, "block_causal", 0)
    wrapper = AttentionWrapper(adapter.model, "block_causal", BLOCK)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    wrapper(ids, torch.ones_like(ids), torch.arange(5)[None])
    assert (wrapper.num_forwards, wrapper.tokens_fed) == (1, 5)
    with pytest.raises(ValueError, match="call the pipeline once per prompt"):
        wrapper(ids.repeat(2, 1), torch.ones(2, 5, dtype=torch.long), torch.arange(5).repeat(2, 1))
