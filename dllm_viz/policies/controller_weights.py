"""Weights of the learned controllers (TSPD's LSTM, Learn2PD's filter) and their numpy forward passes.

Trained with torch by `python -m dllm_viz train-controller` and saved as safetensors with a JSON
card beside them; decoding runs them in numpy so policies stay torch-free and cheap (a 2-layer,
64-unit LSTM step over a 32-position window takes about 0.4 ms in a decode on one core).

The LSTM's matrix products run with the BLAS pool limited to one thread (Learn2PD's
matrix-vector products need no guard, see `mlp_forward`): they are far too small to gain from
threads, and on the 2-core dev box with the other core taken, numpy's default 2-thread OpenBLAS
made one TSPD step at 256 positions take 3.5 ms (a busy loop there) to 27-44 ms (another decoding
process there) instead of 1-2 ms: its threads wait on each other for a core.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController

from dllm_viz.model_facts import AdapterInfo

CONTROLLER_DIR = Path(__file__).resolve().parent.parent / "assets" / "controllers"
BUNDLED = "bundled"


@dataclass(frozen=True)
class ControllerWeights:
    """Named float32 arrays plus the JSON card (kind, sizes, training data, metrics)."""

    tensors: dict[str, np.ndarray]
    card: dict[str, object]

    @property
    def kind(self) -> str:
        """"tspd" or "learn2pd"."""
        return str(self.card.get("kind"))

    @cached_property
    def fused_lstm(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per LSTM layer: ([W_ih; W_hh] transposed, b_ih + b_hh), gate columns reordered to i, f, o,
        g, with the i, f, o columns halved (built once per weights object).

        One matrix product per layer instead of two, and one tanh over all four gates: with the
        sigmoid gates' pre-activations halved, sigmoid(x) = (1 + tanh(x / 2)) / 2 needs only a
        scale and a shift after it.
        """
        t = self.tensors
        layers = []
        for layer in range(sum(1 for k in t if k.startswith("lstm.weight_ih_l"))):
            w = np.concatenate([t[f"lstm.weight_ih_l{layer}"], t[f"lstm.weight_hh_l{layer}"]], axis=1)
            b = t[f"lstm.bias_ih_l{layer}"] + t[f"lstm.bias_hh_l{layer}"]
            i, f, g, o = np.split(np.arange(w.shape[0]), 4)
            order = np.concatenate([i, f, o, g])
            scale = np.concatenate([np.full(3 * len(i), 0.5), np.ones(len(g))])
            layers.append((np.ascontiguousarray((w[order] * scale[:, None]).T, dtype=np.float32),
                           (b[order] * scale).astype(np.float32)))
        return layers


def load_named(weights: str, kind: str) -> ControllerWeights:
    """The controller a rule's weights knob names (`bundled` or a path), read and checked."""
    return load_controller(str(resolve_path(weights, kind)), kind)


def check_trained_for(weights: ControllerWeights, info: AdapterInfo, named: str) -> None:
    """Raise ValueError when the controller was trained for another model than `info`'s.

    A controller is fitted to one model's confidence dynamics (TSPD also scales its entropy feature
    by the vocabulary its card records), so on another model it decodes without error and without
    meaning: the bundled one, trained on the tiny model, would quietly steer LLaDA. The card's
    `vocab_size` is the identity checked: a different vocabulary is certainly another model (two
    checkpoints of one vocabulary are not told apart). A card without it is not checked.
    """
    trained = weights.card.get("vocab_size")
    if trained is None or trained == info.vocab_size:
        return
    model = Path(str(weights.card.get("model", "another model"))).name  # names only: messages reach browsers
    this = Path(info.name_or_path).name or info.family
    raise ValueError(
        f"{weights.kind} controller {Path(named).name!r} was trained for {model!r} (vocabulary {trained}), not "
        f"for this {info.family} model {this!r} (vocabulary {info.vocab_size}); train one for it with "
        f"`python -m dllm_viz train-controller --kind {weights.kind} --model <this model>` (or on the app's "
        "Train page) and pass the weights it writes")


def resolve_path(weights: str, kind: str) -> Path:
    """`bundled` -> the shipped controller for the tiny model; else the given path."""
    if weights == BUNDLED:
        return CONTROLLER_DIR / f"{kind}_tiny.safetensors"
    return Path(weights).expanduser()


