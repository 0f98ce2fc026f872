"""Host processes a sandbox test may have left behind, found by a marker in their command line."""

from __future__ import annotations

from pathlib import Path


def alive_with(marker: str) -> list[int]:
    """Host pids whose command line contains `marker` (zombies have none, and are dead)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids
