"""Bad inputs to the training and calibration commands (train-tiny, train-controller, calibrate,
diagnose): each once ended in a raw traceback, a hang, or a silently wrong run; now exit 2 and one
line naming the value and the fix, before anything is written.

Every command here either fails before its work starts or runs a few steps on a tiny model; the
options that would train are kept small (SMALL) so that, without the checks, a test fails fast
instead of training for the default two hours.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from test_bad_inputs import one_line_error
from toy import ToyAdapter

from dllm_viz.cli import main
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.policies import Pipeline
from dllm_viz.tasks import Problem, dump_problems, get_task
from dllm_viz.train.config import DataConfig, ModelConfig, TrainConfig

REPO = Path(__file__).resolve().parent.parent
BUNDLED_TINY = REPO / "dllm_viz" / "assets" / "tiny"
# A 1-step run of a 1-layer model: what the checks stop, kept cheap should one be missing.
SMALL = ["--hidden-size", "32", "--num-layers", "1", "--num-heads", "2", "--intermediate-size", "64",
         "--batch-size", "2", "--drill-batch-size", "2", "--max-steps", "1", "--eval-every", "1", "--minutes", "1"]
FAST = ["--gen-length", "16", "--block-length", "8", "--device", "cpu"]
CHECKPOINT_CONFIG = TrainConfig(data=DataConfig(batch_size=2),
                                model=ModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64))


def train_tiny(out: Path, *argv: str) -> int:
    return main(["train-tiny", "--out", str(out), *SMALL, *argv])


def fake_checkpoint(run_dir: Path, *, config: TrainConfig = CHECKPOINT_CONFIG,
                    model: dict[str, torch.Tensor] | None = None, tokenizer: bool = True) -> Path:
    """A checkpoint.pt with `config` (weights only as far as a test needs), and the bundled tokenizer."""
    run_dir.mkdir(parents=True)
    torch.save({"model": model or {}, "optimizer": {}, "config": dataclasses.asdict(config), "state": {},
                "torch_rng": torch.get_rng_state()}, run_dir / "checkpoint.pt")
    if tokenizer:
        (run_dir / "tokenizer").mkdir()
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(BUNDLED_TINY / name, run_dir / "tokenizer" / name)
    return run_dir / "checkpoint.pt"


class TestTrainTiny:
    """`train-tiny`: refused before the run directory, its tokenizer or an export is touched."""

    @pytest.mark.parametrize(("argv", "needle"), [
        (["--minutes", "nan"], "`minutes` must be a finite number > 0, got nan"),  # never ran out: a hang
        (["--minutes", "inf"], "`minutes` must be a finite number > 0, got inf"),
        (["--lr", "nan"], "`lr` must be a finite number > 0, got nan; pass e.g. --lr"),  # torch's words, late
        (["--lr", "inf"], "`lr` must be a finite number > 0, got inf"),
    ])
    def test_budget_and_learning_rate_must_be_finite(self, argv: list[str], needle: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
        one_line_error(capsys, train_tiny(tmp_path / "run", "--no-export", *argv), needle)
        assert not (tmp_path / "run").exists()

    @pytest.mark.parametrize(("argv", "needle"), [
        (["--num-heads", "0"], "`num_heads` must be a whole number >= 1, got 0; pass --num-heads 1"),  # ZeroDivision
        (["--hidden-size", "0"], "`hidden_size` must be a whole number >= 1, got 0"),  # ZeroDivisionError
        (["--hidden-size", "-4"], "`hidden_size` must be a whole number >= 1, got -4"),  # torch RuntimeError
        (["--num-layers", "0"], "`num_layers` must be a whole number >= 1, got 0"),  # trained a model of no layers
        (["--intermediate-size", "0"], "`intermediate_size` must be a whole number >= 1"),  # an MLP of width 0
        (["--hidden-size", "6", "--num-heads", "2"], "must be even for rotary position embeddings, got 6 / 2 = 3"),
    ])
    def test_model_sizes_that_cannot_build_a_model(self, argv: list[str], needle: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        one_line_error(capsys, train_tiny(tmp_path / "run", "--no-export", *argv), needle)
        assert not (tmp_path / "run").exists()

    def test_hard_weight_without_hard_rows_is_refused(self, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
        """--hard-weight picks among the hard rows; with --hard-fraction 0 there were none, and the flag
        was silently a no-op."""
        status = train_tiny(tmp_path / "run", "--no-export", "--hard-weight", "hard/chain=0.6")
        one_line_error(capsys, status, "--hard-weight hard/chain=0.6", "--hard-fraction 0", "--hard-fraction 0.6")

    @pytest.mark.parametrize("device", ["cuda:x", "cuda:99"])
    def test_device_that_is_not_one_or_not_here(self, device: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
        """torch's RuntimeError / AssertionError, raised only once the model moved there; the rules
        are the model loader's."""
        one_line_error(capsys, train_tiny(tmp_path / "run", "--no-export", "--device", device),
                       f"--device {device!r}", "cpu")
        assert not (tmp_path / "run").exists()

    def test_resume_refuses_flags_it_would_ignore(self, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
        """Resuming keeps the checkpoint's model, data and seed: `--resume --batch-size 3` trained at
        the checkpoint's 2 without a word. The same values again (one command line rerun) are fine."""
        import dllm_viz.train.tiny as tiny

        ran: list[Any] = []
        monkeypatch.setattr(tiny, "train", lambda *args, **kwargs: ran.append(args) or {
            "step": 1, "minutes": 0.0, "best_step": 1, "best_score": 0.5})
        run_dir = tmp_path / "run"
        fake_checkpoint(run_dir)
        status = main(["train-tiny", "--out", str(run_dir), "--resume", "--no-export", "--batch-size", "3",
                       "--seed", "5", "--num-layers", "1"])
        one_line_error(capsys, status, "--batch-size 3 is not its --batch-size 2", "--seed 5 is not its --seed 0",
                       "drop those flags")
        assert not ran
        assert main(["train-tiny", "--out", str(run_dir), "--resume", "--no-export", "--batch-size", "2",
                     "--num-layers", "1", "--minutes", "3"]) == 0
        assert len(ran) == 1

    def test_init_from_refuses_sizes_it_would_ignore(self, tiny_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
        """A warm start takes the export's sizes: --hidden-size 64 trained the export's 32 silently."""
        status = train_tiny(tmp_path / "run", "--no-export", "--init-from", str(tiny_dir), "--hidden-size", "64")
        one_line_error(capsys, status, "--hidden-size 64 is not its 32", "--grow-layers")
        assert not (tmp_path / "run").exists()

    @pytest.mark.parametrize(("content", "needle"), [
        (b"\x00garbage", "is not a readable training checkpoint (UnpicklingError"),  # a raw UnpicklingError
        (None, "is not a train-tiny checkpoint (it lacks model, optimizer, config"),  # a raw KeyError 'config'
    ])
    @pytest.mark.parametrize("flags", [[], ["--seed", "5"]])  # a flag: read first for its config alone (mapped)
    def test_resume_from_a_damaged_or_foreign_checkpoint(self, content: bytes | None, needle: str, flags: list[str],
                                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        if content is None:
            torch.save({"weights": torch.zeros(2)}, run_dir / "checkpoint.pt")
        else:
            (run_dir / "checkpoint.pt").write_bytes(content)
        status = main(["train-tiny", "--out", str(run_dir), "--resume", "--no-export", *flags])
        one_line_error(capsys, status, needle, "another --out")

    def test_resume_never_runs_code_a_checkpoint_carries(self, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
        """A shared checkpoint.pt was unpickled in full: loading it could run any code it carried."""
        run_dir, marker = tmp_path / "run", tmp_path / "ran"
        run_dir.mkdir()
        torch.save({"model": {}, "optimizer": {}, "config": {}, "state": {}, "torch_rng": _RunsCode(str(marker))},
                   run_dir / "checkpoint.pt")
        status = main(["train-tiny", "--out", str(run_dir), "--resume", "--no-export"])
        one_line_error(capsys, status, "holds Python objects other than tensors and plain data",
                       "GLOBAL posix.system", "is not loaded", "another --out")
        assert not marker.exists()

    def test_resume_without_its_tokenizer(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A new tokenizer was trained silently, and the checkpoint's weights then failed to load."""
        run_dir = tmp_path / "run"
        fake_checkpoint(run_dir, tokenizer=False)
        status = main(["train-tiny", "--out", str(run_dir), "--resume", "--no-export"])
        one_line_error(capsys, status, "tokenizer is missing", "restore that folder")
        assert not (run_dir / "tokenizer").exists()

    def test_resume_whose_weights_do_not_fit_its_tokenizer(self, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
        """torch's many-line RuntimeError of mismatched shapes."""
        run_dir = tmp_path / "run"
        fake_checkpoint(run_dir, model={"model.embed_tokens.weight": torch.zeros(5, 32)})
        status = main(["train-tiny", "--out", str(run_dir), "--resume", "--no-export"])
        one_line_error(capsys, status, "do not fit the model of its own configuration", "restore the tokenizer")

    @pytest.mark.parametrize(("damage", "needle"), [
        ("bad_json", "its config.json is not readable JSON"),  # a JSONDecodeError's words alone
        ("no_sizes", "its config.json lacks a positive whole hidden_size"),  # a raw KeyError
        ("no_weights", "lacks model.safetensors"),  # after the tokenizer was copied into the run
        ("no_tokenizer", "lacks tokenizer.json"),  # transformers' message about sentencepiece
    ])
    def test_init_from_a_broken_export(self, damage: str, needle: str, tiny_dir: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        export = tmp_path / "export"
        shutil.copytree(tiny_dir, export)
        config = export / "config.json"
        if damage == "bad_json":
            config.write_text("{not json")
        elif damage == "no_sizes":
            raw = json.loads(config.read_text())
            del raw["hidden_size"]
            config.write_text(json.dumps(raw))
        else:
            (export / ("model.safetensors" if damage == "no_weights" else "tokenizer.json")).unlink()
        status = train_tiny(tmp_path / "run", "--no-export", "--init-from", str(export))
        one_line_error(capsys, status, f"--init-from {str(export)!r}", needle, "dllm_viz/assets/tiny")
        assert not (tmp_path / "run").exists()  # no tokenizer left for a later fresh run to reuse

    def test_a_new_run_does_not_replace_an_export(self, tiny_dir: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
        """A new run's first evaluation always 'improved' on nothing and replaced the export there,
        by default the bundled model: a 1-step trial run destroyed the shipped weights."""
        import dllm_viz.train.export as export

        kept = tmp_path / "kept"
        shutil.copytree(tiny_dir, kept)
        before = (kept / "model.safetensors").read_bytes()
        status = train_tiny(tmp_path / "run", "--export-dir", str(kept))
        one_line_error(capsys, status, f"--export-dir {str(kept)!r} already holds an exported model", "--no-export",
                       "--init-from")
        monkeypatch.setattr(export, "ASSETS_DIR", kept)  # what the default export folder is
        one_line_error(capsys, train_tiny(tmp_path / "run"), "the default export folder", "--export-dir NEW_FOLDER")
        assert (kept / "model.safetensors").read_bytes() == before
        assert not (tmp_path / "run").exists()


def _training_prompts(path: Path, n: int) -> Path:
    dump_problems(get_task("arith").generate(n, seed=5, split="train"), path)
    return path


class TestTrainController:
    """`train-controller`: refused before the model loads and the dense decodes start."""

    def test_resume_with_nothing_to_resume(self, tiny_dir: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
        """Silently decoded every prompt again (most of a run's time), e.g. under a mistyped --out."""
        out = tmp_path / "c.safetensors"
        status = main(["train-controller", "--model", str(tiny_dir), "--n", "2", "--epochs", "1", *FAST,
                       "--out", str(out), "--resume"])
        one_line_error(capsys, status, "--resume", "c.trajectories", "drop --resume")
        assert not out.exists()

    @pytest.mark.parametrize("heldout", ["arith_heldout.jsonl", "mixed"])
    def test_prompts_from_a_heldout_set(self, heldout: str, tiny_dir: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        """A controller trained on the problems the benchmarks score, without a word."""
        prompts = REPO / "sample_prompts" / heldout
        if heldout == "mixed":  # one held-out problem among training ones is enough
            prompts = _training_prompts(tmp_path / "mixed.jsonl", 3)
            with prompts.open("a") as handle:
                handle.write((REPO / "sample_prompts" / "hard_heldout.jsonl").read_text().splitlines()[3] + "\n")
        status = main(["train-controller", "--model", str(tiny_dir), "--n", "4", "--epochs", "1", *FAST,
                       "--prompts", str(prompts), "--out", str(tmp_path / "c.safetensors")])
        one_line_error(capsys, status, "held-out set sample_prompts/", "omit --prompts")
        assert sorted(p.name for p in tmp_path.iterdir()) == ([] if heldout != "mixed" else ["mixed.jsonl"])

    @pytest.mark.parametrize(("tasks", "said"), [
        ("gsm8k", ("--tasks 'gsm8k'", "real benchmark", "--prompts")),
        ("hard,hard", ("names a task twice",)),
        (" , ", ("names no task", "arith,code")),
        ("hrad", ("unknown task 'hrad'", "hard/chain")),
    ])
    def test_tasks_that_give_no_training_problems(self, tasks: str, said: tuple[str, ...], tiny_dir: Path,
                                                  tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Refused with the fix before the model loads and nothing is written."""
        status = main(["train-controller", "--model", str(tiny_dir), "--n", "4", "--epochs", "1", *FAST,
                       "--tasks", tasks, "--out", str(tmp_path / "c.safetensors")])
        one_line_error(capsys, status, *said)
        assert list(tmp_path.iterdir()) == []

    def test_tasks_and_prompts_together(self, tiny_dir: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        prompts = _training_prompts(tmp_path / "p.jsonl", 3)
        with pytest.raises(SystemExit):
            main(["train-controller", "--model", str(tiny_dir), "--tasks", "hard", "--prompts", str(prompts)])
        assert "not allowed with argument" in capsys.readouterr().err

    def test_a_prompt_set_smaller_than_n_is_said(self, tiny_dir: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
        prompts = _training_prompts(tmp_path / "p.jsonl", 3)
        status = main(["train-controller", "--model", str(tiny_dir), "--n", "10", "--epochs", "1", *FAST,
                       "--prompts", str(prompts), "--out", str(tmp_path / "c.safetensors")])
        assert status == 0
        assert f"note: --prompts {str(prompts)!r} has 3 problems, so --n 10 runs 3" in capsys.readouterr().err

    def test_resume_refuses_trajectories_of_a_retrained_model(self, tiny_dir: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
        """The kept dense trajectories were tied to the model's name only, so after `tiny` was
        retrained a --resume trained the controller on the old model's endpoints."""
        import dllm_viz.train.controller as controller

        model = tmp_path / "model"
        shutil.copytree(tiny_dir, model)
        trace = decode(ToyAdapter(), [3, 4], Pipeline.from_names("fixed_steps", block_length=8),
                       DecodeConfig(gen_length=16))

        def interrupted(*args: Any, store: Any, **kwargs: Any) -> Any:
            store.put(0, trace)
            raise ValueError("interrupted")

        def never(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("trained on the old model's trajectories")

        argv = ["train-controller", "--model", str(model), "--n", "2", "--epochs", "1", *FAST,
                "--out", str(tmp_path / "c.safetensors")]
        monkeypatch.setattr(controller, "train_controller", interrupted)
        assert main(argv) == 2
        assert (tmp_path / "c.trajectories" / "000000.npz").is_file()
        weights = model / "model.safetensors"
        data = bytearray(weights.read_bytes())
        data[-1] ^= 1  # the last tensor's last byte: "retrained"
        weights.write_bytes(bytes(data))
        capsys.readouterr()
        monkeypatch.setattr(controller, "train_controller", never)
        one_line_error(capsys, main([*argv, "--resume"]), "cannot --resume", "other settings")


class TestCalibrate:
    """`calibrate --rows`: a failed start leaves nothing that blocks the rerun, and says --rows."""

    ARGV: ClassVar[list[str]] = ["calibrate", "--policy", "threshold", "--grid", "threshold=0.5,0.9", "--tasks",
                                 "arith", "--n", "1", "--check-n", "1", "--gen-length", "16", "--block-length", "8"]

    def test_bad_threads_leaves_no_rows_file(self, tiny_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        """--threads was checked only as the model loaded, after the rows file was made; the rerun
        with --threads fixed was then refused because that file 'already exists'."""
        rows = tmp_path / "rows.csv"
        status = main([*self.ARGV, "--model", str(tiny_dir), "--device", "cpu", "--rows", str(rows), "--threads", "0"])
        one_line_error(capsys, status, "`--threads` must be >= 1, got 0")
        assert sorted(p.name for p in tmp_path.iterdir()) == []

    def test_an_existing_rows_file_is_named_as_rows(self, tiny_dir: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
        """The message said '--out ... already exists' (bench's flag); calibrate's --out is its report."""
        rows = tmp_path / "rows.csv"
        rows.write_text("kept")
        status = main([*self.ARGV, "--model", str(tiny_dir), "--device", "cpu", "--rows", str(rows)])
        line = one_line_error(capsys, status, f"--rows {str(rows)!r} already exists", "--resume")
        assert "--out" not in line and rows.read_text() == "kept"


def test_diagnose_says_when_the_heldout_set_is_shorter_than_n(tiny_dir: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """--n above the held-out arithmetic set's 500 problems measured 500 and printed counts as if --n ran."""
    import dllm_viz.evaluation as evaluation

    two: list[Problem] = get_task("arith").generate(2, seed=3, split="heldout")
    monkeypatch.setattr(evaluation, "heldout_problems", lambda task, n=None: two if task == "arith" else [])
    assert main(["diagnose", "--model", str(tiny_dir), "--device", "cpu", "--n", "3", "--ratios", "1.0",
                 "--list-n", "0"]) == 0
    assert "note: the held-out arithmetic set has 2 problems, so its tables measure 2, not --n 3" in (
        capsys.readouterr().err)


class _RunsCode:
    """Pickles as a call of os.system: what a malicious checkpoint would carry."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)
