"""Train: teach the TSPD controller (or the Learn2PD filter) on dense trajectories of the model.

Collects dense decodes of generated training prompts, trains by oracle imitation with live
loss and validation precision/recall, saves the weights plus their JSON card under the
controller directory, and hands a chosen file to the Decode page.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_ui.common import (
    canvas_limit,
    controller_dir,
    current_model,
    file_name_problem,
    model_turn,
    require_app_frame,
)
from app_ui.widgets import gen_length_input, trained_controllers
from dllm_viz import figures
from dllm_viz.models import ModelAdapter
from dllm_viz.policies.controller_weights import CONTROLLER_DIR as BUNDLED_CONTROLLERS
from dllm_viz.roots import relative_name
from dllm_viz.tasks import GENERATED_TASKS, get_task
from dllm_viz.threads import apply_choice
from dllm_viz.train.controller import (
    ControllerConfig,
    ControllerExistsError,
    TrainProgress,
    train_controller,
    trivial_controller,
)

WEIGHT_KEYS = {"tspd": "controller_weights", "learn2pd": "filter_weights"}
# The generated training prompts are one or two sentences; a long one sizes the canvas limit.
TRAIN_PROMPT_HINT = "x " * 96

require_app_frame()
st.title("Train")
st.caption("Oracle imitation: a position's label is 1 when its current candidate is the token the dense run "
           "finally wrote there. TSPD learns an LSTM gate over steps; Learn2PD a filter over the window.")
adapter = current_model()
a, b, c, d = st.columns(4)
kind = str(a.segmented_control("Controller", ["tspd", "learn2pd"], default="tspd", required=True, key="train_kind"))
task = b.selectbox("Training prompts", GENERATED_TASKS, key="train_task",
                   help="generated tasks only: the real benchmarks (GSM8K, HumanEval) have no training split here")
prompts = int(c.number_input("Prompts", 2, 2000, 8, key="train_prompts", help="generated training-split problems"))
epochs = int(d.number_input("Epochs", 1, 200, 3, key="train_epochs"))
a, b, c, d = st.columns(4)
gen_length = gen_length_input("train_gen", default=64, container=a, limit=canvas_limit(adapter, TRAIN_PROMPT_HINT))
block_length = int(b.number_input("Block length", 1, 256, 32 if gen_length >= 32 else gen_length, key="train_block"))
hidden = int(c.number_input("Hidden units", 4, 512, 32, key="train_hidden", disabled=kind != "tspd"))
lr = float(d.number_input("Learning rate", 1e-5, 1.0, 1e-3, format="%.5f", key="train_lr"))
# The suggested name follows the settings until the user types one: it kept the first suggestion
# ("tspd_arith_8" for a controller trained on 2 prompts), and a second Train was refused as a repeat.
name_key, suggested = f"train_name_{kind}", f"{kind}_{task}_{prompts}"
if name_key not in st.session_state or st.session_state[name_key] == st.session_state.get(f"{name_key}_suggested"):
    st.session_state[name_key] = suggested
st.session_state[f"{name_key}_suggested"] = suggested
name = st.text_input("Save as", key=name_key,
                     help="file name (no extension) in the app's controller folder ($DLLM_VIZ_CONTROLLER_DIR)")
name = (name or "").strip().removesuffix(".safetensors")


def train(adapter: ModelAdapter) -> None:
    """Train with a progress bar, a live loss chart and the validation metrics of every epoch."""
    config = ControllerConfig(kind=kind, gen_length=gen_length, block_length=block_length, epochs=epochs,  # type: ignore[arg-type]
                              hidden=hidden, lr=lr, layers=2)
    texts = [p.prompt for p in get_task(str(task)).generate(prompts, seed=int(st.session_state.get("seed", 0)),
                                                             split="train")]
    history: list[dict[str, float]] = []  # one row per epoch, for the chart

    def on_progress(progress: TrainProgress) -> None:  # every call is a yield point: a click stops training here
        if progress.stage == "epoch":
            history.append({"epoch": progress.fit_round * epochs + progress.done, "train loss": progress.loss,
                            "val loss": progress.val_loss, "val precision": progress.precision,
                            "val recall": progress.recall})
            # Plotly, not st.line_chart: a 1-epoch run's single point was a line with no marker
            # (an empty chart) over an axis labelled "1.000000".
            chart.plotly_chart(figures.training_curves(history, title="Training loss and validation"),
                               key=f"train_curves_{len(history)}", theme=None)
            bar.progress(progress.done / progress.total, text=progress.message())
        else:
            bar.progress(progress.done / max(progress.total, 1), text=progress.message())

    bar, chart = st.progress(0.0, text="collecting dense trajectories"), st.empty()
    # The model lock is held only for each decode (train_controller's model_turn), not for the fits,
    # which run here, outside it: so at this session's thread count, set now, not by a turn.
    apply_choice(st.session_state.get("threads"))
    try:
        # overwrite=False: the name is claimed for the run (a second session training it is refused
        # at once), checked again at every model turn (another session may have saved it while this
        # one waited), and the final save refuses an existing file atomically, since no lock covers it.
        path, card = train_controller(adapter, texts, config, controller_dir() / f"{name}.safetensors",
                                      on_progress=on_progress, model_turn=model_turn, overwrite=False,
                                      tasks=str(task))
    except ControllerExistsError as exc:  # its message has the server's path; say the name instead
        raise ValueError(taken_message(name, training=exc.training)) from None
    st.session_state["train_result"] = (str(path), card)


def refuse_taken(name: str) -> None:
    """Raise ValueError when the controller folder already holds a controller named `name`.

    Like Traces' Save, Train never replaces a file: a second Train under the same default name used
    to overwrite the first controller, perhaps the one Decode is using.
    """
    if (controller_dir() / f"{name}.safetensors").exists():
        raise ValueError(taken_message(name, training=False))


def taken_message(name: str, *, training: bool) -> str:
    """Why the name `name` cannot be saved to: a controller has it, or another session is training one under it."""
    if training:
        return (f"another session is training a controller named {name!r} right now; type another name in Save as "
                "(or wait for it to finish)")
    return f"a controller named {name!r} is already in the controller folder; type another name in Save as"


def describe(path: str, card: dict) -> str:
    """One line about a controller file: name, kind, training prompts, validation scores."""
    val = card.get("validation", {})
    return (f"**{Path(path).name}** · {card.get('kind')} · {card.get('prompts')} prompts · "
            f"val precision {val.get('precision', 0):.3f}, recall {val.get('recall', 0):.3f}"
            + (" · ⚠️ trivial: always or never commits" if card.get("trivial") or trivial_controller(val) else ""))


def use(path: str, which: str) -> None:
    """Select `path` on the Decode page (its weights widget and the matching rule)."""
    st.session_state[WEIGHT_KEYS[which]] = relative_name(Path(path), controller_dir())
    st.session_state["rule"] = which


if st.button("Train", type="primary", key="train_run", disabled=adapter is None) and adapter is not None:
    try:
        if (problem := file_name_problem(name)) is not None:  # also a name too long for the disk
            raise ValueError(problem)
        if gen_length % block_length:
            raise ValueError(f"block length {block_length} must divide gen length {gen_length}")
        refuse_taken(name)  # now, before any work (train_controller asks again at every model turn and as it saves)
        train(adapter)
    except ValueError as exc:
        st.error(f"Cannot train: {exc}")

if result := st.session_state.get("train_result"):
    path, card = result
    st.success(f"Saved {Path(path).name} in the controller folder")
    validation = card.get("validation", {})
    x, y, z = st.columns(3)
    x.metric("Final train loss", f"{card['train_loss'][-1]:.4f}", border=True)
    y.metric("Validation precision", f"{validation.get('precision', 0):.3f}", border=True)
    z.metric("Validation recall", f"{validation.get('recall', 0):.3f}", border=True)
    if why := card.get("trivial") or trivial_controller(validation):
        st.warning(f"Trivial controller: {why}", icon="⚠️")

st.subheader("Trained controllers")
bundled = trained_controllers(BUNDLED_CONTROLLERS)
if bundled:
    st.caption("Bundled, trained on the tiny model; the TSPD and Learn2PD rules use them when their weights field "
               "is `bundled` (the default): " + "; ".join(describe(path, card) for path, card in bundled.items()))
found = trained_controllers(controller_dir())
if not found:
    st.info("None of your own yet in the controller folder ($DLLM_VIZ_CONTROLLER_DIR): train one above.")
for path, card in found.items():
    with st.container(border=True):
        left, right = st.columns([4, 1], vertical_alignment="center")
        left.markdown(describe(path, card))
        if right.button("Use on Decode", key=f"use_{path}", on_click=use, args=(path, str(card.get("kind")))):
            st.switch_page("pages/decode.py")
