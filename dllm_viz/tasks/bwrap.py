"""The bubblewrap (`bwrap`) command line that isolates one Python program, and its user mapping.

The sandbox gets new user, pid, network, ipc, uts and cgroup namespaces, dies with its parent,
sees only read-only binds of what the interpreter needs (/usr, /lib*, the Python prefixes), a
private size-capped tmpfs as its working directory, a /proc of its own pid namespace, an empty
environment, and cannot create further user namespaces. A small launcher inside drops to an
unprivileged user and sets the rlimits before the program starts. Knows nothing about scoring.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from pathlib import Path

BWRAP = "bwrap"
WORK_DIR = "/sandbox"
PROGRAM = f"{WORK_DIR}/program.py"
# The working directory's tmpfs: room for scratch files, not for filling the host's memory.
WORK_DIR_BYTES = 16 << 20
# The unprivileged user the program runs as (inside the namespace and, when we are root, on the
# host too: "nobody", so RLIMIT_NPROC applies, which the kernel never enforces for host root).
SANDBOX_UID = SANDBOX_GID = 65534
# Top-level entries that hold the dynamic loader and shared libraries on merged-/usr and
# classic layouts; each is a symlink into /usr or a directory bound read-only.
SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

# Runs as `python -I -B -S -c LAUNCHER <uid> <gid> <limits JSON> <program> [<runner> <fd>...]` inside
# the sandbox; with a runner, `python -I -B -S -c <runner> <fd>... <program>` runs the program and
# the fds named (the runner's own channels to the caller) stay open across the launcher. -S: no site
# module, so no `.pth` startup hook (which `-I` still runs) executes in a process holding those fds;
# the interpreter's folders are bound read-only here, but an earlier --unsafe-exec run on the host
# could have planted one in a virtual environment the user owns.
LAUNCHER = """\
import json, os, resource, sys
keep = sorted(int(fd) for fd in sys.argv[6:])
low = 3
for fd in [*keep, 1 << 16]:
    os.closerange(low, fd)  # bwrap's setup pipes stay open otherwise
    low = fd + 1
uid, gid = int(sys.argv[1]), int(sys.argv[2])
if os.getuid() != uid:  # started as the namespace's root (see map_user): become the sandbox user
    with open("/proc/sys/user/max_user_namespaces", "w") as limit:
        limit.write("0")  # what --disable-userns does, which bwrap refuses with the mapping
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
for name, value in json.loads(sys.argv[3]).items():
    resource.setrlimit(getattr(resource, name), (value, value))
runner = ["-S", "-c", sys.argv[5], *sys.argv[6:]] if len(sys.argv) > 5 else []
os.execv(sys.executable, [sys.executable, "-I", "-B", *runner, sys.argv[4]])
"""


def interpreter_dirs() -> list[str]:
    """Directories outside /usr the interpreter needs: its prefixes and its executable's home."""
    found = [sys.base_prefix, sys.prefix, str(Path(sys.executable).resolve().parent.parent)]
    out: list[str] = []
    for path in (str(Path(p).resolve()) for p in found):
        if path in ("/", "/usr") or path.startswith("/usr/") or path in out:
            continue
        out.append(path)
    return out


def _system_binds() -> list[str]:
    """/usr and the /bin, /lib* entries, as symlinks or read-only binds like the host's."""
    args = ["--ro-bind", "/usr", "/usr"]
    for entry in SYSTEM_DIRS:
        path = Path(entry)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), entry]
        elif path.is_dir():
            args += ["--ro-bind", entry, entry]
    return args


def _traversable_parents(path: str) -> list[str]:
    """Create the parents of a bind as 0755 directories: bwrap copies the host's modes, and a
    0700 /root would keep the unprivileged sandbox user from its own interpreter."""
    args: list[str] = []
    for parent in reversed(Path(path).parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def command(
    *, program_fd: int, limits: dict[str, int], info_fd: int, block_fd: int, mapped: bool,
    runner: tuple[str, ...] = (),
) -> list[str]:
    """argv for bwrap running the program read from `program_fd` under `limits`.

    Args:
        program_fd: a readable fd holding the program's source (bwrap copies it in).
        limits: rlimit name -> value, set by the launcher inside.
        info_fd: bwrap writes the sandbox's pid (as JSON) here.
        block_fd: bwrap waits for a byte on it before going on (before the program starts),
            so the caller can take hold of the sandbox's init first.
        mapped: the caller is root and writes the user mapping itself (`map_user`) while bwrap
            waits, right after creating the user namespace.
        runner: empty to run the program as `python -I -B <program>`; else (source, fd, ...): the
            program runs as `python -I -B -c <source> <fd>... <program>`, and those inherited fds
            are kept open for it.
    """
    argv = [BWRAP, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--clearenv", "--info-fd", str(info_fd)]
    if mapped:
        # The launcher needs CAP_SYS_RESOURCE in namespace root's bounding set (copied from
        # ours) to lower max_user_namespaces; it drops every capability before the program.
        argv += ["--userns-block-fd", str(block_fd), "--cap-add", "CAP_SYS_RESOURCE"]
    else:
        argv += ["--block-fd", str(block_fd), "--disable-userns", "--uid", str(SANDBOX_UID),
                 "--gid", str(SANDBOX_GID)]
    argv += _system_binds()
    for path in interpreter_dirs():
        argv += [*_traversable_parents(path), "--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
             "--perms", "1777", "--size", str(WORK_DIR_BYTES), "--tmpfs", WORK_DIR,
             "--perms", "0444", "--ro-bind-data", str(program_fd), PROGRAM, "--remount-ro", "/", "--chdir", WORK_DIR]
    for name, value in {"PATH": "/usr/bin:/bin", "HOME": WORK_DIR, "TMPDIR": WORK_DIR,
                        "LANG": "C.UTF-8"}.items():
        argv += ["--setenv", name, value]
    return [*argv, "--", sys.executable, "-I", "-B", "-S", "-c", LAUNCHER, str(SANDBOX_UID),
            str(SANDBOX_GID), json.dumps(limits), PROGRAM, *runner]


def read_child_pid(info_fd: int, *, timeout_s: float = 10.0) -> int | None:
    """The sandbox's pid-namespace init, as bwrap reports it on `--info-fd`.

    None if bwrap failed before creating it or said nothing for `timeout_s` (the caller's
    deadline then ends bwrap's whole process group).
    """
    deadline = time.monotonic() + timeout_s
    data = b""
    while not data.rstrip().endswith(b"}"):
        if not select.select([info_fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return None
        chunk = os.read(info_fd, 4096)
        if not chunk:
            return None
        data += chunk
    return int(json.loads(data)["child-pid"])


def map_user(child_pid: int) -> None:
    """Map namespace root to host root (bwrap's own setup) and the sandbox user to "nobody".

    Only for a root caller: bwrap would otherwise map the sandbox user to host root, where
    RLIMIT_NPROC does not apply. Namespace root keeps no way back once the launcher drops it.
    """
    for kind, inner in (("uid", SANDBOX_UID), ("gid", SANDBOX_GID)):
        Path(f"/proc/{child_pid}/{kind}_map").write_text(f"0 0 1\n{inner} {inner} 1\n")
