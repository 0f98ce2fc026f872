"""Training a controller holds the shared model lock only while it decodes.

The Train page held `model_turn` for a whole training, so every other session's Decode, Compare
and Tune waited ("The model is busy…") through minutes of fitting that never touch the model.
Now each decode is its own turn; the fits and the save run outside the lock. Without the lock
around the save, the save itself keeps a name from being saved twice: the run claims its weights
file (a second training of it in this process is refused at once), checks it at every turn, and
the final save refuses an existing file atomically. A Stop anywhere releases the lock and the
claim and leaves no file behind.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from streamlit.runtime.scriptrunner_utils.exceptions import StopException
from test_app import _WatchedLock, errors, open_app
from test_app import dirs as dirs  # the fixture

import dllm_viz.train.controller as controller
from dllm_viz.models import ModelAdapter
from dllm_viz.train.controller import (
    ControllerConfig,
    ControllerExistsError,
    FilterNet,
    TrainProgress,
    claim_weights,
    save_controller,
    train_controller,
)

PROMPTS = [f"Tom has {i} apples and buys {i + 2} more." for i in range(4)]
CONFIG = ControllerConfig(kind="tspd", gen_length=16, block_length=8, epochs=2, hidden=8)


def turn_on(lock: threading.Lock | _WatchedLock) -> Callable[[], Any]:
    """A model_turn over `lock`, as app_ui.common.model_turn is over the app's model lock."""
    @contextmanager
    def model_turn() -> Iterator[None]:
        lock.acquire()
        try:
            yield
        finally:
            lock.release()
    return model_turn


def free_in_another_thread(lock: threading.Lock) -> bool:
    """Whether another thread (another session) can take `lock` now, without waiting."""
    got: list[bool] = []

    def take() -> None:
        got.append(lock.acquire(blocking=False))
        if got[-1]:
            lock.release()

    thread = threading.Thread(target=take)
    thread.start()
    thread.join()
    return got == [True]


def files_in(folder: Path) -> list[str]:
    """Every name in `folder`, hidden partial files included ([] when it does not exist)."""
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


# ---- The lock: held for each decode, free while fitting ------------------------------------

