"""Writing a trace file so that a failure loses nothing and leaves nothing behind.

A save writes to a hidden temporary file in the target's folder (so the final rename is atomic
and on the same disk), then moves it into place: replacing an existing file only when asked,
never half-written. Whatever goes wrong (a folder that is a file, a target that is a directory,
a full disk, no permission), the temporary file is removed and the error says what to change.
The temporary name starts with '.' and does not end in '.npz', so no trace library lists it; and
a caller's name that no library would list (hidden, or a leftover's ending) is refused, so a save
never writes a trace that then seems lost (`unlisted_name_problem`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from dllm_viz.writable import partial_path, place_file

LEFTOVER_SUFFIX = ".tmp.npz"  # what saves before this module left behind when they failed


class TraceSaveError(ValueError):
    """A trace that could not be saved; nothing was written, and the message names the path and the fix."""


def write_npz(path: Path, arrays: Mapping[str, np.ndarray], *, overwrite: bool) -> Path:
    """Write `arrays` as a compressed .npz at `path` atomically; returns `path`.

    Raises:
        TraceSaveError: `path`'s name is one `trace_files` would not list (it starts with '.'),
            `path` exists and `overwrite` is False, is a directory, its folder is a file or
            cannot be created, or the write failed (disk full, permission denied).
    """
    if (problem := unlisted_name_problem(path.name)) is not None:  # written, then never listed: as good as lost
        raise TraceSaveError(problem)
    try:  # a name too long for the file system (ENAMETOOLONG) fails already here, not at the write
        is_dir, exists = path.is_dir(), path.exists()
    except OSError as exc:
        raise TraceSaveError(_os_message(path, exc)) from None
    if is_dir:
        raise TraceSaveError(f"{str(path)!r} is a directory; save to a file inside it, "
                             f"e.g. {str(path / 'trace.npz')!r}")
    if not overwrite and exists:
        raise TraceSaveError(f"{str(path)!r} already exists; choose another name (a save replaces a trace only when "
                             "told to overwrite it)")
    _make_folder(path.parent)
    tmp = partial_path(path)  # unique per call: Streamlit sessions are threads of one process
    try:
        with tmp.open("wb") as handle:
            np.savez_compressed(handle, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        _move_into_place(tmp, path, overwrite)
    except OSError as exc:
        raise TraceSaveError(_os_message(path, exc)) from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


def trace_files(folder: Path) -> list[str]:
    """Names of the traces in `folder`, sorted: *.npz files, without hidden files and the
    `*.npz.tmp.npz` leftovers that saves before this module could leave behind."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.glob("*.npz") if p.is_file() and unlisted_name_problem(p.name) is None)


def unlisted_name_problem(name: str) -> str | None:
    """Why `trace_files` would leave out a trace file named `name` (with its .npz), or None.

    One rule for the listing and for `write_npz`, which refuses such a name: a trace saved as
    '.hidden.npz' was written, but no library listed it, so to the user it was lost.
    """
    if name.startswith("."):
        stripped = name.lstrip(".")
        example = stripped if stripped.endswith(".npz") and len(stripped) > len(".npz") else "trace.npz"
        return (f"the file name {name!r} starts with '.', which hides the file, and no trace library lists "
                f"hidden files; use a name that does not start with '.', e.g. {example!r}")
    if name.endswith(LEFTOVER_SUFFIX):
        return (f"the file name {name!r} ends in {LEFTOVER_SUFFIX!r}, which trace libraries take for the "
                f"leftover of a failed save and do not list; use another name, e.g. "
                f"{name.removesuffix(LEFTOVER_SUFFIX) + '.npz'!r}")
    return None


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise TraceSaveError(f"cannot save into {str(folder)!r}: it (or a folder above it) is a file, not a "
                             "folder; choose another folder") from None
    except OSError as exc:
        raise TraceSaveError(_os_message(folder, exc)) from None


def _move_into_place(tmp: Path, path: Path, overwrite: bool) -> None:
    """Rename `tmp` to `path`; without `overwrite`, an existing file is refused atomically (writable.place_file)."""
    try:
        place_file(tmp, path, overwrite=overwrite)
    except FileExistsError:
        raise TraceSaveError(f"{str(path)!r} already exists; choose another name (a save replaces a trace only when "
                             "told to overwrite it)") from None


def _os_message(path: Path, exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk holding {str(path)!r} is full; free some space or save elsewhere (nothing was written)"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write {str(path)!r} (permission denied or read-only); choose a folder you can write to"
    if isinstance(exc, IsADirectoryError):
        return f"{str(path)!r} is a directory; save to a file inside it"
    if exc.errno == errno.ENAMETOOLONG:
        size = len(path.name.encode())
        return f"the file name {path.name[:40]!r}... is too long for the disk ({size} bytes); shorten it"
    return f"cannot write {str(path)!r} ({exc.strerror or exc.__class__.__name__}); choose another path"
