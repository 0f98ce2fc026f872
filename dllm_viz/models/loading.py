"""`load(name_or_path)`: pick the family from config.json and build a ModelAdapter.

Families (docs/DESIGN.md §3) are the rows of families.FAMILIES, each run bidirectionally on its
maintained transformers class; block-diffusion checkpoints (block_diffusion.py) run block-causally
on theirs; anything else only with `trust_remote_code=True`.
Special ids come from config.json or the tokenizer, never from literals in the engine. Every
transformers call is told `trust_remote_code` explicitly and can never ask about it on stdin.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from dllm_viz.models import block_diffusion, families
from dllm_viz.models import config_values as values
from dllm_viz.models.base import AdapterInfo, ModelAdapter, ModelLoadError
from dllm_viz.models.bidirectional import make_bidirectional
from dllm_viz.models.families import Family, SpecialTokens
from dllm_viz.models.weights import load_renamed

log = logging.getLogger(__name__)

TINY_DIR = Path(__file__).resolve().parent.parent / "assets" / "tiny"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
           "float64": torch.float64}


def resolve_device(device: str) -> torch.device:
    """'auto' -> cuda > mps > cpu; anything else is validated and returned."""
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if not isinstance(device, str):
        raise ModelLoadError(f"unknown device {device!r}; use auto, cpu, cuda, cuda:N or mps")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise ModelLoadError(f"unknown device {device!r}; use auto, cpu, cuda, cuda:N or mps") from None
    # torch names more device types than this machine's build can run ('xla', 'meta', ...): a model
    # on 'meta' loads without a byte of weights and fails at its first pass.
    if resolved.type not in ("cpu", "cuda", "mps"):
        raise ModelLoadError(f"device {device!r} is not one dllm_viz runs on; use auto, cpu, cuda, cuda:N or mps")
    if resolved.type == "cpu" and resolved.index not in (None, 0):
        raise ModelLoadError(f"device {device!r} names a CPU index, but torch has one CPU device; use cpu")
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device {device!r} requested but CUDA is not available; use cpu")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ModelLoadError(f"device {device!r} requested but this machine has {torch.cuda.device_count()} "
                                 f"CUDA device(s); use cuda:0 .. cuda:{torch.cuda.device_count() - 1}")
    if resolved.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ModelLoadError(f"device {device!r} requested but MPS is not available; use cpu")
    return resolved


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """Default: bf16 on CUDA, fp16 on MPS, fp32 on CPU."""
    if isinstance(dtype, torch.dtype):
        if dtype not in _DTYPES.values():  # int64 weights fail in torch's copy; complex64 loads and decodes nonsense
            raise ModelLoadError(f"unsupported dtype {dtype}; use one of {sorted(_DTYPES)}")
        return dtype
    if dtype is None:
        return {"cuda": torch.bfloat16, "mps": torch.float16}.get(device.type, torch.float32)
    if dtype not in _DTYPES:
        raise ModelLoadError(f"unknown dtype {dtype!r}; use one of {sorted(_DTYPES)}")
    return _DTYPES[dtype]


def load(
    name_or_path: str | os.PathLike[str],
    device: str = "auto",
    dtype: str | torch.dtype | None = None,
    trust_remote_code: bool = False,
) -> ModelAdapter:
    """Load a masked-diffusion LM as a ModelAdapter.

    Args:
        name_or_path: "tiny" (the bundled model), a local checkpoint directory (a str or a
            Path; "~" is expanded), or a Hugging Face hub id (needs network access).
        device: "auto" (cuda > mps > cpu), "cpu", "cuda", "cuda:N" or "mps".
        dtype: weights dtype name; default bf16 on CUDA, fp16 on MPS, fp32 on CPU.
        trust_remote_code: allow families we do not support natively, through their own code.

    Raises:
        ModelLoadError: unknown path or id, unsupported architecture, bad device or dtype.
    """
    name_or_path = _name(name_or_path)
    directory = _local_directory(name_or_path)
    raw = _read_config(directory)
    spec = block_diffusion.detect(raw)  # before the LLaDA test, which would claim "LLaDA2MoeModelLM"
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    family = None if spec is not None else families.detect(raw, directory)
    # The architecture's config is checked before the tokenizer loads: AutoTokenizer parses
    # config.json too, and its complaint about a bad hidden size would read as a tokenizer error.
    config: Any = None
    if spec is not None:
        config = values.build(lambda: block_diffusion.base_config(raw, spec), spec.family)
    elif family is not None:
        config = values.build(lambda: family.config(raw), family.name)
    tokenizer = _load_tokenizer(directory, name_or_path, trust_remote_code)
    if spec is not None:
        return _block(spec, name_or_path, directory, raw, tokenizer, dev, torch_dtype, config)
    if family is not None:
        return _native(family, name_or_path, directory, raw, tokenizer, dev, torch_dtype, config)
    if trust_remote_code:
        return _remote(name_or_path, directory, raw, tokenizer, dev, torch_dtype)
    raise ModelLoadError(
        f"{name_or_path!r} has model_type {raw.get('model_type')!r} and architectures "
        f"{raw.get('architectures')!r}, which dllm_viz does not support natively "
        f"({', '.join(f.name for f in families.FAMILIES)}); pass trust_remote_code=True "
        "(CLI: --trust-remote-code) to run its own code"
    )


# What a checkpoint's outputs depend on: weights, config and tokenizer files (not its model card).
_FINGERPRINTED = (".safetensors", ".bin", ".json", ".model")
_FINGERPRINT_SPAN = 1 << 16


def weights_fingerprint(name_or_path: str) -> str | None:
    """A short fingerprint of a local checkpoint's files ("tiny" included), so a results file
    resumed later can tell that the model under the same name was retrained or replaced.

    Why not a full hash: checkpoints run to many GB. Each file's name, size and first and last
    64 KiB are hashed: a safetensors header (tensor names, shapes, offsets) and the first and last
    tensors' bytes, which any retraining changes. None for a hub id or a path that does not exist
    (nothing is downloaded here; `load` reports a bad path).
    """
    directory = TINY_DIR if name_or_path == "tiny" else Path(name_or_path).expanduser()
    if not directory.is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.suffix in _FINGERPRINTED and p.is_file()):
        size = path.stat().st_size
        digest.update(f"{path.name}\0{size}\0".encode())
        with path.open("rb") as handle:
            digest.update(handle.read(_FINGERPRINT_SPAN))
            handle.seek(max(0, size - _FINGERPRINT_SPAN))
            digest.update(handle.read(_FINGERPRINT_SPAN))
    return digest.hexdigest()[:16]


def block_length_of(name_or_path: str) -> int | None:
    """The block length of a block-diffusion checkpoint, read from its config.json alone (no
    weights loaded, nothing downloaded); None for every other model and for anything that cannot
    be read now (a missing path, a hub id not in the local cache): `load` reports those, after
    the caller's own checks."""
    try:
        raw, _ = _peek_config(name_or_path)
        spec = block_diffusion.detect(raw)
    except (ModelLoadError, OSError, ValueError):
        return None
    return None if spec is None else spec.block_length


