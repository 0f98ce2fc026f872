"""Is a path writable? Asked before hours of work go into a file, not after; and the finished
file moved into place in one step.

`train-controller --out`, `decode --save` and the Train page check their target up front: a
folder that is a file, a missing permission or a read-only disk is reported before the decode
or the training runs, instead of as an OSError once the result exists and can only be lost.

The writes themselves (trace_files.write_npz, train.controller.save_controller) go to a hidden
`partial_path` in the target's folder and then `place_file` moves it into place: a failure never
leaves a half-written file under the real name, and a save told not to overwrite refuses an
existing file atomically, so two sessions (threads of one app process) saving one name at once
cannot replace each other's file.
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path


def check_writable(path: Path, what: str) -> None:
    """Raise ValueError unless a file can be created at `path`, before hours of work go into it.

    Creates and removes a probe file in the folder (making the folder if needed), named for this
    call alone: with one shared name, two sessions checking one target at once removed each other's
    probe, and the second removal called a writable folder "not writable".
    """
    if path.is_dir():
        raise ValueError(f"{what} {str(path)!r} is a directory; give a file path")
    probe = path.with_name(f".{path.name[:64]}.{os.getpid()}-{uuid.uuid4().hex[:8]}.probe")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with probe.open("xb"):
            pass
        probe.unlink()
    except (FileExistsError, NotADirectoryError):
        raise ValueError(f"{what} {str(path)!r} cannot be created: a folder above it is a file; "
                         "choose another folder") from None
    except OSError as exc:
        raise ValueError(f"{what} {str(path)!r} is not writable ({exc.strerror or exc.__class__.__name__}); "
                         "choose a folder you can write to") from None


def check_new_file(path: Path, what: str) -> None:
    """Raise ValueError if `path` exists or cannot be created: a finished result is never replaced,
    and a file written only once the work is done (a report, a chart) is checked before the work."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what} {str(path)!r} already exists; choose another path (finished results are never "
                         "overwritten)")
    check_writable(path, what)


PARTIAL_SUFFIX = ".partial"


def partial_path(path: Path) -> Path:
    """A hidden name beside `path` for the file while it is being written, unique per call.

    Unique because Streamlit sessions are threads of one process and may save the same name at
    once; in the same folder, so the final move is a rename on one disk. It starts with '.' and
    ends in PARTIAL_SUFFIX, so no listing of traces or controllers shows a leftover.
    """
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}{PARTIAL_SUFFIX}")


def write_synced(path: Path, data: bytes) -> None:
    """Write `data` to `path` and flush it to the disk, so that a move into place publishes a whole file."""
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def place_file(tmp: Path, path: Path, *, overwrite: bool) -> None:
    """Move the finished file `tmp` to `path` in one step; the caller removes `tmp` afterwards
    (`unlink(missing_ok=True)`: a hard link leaves it behind).

    Without `overwrite`, a hard link refuses an existing `path` atomically; a check and then a
    rename would let two writers both pass the check, and the second replace the first's file.

    Raises:
        FileExistsError: `path` exists and `overwrite` is False (nothing was changed).
        OSError: the move failed (permission, a directory in the way).
    """
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links: check, then rename
        if path.exists():
            raise FileExistsError(errno.EEXIST, "File exists", str(path)) from None
        os.replace(tmp, path)
