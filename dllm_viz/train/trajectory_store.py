"""Dense trajectories kept on disk as they are decoded, so an interrupted controller training resumes.

Collecting the dense traces is most of `train-controller`'s time (one forward pass per token per
prompt). Each finished trace is saved at once as `<folder>/<index>.npz`; a rerun with `--resume`
loads those (through the checked trace loader) and decodes only the rest. The folder also holds
the settings the traces depend on, and a resume with other settings is refused.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dllm_viz.trace import Trace, TraceFileError, load_trace

_SETTINGS = "settings.json"


class TrajectoryStore:
    """A folder of dense traces, one per prompt index, tied to the settings that made them.

    Raises (on construction):
        ValueError: the folder holds traces of a previous run and `resume` is False, or
            their settings differ from `settings`.
    """

    def __init__(self, folder: Path, prompts: Sequence[str], settings: dict[str, Any], *, resume: bool) -> None:
        self.folder = folder
        digest = hashlib.sha256(json.dumps(list(prompts)).encode("utf-8")).hexdigest()
        self.settings = json.loads(json.dumps({**settings, "prompts_sha256": digest}, default=str))
        previous = sorted(folder.glob("*.npz")) if folder.is_dir() else []
        if previous and not resume:
            raise ValueError(f"{str(folder)!r} holds {len(previous)} dense trajectories of an interrupted run; "
                             "pass --resume to reuse them, or delete that folder to start over")
        if previous:
            try:
                saved = json.loads((folder / _SETTINGS).read_text())
            except (OSError, ValueError):
                saved = None
            if saved != self.settings:
                raise ValueError(f"cannot --resume from {str(folder)!r}: its trajectories were decoded with other "
                                 "settings (model, prompts, gen length or block length); rerun with the same "
                                 "options or delete that folder")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / _SETTINGS).write_text(json.dumps(self.settings, indent=2, sort_keys=True))

    def _path(self, index: int) -> Path:
        return self.folder / f"{index:06d}.npz"

    def get(self, index: int) -> Trace | None:
        """The saved trace of prompt `index`, or None (also for a damaged file, which is decoded again)."""
        path = self._path(index)
        if not path.is_file():
            return None
        try:
            return load_trace(path)
        except TraceFileError:
            return None

    def put(self, index: int, trace: Trace) -> None:
        """Keep the finished trace of prompt `index` (written atomically)."""
        trace.save(self._path(index))

    def remove(self) -> None:
        """Delete the folder once the controller is saved (the traces are no longer needed)."""
        shutil.rmtree(self.folder, ignore_errors=True)