def family_of(name_or_path: str) -> str | None:
    """The model-family table's name for a checkpoint (AdapterInfo.family of the adapter `load`
    would build), read from its config.json alone like `block_length_of`; None for a
    block-diffusion or remote-code model (no row, so its family-calibrated knobs run at their
    published values) and for anything that cannot be read now."""
    try:
        raw, directory = _peek_config(name_or_path)
        if block_diffusion.detect(raw) is not None:
            return None
        row = families.detect(raw, directory)
    except (ModelLoadError, OSError, ValueError):
        return None
    return None if row is None else row.name


def _peek_config(name_or_path: str) -> tuple[dict[str, Any], Path]:
    """A checkpoint's config.json and its directory, from a local path or the hub cache (never
    downloaded: ModelLoadError when it is not there)."""
    config = _cached_hub_config(name_or_path)
    if config is None:
        directory = _local_directory(name_or_path)
        return _read_config(directory), directory
    return _read_config(config.parent), config.parent


def _cached_hub_config(name_or_path: str) -> Path | None:
    """A hub id's config.json from the local Hugging Face cache, without any network call."""
    local = name_or_path == "tiny" or Path(name_or_path).expanduser().exists()
    if local or name_or_path.count("/") != 1 or name_or_path.startswith((".", "/", "~")):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name_or_path, "config.json")
    except Exception:  # an id the hub client rejects: load() says what is wrong with it
        return None
    if not isinstance(found, str):
        raise ModelLoadError(f"{name_or_path!r} is not downloaded yet")  # read as "not now" above
    return Path(found)