def test_the_model_lock_is_held_for_each_decode_and_free_while_fitting(
        tiny_adapter: ModelAdapter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = threading.Lock()
    held_while_decoding: list[bool] = []
    decode = controller.decode

    def watched_decode(*args: Any, **kwargs: Any) -> Any:
        held_while_decoding.append(lock.locked())
        return decode(*args, **kwargs)

    monkeypatch.setattr(controller, "decode", watched_decode)
    free_while: dict[str, list[bool]] = {"trajectory": [], "epoch": [], "rollout": []}

    def on_progress(progress: TrainProgress) -> None:
        free_while[progress.stage].append(free_in_another_thread(lock))

    config = ControllerConfig(**{**CONFIG.__dict__, "rollouts": 1})
    path, card = train_controller(tiny_adapter, PROMPTS, config, tmp_path / "c.safetensors",
                                  on_progress=on_progress, model_turn=turn_on(lock), overwrite=False)
    # Dense collection and the one on-policy round: every decode in its own turn.
    assert held_while_decoding == [True] * (2 * len(PROMPTS))
    assert free_while["epoch"] == [True] * (2 * config.epochs)  # both fits, every epoch
    assert free_while["trajectory"] and all(free_while["trajectory"]) and free_while["rollout"] == [True]
    assert not lock.locked() and path.is_file() and card["rollouts"][0]["round"] == 1


def test_the_cli_default_takes_no_lock_and_still_replaces(tiny_adapter: ModelAdapter, tmp_path: Path) -> None:
    """train-controller calls train_controller as before (no model_turn, no overwrite): its --force
    still replaces weights, which the CLI checked up front."""
    out = tmp_path / "c.safetensors"
    out.write_bytes(b"old weights")
    path, card = train_controller(tiny_adapter, PROMPTS[:2], CONFIG, out)
    assert path == out and out.read_bytes() != b"old weights"
    assert json.loads(out.with_suffix(".json").read_text())["kind"] == card["kind"] == "tspd"
    assert files_in(tmp_path) == ["c.json", "c.safetensors"]


# ---- One name, two trainings ---------------------------------------------------------------

def test_two_trainings_of_one_name_save_one_controller_and_tell_the_other_why(
        tiny_adapter: ModelAdapter, tmp_path: Path) -> None:
    """Without the lock around the whole run, two sessions training one name ran side by side, and
    the later save replaced the earlier one's controller."""
    lock, out = threading.Lock(), tmp_path / "shared.safetensors"
    first_fitting, second_done = threading.Event(), threading.Event()
    results: list[Any] = []

    def first_progress(progress: TrainProgress) -> None:
        if progress.stage == "epoch":
            first_fitting.set()
            assert second_done.wait(120), "the second training never finished"

    def first() -> None:
        try:
            results.append(train_controller(tiny_adapter, PROMPTS, CONFIG, out, on_progress=first_progress,
                                            model_turn=turn_on(lock), overwrite=False))
        except BaseException as exc:  # handed to the test's thread
            results.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert first_fitting.wait(120), "the first training never fitted"
        with pytest.raises(ControllerExistsError, match="another training is already writing") as refused:
            train_controller(tiny_adapter, PROMPTS, CONFIG, out, model_turn=turn_on(lock), overwrite=False)
        assert refused.value.training and refused.value.path == out
    finally:
        second_done.set()
        thread.join(300)
    assert not thread.is_alive() and not isinstance(results[0], BaseException), results
    assert files_in(tmp_path) == ["shared.json", "shared.safetensors"]
    assert json.loads(out.with_suffix(".json").read_text()) == results[0][1]
    with pytest.raises(ControllerExistsError, match="already exist") as again:  # and once saved: refused as taken
        train_controller(tiny_adapter, PROMPTS, CONFIG, out, model_turn=turn_on(lock), overwrite=False)
    assert not again.value.training


def test_a_name_saved_while_waiting_for_the_model_stops_the_training_at_that_turn(
        tiny_adapter: ModelAdapter, tmp_path: Path) -> None:
    """Another process (or a copy) saved the name while this training waited for the model: it
    stops as it gets the model, not after minutes of fitting, and the other file stays."""
    lock, out = _WatchedLock(), tmp_path / "c.safetensors"
    progress: list[TrainProgress] = []
    result: list[BaseException] = []

    def run() -> None:
        try:
            train_controller(tiny_adapter, PROMPTS, CONFIG, out, on_progress=progress.append,
                             model_turn=turn_on(lock), overwrite=False)
        except BaseException as exc:  # handed to the test's thread
            result.append(exc)

    lock.acquire()  # another session decodes
    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert lock.contended.wait(120), "the training never asked for the model"
        out.write_bytes(b"the other session's controller")  # saved while this one waits
    finally:
        lock.release()
        thread.join(300)
    assert len(result) == 1 and isinstance(result[0], ControllerExistsError) and not result[0].training
    assert progress == [] and out.read_bytes() == b"the other session's controller"
    assert files_in(tmp_path) == ["c.safetensors"]


def test_two_saves_of_one_name_at_once_keep_exactly_one_pair(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Both saves pass every check before either moves its file into place (the race a check and
    then a write loses): one pair of weights and card is saved, whole and matching."""
    import dllm_viz.writable as writable

    link, both_ready = os.link, threading.Barrier(2)

    def link_together(src: Any, dst: Any) -> None:
        both_ready.wait(60)
        link(src, dst)

    monkeypatch.setattr(writable.os, "link", link_together)
    out, outcome = tmp_path / "c.safetensors", {}
    nets = {who: FilterNet() for who in ("a", "b")}  # two random initialisations

    def save(who: str) -> None:
        try:
            save_controller(nets[who], out, {"who": who}, overwrite=False)
            outcome[who] = "saved"
        except ControllerExistsError as exc:
            outcome[who] = str(exc)

    threads = [threading.Thread(target=save, args=(who,)) for who in nets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    saved = [who for who, what in outcome.items() if what == "saved"]
    assert len(saved) == 1 and len(outcome) == 2, outcome
    (refused,) = set(outcome) - set(saved)
    assert "already exist" in outcome[refused] and "choose another name" in outcome[refused]
    assert files_in(tmp_path) == ["c.json", "c.safetensors"]
    assert json.loads(out.with_suffix(".json").read_text()) == {"who": saved[0]}
    from safetensors.torch import load_file

    expected = nets[saved[0]].state_dict()  # the card's own weights, not the other save's
    assert all(torch.equal(tensor, expected[key]) for key, tensor in load_file(str(out)).items())


# ---- A Stop (or a failure) anywhere leaves nothing and frees the lock ----------------------

@pytest.mark.parametrize("where", ["trajectory", "inside a decode", "epoch", "rollout", "card write"])
def test_a_stopped_or_failed_training_frees_the_lock_and_leaves_no_file(
        where: str, tiny_adapter: ModelAdapter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock, out = threading.Lock(), tmp_path / "controllers" / "c.safetensors"
    decodes = [0]
    decode = controller.decode

    def decode_then_stop(*args: Any, **kwargs: Any) -> Any:
        decodes[0] += 1
        if where == "inside a decode" and decodes[0] == 2:
            assert lock.locked()
            raise StopException()  # as Streamlit raises it at a yield point with the lock held
        return decode(*args, **kwargs)

    def on_progress(progress: TrainProgress) -> None:
        if progress.stage == where:
            raise StopException()  # the user's Stop, raised by the page's progress widgets

    replace = os.replace

    def no_room_for_the_card(src: Any, dst: Any) -> None:
        if Path(dst) == out.with_suffix(".json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        replace(src, dst)

    monkeypatch.setattr(controller, "decode", decode_then_stop)
    monkeypatch.setattr(controller.os, "replace", no_room_for_the_card)
    config = ControllerConfig(**{**CONFIG.__dict__, "rollouts": 1})
    expected = (ValueError, "cannot write controller weights") if where == "card write" else (StopException, None)
    with pytest.raises(expected[0], match=expected[1]):
        train_controller(tiny_adapter, PROMPTS[:2], config, out, on_progress=on_progress,
                         model_turn=turn_on(lock), overwrite=False)
    assert not lock.locked()
    assert files_in(out.parent) == []  # no weights, no card, no partial file
    with claim_weights(out):  # the claim was released: the name can be trained again
        pass


# ---- The Train page -------------------------------------------------------------------------

def small_train_page() -> Any:
    """The Train page set for a tiny training: 2 prompts, 2 epochs, gen 16, 8 hidden units."""
    at = open_app("train")
    at.number_input(key="train_prompts").set_value(2).run()
    at.number_input(key="train_epochs").set_value(2).run()
    at.select_slider(key="train_gen").set_value(16).run()
    at.number_input(key="train_block").set_value(16).run()
    at.number_input(key="train_hidden").set_value(8).run()
    return at


def test_the_train_page_leaves_the_model_free_while_it_fits_at_the_sessions_thread_count(
        dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The page held model_turn for the whole training: every other session waited for its fits."""
    import app_ui.common as common

    lock = _WatchedLock()
    monkeypatch.setattr(common, "model_lock", lambda: lock)
    monkeypatch.setenv("DLLM_VIZ_THREADS", "2")  # this session's count, not the test thread's 1
    fitted: list[tuple[bool, int]] = []
    fit = controller.train

    def watched_fit(*args: Any, **kwargs: Any) -> Any:
        fitted.append((free_in_another_thread(lock._lock), torch.get_num_threads()))
        return fit(*args, **kwargs)

    monkeypatch.setattr(controller, "train", watched_fit)
    before = torch.get_num_threads()
    try:
        at = small_train_page()
        at.button(key="train_run").click().run()
    finally:
        torch.set_num_threads(before)
    assert not at.exception and not errors(at), (at.exception, errors(at))
    assert fitted == [(True, 2)]
    path, _ = at.session_state["train_result"]
    assert files_in(dirs["controllers"]) == sorted([Path(path).name, Path(path).with_suffix(".json").name])


def test_the_train_page_tells_a_second_session_that_the_name_is_being_trained(
        dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two students Train under one name at once: the second is told at its click, not after its
    training (which then could not be saved), and the first one's controller is saved."""
    first_fitting, second_done = threading.Event(), threading.Event()
    fit = controller.train

    def first_fit_waits(*args: Any, **kwargs: Any) -> Any:
        first_fitting.set()
        second_done.wait(60)
        return fit(*args, **kwargs)

    monkeypatch.setattr(controller, "train", first_fit_waits)
    first, second = small_train_page(), small_train_page()
    name = first.text_input(key="train_name_tspd").value
    assert second.text_input(key="train_name_tspd").value == name
    first.button(key="train_run").click()
    running = threading.Thread(target=first.run)
    running.start()
    try:
        assert first_fitting.wait(120), "the first session never fitted"
        second.button(key="train_run").click().run()
    finally:
        second_done.set()
        running.join(300)
    assert any(f"another session is training a controller named {name!r}" in e for e in errors(second)), \
        errors(second)
    assert "train_result" not in second.session_state
    assert not first.exception and not errors(first), (first.exception, errors(first))
    assert files_in(dirs["controllers"]) == [f"{name}.json", f"{name}.safetensors"]


@pytest.mark.parametrize("where", ["fit", "decode"])
def test_a_stop_on_the_train_page_frees_the_model_and_the_name(
        where: str, dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A Stop click while fitting (lock free) or decoding (lock held) leaves no file, frees the
    model for other sessions, and the same name trains at the next click."""
    import app_ui.common as common

    lock = _WatchedLock()
    monkeypatch.setattr(common, "model_lock", lambda: lock)
    stops = [1]

    def stop_once(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if stops[0]:
                stops[0] = 0
                raise StopException()
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(controller, "train" if where == "fit" else "decode",
                        stop_once(getattr(controller, "train" if where == "fit" else "decode")))
    at = small_train_page()
    at.button(key="train_run").click().run()
    assert stops == [0] and "train_result" not in at.session_state
    assert free_in_another_thread(lock._lock)
    assert files_in(dirs["controllers"]) == []
    at.button(key="train_run").click().run()
    assert not at.exception and not errors(at), (at.exception, errors(at))
    path, _ = at.session_state["train_result"]
    assert Path(path).is_file() and Path(path).with_suffix(".json").is_file()
