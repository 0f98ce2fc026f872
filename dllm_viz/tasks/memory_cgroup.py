"""A memory cgroup around one sandbox, so all of its processes together stay under one bound.

The rlimits bound each process (RLIMIT_AS), so a program's PROCESS_LIMIT processes could hold that
much memory each between them (32 x 1 GiB). A cgroup charges every page any of them touches to
one account, and the kernel's OOM killer ends a process of the group once the account passes
its limit, before the host runs short. It needs a memory controller this process may write: a
cgroup v1 memory hierarchy (what a root process in most containers has), or a cgroup v2 group
whose children get the memory controller. Elsewhere `unavailable_reason` says why, and the
per-process bound is all there is. Knows nothing about bwrap or scoring.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PREFIX = "dllm-viz-sandbox-"
MOUNTINFO = Path("/proc/self/mountinfo")
OWN_CGROUPS = Path("/proc/self/cgroup")
# A group is removed once its processes are gone; the kernel may take a moment to let go of the
# last one after its parent reaped it, so removal retries this long.
REMOVE_WAIT_S = 1.0


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where groups are made and the file names of this cgroup version."""

    parent: Path
    limit_file: str  # the bound on memory
    swap_file: str  # the bound that keeps swap from extending it (absent without swap accounting)
    events_file: str  # holds the count of OOM kills as an `oom_kill N` line
    swap_is_total: bool  # v1's memsw limit counts memory + swap; v2's swap.max counts swap alone


@dataclass(slots=True)
class MemoryGroup:
    """One sandbox's cgroup: processes added to it (and all they fork) share `limit_bytes`."""

    path: Path
    limit_bytes: int
    layout: _Layout

    def add(self, pid: int) -> None:
        """Move process `pid` (and, from then on, everything it starts) into the group.

        Call while the process has not yet run untrusted code (bwrap waits on its block fd).
        """
        (self.path / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        """How many of the group's processes the kernel killed for passing the limit."""
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / self.layout.events_file).read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
        return 0

    def remove(self) -> None:
        """Remove the group once its processes are gone (retrying briefly; left behind otherwise,
        and then removed by the next `create` in any process once its creator has exited)."""
        deadline = time.monotonic() + REMOVE_WAIT_S
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.02)


@functools.cache
def _layout() -> _Layout | str:
    """Where this process may make memory groups, or why it cannot (a sentence)."""
    try:
        mounts = MOUNTINFO.read_text()
        own = OWN_CGROUPS.read_text()
    except OSError as exc:
        return f"the cgroup layout cannot be read ({exc})"
    found = _v1_parent(mounts, own)
    if found is not None:
        return _usable(_Layout(found, "memory.limit_in_bytes", "memory.memsw.limit_in_bytes",
                               "memory.oom_control", swap_is_total=True))
    found = _v2_parent(mounts, own)
    if found is None:
        return "this machine has no memory cgroup controller mounted where this process can see it"
    controls = found / "cgroup.subtree_control"
    with contextlib.suppress(OSError):
        if "memory" in controls.read_text().split():
            return _usable(_Layout(found, "memory.max", "memory.swap.max", "memory.events", swap_is_total=False))
    return (f"the cgroup v2 group {str(found)!r} does not give its children the memory controller "
            "(run as a systemd unit or container with memory delegated, e.g. `systemd-run --user -p Delegate=yes`)")


