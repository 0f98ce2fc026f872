"""Learned controllers: numpy inference equals the torch networks, training learns, the CLI saves a card."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from toy import ToyAdapter

from dllm_viz.cli import main
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.policies import Learn2PdPolicy, Pipeline, TspdPolicy
from dllm_viz.policies.base import Decision
from dllm_viz.policies.blocks import FixedBlocks
from dllm_viz.policies.controller_features import tspd_features
from dllm_viz.policies.controller_weights import (
    BUNDLED,
    ControllerWeights,
    load_controller,
    lstm_step,
    mlp_forward,
    resolve_path,
)
from dllm_viz.policies.extras import FILTER_PROB, TSPD_GATE
from dllm_viz.policies.knobs import point
from dllm_viz.train.controller import (
    ControllerConfig,
    FilterNet,
    TspdNet,
    _metrics,
    filter_examples,
    train,
    train_controller,
    tspd_sequences,
    validation_split,
)


def as_weights(model: torch.nn.Module, card: dict) -> ControllerWeights:
    return ControllerWeights({k: v.detach().numpy() for k, v in model.state_dict().items()}, card)


def test_numpy_lstm_matches_torch_step_by_step() -> None:
    torch.manual_seed(0)
    net = TspdNet(hidden=8, layers=2).eval()
    weights = as_weights(net, {"kind": "tspd"})
    x = torch.randn(5, 6, 7)  # 5 positions, 6 steps
    expected = net(x).detach().numpy()
    h = np.zeros((2, 5, 8), np.float32)
    c = np.zeros_like(h)
    for t in range(6):
        logit, h, c = lstm_step(weights, x[:, t].numpy(), h, c)
        np.testing.assert_allclose(logit, expected[:, t], rtol=1e-4, atol=1e-5)


def test_numpy_filter_matches_torch() -> None:
    torch.manual_seed(0)
    net = FilterNet().eval()
    x = torch.rand(3, 32)
    np.testing.assert_allclose(mlp_forward(as_weights(net, {"kind": "learn2pd"}), x.numpy()),
                               net(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert sum(p.numel() for p in net.parameters()) == 2112


def test_tspd_training_reduces_loss_on_toy_trajectories() -> None:
    adapter = ToyAdapter()
    traces = [decode(adapter, [3 + i, 4], Pipeline.from_names("fixed_steps", block_length=8),
                     DecodeConfig(gen_length=32)) for i in range(8)]
    x, y, m = tspd_sequences(traces, 24, 0.7)
    # One sequence per (trace, window, position), as long as the window's steps (8: one token a step).
    assert x.shape == (8 * 32, 8, 7) and y.shape == m.shape == (8 * 32, 8)
    _, losses, metrics = train(x, y, m, ControllerConfig(kind="tspd", epochs=6, hidden=16, lr=3e-3, batch_size=16),
                               gate_threshold=0.5)
    assert losses[-1] < losses[0] * 0.8, losses
    assert 0.0 <= metrics["precision"] <= 1.0 and metrics["recall"] > 0.0


def test_training_keeps_the_epoch_of_lowest_validation_loss() -> None:
    """The gate's validation recall can swing from epoch to epoch (0.46-0.89 on the bundled model's
    retrain in session 44), so train() returns the epoch whose validation loss is lowest, not the
    last: the returned metrics are that epoch's, and so is the returned model (its validation recall,
    recomputed, is the reported one), here at a learning rate high enough to overshoot."""
    adapter = ToyAdapter()
    traces = [decode(adapter, [3 + i, 4], Pipeline.from_names("fixed_steps", block_length=8),
                     DecodeConfig(gen_length=32)) for i in range(8)]
    x, y, m = tspd_sequences(traces, 24, 0.7)
    config = ControllerConfig(kind="tspd", epochs=8, hidden=16, lr=0.3, batch_size=16)
    seen: list[dict[str, float]] = []
    model, losses, metrics = train(x, y, m, config, gate_threshold=0.5, on_epoch=lambda e, loss, met: seen.append(met))
    assert len(seen) == len(losses) == 8
    lowest = min(seen, key=lambda met: met["loss"])
    assert metrics == lowest and seen[-1]["loss"] > lowest["loss"]  # here the last epoch is not the best
    # the model is the kept epoch's: its recall, recomputed on train()'s validation split, is the reported one
    order, _ = validation_split(np.random.default_rng(config.seed), x.shape[0], config.val_fraction)
    with torch.no_grad():
        xv, yv, mv = torch.from_numpy(x[order]), torch.from_numpy(y[order]), torch.from_numpy(m[order].astype(np.bool_))
        logits = model(xv)
    assert _metrics(logits, yv, mv, 0.5)["recall"] == pytest.approx(metrics["recall"])


def test_learned_policies_record_their_gates(controller_options: dict[str, str]) -> None:
    tspd_policy = TspdPolicy(controller_weights=controller_options["controller_weights"])
    tspd = decode(ToyAdapter(), [4, 5], Pipeline(tspd_policy),
                  DecodeConfig(gen_length=32))
    assert TSPD_GATE in tspd.extras and np.nanmax(tspd.extras[TSPD_GATE]) <= 1.0
    l2p = decode(ToyAdapter(), [4, 5], Pipeline(Learn2PdPolicy(filter_weights=controller_options["filter_weights"])),
                 DecodeConfig(gen_length=32))
    assert FILTER_PROB in l2p.extras and l2p.is_complete


class _AllRowsTspd(TspdPolicy):
    """The reference: a full-canvas (h, c) from step 0 and the LSTM over every row, its new state
    kept only for the window's masked rows (so a position's state is zero until its window opens)."""

    def init_state(self, gen_length):  # type: ignore[no-untyped-def]
        state = super().init_state(gen_length)
        zeros = np.zeros((state.h.shape[0], gen_length, state.h.shape[2]), np.float32)
        return replace(state, h=zeros, c=zeros.copy())

    def step(self, view, state):  # type: ignore[no-untyped-def]
        weights = state.weights
        rows, features = tspd_features(view.confidence, view.entropy, view.candidate, view.window,
                                       view.step_in_window, int(weights.card["vocab_size"]), state.features, self.beta)
        x = np.zeros((view.gen_length, rows.shape[1]), np.float32)  # rows outside the window: never kept
        x[slice(*view.window)] = rows
        logit, h, c = lstm_step(weights, x, state.h, state.c)
        gate = 1.0 / (1.0 + np.exp(-logit))
        run = view.open_positions
        h = np.where(run[None, :, None], h, state.h)
        c = np.where(run[None, :, None], c, state.c)
        commit = run & (gate > point(self, "tau_fix"))
        gates = np.where(run, gate, np.nan).astype(np.float32)
        return Decision.of(commit, "tspd", {TSPD_GATE: gates}), replace(state, features=features, h=h, c=c)


def test_tspd_on_window_rows_only_equals_the_lstm_over_every_row(controller_files: dict[str, str]) -> None:
    runs = [decode(ToyAdapter(), [4, 5], Pipeline(policy(controller_weights=controller_files["tspd"]), FixedBlocks(8)),
                   DecodeConfig(gen_length=32)) for policy in (TspdPolicy, _AllRowsTspd)]
    assert runs[0].tokens.shape[0] > 4  # several passes over several windows
    np.testing.assert_array_equal(runs[0].tokens, runs[1].tokens)
    np.testing.assert_allclose(runs[0].extras[TSPD_GATE], runs[1].extras[TSPD_GATE], rtol=1e-5, atol=1e-6)
    gate = runs[0].extras[TSPD_GATE]
    outside = np.ones_like(gate, dtype=bool)
    for step, (start, end) in enumerate(runs[0].window):
        outside[step, start:end] = False
    assert np.isnan(gate[outside]).all()


def test_training_sequences_reproduce_the_gates_tspd_computed_while_decoding(controller_files: dict[str, str]) -> None:
    """Training and decoding see the same inputs: running the LSTM over `tspd_sequences` of a TSPD
    decode gives back, cell by cell, the gate the policy recorded (train/serve consistency)."""
    trace = decode(ToyAdapter(), [4, 5], Pipeline.from_names("tspd", block_length=8,
                                                             controller_weights=controller_files["tspd"]),
                   DecodeConfig(gen_length=32))
    weights = load_controller(controller_files["tspd"], "tspd")
    x, _, mask = tspd_sequences([trace], int(weights.card["vocab_size"]), 0.7)
    layers, hidden = int(weights.card["layers"]), int(weights.card["hidden"])
    h = np.zeros((layers, x.shape[0], hidden), np.float32)
    c = np.zeros_like(h)
    replayed = []
    for t in range(x.shape[1]):
        logit, h, c = lstm_step(weights, x[:, t], h, c)
        replayed.append(1.0 / (1.0 + np.exp(-logit)))
    replayed = np.stack(replayed, axis=1)  # [rows, steps], rows ordered window by window
    recorded = []
    for block in np.unique(trace.block_index):
        steps = np.flatnonzero(trace.block_index == block)
        start, end = trace.window[steps[0]]
        cells = trace.extras[TSPD_GATE][steps, start:end].T
        recorded.append(np.pad(cells, [(0, 0), (0, x.shape[1] - len(steps))], constant_values=np.nan))
    recorded = np.concatenate(recorded)
    assert mask.sum() > 10 and np.isfinite(recorded[mask]).all()
    np.testing.assert_allclose(replayed[mask], recorded[mask], rtol=1e-4, atol=1e-5)


def test_weights_retrained_into_the_same_file_are_read_again(tmp_path: Path) -> None:
    """The Train page may overwrite a named controller; decoding must then use the new weights."""
    import os

    from safetensors.numpy import save_file

    bundled = load_controller(str(resolve_path(BUNDLED, "learn2pd")), "learn2pd")
    path = tmp_path / "mine.safetensors"
    path.with_suffix(".json").write_text(json.dumps(bundled.card))
    save_file(bundled.tensors, str(path))
    first = load_controller(str(path), "learn2pd")
    assert load_controller(str(path), "learn2pd") is first  # cached while the file is unchanged
    save_file({**bundled.tensors, "fc2.bias": bundled.tensors["fc2.bias"] + 1.0}, str(path))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    second = load_controller(str(path), "learn2pd")
    np.testing.assert_allclose(second.tensors["fc2.bias"], bundled.tensors["fc2.bias"] + 1.0)


def test_missing_controller_weights_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="train-controller"):
        decode(ToyAdapter(), [4], Pipeline(TspdPolicy(controller_weights=str(tmp_path / "none.safetensors"))),
               DecodeConfig(gen_length=32))
    with pytest.raises(ValueError, match="not 'learn2pd'"):
        load_controller(str(tmp_path / "x.safetensors"), "learn2pd") if False else None
        (tmp_path / "x.safetensors").write_bytes(b"")
        (tmp_path / "x.json").write_text(json.dumps({"kind": "tspd"}))
        load_controller(str(tmp_path / "x.safetensors"), "learn2pd")


def test_train_controller_cli_writes_weights_and_card(tiny_dir: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ctl.safetensors"
    status = main(["train-controller", "--model", str(tiny_dir), "--device", "cpu", "--kind", "tspd", "--n", "4",
                   "--epochs", "1", "--gen-length", "16", "--block-length", "8", "--out", str(out)])
    assert status == 0 and out.is_file()
    card = json.loads(out.with_suffix(".json").read_text())
    assert card["kind"] == "tspd" and set(card["validation"]) >= {"precision", "recall"}
    assert card["prompts"] == 4 and len(card["train_loss"]) == 1
    assert card["tasks"] == "arith,code"  # the default, recorded so the recipe can be rerun
    assert "saved" in capsys.readouterr().out


def test_train_controller_tasks_pick_the_training_problems(tiny_dir: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """--tasks hard trains on the hard split's training problems (the distribution the controller will
    decode), --n split evenly among the named tasks in order; the card records the tasks."""
    import dllm_viz.train.controller as controller
    from dllm_viz.cli import train_controller as cli
    from dllm_viz.tasks import get_task

    seen: list[list[str]] = []
    real = controller.train_controller

    def spy(adapter: Any, prompts: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.append(list(prompts))
        return real(adapter, prompts, *args, **kwargs)

    monkeypatch.setattr(controller, "train_controller", spy)
    out = tmp_path / "hard.safetensors"
    assert main(["train-controller", "--model", str(tiny_dir), "--device", "cpu", "--tasks", "hard", "--n", "3",
                 "--epochs", "1", "--gen-length", "16", "--block-length", "8", "--out", str(out)]) == 0
    assert seen[0] == [p.prompt for p in get_task("hard").generate(3, seed=1, split="train")]
    assert json.loads(out.with_suffix(".json").read_text())["tasks"] == "hard"
    # arith,code as before --tasks: arith takes the remainder
    mixed = cli.training_problems(["arith", "code"], 5)
    assert [p.prompt for p in mixed] == [p.prompt for p in (get_task("arith").generate(3, seed=1, split="train")
                                                           + get_task("code").generate(2, seed=1, split="train"))]


def test_shipped_controllers_for_the_tiny_model_load_with_their_cards() -> None:

    for kind in ("tspd", "learn2pd"):
        weights = load_controller(str(resolve_path(BUNDLED, kind)), kind)
        assert weights.card["kind"] == kind and {"precision", "recall"} <= set(weights.card["validation"])


def test_rollout_labels_compare_with_the_given_endpoint_not_the_rollouts_own() -> None:
    adapter = ToyAdapter()
    trace = decode(adapter, [3, 4], Pipeline.from_names("fixed_steps", block_length=8), DecodeConfig(gen_length=16))
    wrong = np.full_like(trace.final_tokens, -1)  # no candidate can equal it
    _, own, mask = tspd_sequences([trace], 24, 0.7)
    _, none, _ = tspd_sequences([trace], 24, 0.7, [wrong])
    assert own[mask].sum() > 0 and none.sum() == 0
    _, f_none, _ = filter_examples([trace], [wrong])
    assert f_none.sum() == 0


@pytest.mark.parametrize("kind", ["tspd", "learn2pd"])
def test_on_policy_rounds_decode_with_the_controller_and_add_data(kind: str, tiny_dir: Path, tmp_path: Path) -> None:
    from dllm_viz.models import load

    adapter = load(str(tiny_dir), device="cpu")
    prompts = [f"Tom has {i} apples." for i in range(4)]
    config = ControllerConfig(kind=kind, gen_length=16, block_length=8, epochs=1, hidden=8)
    _, plain = train_controller(adapter, prompts, config, tmp_path / "plain.safetensors")
    path, card = train_controller(adapter, prompts, ControllerConfig(**{**config.__dict__, "rollouts": 2}),
                                  tmp_path / "dagger.safetensors")
    assert path.is_file() and [r["round"] for r in card["rollouts"]] == [1, 2]
    assert card["examples"] == 3 * plain["examples"]  # the dense data plus one rollout per round
    assert all(r["mean_nfe"] <= r["dense_nfe"] for r in card["rollouts"])
    assert load_controller(str(path), kind).card["rollouts"] == card["rollouts"]


def test_a_gate_that_accepts_every_cell_or_none_is_called_trivial() -> None:
    from dllm_viz.train.controller import trivial_controller

    always = {"precision": 0.30, "recall": 1.0, "positives": 300.0, "cells": 1000.0}
    never = {"precision": 0.0, "recall": 0.0, "positives": 300.0, "cells": 1000.0}
    learned = {"precision": 0.80, "recall": 0.9, "positives": 300.0, "cells": 1000.0}
    assert "always commits" in (trivial_controller(always) or "") and "more prompts" in trivial_controller(always)
    assert "never commits" in (trivial_controller(never) or "")
    assert trivial_controller(learned) is None
    assert trivial_controller({**always, "precision": 0.5}) is None  # recall 1 but selective


def test_progress_events_are_typed_and_print_as_before() -> None:
    from dllm_viz.train.controller import TrainProgress

    epoch = TrainProgress("epoch", 2, 3, 1, loss=0.5, precision=0.25, recall=1.0)
    assert epoch.message() == "round 1 epoch 2/3 loss 0.5000 val precision 0.250 recall 1.000"
    held_out = TrainProgress("epoch", 2, 3, 0, loss=0.5, precision=0.25, recall=1.0, val_loss=0.125)
    assert held_out.message() == "epoch 2/3 loss 0.5000 val loss 0.1250 val precision 0.250 recall 1.000"
    assert TrainProgress("trajectory", 10, 20).message() == "trajectory 10/20"
    assert TrainProgress("rollout", 1, 2, 1, mean_nfe=12.0, dense_nfe=32.0).message() == \
        "rollout 1/2: mean NFE 12.0 (dense 32.0)"


def _copy_controller(kind: str, folder: Path, name: str = "mine") -> Path:
    """A copy of the shipped `kind` controller (weights and card) as `folder/name.safetensors`."""
    import shutil

    path = folder / f"{name}.safetensors"
    shutil.copy(resolve_path(BUNDLED, kind), path)
    shutil.copy(resolve_path(BUNDLED, kind).with_suffix(".json"), path.with_suffix(".json"))
    return path


@pytest.mark.parametrize("kind", ["tspd", "learn2pd"])
def test_nan_or_infinite_weights_are_refused_not_decoded_with(kind: str, tmp_path: Path) -> None:
    """A diverged training run's NaN gate compares False: the policy would silently never commit."""
    from safetensors.numpy import load_file, save_file

    path = _copy_controller(kind, tmp_path)
    tensors = load_file(str(path))
    key = "head.bias" if kind == "tspd" else "fc1.weight"
    tensors[key] = np.full_like(tensors[key], np.nan)
    save_file(tensors, str(path))
    with pytest.raises(ValueError, match=rf"'mine.safetensors' has NaN or infinite values in {key}.*train-controller"):
        load_controller(str(path), kind)