def _name(name_or_path: Any) -> str:
    """The model argument as text: a pathlib.Path is as good as its string (it used to fail with
    "'PosixPath' object has no attribute 'strip'"); anything else is refused by value."""
    if isinstance(name_or_path, os.PathLike):
        name_or_path = os.fspath(name_or_path)
    if not isinstance(name_or_path, str):
        raise ModelLoadError(f"the model must be 'tiny', a checkpoint directory or a hub id (owner/name), "
                             f"got {name_or_path!r}")
    return name_or_path


def _local_directory(name_or_path: str) -> Path:
    if name_or_path == "tiny":
        if not (TINY_DIR / "config.json").is_file():
            raise ModelLoadError(
                f"the bundled tiny model is missing from {str(TINY_DIR)!r}; reinstall dllm_viz or "
                "train it with `python -m dllm_viz train-tiny`"
            )
        return TINY_DIR
    if not name_or_path.strip():  # Path("") is the working directory: "a directory without config.json" misleads
        raise ModelLoadError("the model name is empty; pass 'tiny', a checkpoint directory or a hub id (owner/name)")
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"{name_or_path!r} is a directory without config.json; "
                                 "pass a checkpoint directory saved by save_pretrained")
        return path
    if path.exists() or name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") != 1:
        raise ModelLoadError(
            f"model {name_or_path!r} is neither 'tiny', a checkpoint directory nor a hub id "
            "(owner/name); check the path"
        )
    return _download(name_or_path)


def _download(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, allow_patterns=["*.json", "*.safetensors", "*.py",
                                                               "*.model", "*.txt", "*.jinja"]))
    except Exception as exc:  # the hub client raises many types for offline/not found
        raise ModelLoadError(
            f"could not fetch {repo_id!r} from the Hugging Face hub ({exc.__class__.__name__}); "
            "if this machine is offline, download the checkpoint elsewhere and pass its local "
            "directory instead"
        ) from None


def _read_config(directory: Path) -> dict[str, Any]:
    path = str(directory / "config.json")
    try:
        data = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError (a binary file) are ValueErrors
        raise ModelLoadError(f"cannot read {path!r}: {exc}; use the config.json that came with the "
                             "checkpoint") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path!r} is not a JSON object")
    # The family tests lower-case these: a number or a bare string failed there as an AttributeError
    # or TypeError, or (a string) was read character by character.
    model_type, archs = data.get("model_type"), data.get("architectures")
    if model_type is not None and not isinstance(model_type, str):
        raise ModelLoadError(f"{path!r} has model_type {model_type!r}; it must be a string such as \"llada\"")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise ModelLoadError(f"{path!r} has architectures {archs!r}; it must be a list of class names such as "
                             '["LLaDAModelLM"]')
    return data