def load_controller(path: str, kind: str) -> ControllerWeights:
    """Read controller weights and their card; errors name the file, the problem and the fix.

    Cached per file version (path and modification times), so weights retrained into the same
    file, as the Train page allows, are read again rather than served from the cache.
    """
    file = Path(path)
    train = f"train them with `python -m dllm_viz train-controller --kind {kind}` or pass weights=PATH"
    if not file.name or file.suffix == ".json":
        raise ValueError(f"{kind} controller weights {path!r} name no .safetensors file; {train}")
    card_file = file.with_suffix(".json")
    if file.is_dir():
        raise ValueError(f"{kind} controller weights {file.name!r} is a directory, not a .safetensors file; "
                         f"name the weights file in it, or {train}")
    if not file.is_file():
        raise ValueError(f"{kind} controller weights {file.name!r} (and its .json card) not found; {train}")
    if not card_file.is_file():
        raise ValueError(f"{kind} controller weights {file.name!r} have no card {card_file.name!r} beside them "
                         f"(the JSON file train-controller writes with the weights); put it back or {train}")
    if card_file.resolve().parent != file.resolve().parent:  # a link must not pull a card from elsewhere
        raise ValueError(f"the card {card_file.name!r} of controller {file.name!r} is a link out of the weights' "
                         f"folder; put the card itself beside the weights")
    return _read_controller(str(file), kind, file.stat().st_mtime_ns, card_file.stat().st_mtime_ns)