def test_lstm_layers_the_card_leaves_out_are_refused_not_an_index_error(tmp_path: Path) -> None:
    """The forward pass runs every layer in the file, the state has the card's: an IndexError mid-decode."""
    from safetensors.numpy import load_file, save_file

    path = _copy_controller("tspd", tmp_path)
    tensors = load_file(str(path))
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        tensors[f"lstm.{name}_l2"] = tensors[f"lstm.{name}_l1"]
    save_file(tensors, str(path))
    with pytest.raises(ValueError, match="holds 14 tensors, but its card's 2 LSTM layers need 10"):
        decode(ToyAdapter(), [4, 5], Pipeline(TspdPolicy(controller_weights=str(path))), DecodeConfig(gen_length=32))


def test_a_learn2pd_file_with_extra_tensors_is_refused(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    path = _copy_controller("learn2pd", tmp_path)
    save_file({**load_file(str(path)), "head.weight": np.zeros((1, 4), np.float32)}, str(path))
    with pytest.raises(ValueError, match=r"tensors its card does not describe \(head.weight\)"):
        load_controller(str(path), "learn2pd")


def test_a_card_claiming_huge_layers_fails_at_once(tmp_path: Path) -> None:
    """The expected tensors were listed layer by layer first: 10**8 layers took minutes and tens of GB
    (10**6 here, so that the test fails quickly without the fix)."""
    path = _copy_controller("tspd", tmp_path)
    card = json.loads(path.with_suffix(".json").read_text())
    path.with_suffix(".json").write_text(json.dumps({**card, "layers": 10**6}))
    with pytest.raises(ValueError, match="1000000 LSTM layers need 4000002"):
        load_controller(str(path), "tspd")


def test_other_weights_are_refused_from_the_header_before_reading_them(tmp_path: Path) -> None:
    """A large file (a model checkpoint given as controller weights) is judged by its header: its
    data (here 1 GiB, a sparse file) is never read into memory."""
    import struct

    path = _copy_controller("tspd", tmp_path, "ckpt")
    size = 4 * 2**28
    header = json.dumps({"embed.weight": {"dtype": "F32", "shape": [2**28], "data_offsets": [0, size]}}).encode()
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(header)) + header)
        out.truncate(8 + len(header) + size)
    with pytest.raises(ValueError, match=r"'ckpt.safetensors' holds 1 tensors"):
        load_controller(str(path), "tspd")


