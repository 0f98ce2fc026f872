"""Bad inputs by category: each must end in one clear message naming the value and the fix, with
nothing lost (finished results, saved traces, bundled weights) and no silently wrong result.

Categories: CLI (exit 2, one line), TraceFiles (crafted, oversized, mistyped or out-of-range
.npz files; failed saves), AppAndURL (AppTest: st.error / st.warning, the page still usable),
Concurrency (saves racing for one name).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import shutil
import sys
import threading
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from checkpoints import build_llada, build_tiny
from tool_scripts import tool
from toy import ToyAdapter

from dllm_viz.cli import main
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.policies import Pipeline
from dllm_viz.tasks import Problem, dump_problems, get_task
from dllm_viz.trace import Trace, TraceFileError, TraceSaveError, load_trace
from dllm_viz.trace_files import trace_files

FAST = ["--gen-length", "16", "--block-length", "8", "--device", "cpu"]
BUNDLED = Path(__file__).resolve().parent.parent / "dllm_viz" / "assets" / "controllers"


@pytest.fixture(scope="module")
def trace() -> Trace:
    return decode(ToyAdapter(), [3, 4, 5], Pipeline.from_names("threshold", threshold=0.6, block_length=8),
                  DecodeConfig(gen_length=24), prompt_text="toy prompt")


def one_line_error(capsys: pytest.CaptureFixture[str], status: int, *needles: str) -> str:
    """Assert exit 2 and a single stderr line holding every needle (no traceback)."""
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    lines = [line for line in err.splitlines() if not line.startswith(("[", "note:"))]  # progress, notes aside
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def arrays_of(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def with_meta(arrays: dict[str, np.ndarray], meta: Any) -> dict[str, np.ndarray]:
    return {**arrays, "__meta_json__": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}


def _eval_rows_argv(tmp_path: Path, model: Path, n: int) -> tuple[Path, list[str]]:
    """An `eval --out rows.jsonl` command over `n` one-line arithmetic prompts, and its --out."""
    prompts = tmp_path / "p.jsonl"
    dump_problems([Problem(task="arith", problem_id=f"p{i}", prompt=f"{i} + 1?", target="x", gold=str(i + 1))
                   for i in range(n)], prompts)
    out = tmp_path / "rows.jsonl"
    return out, ["eval", "--model", str(model), "--prompts", str(prompts), "--quiet", "--out", str(out), *FAST]


class TestCLI:
    """`python -m dllm_viz ...`: exit 2 and one line, before any work is wasted or lost."""

    @pytest.mark.parametrize("command", ["bench", "eval"])
    def test_a_run_refused_before_its_first_row_leaves_no_file(self, command: str, tiny_dir: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
        """The controller is checked once the model is loaded, after --out was opened: the header left
        behind made the corrected command fail with 'already exists' (and --resume with 'other settings')."""
        out = tmp_path / ("rows.csv" if command == "bench" else "rows.jsonl")
        argv = [command, "--model", str(tiny_dir), "--n", "1", "--out", str(out), *FAST]
        policy = ["--policies"] if command == "bench" else ["--policy"]
        one_line_error(capsys, main([*argv, *policy, "tspd"]), "was trained for 'tiny'")
        assert not out.exists() and not out.with_name(out.name + ".settings.json").exists()
        assert main([*argv, *policy, "threshold"]) == 0 and out.is_file()

    def test_llada_config_without_d_model(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        ckpt = build_llada(tmp_path / "llada")
        cfg = json.loads((ckpt / "config.json").read_text())
        del cfg["d_model"]
        (ckpt / "config.json").write_text(json.dumps(cfg))
        status = main(["decode", "--model", str(ckpt), "--prompt", "hi", *FAST])
        one_line_error(capsys, status, "'d_model'", "config.json")

    @pytest.mark.parametrize("damage", ["garbage", "truncated"])
    def test_corrupt_or_truncated_safetensors(self, damage: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        ckpt = build_tiny(tmp_path / "tiny")
        weights = ckpt / "model.safetensors"
        data = weights.read_bytes()
        weights.write_bytes(b"\x00garbage" * 4 if damage == "garbage" else data[: len(data) // 2])
        capsys.readouterr()  # the builder's own progress output
        status = main(["decode", "--model", str(ckpt), "--prompt", "hi", *FAST])
        one_line_error(capsys, status, "'model.safetensors'", "corrupt or truncated")

    @pytest.mark.parametrize("mask_id", [99_999, -1])
    def test_mask_id_outside_the_vocabulary(self, mask_id: int, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        ckpt = build_tiny(tmp_path / "tiny")
        cfg = json.loads((ckpt / "config.json").read_text())
        cfg["dllm_viz"]["mask_token_id"] = mask_id
        (ckpt / "config.json").write_text(json.dumps(cfg))
        capsys.readouterr()  # the builder's own progress output
        status = main(["decode", "--model", str(ckpt), "--prompt", "hi", *FAST])
        one_line_error(capsys, status, f"mask token id {mask_id}", "outside the vocabulary", "mask_token_id")

    @pytest.mark.parametrize(("damage", "needle"), [
        ("card_without_layers", "lacks a positive integer 'layers'"),
        ("corrupt_weights", "not a readable .safetensors file"),
        ("corrupt_card", "not readable JSON"),
        ("wrong_shapes", "should have shape"),
    ])
    def test_broken_controller_weights(self, damage: str, needle: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str], tiny_dir: Path) -> None:
        weights, card = tmp_path / "mine.safetensors", tmp_path / "mine.json"
        shutil.copy(BUNDLED / "tspd_tiny.safetensors", weights)
        shutil.copy(BUNDLED / "tspd_tiny.json", card)
        content = json.loads(card.read_text())
        if damage == "card_without_layers":
            del content["layers"]
        elif damage == "wrong_shapes":
            content["hidden"] = 32
        card.write_text("{not json" if damage == "corrupt_card" else json.dumps(content))
        if damage == "corrupt_weights":
            weights.write_bytes(b"xx")
        status = main(["decode", "--model", str(tiny_dir), "--prompt", "hi", "--rule", "tspd",
                       "--controller-weights", str(weights), *FAST])
        line = one_line_error(capsys, status, "'mine.safetensors'", needle)
        assert str(tmp_path) not in line  # named by file name: the same message reaches browsers

    def test_save_into_a_file_path_or_a_directory(self, tmp_path: Path, tiny_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
        (tmp_path / "afile").write_text("x")
        status = main(["decode", "--model", str(tiny_dir), "--prompt", "hi", *FAST,
                       "--save", str(tmp_path / "afile" / "t.npz")])
        one_line_error(capsys, status, "a folder above it is a file")
        (tmp_path / "adir.npz").mkdir()
        status = main(["decode", "--model", str(tiny_dir), "--prompt", "hi", *FAST,
                       "--save", str(tmp_path / "adir.npz")])
        one_line_error(capsys, status, "is a directory")

    def test_save_under_a_hidden_name_is_refused_before_the_decode(self, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
        """Trace.save refuses '.hidden.npz' (no trace library lists it); the CLI says so before it
        loads the model, not after a decode it then cannot save."""
        status = main(["decode", "--model", str(tmp_path / "no-such-model"), "--prompt", "hi", *FAST,
                       "--save", str(tmp_path / ".hidden")])  # a load would fail: the name is refused first
        one_line_error(capsys, status, "'.hidden.npz' starts with '.'", "e.g. 'hidden.npz'")
        assert list(tmp_path.iterdir()) == []

    def test_save_refuses_to_overwrite_without_force(self, tmp_path: Path, tiny_dir: Path, trace: Trace,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
        target = trace.save(tmp_path / "kept.npz")
        before = target.read_bytes()
        status = main(["decode", "--model", str(tiny_dir), "--prompt", "hi", *FAST, "--save", str(target)])
        one_line_error(capsys, status, "already exists", "--force")
        assert target.read_bytes() == before
        assert main(["decode", "--model", str(tiny_dir), "--prompt", "hi", *FAST, "--save", str(target),
                     "--force"]) == 0
        assert load_trace(target).meta.prompt_text == "hi"

    def test_prompt_that_is_not_a_string(self, tmp_path: Path, tiny_dir: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
        prompts = tmp_path / "p.jsonl"
        prompts.write_text(json.dumps({"task": "arith", "problem_id": "a", "prompt": 5, "target": "x", "gold": "1"})
                           + "\n")
        status = main(["eval", "--model", str(tiny_dir), "--prompts", str(prompts), *FAST])
        one_line_error(capsys, status, "p.jsonl:1", "'prompt' must be a string")

    @pytest.mark.parametrize("command", ["eval", "bench"])
    def test_a_problem_of_the_hard_mix_instead_of_a_family(self, command: str, tmp_path: Path, tiny_dir: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
        # "hard" mixes families and scores a problem by its family: a problem naming "hard" itself used to
        # recurse until RecursionError (a traceback, not a message)
        prompts = tmp_path / "p.jsonl"
        prompts.write_text(json.dumps({"task": "hard", "problem_id": "h", "prompt": "2 + 2?", "target": "#### 4",
                                       "gold": "4"}) + "\n")
        status = main([command, "--model", str(tiny_dir), "--prompts", str(prompts), *FAST])
        one_line_error(capsys, status, "p.jsonl:1", "task 'hard' is a mix of families", "'hard/chain'")
        with pytest.raises(ValueError, match="task 'hard' is a mix of families"):
            get_task("hard").score(Problem("hard", "h", "2 + 2?", "#### 4", "4"), "#### 4")

    @pytest.mark.parametrize(("task", "gold", "needle"), [
        ("arith", "four", "is not a plain number"),
        ("hard/chain", "1e400", "is not a plain number"),  # the scorer would read only its '1'
        ("gsm8k", "1,200", "without commas"),
        ("parallelbench/copy", "x", "must be three lines"),
        ("parallelbench/insert_index", '["Mia Stone"]\n\n0', "names no new name"),
        ("parallelbench/replace_index", '["Mia Stone"]\nTom Reed\n1', "give a position in 0..0"),  # no 2nd name
        ("parallelbench/insert_index", '["Mia Stone"]\nTom Reed\n2', "give a position in 0..1"),  # or last
        ("parallelbench/latin_square", "AAB", "4 distinct symbols"),
        ("parallelbench/sudoku", "1234", "4 lines of 4 digits"),
        ("code", "assert f(1) ==", "is not valid Python"),
        ("humaneval", "def check(candidate): pass", "entry point must be the name of the function"),
        ("code", "assert f(1) == 1", "entry point must be the name of the function"),  # scoring raised AttributeError
    ])
    def test_a_gold_answer_the_scorer_cannot_read(self, task: str, gold: str, needle: str, tmp_path: Path,
                                                  tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        # each would have scored every answer wrong (or half-read the gold) without a word
        prompts = tmp_path / "p.jsonl"
        prompts.write_text(json.dumps({"task": task, "problem_id": "g", "prompt": "Go.\ndef f(x):",
                                       "target": "x", "gold": gold}) + "\n")
        one_line_error(capsys, main(["eval", "--model", str(tiny_dir), "--prompts", str(prompts), *FAST]),
                       "p.jsonl:1", needle)

    @pytest.mark.parametrize(("argv", "needle"), [
        (["--delta-p", "0.9"], "--delta-p applies to cora"),
        (["--block", "adablock", "--block-length", "8"], "--block-length applies to aligned, fixed"),
        (["--refresh-every", "2"], "--refresh-every applies only to a prefix or dual KV cache"),
        (["--temperature", "inf"], "finite number"),
        (["--temperature", "nan"], "finite number"),
    ])
    def test_options_that_would_be_ignored_or_break_later(self, argv: list[str], needle: str, tiny_dir: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
        base = ["decode", "--model", str(tiny_dir), "--prompt", "hi", "--gen-length", "16", "--device", "cpu"]
        one_line_error(capsys, main(base + argv), needle)

    @pytest.mark.parametrize(("argv", "needle"), [
        (["--tasks", ","], "names no task"),
        (["--policies", ","], "names no configuration"),
        (["--caches", ","], "names no cache mode"),
        (["--delta-p", "0.9", "--policies", "dense,threshold"], "--delta-p applies to cora"),
    ])
    def test_bench_empty_lists_and_unused_options(self, argv: list[str], needle: str, tiny_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
        one_line_error(capsys, main(["bench", "--model", str(tiny_dir), "--n", "1", *FAST, *argv]), needle)

    @pytest.mark.parametrize("command", ["eval", "bench"])
    def test_empty_prompt_set_exits_non_zero(self, command: str, tmp_path: Path, tiny_dir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        empty = tmp_path / "empty.jsonl"
        empty.write_text("\n")
        status = main([command, "--model", str(tiny_dir), "--prompts", str(empty), *FAST])
        one_line_error(capsys, status, "has no problems")

    def test_eval_reports_the_task_it_scored(self, tmp_path: Path, tiny_dir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        prompts = tmp_path / "gsm.jsonl"  # not the --task default (arith)
        dump_problems([Problem(task="gsm8k", problem_id="g1", prompt="What is 2 + 2?", target="#### 4", gold="4")],
                      prompts)
        assert main(["eval", "--model", str(tiny_dir), "--prompts", str(prompts), "--quiet", *FAST]) == 0
        out = capsys.readouterr().out
        assert "task=gsm8k" in out and "task=arith" not in out

    def test_eval_writes_each_row_and_resumes(self, tmp_path: Path, tiny_dir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        out, argv = _eval_rows_argv(tmp_path, tiny_dir, 3)
        assert main(argv) == 0
        full = out.read_text().splitlines()
        assert [json.loads(line)["problem_id"] for line in full] == ["p0", "p1", "p2"]
        capsys.readouterr()
        one_line_error(capsys, main(argv), "already exists", "--resume")  # never overwritten
        assert out.read_text().splitlines() == full
        out.write_text(full[0] + "\n" + full[1][:20])  # killed while writing the second row
        assert main([*argv, "--resume"]) == 0
        assert [json.loads(line)["problem_id"] for line in out.read_text().splitlines()] == ["p0", "p1", "p2"]
        assert "n=3" in capsys.readouterr().out
        one_line_error(capsys, main([*argv, "--resume", "--threshold", "0.5"]), "other settings")

    def test_resume_refuses_rows_of_a_retrained_model(self, tmp_path: Path, tiny_dir: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
        """Same model name, other weights (a retrained "tiny"): old and new rows would mix two models."""
        import shutil

        model = tmp_path / "model"
        shutil.copytree(tiny_dir, model)
        out, argv = _eval_rows_argv(tmp_path, model, 2)
        assert main(argv) == 0
        (model / "MODEL_CARD.md").write_text("edited")  # not what outputs depend on
        assert main([*argv, "--resume"]) == 0
        weights = model / "model.safetensors"
        data = bytearray(weights.read_bytes())
        data[-1] ^= 1  # the last tensor's last byte: retrained
        weights.write_bytes(bytes(data))
        capsys.readouterr()
        one_line_error(capsys, main([*argv, "--resume"]), "changed since its rows were written", "new --out")
        # A file from before fingerprints existed has none: it is resumed on trust.
        settings = out.with_name(out.name + ".settings.json")
        saved = json.loads(settings.read_text())
        del saved["model_weights"]
        settings.write_text(json.dumps(saved))
        assert main([*argv, "--resume"]) == 0

    def test_bench_resume_refuses_rows_of_other_data_files(self, tmp_path: Path, tiny_dir: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
        """GSM8K's and HumanEval's problem ids are positions in the --data file: another file's rows
        carry the same ids, so bench (and calibrate, which reuses rows by id) keep the files."""
        out = tmp_path / "rows.csv"
        argv = ["bench", "--model", str(tiny_dir), "--n", "1", "--policies", "dense", "--out", str(out), *FAST]
        assert main(argv) == 0
        capsys.readouterr()
        other = tmp_path / "gsm8k_other.jsonl"
        other.write_text("")
        one_line_error(capsys, main([*argv, "--data", str(other), "--resume"]), "other settings (data: null then")

    def test_bench_resume_refuses_rows_decoded_at_another_family_point(self, tmp_path: Path, tiny_dir: Path,
                                                                      capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
        """`cora` with no knobs runs at the model family's point; a recalibrated point (same model
        files, new code) decodes other values, so the rows of the old point are not this run's."""
        from dllm_viz.models import families

        out = tmp_path / "rows.csv"
        argv = ["bench", "--model", str(tiny_dir), "--n", "1", "--policies", "cora", "--out", str(out), *FAST]
        assert main(argv) == 0
        saved = json.loads(out.with_name(out.name + ".settings.json").read_text())
        rule = saved["configs"]["cora"]["rule"]
        tiny = families.calibrated_points("tiny").get("cora", {})
        assert (rule["delta_p"], rule["m"]) == (tiny.get("delta_p", 0.97), tiny.get("m", 2))  # what it decoded
        row = families.by_name("tiny")
        moved = dataclasses.replace(row, points={**row.points, "cora": {"delta_p": 0.5, "m": 0}})
        monkeypatch.setattr(families, "FAMILIES", tuple(moved if f.name == "tiny" else f for f in families.FAMILIES))
        capsys.readouterr()
        one_line_error(capsys, main([*argv, "--resume"]), "other settings (configs:")

    def test_bench_resumes_a_jsonl_file_with_its_types(self, tmp_path: Path, tiny_dir: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "rows.jsonl"
        argv = ["bench", "--model", str(tiny_dir), "--n", "2", "--policies", "dense,threshold", "--out", str(out),
                *FAST]
        assert main(argv) == 0
        first = capsys.readouterr().out
        lines = out.read_text().splitlines()
        out.write_text("\n".join(lines[:3]) + "\n")  # the fourth row was never written
        assert main([*argv, "--resume"]) == 0
        resumed = capsys.readouterr()
        assert "resuming" in resumed.err and len(out.read_text().splitlines()) == 4
        def table(text: str) -> dict[str, dict[str, str]]:  # the summary's deterministic columns
            lines = text.splitlines()
            header = next(line.split() for line in lines if line.split()[:1] == ["accuracy"])
            keep = ("accuracy", "mean_nfe", "nfe_speedup", "agreement")
            return {line.split()[0]: {k: v for k, v in zip(header, line.split()[1:], strict=False) if k in keep}
                    for line in lines if line.startswith(("dense ", "threshold "))}

        # read-back rows keep their bools: the same accuracy and agreement (they were NaN from jsonl)
        assert table(resumed.out) == table(first) and table(first)["dense"]["agreement"] == "1.000"

    def test_bench_writes_each_row_and_resumes(self, tmp_path: Path, tiny_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        import pandas as pd

        out = tmp_path / "rows.csv"
        argv = ["bench", "--model", str(tiny_dir), "--n", "2", "--policies", "dense,threshold", "--out", str(out),
                *FAST]
        assert main(argv) == 0
        full = pd.read_csv(out, keep_default_na=False)
        assert len(full) == 4
        with out.open(newline="") as handle:
            text = handle.read()
        rows_end = [i for i in range(len(text)) if text.startswith("\r\n", i)]
        with out.open("w", newline="") as handle:  # killed while writing the third row
            handle.write(text[: rows_end[2] + 12])
        assert main([*argv, "--resume"]) == 0
        resumed = pd.read_csv(out, keep_default_na=False)
        assert list(zip(resumed["config"], resumed["problem_id"], strict=True)) == list(
            zip(full["config"], full["problem_id"], strict=True))
        assert resumed["completion"].tolist() == full["completion"].tolist()
        assert "resuming" in capsys.readouterr().err

    def test_train_controller_checks_out_before_training(self, tmp_path: Path, tiny_dir: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
        import dllm_viz.train.controller as controller

        def never(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("trained although --out was unusable")

        monkeypatch.setattr(controller, "train_controller", never)
        (tmp_path / "afile").write_text("x")
        base = ["train-controller", "--model", str(tiny_dir), "--n", "2", "--device", "cpu"]
        one_line_error(capsys, main([*base, "--out", str(tmp_path / "afile" / "c.safetensors")]),
                       "a folder above it is a file")
        bundled = BUNDLED / "tspd_tiny.safetensors"
        before = bundled.read_bytes()
        one_line_error(capsys, main([*base, "--out", str(bundled)]), "already exists", "--force")
        assert bundled.read_bytes() == before

    def test_train_controller_default_is_not_the_bundled_file(self, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
        from dllm_viz.cli.train_controller import weights_path

        monkeypatch.setenv("DLLM_VIZ_CONTROLLER_DIR", str(tmp_path))
        args = type("Args", (), {"out": None, "kind": "tspd", "model": "tiny"})()
        assert weights_path(args) == tmp_path / "tspd_tiny.safetensors"  # type: ignore[arg-type]

    def test_train_controller_keeps_trajectories_for_resume(self, tmp_path: Path) -> None:
        from dllm_viz.train.trajectory_store import TrajectoryStore

        trace = decode(ToyAdapter(), [3, 4], Pipeline.from_names("fixed_steps", block_length=8),
                       DecodeConfig(gen_length=16))
        folder = tmp_path / "c.trajectories"
        store = TrajectoryStore(folder, ["a", "b"], {"model": "m"}, resume=False)
        store.put(0, trace)
        with pytest.raises(ValueError, match="pass --resume"):
            TrajectoryStore(folder, ["a", "b"], {"model": "m"}, resume=False)
        with pytest.raises(ValueError, match="other settings"):
            TrajectoryStore(folder, ["a", "c"], {"model": "m"}, resume=True)
        again = TrajectoryStore(folder, ["a", "b"], {"model": "m"}, resume=True)
        kept = again.get(0)
        assert kept is not None and np.array_equal(kept.tokens, trace.tokens) and again.get(1) is None


class TestBadInputHunt:
    """Inputs a user gets wrong, each once silently mishandled: one line naming value and fix, exit 2."""

    @pytest.mark.parametrize(("argv", "needle"), [
        (["--policies", "dense,threshold(threshold=0.5,threshold=0.6)"], "'threshold' of 'threshold' is given twice"),
        (["--sweep", "threshold(threshold=0.5:0.9:3,threshold=0.7)"], "is given twice"),
        (["--sweep", ""], "exactly one knob range"),
        (["--sweep", "threshold(threshold=0.5:0.9:2.5)"], "got '2.5'"),
        (["--sweep", "threshold(threshold=0.5:0.9:-2)"], "got '-2'"),
        (["--sweep", "cora(m=1:4:3)"], "'m' is an integer knob"),  # once "m='2.5' is not an integer"
        (["--seed", "-1"], "`seed` must be an integer in [0, 2**64), got -1"),
        (["--tasks", "arith,arith"], "twice"),
        (["--tasks", "hard,hard/chain", "--n", "100"], "twice"),
    ])
    def test_bench_options_that_ran_another_experiment(self, argv: list[str], needle: str, tiny_dir: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
        one_line_error(capsys, main(["bench", "--model", str(tiny_dir), "--n", "1", *FAST, *argv]), needle)

    def test_bench_runs_its_caches_with_the_refresh_asked_for(self, tmp_path: Path, tiny_dir: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
        """--refresh-every was silently dropped (every dual configuration ran refresh_every=None), and
        --rule / --block / --cache / --extrapolate / --stop were accepted and ignored (bench names its
        configurations in --policies; `--cache` was even read as an abbreviation of --caches). --caches
        without none still runs the uncached dense baseline."""
        out = tmp_path / "rows.csv"
        base = ["bench", "--model", str(tiny_dir), "--n", "1", *FAST]
        assert main([*base, "--policies", "threshold,threshold+dual", "--refresh-every", "2", "--out", str(out)]) == 0
        configs = json.loads(out.with_name(out.name + ".settings.json").read_text())["configs"]
        assert configs["threshold+dual"]["refresh_every"] == 2 and configs["threshold"]["refresh_every"] is None
        for flag, value in (("--rule", "cora"), ("--block", "adablock"), ("--extrapolate", "kalman"),
                            ("--stop", "eos"), ("--cache", "dual"), ("--thresh", "0.5")):  # no abbreviations
            with pytest.raises(SystemExit) as stopped:
                main([*base, "--policies", "threshold", flag, value])
            assert stopped.value.code == 2 and f"unrecognized arguments: {flag} {value}" in capsys.readouterr().err
        assert main([*base, "--policies", "threshold", "--caches", "dual"]) == 0
        table = capsys.readouterr().out
        assert "\ndense " in table and "threshold+dual" in table

    def test_plot_is_checked_before_the_run_and_never_replaced(self, tmp_path: Path, tiny_dir: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
        base = ["bench", "--model", str(tiny_dir), "--n", "1", *FAST]
        (tmp_path / "dir.html").mkdir()
        one_line_error(capsys, main([*base, "--plot", str(tmp_path / "dir.html")]), "is a directory")
        (tmp_path / "afile").write_text("x")
        one_line_error(capsys, main([*base, "--plot", str(tmp_path / "afile" / "p.html")]), "is a file")
        old = tmp_path / "old.html"
        old.write_text("an earlier chart")
        one_line_error(capsys, main([*base, "--plot", str(old)]), "already exists")
        assert old.read_text() == "an earlier chart"
        assert "[1/" not in capsys.readouterr().err  # nothing was decoded

    @pytest.mark.parametrize(("content", "needle"), [
        (b"\xff\xfe\x00binary", "is not UTF-8 text"),
        (None, "is a directory"),
    ])
    def test_prompt_files_that_are_not_text(self, content: bytes | None, needle: str, tmp_path: Path,
                                            tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "p.jsonl"
        if content is None:
            path.mkdir()
        else:
            path.write_bytes(content)
        status = main(["eval", "--model", str(tiny_dir), "--prompts", str(path), *FAST])
        one_line_error(capsys, status, needle, str(path))

    def test_a_repeated_problem_id_is_refused(self, tmp_path: Path, tiny_dir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        problem = Problem(task="arith", problem_id="p1", prompt="1 + 1?", target="x", gold="2")
        path = tmp_path / "dup.jsonl"
        dump_problems([problem, problem], path)
        for command in ("eval", "bench"):  # counted twice, and a bench --resume crashed on it
            status = main([command, "--model", str(tiny_dir), "--prompts", str(path), *FAST])
            one_line_error(capsys, status, ":2 repeats problem_id 'p1' of line 1")

    def test_model_name_and_tokenizer_errors(self, tmp_path: Path, tiny_dir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        base = ["decode", "--prompt", "hi", *FAST]
        one_line_error(capsys, main([*base, "--model", ""]), "the model name is empty")
        broken = tmp_path / "no_tokenizer"
        shutil.copytree(tiny_dir, broken)
        (broken / "tokenizer.json").unlink()
        one_line_error(capsys, main([*base, "--model", str(broken)]), "cannot load the tokenizer", "tokenizer.json")

    @pytest.mark.parametrize(("ratios", "needle"), [("", "no masking ratio"), ("1.5", "must be in (0, 1]"),
                                                    ("0.5,0.5", "0.5 is given twice")])
    def test_diagnose_ratios_before_the_model(self, ratios: str, needle: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        missing = tmp_path / "never_loaded"  # a model that cannot load: the ratios are refused first
        status = main(["diagnose", "--model", str(missing), "--n", "2", "--ratios", ratios, "--list-n", "0"])
        one_line_error(capsys, status, needle)

    @pytest.mark.parametrize(("argv", "needle"), [
        (["decode", "--prompt", ""], "--prompt '' is empty"),
        (["decode", "--prompt", " \n "], "is empty"),
        (["train-controller", "--gen-length", "0"], "`gen_length` must be an integer in [1, 4096], got 0"),
        (["train-controller", "--gen-length", "16", "--block-length", "5"], "must divide `gen_length`"),
        (["train-controller", "--out", "OUT/a.txt"], "name it e.g. 'OUT/a.safetensors'"),
        (["diagnose", "--seed", "-1", "--list-n", "0"], "the masking seed must be >= 0, got -1"),
        (["diagnose", "--lines-n", "-1"], "`--lines-n` must be >= 0 (0: no by-line table), got -1"),
    ])
    def test_refused_before_the_model_loads(self, argv: list[str], needle: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        missing = tmp_path / "never_loaded"  # a model that cannot load: the value is refused first
        argv = [a.replace("OUT", str(tmp_path)) for a in argv]
        status = main([*argv, "--model", str(missing)])
        one_line_error(capsys, status, needle.replace("OUT", str(tmp_path)))
        assert sorted(p.name for p in tmp_path.iterdir()) == []  # no weights, no trajectories

    def test_a_set_smaller_than_n_is_said(self, tmp_path: Path, tiny_dir: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        _, argv = _eval_rows_argv(tmp_path, tiny_dir, 2)
        prompts = argv[argv.index("--prompts") + 1]
        note = f"note: --prompts {prompts!r} has 2 problems, so --n 5 runs 2"
        assert main(["bench", "--model", str(tiny_dir), "--prompts", prompts, "--policies", "dense", "--n", "5",
                     *FAST]) == 0
        captured = capsys.readouterr()
        assert note in captured.err and "n=2" in captured.out
        assert main(["eval", "--model", str(tiny_dir), "--prompts", prompts, "--quiet", "--n", "5", *FAST]) == 0
        captured = capsys.readouterr()
        assert note in captured.err and "n=2" in captured.out
        assert main(["eval", "--model", str(tiny_dir), "--prompts", prompts, "--quiet", "--n", "2", *FAST]) == 0
        assert "note: --prompts" not in capsys.readouterr().err  # a set that has them all says nothing
        for command in ("bench", "eval"):  # a --skip past the set is an error, not an empty run
            status = main([command, "--model", str(tiny_dir), "--prompts", prompts, "--skip", "2", *FAST])
            one_line_error(capsys, status, "`--skip 2` leaves no problem: the set has 2")

    def test_steps_beyond_the_gen_length_are_said_once(self, tmp_path: Path, tiny_dir: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
        _, argv = _eval_rows_argv(tmp_path, tiny_dir, 2)
        prompts = argv[argv.index("--prompts") + 1]
        status = main(["bench", "--model", str(tiny_dir), "--prompts", prompts, "--n", "2", *FAST,
                       "--policies", "fixed_steps(steps=100),fixed_steps(steps=16)"])
        captured = capsys.readouterr()
        assert status == 0, captured.err
        notes = [line for line in captured.err.splitlines() if "asks for more steps" in line]
        assert notes == ["note: fixed_steps steps=100 asks for more steps than --gen-length 16: every pass commits at "
                         "least one position, so at most 16 passes run (steps left with nothing to commit are "
                         "skipped)"]
        assert main(["decode", "--model", str(tiny_dir), "--prompt", "1 + 1?", "--rule", "fixed_steps", "--steps",
                     "100", *FAST]) == 0
        assert "fixed_steps steps=100 asks for more steps than --gen-length 16" in capsys.readouterr().err

    @pytest.mark.parametrize("command", ["bench", "eval"])
    def test_resume_of_a_file_that_is_not_text(self, command: str, tmp_path: Path, tiny_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        _, argv = _eval_rows_argv(tmp_path, tiny_dir, 1)
        prompts = argv[argv.index("--prompts") + 1]
        out = tmp_path / ("rows.csv" if command == "bench" else "rows.jsonl")
        argv = [command, "--model", str(tiny_dir), "--prompts", prompts, "--out", str(out), *FAST]
        assert main(argv) == 0  # its settings file is this run's: only the rows are unreadable
        capsys.readouterr()
        out.write_bytes(b"\xff\xfe\x00binary\x80")
        kind = "CSV" if command == "bench" else "JSONL"
        one_line_error(capsys, main([*argv, "--resume"]), repr(str(out)), f"not a results {kind} file",
                       "choose another --out")
        assert out.read_bytes() == b"\xff\xfe\x00binary\x80"

    @pytest.mark.parametrize(("sweep", "needle"), [
        ("", "exactly one knob range"),  # once read as "no sweep"
        ("threshold", "exactly one knob range"),  # once a traceback
    ])
    def test_bench_summary_reads_a_sweep_as_bench_does(self, sweep: str, needle: str, tmp_path: Path) -> None:
        with pytest.raises(SystemExit, match=f"^error: .*{needle}"):
            tool("bench_summary").main([str(tmp_path / "rows.csv"), "--sweep", sweep])

    def test_bench_summary_names_a_file_it_cannot_read(self, tmp_path: Path) -> None:
        rows = tmp_path / "rows.csv"
        rows.write_bytes(b"\xff\xfe binary")
        with pytest.raises(SystemExit, match=r"rows\.csv: it is not UTF-8 text"):
            tool("bench_summary").main([str(rows)])
        assert rows.read_bytes() == b"\xff\xfe binary"

    def test_train_controller_out_that_is_a_folder(self, tmp_path: Path, tiny_dir: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        status = main(["train-controller", "--model", str(tiny_dir), "--n", "2", "--out", str(tmp_path)])
        one_line_error(capsys, status, "is a directory", "tspd.safetensors")
        assert not tmp_path.with_suffix(".safetensors").exists()  # once written beside the folder

    @pytest.mark.parametrize(("argv", "needle"), [
        (["--eval-every", "0"], "`eval_every` must be >= 1"),
        (["--log-every", "0"], "`log_every` must be >= 1"),
        (["--max-steps", "-1"], "`max_steps` must be >= 0"),
        (["--warmup-steps", "-5"], "`warmup_steps` must be >= 0"),
        (["--init-from", "EMPTY"], "no config.json"),
        (["--out", "FILE"], "is a file"),
    ])
    def test_train_tiny_refuses_before_making_the_run(self, argv: list[str], needle: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
        (tmp_path / "empty").mkdir()
        (tmp_path / "afile").write_text("x")
        swap = {"EMPTY": str(tmp_path / "empty"), "FILE": str(tmp_path / "afile")}
        run = tmp_path / "run"
        argv = [swap.get(a, a) for a in argv]
        status = main(["train-tiny", "--no-export", "--minutes", "0.01", "--device", "cpu", "--out", str(run), *argv])
        one_line_error(capsys, status, needle)
        assert not run.exists()


class TestTraceFiles:
    """Crafted or damaged .npz files: a TraceFileError naming the field, memory bounded, file untouched."""

    def test_huge_declared_shape_is_refused_before_allocating(self, tmp_path: Path) -> None:
        path = tmp_path / "huge.npz"
        header = {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)}
        member = np.lib.format.magic(1, 0) + _npy_header(header) + b"\x00" * 64
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("confidence.npy", member)
        tracemalloc.start()
        with pytest.raises(TraceFileError, match=r"'confidence.npy' declares .* over the .* cap"):
            load_trace(path)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 50 * 2**20

    def test_compression_bomb_is_refused(self, tmp_path: Path, trace: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("DLLM_VIZ_MAX_TRACE_MB", "4")
        arrays = arrays_of(trace.save(tmp_path / "t.npz"))
        arrays["extra__bomb"] = np.zeros((1024, 2048), dtype=np.float32)  # 8 MB of zeros: a few kB on disk
        path = tmp_path / "bomb.npz"
        np.savez_compressed(path, **arrays)
        assert path.stat().st_size < 100_000
        with pytest.raises(TraceFileError, match=r"over the 4 MB cap"):
            load_trace(path)

    def test_member_size_disagreeing_with_its_header(self, tmp_path: Path) -> None:
        path = tmp_path / "lies.npz"
        header = {"descr": "<i4", "fortran_order": False, "shape": (1000,)}
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("tokens.npy", np.lib.format.magic(1, 0) + _npy_header(header) + b"\x00" * 40)
        with pytest.raises(TraceFileError, match=r"'tokens\.npy' declares 4128 bytes"):
            load_trace(path)

    @pytest.mark.parametrize(("content", "needle"), [
        (bytes(range(256)) * 4, "not a zip archive"),
        (b"\x80\x04\x95" + b"\x00" * 20, "pickle"),
        (b"", "empty"),
    ])
    def test_not_an_npz(self, content: bytes, needle: str, tmp_path: Path) -> None:
        path = tmp_path / "x.npz"
        path.write_bytes(content)
        with pytest.raises(TraceFileError, match=needle):
            load_trace(path)
        assert path.read_bytes() == content

    def test_bare_npy_and_object_arrays(self, tmp_path: Path) -> None:
        bare = tmp_path / "bare.npz"
        with bare.open("wb") as handle:
            np.save(handle, np.zeros(3))
        with pytest.raises(TraceFileError, match=r"single \.npy array"):
            load_trace(bare)
        objects = tmp_path / "objects.npz"
        np.savez(objects, tokens=np.array([{"a": 1}], dtype=object))
        with pytest.raises(TraceFileError, match=r"dtype '\|O'.*never loads"):
            load_trace(objects)

    @pytest.mark.parametrize(("change", "needle"), [
        (lambda m: [m], "metadata is a JSON list"),
        (lambda m: {**m, "model": "tiny"}, "'model' must be an object"),
        (lambda m: {**m, "token_text": ["a", "b"]}, "'token_text' must be an object"),
        (lambda m: {**m, "token_text": {"x": 3}}, "'token_text' must map token ids"),
        (lambda m: {**m, "schema_version": -1}, "schema -1"),
        (lambda m: {**m, "schema_version": "1"}, "schema '1'"),
        (lambda m: {**m, "schema_version": 99}, "upgrade dllm_viz"),
        (lambda m: {**m, "label": 7}, "'label' must be a string"),
        (lambda m: {**m, "pipeline": {"rule": "threshold"}}, "'pipeline.rule'"),
        (lambda m: {**m, "model": {**m["model"], "stop_token_ids": "1"}}, "'model.stop_token_ids'"),
        (lambda m: {**m, "reason_names": [1, 2]}, "'reason_names' must be a list of strings"),
    ])
    def test_metadata_of_the_wrong_type(self, change: Any, needle: str, tmp_path: Path, trace: Trace) -> None:
        arrays = arrays_of(trace.save(tmp_path / "t.npz"))
        meta = json.loads(arrays["__meta_json__"].tobytes())
        path = tmp_path / "bad.npz"
        np.savez(path, **with_meta(arrays, change(meta)))
        with pytest.raises(TraceFileError, match=needle):
            load_trace(path)

    @pytest.mark.parametrize(("field", "edit", "needle"), [
        ("reason", lambda a: _set(a, (0, 0), 99), "'reason' holds 99"),
        ("window", lambda a: _set(a, (0,), [50, -3]), r"'window' holds \[50, -3\]"),
        ("pass_kind", lambda a: _set(a, (0,), 7), "'pass_kind' holds 7"),
        ("tokens", lambda a: _set(a, (1, 0), -5), "'tokens' holds -5"),
        ("step_seconds", lambda a: _set(a, (0,), np.inf), "negative or infinite seconds"),
        ("confidence", lambda a: _set(a, (0, 0), 7.0), "outside \\[0, 1\\]"),
        ("tokens", lambda a: a[0], "'tokens.*2 dimensions"),
    ])
    def test_values_out_of_range(self, field: str, edit: Any, needle: str, tmp_path: Path, trace: Trace) -> None:
        arrays = arrays_of(trace.save(tmp_path / "t.npz"))
        arrays[field] = edit(arrays[field])
        path = tmp_path / "bad.npz"
        np.savez(path, **arrays)
        with pytest.raises(TraceFileError, match=needle):
            load_trace(path)

    def test_deeply_nested_metadata(self, tmp_path: Path, trace: Trace) -> None:
        arrays = arrays_of(trace.save(tmp_path / "t.npz"))
        arrays["__meta_json__"] = np.frombuffer(b"[" * 200_000 + b"]" * 200_000, dtype=np.uint8)
        path = tmp_path / "deep.npz"
        np.savez(path, **arrays)
        with pytest.raises(TraceFileError, match="corrupt trace metadata"):
            load_trace(path)

    def test_messages_name_the_file_not_its_folder(self, tmp_path: Path) -> None:
        path = tmp_path / "secret" / "x.npz"
        path.parent.mkdir()
        path.write_bytes(b"junk")
        with pytest.raises(TraceFileError) as info:
            load_trace(path)
        assert "'x.npz'" in str(info.value) and str(path.parent) not in str(info.value)

    def test_a_valid_trace_still_round_trips(self, tmp_path: Path, trace: Trace) -> None:
        loaded = load_trace(trace.save(tmp_path / "ok.npz"))
        assert np.array_equal(loaded.tokens, trace.tokens) and loaded.meta.label == trace.meta.label

    def test_failed_saves_leave_nothing(self, tmp_path: Path, trace: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
        def full_disk(*args: Any, **kwargs: Any) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(np, "savez_compressed", full_disk)
        with pytest.raises(TraceSaveError, match=r"disk holding .* is full"):
            trace.save(tmp_path / "t.npz")
        assert list(tmp_path.iterdir()) == []

    def test_save_never_replaces_without_overwrite(self, tmp_path: Path, trace: Trace) -> None:
        target = trace.save(tmp_path / "t.npz")
        before = target.read_bytes()
        with pytest.raises(TraceSaveError, match="already exists"):
            trace.save(target, overwrite=False)
        assert target.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["t.npz"]

    def test_library_never_lists_partial_files(self, tmp_path: Path, trace: Trace) -> None:
        trace.save(tmp_path / "real.npz")
        (tmp_path / "old.npz.tmp.npz").write_bytes(b"left by an old failed save")
        (tmp_path / ".real.npz.123.partial").write_bytes(b"x")
        assert trace_files(tmp_path) == ["real.npz"]


class TestAppAndURL:
    """AppTest: an error or warning on the page, which stays usable; no server paths shown."""

    @pytest.fixture
    def app(self, tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
        import streamlit.testing.v1.app_test as app_test_module
        from test_app import _NavigationPagesManager

        monkeypatch.setattr(app_test_module, "PagesManager", _NavigationPagesManager)
        monkeypatch.setenv("DLLM_VIZ_MODEL", str(tiny_dir))
        monkeypatch.setenv("DLLM_VIZ_TRACE_DIR", str(tmp_path / "traces"))
        monkeypatch.setenv("DLLM_VIZ_CONTROLLER_DIR", str(tmp_path / "controllers"))
        monkeypatch.chdir(Path(__file__).resolve().parent.parent)
        return tmp_path

    def test_bad_url_values_are_named_in_a_warning(self, app: Path) -> None:
        from test_app import open_app

        at = open_app(query={"threshold": "5", "gen": "-3", "seed": "abc", "rule": "nope", "cache": "zzz",
                             "block_length": "8"})
        warnings = " ".join(w.value for w in at.warning)
        for needle in ("threshold='5'", "(0, 1]", "gen='-3'", "16, 32, 64", "seed='abc'", "rule='nope'",
                       "cache='zzz'", "one of none, prefix, dual"):
            assert needle in warnings, warnings
        assert "block_length" not in warnings  # a valid value is not reported

    def test_bad_traces_leave_the_traces_page_usable(self, app: Path, trace: Trace) -> None:
        from test_app import errors, open_app

        library = app / "traces"
        trace.save(library / "good.npz")
        arrays = arrays_of(library / "good.npz")
        meta = json.loads(arrays["__meta_json__"].tobytes())
        np.savez(library / "bad.npz", **with_meta(arrays, {**meta, "model": "tiny"}))
        at = open_app("traces", {"file": "bad.npz"})
        assert any("Could not open bad.npz" in e and "'model' must be an object" in e for e in errors(at)), errors(at)
        assert "traces_loaded" not in at.session_state
        at.get("file_uploader")[0].set_value(("up.npz", (library / "bad.npz").read_bytes(), "x")).run()
        assert not at.exception and any("Could not read the uploaded file" in e for e in errors(at)), errors(at)
        assert all(str(app) not in e and "/tmp" not in e for e in errors(at))  # no server paths
        at.selectbox(key="file").set_value("good.npz").run()  # the page still works
        assert not at.exception and not errors(at)
        assert at.session_state["traces_loaded"].nfe == trace.nfe

    def test_a_run_is_autosaved_and_a_failed_save_keeps_the_page(self, app: Path) -> None:
        from test_app import click, errors, open_app

        at = click(open_app(query={"gen": "32", "block_length": "8"}), "run")
        decoded = at.session_state["trace"]
        saved = trace_files(app / "traces")
        assert len(saved) == 1 and saved[0].startswith("autosave-")  # a reload now would keep this run
        assert load_trace(app / "traces" / saved[0]).nfe == decoded.nfe
        at.switch_page("pages/traces.py").run()
        (app / "traces" / "afile").write_text("x")  # typed folders stay inside the library (issue 20, item 7)
        at.text_input(key="traces_dir").set_value("afile").run()
        at.text_input(key="traces_name").set_value("mine").run()
        click(at, "traces_save")
        assert any("Not saved" in e and "is a file" in e for e in errors(at)), errors(at)
        at.text_input(key="traces_dir").set_value("").run()
        click(at, "traces_save")
        assert load_trace(app / "traces" / "mine.npz").nfe == decoded.nfe

    def test_broken_controller_from_the_url_is_an_error_without_paths(self, app: Path) -> None:
        from test_app import click, errors, open_app

        weights = app / "controllers" / "mine.safetensors"  # the URL may name only the app's controller folder
        weights.parent.mkdir()
        shutil.copy(BUNDLED / "tspd_tiny.safetensors", weights)
        weights.with_suffix(".json").write_text(json.dumps({"kind": "tspd"}))
        at = click(open_app(query={"rule": "tspd", "controller_weights": str(weights), "gen": "32",
                                   "block_length": "8"}), "run")
        assert any("lacks a positive integer 'layers'" in e for e in errors(at)), errors(at)
        assert all(str(weights.parent) not in e for e in errors(at))


class TestConcurrency:
    """Saves racing for one file: exactly one wins, every file on disk is a whole trace."""

    def test_racing_saves_without_overwrite(self, tmp_path: Path, trace: Trace) -> None:
        target, outcomes = tmp_path / "same.npz", []

        def save() -> None:
            try:
                trace.save(target, overwrite=False)
                outcomes.append("saved")
            except TraceSaveError:
                outcomes.append("refused")

        threads = [threading.Thread(target=save) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["refused"] * 5 + ["saved"]
        assert load_trace(target).nfe == trace.nfe and [p.name for p in tmp_path.iterdir()] == ["same.npz"]

    def test_racing_overwrites_leave_one_whole_trace(self, tmp_path: Path, trace: Trace) -> None:
        target = tmp_path / "same.npz"
        threads = [threading.Thread(target=trace.save, args=(target,)) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert load_trace(target).nfe == trace.nfe and [p.name for p in tmp_path.iterdir()] == ["same.npz"]


def _npy_header(header: dict[str, Any]) -> bytes:
    text = repr(header).encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    body = text + b" " * pad + b"\n"
    return len(body).to_bytes(2, "little") + body


def _set(array: np.ndarray, index: tuple[int, ...], value: Any) -> np.ndarray:
    out = array.copy()
    out[index] = value
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