@lru_cache(maxsize=8)
def _read_controller(path: str, kind: str, mtime_ns: int, card_mtime_ns: int) -> ControllerWeights:
    """Read and check weights + card; messages name the file by its name only (they reach browsers).

    The card and the file's header (names, shapes) are checked before any tensor is read, so a
    file of other weights (a model checkpoint, another kind's controller) costs no memory.
    """
    from safetensors import SafetensorError, safe_open

    file = Path(path)
    retrain = f"retrain it with `python -m dllm_viz train-controller --kind {kind}`"
    try:
        card = json.loads(file.with_suffix(".json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"the card {file.with_suffix('.json').name!r} of controller {file.name!r} is not readable "
                         f"JSON ({exc.__class__.__name__}); {retrain}") from None
    if not isinstance(card, dict):
        raise ValueError(f"the card of controller {file.name!r} is not a JSON object; {retrain}")
    if card.get("kind") != kind:
        raise ValueError(f"{file.name!r} holds a {card.get('kind')!r} controller (its card's 'kind'), not {kind!r}; "
                         f"pass a {kind} controller, or {retrain}")
    try:
        with safe_open(str(file), framework="numpy") as handle:
            names = handle.keys()  # a list (the handle is not iterable)
            shapes = {k: tuple(handle.get_slice(k).get_shape()) for k in names}  # the header only
            check_controller(shapes, card, file.name, kind)
            tensors = {k: handle.get_tensor(k).astype(np.float32) for k in shapes}
    except (SafetensorError, OSError, TypeError) as exc:
        raise ValueError(f"controller weights {file.name!r} are not a readable .safetensors file ({exc}); "
                         f"{retrain}") from None
    bad = sorted(k for k, v in tensors.items() if not np.isfinite(v).all())
    if bad:  # NaN gates compare False: the controller would silently never commit
        raise ValueError(f"controller {file.name!r} has NaN or infinite values in {', '.join(bad)} (training "
                         f"diverged); {retrain} with a lower learning rate")
    return ControllerWeights(tensors=tensors, card=card)


_CARD_INTS = ("layers", "hidden", "vocab_size")  # what TSPD's forward pass reads; "features" is optional


def check_controller(tensors: Mapping[str, np.ndarray | tuple[int, ...]], card: dict[str, object], name: str,
                     kind: str) -> None:
    """Raise ValueError unless the card has the sizes the forward passes read and the tensors fit them.

    `tensors` maps names to arrays or to their shapes (a file's header). A card without `layers`,
    tensors of another size, or tensors the card does not describe (a layer the card leaves out
    would be run by the forward pass) would otherwise surface as a KeyError or a numpy shape or
    index error in the middle of a decode.
    """
    fix = f"retrain it with `python -m dllm_viz train-controller --kind {kind}`"
    shapes = {k: tuple(v) if isinstance(v, tuple) else v.shape for k, v in tensors.items()}
    for key in _CARD_INTS if kind == "tspd" else ():
        value = card.get(key)
        if type(value) is not int or value < 1:
            raise ValueError(f"the card of controller {name!r} lacks a positive integer {key!r} (got {value!r}); {fix}")
    from dllm_viz.policies.controller_features import FILTER_WIDTH, TSPD_FEATURES

    expected_features = TSPD_FEATURES if kind == "tspd" else FILTER_WIDTH
    features = card.get("features", expected_features)
    if features != expected_features:
        raise ValueError(f"controller {name!r} was trained on {features!r} features; this dllm_viz computes "
                         f"{expected_features}: {fix}")
    if kind == "tspd":
        layers, hidden = int(card["layers"]), int(card["hidden"])  # type: ignore[call-overload]
        if 4 * layers + 2 != len(shapes):  # before listing them: a card may claim any number of layers
            raise ValueError(f"controller {name!r} holds {len(shapes)} tensors, but its card's {layers} LSTM "
                             f"layers need {4 * layers + 2}: the card does not describe these weights; {fix}")
        want = {"head.weight": (1, hidden), "head.bias": (1,)}
        for i in range(layers):
            want |= {f"lstm.weight_ih_l{i}": (4 * hidden, features if i == 0 else hidden),
                     f"lstm.weight_hh_l{i}": (4 * hidden, hidden),
                     f"lstm.bias_ih_l{i}": (4 * hidden,), f"lstm.bias_hh_l{i}": (4 * hidden,)}
    else:
        width = (shapes.get("fc1.weight") or (1, 0))[0] or 1  # an empty hidden layer is reported as a wrong shape
        want = {"fc1.weight": (width, features), "fc1.bias": (width,), "fc2.weight": (features, width),
                "fc2.bias": (features,)}
    for key, shape in want.items():
        got = shapes.get(key)
        if got != shape:
            raise ValueError(f"controller {name!r}: tensor {key!r} should have shape {shape} (from its card), got "
                             f"{got}; {fix}")
    extra = sorted(set(shapes) - set(want))
    if extra:
        raise ValueError(f"controller {name!r} holds tensors its card does not describe ({', '.join(extra[:4])}): "
                         f"not {kind} weights of that size; {fix}")


@lru_cache(maxsize=1)
def _blas_libraries() -> tuple:  # type: ignore[type-arg]
    """Controllers of the process's BLAS pools (inspected once: the BLAS numpy loaded is there by now)."""
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS on one thread for the duration, restored after.

    Talks to the BLAS libraries' controllers directly (about 6 microseconds to enter and exit,
    against 13 for threadpoolctl's `limit`, which re-inspects every pool each time): this runs at
    every forward pass, right after the model has cooled the CPU caches.
    """
    libraries = _blas_libraries()
    previous = [library.get_num_threads() for library in libraries]
    for library in libraries:
        library.set_num_threads(1)
    try:
        yield
    finally:
        for library, threads in zip(libraries, previous, strict=True):
            library.set_num_threads(threads)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -60.0, 60.0)))


def lstm_step(weights: ControllerWeights, x: np.ndarray, h: np.ndarray, c: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step of the stacked LSTM (PyTorch's gates i, f, g, o) and its linear head.

    Args:
        x: [positions, features]; h, c: [layers, positions, hidden].

    Returns:
        (logit [positions], new h, new c)
    """
    t = weights.tensors
    hidden = h.shape[2]
    new_h, new_c = np.empty_like(h), np.empty_like(c)
    inp = np.asarray(x, dtype=np.float32)
    with _one_blas_thread():
        for layer, (w, b) in enumerate(weights.fused_lstm):
            gates = np.concatenate([inp, h[layer]], axis=1) @ w
            gates += b
            np.tanh(gates, out=gates)  # tanh(x / 2) for i, f, o (pre-halved), tanh(x) for g
            sig = gates[:, : 3 * hidden]
            sig *= 0.5
            sig += 0.5
            i, f, o, g = (gates[:, k * hidden : (k + 1) * hidden] for k in range(4))
            cell = new_c[layer]
            np.multiply(f, c[layer], out=cell)
            cell += i * g
            np.multiply(o, np.tanh(cell), out=new_h[layer])
            inp = new_h[layer]
        logit = inp @ t["head.weight"][0] + t["head.bias"][0]
    return logit, new_h, new_c


def mlp_forward(weights: ControllerWeights, x: np.ndarray) -> np.ndarray:
    """Learn2PD's 32 -> 32 -> 32 filter: logits for each window slot.

    No one-thread guard here: at decode time x is one 32-vector, a matrix-vector product that
    OpenBLAS never splits over threads at this size, and the guard's four calls into the BLAS
    library cost more than the product (about 0.08 of 0.13 ms a pass, measured in a decode).
    """
    t = weights.tensors
    hidden = np.maximum(x @ t["fc1.weight"].T + t["fc1.bias"], 0.0)
    return hidden @ t["fc2.weight"].T + t["fc2.bias"]


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically safe logistic function."""
    return _sigmoid(x)
