"""Is a path writable? Asked before hours of work go into a file, not after.

`train-controller --out`, `decode --save` and the Train page check their target up front: a
folder that is a file, a missing permission or a read-only disk is reported before the decode
or the training runs, instead of as an OSError once the result exists and can only be lost.
"""

from __future__ import annotations

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