def _usable(layout: _Layout) -> _Layout | str:
    """The layout if a group can be made, bounded, entered by a process and removed in it, else why not.

    Entering is tried too (a waiting child is moved in): where mkdir works but moving a process
    does not (cgroup v2's rules on who may move what), every sandbox would otherwise be refused.
    """
    probe = layout.parent / f"{PREFIX}{os.getpid()}-probe-{secrets.token_hex(4)}"
    try:
        probe.mkdir()
    except OSError as exc:
        return f"a memory cgroup cannot be made under {str(layout.parent)!r} ({exc.strerror or exc})"
    try:
        if not (probe / layout.limit_file).exists():
            return f"cgroups made under {str(layout.parent)!r} have no {layout.limit_file}"
        (probe / layout.limit_file).write_text(str(1 << 30))
        waiting = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        try:
            (probe / "cgroup.procs").write_text(str(waiting.pid))
        finally:
            assert waiting.stdin is not None
            waiting.stdin.close()
            waiting.wait()
    except OSError as exc:
        return f"a process cannot be put in a memory cgroup under {str(layout.parent)!r} ({exc.strerror or exc})"
    finally:
        MemoryGroup(probe, 1, layout).remove()
    return layout


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _mounts(mounts: str, fstype: str) -> Iterator[tuple[str, Path, list[str]]]:
    """(root within the hierarchy, mount point, super options) of each mount of `fstype`."""
    for line in mounts.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if sep and len(fields) >= 5 and len(rest) >= 3 and rest[0] == fstype:
            yield _unescape(fields[3]), Path(_unescape(fields[4])), rest[2].split(",")


def _inside(mount_root: str, mount_point: Path, own_path: str) -> Path | None:
    """The directory of our own cgroup `own_path` under a mount of the hierarchy from `mount_root`."""
    root = mount_root.rstrip("/")
    if own_path != root and not own_path.startswith(f"{root}/"):
        return None  # our group lies outside what this mount shows
    path = mount_point / own_path[len(root):].lstrip("/")
    return path if path.is_dir() else None


def _v1_parent(mounts: str, own: str) -> Path | None:
    """Our own group's directory in the v1 memory hierarchy, if one is mounted."""
    own_path = next((line.split(":", 2)[2] for line in own.splitlines()
                     if line.count(":") >= 2 and "memory" in line.split(":", 2)[1].split(",")), None)
    if own_path is None:
        return None
    for root, point, options in _mounts(mounts, "cgroup"):
        if "memory" in options and (found := _inside(root, point, own_path)) is not None:
            return found
    return None


def _v2_parent(mounts: str, own: str) -> Path | None:
    """Our own group's directory in the v2 hierarchy, if one is mounted."""
    own_path = next((line[3:] for line in own.splitlines() if line.startswith("0::")), None)
    if own_path is None:
        return None
    for root, point, _ in _mounts(mounts, "cgroup2"):
        if (found := _inside(root, point, own_path)) is not None:
            return found
    return None


def unavailable_reason() -> str | None:
    """Why no memory group can be made here (a sentence with the fix), or None when one can."""
    layout = _layout()
    return layout if isinstance(layout, str) else None


def create(limit_bytes: int) -> MemoryGroup | None:
    """A new group bounded to `limit_bytes` of memory (swap included), or None where none can be made.

    Raises:
        ValueError: if `limit_bytes` is not a positive whole number.
    """
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes <= 0:
        raise ValueError(f"`limit_bytes` must be a positive whole number of bytes, got {limit_bytes!r}")
    layout = _layout()
    if isinstance(layout, str):
        return None
    _remove_orphans(layout.parent)
    path = layout.parent / f"{PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
    try:
        path.mkdir()
    except OSError:
        return None
    group = MemoryGroup(path, limit_bytes, layout)
    try:
        (path / layout.limit_file).write_text(str(limit_bytes))
        swap = path / layout.swap_file
        if swap.exists():
            swap.write_text(str(limit_bytes if layout.swap_is_total else 0))
    except OSError:
        group.remove()
        return None
    return group


@contextmanager
def bounded(limit_bytes: int) -> Iterator[MemoryGroup | None]:
    """A group for the block's sandbox (None where none can be made), removed when the block ends."""
    group = create(limit_bytes)
    try:
        yield group
    finally:
        if group is not None:
            group.remove()


def _remove_orphans(parent: Path) -> None:
    """Remove groups that processes since exited left behind (an evaluator killed mid-run).

    A group still holding processes refuses rmdir, so a live sandbox is never touched; the
    creator's pid in the name keeps us off groups a running evaluator is still setting up.
    """
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            owner = entry.name.removeprefix(PREFIX).split("-", 1)[0]
            if not entry.name.startswith(PREFIX) or not owner.isdigit() or _alive(int(owner)):
                continue
            with contextlib.suppress(OSError):
                entry.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
