"""Confine paths that come from a browser (typed, or in a shared link) to the folders the app serves.

A web user may name a model, a trace folder or controller weights. Each must resolve, after
symlinks, inside the root the app was configured with; the refusal says what to type instead and
reads the same whether or not the path outside exists. `redact` takes server paths out of
messages shown in the browser. Knows no Streamlit and reads no environment: the app passes roots.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path


class OutsideRootError(ValueError):
    """A browser-supplied path that leaves its root; the message names no server path."""


def inside(root: Path, typed: str, *, what: str, folder: str | None = None) -> Path:
    """The resolved path that `typed` names inside `root` (relative to it, or absolute within it).

    Args:
        root: the folder the app serves for this kind of file.
        typed: what the browser sent; empty means the root itself.
        what: the kind of path, for the message ("trace folder", "model", ...).
        folder: what the message calls the root (default: "<what> folder").

    Raises:
        OutsideRootError: `typed` (or a symlink on its way) leads outside `root`.
    """
    base = Path(root).expanduser().resolve()
    text = typed.strip()
    refusal = OutsideRootError(
        f"{what} {typed!r} is outside the app's {folder or what + ' folder'}; type a name inside it "
        "(paths are relative to it)")
    if "\0" in text or text.startswith("~"):  # "~" would mean the server's home, not the root
        raise refusal
    try:
        candidate = (base / text).resolve() if text else base  # an absolute `text` replaces base
    except (OSError, RuntimeError):  # a symlink loop, an unreadable component
        raise refusal from None
    if candidate != base and base not in candidate.parents:
        raise refusal
    return candidate


def browser_model(typed: str, *, models_root: Path, allowed: Collection[str]) -> str:
    """What `load` gets for a model named in the browser.

    `allowed` names ('tiny', the model the operator started the app with) pass as they are;
    anything else is a checkpoint folder inside `models_root`. A hub id is never fetched on a
    web user's word: "owner/name" means that folder under the models root.

    Raises:
        OutsideRootError: the name leads outside the models folder.
    """
    if typed.strip() in allowed:
        return typed.strip()
    return str(inside(models_root, typed, what="model", folder="models folder"))


def relative_name(path: Path, root: Path) -> str:
    """`path` as the browser may see it: relative to `root` ('.' for the root itself)."""
    resolved, base = Path(path).resolve(), Path(root).expanduser().resolve()
    return "." if resolved == base else str(resolved.relative_to(base))


def redact(message: str, roots: Mapping[str, Path]) -> str:
    """`message` with each root's absolute path (as given and resolved) replaced by `<label>`."""
    forms = {}
    for label, root in roots.items():
        for form in (str(Path(root).expanduser()), str(Path(root).expanduser().resolve())):
            forms[form] = f"<{label}>"
    for form in sorted(forms, key=len, reverse=True):  # the longest first: nested roots
        if form not in ("", "/", "."):
            message = message.replace(form, forms[form])
    return message