def _load_tokenizer(directory: Path, name_or_path: str, trust_remote_code: bool) -> Any:
    from transformers import AutoTokenizer

    try:
        with _quiet_transformers():
            return AutoTokenizer.from_pretrained(str(directory), trust_remote_code=trust_remote_code)
    except Exception as exc:  # tokenizer loading errors come in many types
        from huggingface_hub.errors import StrictDataclassError

        if isinstance(exc, StrictDataclassError):  # AutoTokenizer parses config.json too; the fault is there
            raise ModelLoadError(f"{str(directory / 'config.json')!r} is not a valid transformers config "
                                 f"({' '.join(str(exc).split())}); use the config.json that came with the "
                                 "checkpoint") from None
        if not trust_remote_code and "trust_remote_code" in str(exc):
            raise ModelLoadError(
                f"the tokenizer of {name_or_path!r} needs code shipped with the checkpoint (an auto_map in its "
                "tokenizer_config.json), which dllm_viz runs only if you pass --trust-remote-code "
                "(trust_remote_code=True in the API)") from None
        # transformers' messages span lines ("Couldn't instantiate the backend tokenizer from one of: (1) ..."):
        # one line, with the fix, is what the CLI prints.
        raise ModelLoadError(f"cannot load the tokenizer in {str(directory)!r} ({' '.join(str(exc).split())}); "
                             "check that the checkpoint's tokenizer files (tokenizer.json, tokenizer_config.json) "
                             "are there and whole, or save it again with save_pretrained") from None


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' warnings and progress bars (e.g. 'model of type llada') for a call,
    and turn its "Do you wish to run the custom code? [y/N]" question into an error: a call that
    forgets `trust_remote_code` must fail, never read an answer from stdin."""
    from transformers import dynamic_module_utils
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    timeout = dynamic_module_utils.TIME_OUT_REMOTE_CODE
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    dynamic_module_utils.TIME_OUT_REMOTE_CODE = 0  # 0: transformers raises instead of prompting
    try:
        yield
    finally:
        dynamic_module_utils.TIME_OUT_REMOTE_CODE = timeout
        hf_logging.set_verbosity(level)
        hf_logging.enable_progress_bar()


def _token_id(tokenizer: Any, token: str) -> int | None:
    vocab = tokenizer.get_vocab()
    return int(vocab[token]) if token in vocab else None


def _info(
    family: str,
    name_or_path: str,
    tokenizer: Any,
    model: Any,
    tokens: SpecialTokens,
    *,
    shift_logits: bool = False,
    delimiters: tuple[str, ...] = ("\n",),
    block_length: int | None = None,
) -> AdapterInfo:
    """The adapter's facts; ids the checkpoint states win over the tokenizer's, and all are range-checked."""
    mask_id = tokens.stated_ids.get("mask_token_id")
    if mask_id is None and tokens.mask_token is not None:
        mask_id = _token_id(tokenizer, tokens.mask_token)
    if mask_id is None:
        mask_id = getattr(tokenizer, "mask_token_id", None)
    eos_id = tokens.stated_ids.get("eos_token_id", getattr(tokenizer, "eos_token_id", None))
    if isinstance(eos_id, list):  # generation configs may list several; the first is the end of text
        if not eos_id:
            raise ModelLoadError(f"{name_or_path!r}: eos_token_id is an empty list; state the end-of-text id "
                                 "(eos_token_id) in config.json")
        eos_id = eos_id[0]
    if mask_id is None or eos_id is None:
        raise ModelLoadError(
            f"{name_or_path!r}: cannot find the mask / EOS token ids (mask={mask_id}, eos={eos_id}); "
            "add mask_token_id and eos_token_id to config.json"
        )
    eot_id = _token_id(tokenizer, tokens.eot_token) if tokens.eot_token else None
    vocab_size = int(model.config.vocab_size)
    for role, token_id in (("mask", mask_id), ("eos", eos_id), ("eot", eot_id)):
        if token_id is not None and (isinstance(token_id, bool) or not isinstance(token_id, int)):
            raise ModelLoadError(f"{name_or_path!r}: the {role} token id {token_id!r} is not an integer; "
                                 f"fix {role}_token_id in config.json")
        if token_id is not None and not 0 <= token_id < vocab_size:
            raise ModelLoadError(
                f"{name_or_path!r}: the {role} token id {token_id!r} is outside the vocabulary [0, {vocab_size}); "
                f"fix {role}_token_id in config.json"
            )
    param = next(model.parameters())
    return AdapterInfo(
        family=family,
        name_or_path=name_or_path,
        mask_token_id=int(mask_id),
        eos_token_id=int(eos_id),
        eot_token_id=eot_id,
        vocab_size=vocab_size,
        device=str(param.device),
        dtype=str(param.dtype).removeprefix("torch."),
        shift_logits=shift_logits,
        delimiters=delimiters,
        **({} if block_length is None else {"attention": "block_causal", "block_length": block_length,
                                            "context": "prefix"}),
    )


def _native(
    family: Family,
    name_or_path: str,
    directory: Path,
    raw: dict[str, Any],
    tokenizer: Any,
    device: torch.device,
    dtype: torch.dtype,
    config: Any,
) -> ModelAdapter:
    """A table family on its maintained class (its checked `config`), run bidirectionally.

    Built on the meta device and filled with the saved tensors even for the tiny model: the same
    weights as from_pretrained in 0.03-0.05 s instead of 0.14-0.25 s, which matters because
    importing LlamaForCausalLM alone already takes ~4.5 s of its < 5 s load budget.
    """
    import transformers

    model = load_renamed(getattr(transformers, family.transformers_class), config, directory,
                         family.rename, device=device, dtype=dtype)
    info = _info(family.name, name_or_path, tokenizer, model, family.special_tokens(raw),
                 shift_logits=family.shift_logits, delimiters=family.delimiters(raw))
    return ModelAdapter(make_bidirectional(model), tokenizer, info, prompt_template=family.prompt_template(raw))


def _remote(
    name_or_path: str,
    directory: Path,
    raw: dict[str, Any],
    tokenizer: Any,
    device: torch.device,
    dtype: torch.dtype,
) -> ModelAdapter:
    from transformers import AutoModel

    log.debug("loading %s through its own remote code", name_or_path)
    try:
        with _quiet_transformers():
            model = AutoModel.from_pretrained(str(directory), trust_remote_code=True, dtype=dtype)
    except Exception as exc:  # transformers raises many types here (unknown model_type, missing code file)
        raise ModelLoadError(f"{name_or_path!r} could not be loaded through its own code ({exc.__class__.__name__}: "
                             f"{' '.join(str(exc).split())[:400]}); check that the checkpoint ships the modeling "
                             "files its config.json's auto_map names") from None
    model = model.to(device).eval()
    tokens = SpecialTokens(families.stated_special_ids(raw), mask_token=None, eot_token=None)
    info = _info("remote", name_or_path, tokenizer, model, tokens)
    return ModelAdapter(model, tokenizer, info, uses_remote_code=True)


# The mask token's text in the published block-diffusion tokenizers (LLaDA2.x: "<|mask|>"; SDAR and
# Fast-dLLM v2 state theirs as the tokenizer's mask token or in config.json).
_BLOCK_MASK_TOKEN = "<|mask|>"


def _block(
    spec: block_diffusion.BlockDiffusionSpec,
    name_or_path: str,
    directory: Path,
    raw: dict[str, Any],
    tokenizer: Any,
    device: torch.device,
    dtype: torch.dtype,
    config: Any,
) -> ModelAdapter:
    """A block-diffusion checkpoint on its maintained class, attending block-causally (block_diffusion.py)."""
    from dllm_viz.models.block_adapter import BlockDiffusionAdapter

    model = block_diffusion.load_model(directory, raw, spec, device=device, dtype=dtype, config=config)
    stated = families.stated_special_ids(raw)
    if spec.mask_token_id is not None:
        stated["mask_token_id"] = spec.mask_token_id
    mask_text = getattr(tokenizer, "mask_token", None) or _BLOCK_MASK_TOKEN
    info = _info(spec.family, name_or_path, tokenizer, model, SpecialTokens(stated, mask_token=mask_text,
                                                                            eot_token=None),
                 shift_logits=spec.shift_logits, block_length=spec.block_length)
    return BlockDiffusionAdapter(model, tokenizer, info)