def test_a_learn2pd_filter_with_an_empty_hidden_layer_is_refused(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    path = _copy_controller("learn2pd", tmp_path)
    save_file({"fc1.weight": np.zeros((0, 32), np.float32), "fc1.bias": np.zeros(0, np.float32),
               "fc2.weight": np.zeros((32, 0), np.float32), "fc2.bias": np.zeros(32, np.float32)}, str(path))
    with pytest.raises(ValueError, match=r"'fc1.weight' should have shape \(1, 32\).*got \(0, 32\)"):
        load_controller(str(path), "learn2pd")


def test_a_folder_a_missing_card_or_an_empty_path_say_which(tmp_path: Path) -> None:
    folder = tmp_path / "ctl.safetensors"
    folder.mkdir()
    with pytest.raises(ValueError, match=r"'ctl.safetensors' is a directory"):
        load_controller(str(folder), "tspd")
    path = _copy_controller("tspd", tmp_path)
    path.with_suffix(".json").unlink()
    with pytest.raises(ValueError, match=r"have no card 'mine.json' beside them"):
        load_controller(str(path), "tspd")
    with pytest.raises(ValueError, match=r"name no .safetensors file.*train-controller"):
        TspdPolicy(controller_weights="").init_state(32)  # was "PosixPath('.') has an empty name"


def test_a_card_linked_from_another_folder_is_not_read(tmp_path: Path) -> None:
    """The app confines the weights path to its controller folder; the card beside it must not
    lead out of that folder through a link."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text(json.dumps({"kind": "tspd"}))
    folder = tmp_path / "controllers"
    folder.mkdir()
    path = _copy_controller("tspd", folder)
    path.with_suffix(".json").unlink()
    path.with_suffix(".json").symlink_to(outside / "secret.json")
    with pytest.raises(ValueError, match=r"'mine.json' of controller 'mine.safetensors' is a link out of"):
        load_controller(str(path), "tspd")


def test_a_card_without_kind_names_the_fix(tmp_path: Path) -> None:
    path = _copy_controller("learn2pd", tmp_path)
    card = json.loads(path.with_suffix(".json").read_text())
    del card["kind"]
    path.with_suffix(".json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match=r"holds a None controller .*not 'learn2pd'; pass a learn2pd controller"):
        load_controller(str(path), "learn2pd")


class TestControllerForAnotherModel:
    """A controller is fitted to one model: its card's vocabulary must be the decoding model's.

    The bundled controllers were trained on the bundled tiny model (vocabulary 920); on another
    model they used to decode without complaint, steering it by the tiny model's dynamics (and TSPD
    scaling its entropy feature by the wrong vocabulary).
    """

    @pytest.mark.parametrize(("rule", "kind"), [("tspd", "tspd"), ("learn2pd", "learn2pd")])
    def test_the_bundled_controller_is_refused_on_another_model(self, tiny_adapter, rule: str, kind: str) -> None:
        assert tiny_adapter.info.vocab_size != 920
        with pytest.raises(ValueError, match=rf"{kind} controller 'bundled' was trained for 'tiny' \(vocabulary "
                           rf"920\), not for this tiny model .*vocabulary {tiny_adapter.info.vocab_size}\).*"
                           rf"train-controller --kind {kind}"):
            decode(tiny_adapter, tiny_adapter.encode_prompt("hi"), Pipeline.from_names(rule),
                   DecodeConfig(gen_length=32))

    def test_a_controller_trained_for_the_model_runs(self, tiny_adapter, tiny_controller_options) -> None:
        for rule in ("tspd", "learn2pd"):
            pipeline = Pipeline.from_names(rule, block_length=8, **tiny_controller_options)
            assert decode(tiny_adapter, tiny_adapter.encode_prompt("hi"), pipeline,
                          DecodeConfig(gen_length=32)).is_complete

    def test_the_message_names_files_not_folders(self, tiny_adapter, controller_options) -> None:
        with pytest.raises(ValueError) as caught:
            decode(tiny_adapter, tiny_adapter.encode_prompt("hi"), Pipeline.from_names("tspd", **controller_options),
                   DecodeConfig(gen_length=32))
        message = str(caught.value)
        assert "'tspd.safetensors' was trained for 'toy'" in message and "/" not in message.split("`")[0]

    def test_a_card_without_a_vocabulary_is_not_checked(self, tiny_adapter, controller_files, tmp_path: Path) -> None:
        weights = Path(controller_files["learn2pd"])
        card = json.loads(weights.with_suffix(".json").read_text())
        del card["vocab_size"]  # Learn2PD's forward pass reads no vocabulary: older cards may lack it
        (tmp_path / weights.name).write_bytes(weights.read_bytes())
        (tmp_path / weights.with_suffix(".json").name).write_text(json.dumps(card))
        pipeline = Pipeline.from_names("learn2pd", block_length=8, filter_weights=str(tmp_path / weights.name))
        assert decode(tiny_adapter, tiny_adapter.encode_prompt("hi"), pipeline, DecodeConfig(gen_length=32)).nfe > 0

    def test_replay_refuses_a_controller_for_another_model_than_the_recorded_one(
            self, tiny_adapter, controller_options, tiny_controller_options) -> None:
        from dllm_viz.replay import replay

        dense = decode(tiny_adapter, tiny_adapter.encode_prompt("hi"),
                       Pipeline.from_names("fixed_steps", block_length=8), DecodeConfig(gen_length=32))
        with pytest.raises(ValueError, match="was trained for 'toy'"):
            replay(dense, Pipeline.from_names("tspd", block_length=8, **controller_options))
        assert replay(dense, Pipeline.from_names("tspd", block_length=8, **tiny_controller_options)).nfe > 0

    def test_the_cli_prints_the_refusal(self, tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        status = main(["decode", "--model", str(tiny_dir), "--prompt", "hi", "--device", "cpu", "--gen-length", "32",
                       "--rule", "tspd"])
        err = capsys.readouterr().err
        assert status != 0 and "was trained for 'tiny' (vocabulary 920)" in err and "Traceback" not in err
