"""A sandboxed program's processes share one memory bound (a cgroup per run), not one each.

Before the cgroup, each of a program's 32 processes could hold 1 GiB (RLIMIT_AS), 32 GiB in all.
The real-kernel tests need a memory cgroup this process may write (CI's machines have one);
the layout tests read fake /proc files, so the discovery logic runs everywhere.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from dllm_viz.cli.options import warn_scoring
from dllm_viz.evaluation import heldout_problems
from dllm_viz.tasks import memory_cgroup, sandbox

needs_cgroup = pytest.mark.skipif(memory_cgroup.unavailable_reason() is not None,
                                  reason=f"no memory cgroup here: {memory_cgroup.unavailable_reason()}")
needs_bwrap = pytest.mark.skipif(sandbox.unavailable_reason() is not None,
                                 reason=f"bubblewrap unusable here: {sandbox.unavailable_reason()}")

# Six processes touching 400 MiB each: every one within its own 1 GiB, 2.4 GiB together.
SPREAD_OVER_PROCESSES = textwrap.dedent("""
    import os, time
    kids = []
    for _ in range(6):
        pid = os.fork()
        if pid == 0:
            block = bytearray(400 << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(2)
            os._exit(0)
        kids.append(pid)
    died = sum(os.waitpid(pid, 0)[1] != 0 for pid in kids)
    assert died == 0, f"{died} children died"
""")


def own_groups() -> list[str]:
    layout = memory_cgroup._layout()
    assert not isinstance(layout, str)
    return sorted(p.name for p in layout.parent.iterdir() if p.name.startswith(memory_cgroup.PREFIX))


@needs_cgroup
@pytest.mark.parametrize("unsafe", [False, True], ids=["bwrap", "unsafe"])
def test_processes_together_are_held_to_one_bound(unsafe: bool) -> None:
    if not unsafe and sandbox.unavailable_reason() is not None:
        pytest.skip(f"bubblewrap unusable here: {sandbox.unavailable_reason()}")
    before = own_groups()
    result = sandbox.run_sandboxed(SPREAD_OVER_PROCESSES, timeout_s=30, unsafe=unsafe)
    assert not result.passed and not result.timed_out
    assert "children died" in result.error
    assert "passed the sandbox's memory limit of 1 GiB" in result.error
    assert own_groups() == before, "the run's cgroup was left behind"


@needs_cgroup
@pytest.mark.parametrize("unsafe", [False, True], ids=["bwrap", "unsafe"])
def test_a_program_within_the_bound_passes_and_names_no_limit(unsafe: bool) -> None:
    if not unsafe and sandbox.unavailable_reason() is not None:
        pytest.skip(f"bubblewrap unusable here: {sandbox.unavailable_reason()}")
    result = sandbox.run_sandboxed("block = bytearray(300 << 20)\nassert len(block) == 300 << 20\n",
                                   timeout_s=30, unsafe=unsafe)
    assert result.passed, result.error
    failing = sandbox.run_sandboxed("assert False, 'wrong'", timeout_s=30, unsafe=unsafe)
    assert not failing.passed and "memory limit" not in failing.error


@needs_cgroup
@pytest.mark.parametrize("unsafe", [False, True], ids=["bwrap", "unsafe"])
def test_the_program_and_its_children_run_inside_their_group(unsafe: bool) -> None:
    """The group is entered before the program's first statement; a child it forks stays in it; and
    inside bwrap no cgroup file system is there to move out through."""
    if not unsafe and sandbox.unavailable_reason() is not None:
        pytest.skip(f"bubblewrap unusable here: {sandbox.unavailable_reason()}")
    program = textwrap.dedent("""
        import os, subprocess, sys
        def memory_group(text):
            return next(line.split(":", 2)[2] for line in text.splitlines() if ":memory:" in line)
        own = memory_group(open("/proc/self/cgroup").read())
        child = memory_group(subprocess.run([sys.executable, "-c", "print(open('/proc/self/cgroup').read())"],
                                            capture_output=True, text=True, check=True).stdout)
        assert own == child, (own, child)
        assert own.rsplit("/", 1)[-1].startswith("dllm-viz-sandbox-"), own
        print("mounted:", os.path.exists("/sys/fs/cgroup"))
        assert False, "show"
    """)
    result = sandbox.run_sandboxed(program, timeout_s=30, unsafe=unsafe)
    assert "AssertionError: show" in result.error, result.error
    assert ("mounted: False" in result.error) or unsafe


@needs_cgroup
def test_groups_left_by_a_dead_evaluator_are_removed_and_live_ones_kept() -> None:
    layout = memory_cgroup._layout()
    assert not isinstance(layout, str)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    orphan = layout.parent / f"{memory_cgroup.PREFIX}{dead}-0123456789abcdef"
    mine = layout.parent / f"{memory_cgroup.PREFIX}{os.getpid()}-fedcba9876543210"
    orphan.mkdir()
    mine.mkdir()
    try:
        group = memory_cgroup.create(64 << 20)
        assert group is not None
        assert (group.path / layout.limit_file).read_text().strip() == str(64 << 20)
        group.remove()
        assert not orphan.exists() and mine.exists() and not group.path.exists()
    finally:
        for path in (orphan, mine):
            if path.exists():
                path.rmdir()


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "1G"])
def test_a_limit_that_is_not_a_positive_whole_number_is_refused(limit: object) -> None:
    with pytest.raises(ValueError, match="positive whole number of bytes"):
        memory_cgroup.create(limit)  # type: ignore[arg-type]


# ---------------------------------------------------------------- discovery, on fake /proc files

V1_MOUNTS = ("35 31 0:32 / {root}/memory rw,relatime - cgroup cgroup rw,memory\n"
             "41 31 0:38 / {root}/unified rw,relatime - cgroup2 cgroup2 rw\n")
V2_MOUNTS = "30 23 0:26 / {root}/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"


@pytest.fixture
def fake_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point discovery at files under tmp_path; the cache is cleared before and after."""
    monkeypatch.setattr(memory_cgroup, "MOUNTINFO", tmp_path / "mountinfo")
    monkeypatch.setattr(memory_cgroup, "OWN_CGROUPS", tmp_path / "cgroup")
    memory_cgroup._layout.cache_clear()
    yield tmp_path
    memory_cgroup._layout.cache_clear()


def fake_v1(root: Path, own: str) -> Path:
    (root / "mountinfo").write_text(V1_MOUNTS.format(root=root))
    (root / "cgroup").write_text(f"4:memory:{own}\n0::/\n")
    group = root / "memory" / own.lstrip("/")
    group.mkdir(parents=True)
    return group


def test_v1_hierarchy_is_found_at_our_own_group(fake_proc: Path) -> None:
    group_dir = fake_v1(fake_proc, "/process_api/abc")
    layout = memory_cgroup._layout()
    # A plain directory is no cgroup: a made group lacks the limit file, so it is not usable.
    assert layout == f"cgroups made under {str(group_dir)!r} have no memory.limit_in_bytes"
    assert list(group_dir.iterdir()) == [], "the probe group was left behind"


def test_our_group_outside_the_mounted_part_is_no_place(fake_proc: Path) -> None:
    (fake_proc / "mountinfo").write_text(
        f"35 31 0:32 /docker/x {fake_proc}/memory rw - cgroup cgroup rw,memory\n")
    (fake_proc / "cgroup").write_text("4:memory:/elsewhere\n0::/\n")
    assert memory_cgroup.unavailable_reason() == (
        "this machine has no memory cgroup controller mounted where this process can see it")


def test_v2_without_memory_delegated_says_how_to_get_it(fake_proc: Path) -> None:
    (fake_proc / "mountinfo").write_text(V2_MOUNTS.format(root=fake_proc))
    (fake_proc / "cgroup").write_text("0::/user.slice/app\n")
    group = fake_proc / "unified" / "user.slice" / "app"
    group.mkdir(parents=True)
    (group / "cgroup.subtree_control").write_text("cpu pids\n")
    reason = memory_cgroup.unavailable_reason()
    assert reason is not None and "does not give its children the memory controller" in reason
    assert "Delegate=yes" in reason
    assert memory_cgroup.create(1 << 30) is None


def test_v2_with_memory_delegated_is_used(fake_proc: Path) -> None:
    (fake_proc / "mountinfo").write_text(V2_MOUNTS.format(root=fake_proc))
    (fake_proc / "cgroup").write_text("0::/svc\n")
    group = fake_proc / "unified" / "svc"
    group.mkdir(parents=True)
    (group / "cgroup.subtree_control").write_text("memory pids\n")
    # A plain directory again: found, then refused for lacking the kernel's files.
    assert memory_cgroup.unavailable_reason() == f"cgroups made under {str(group)!r} have no memory.max"


def test_unreadable_layout_and_escaped_mount_paths(fake_proc: Path) -> None:
    assert "cannot be read" in (memory_cgroup.unavailable_reason() or "")
    memory_cgroup._layout.cache_clear()
    spaced = fake_proc / "with space"
    (fake_proc / "mountinfo").write_text(
        f"35 31 0:32 / {str(spaced).replace(' ', chr(92) + '040')}/memory rw - cgroup cgroup rw,memory\n")
    (fake_proc / "cgroup").write_text("4:memory:/\n")
    (spaced / "memory").mkdir(parents=True)
    assert "have no memory.limit_in_bytes" in (memory_cgroup.unavailable_reason() or "")


def test_without_a_cgroup_the_bound_is_said_to_be_per_process(fake_proc: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (fake_proc / "mountinfo").write_text("")
    (fake_proc / "cgroup").write_text("0::/\n")
    assert sandbox.memory_bound().startswith("1 GiB per process only, up to 32 processes")
    args = argparse.Namespace(unsafe_exec=False)
    warn_scoring(args, heldout_problems("code", 1))
    assert "note: scored code is held to 1 GiB per process only" in capsys.readouterr().err
    warn_scoring(args, heldout_problems("arith", 1))
    assert capsys.readouterr().err == "", "a run that scores no code says nothing about the sandbox"


@needs_cgroup
def test_a_group_no_process_can_enter_is_no_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a group can be made but a process not moved into it, every sandbox would have been
    refused at its start; discovery tries the move, so the per-process bound is used instead."""
    layout = memory_cgroup._layout()
    assert not isinstance(layout, str)

    class NoSuchProcess:
        pid = 1 << 30  # above any pid_max: the kernel refuses the move
        stdin = io.BytesIO()

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(memory_cgroup.subprocess, "Popen", lambda *args, **kwargs: NoSuchProcess())
    before = own_groups()
    reason = memory_cgroup._usable(layout)
    assert isinstance(reason, str) and reason.startswith("a process cannot be put in a memory cgroup under")
    assert own_groups() == before, "the probe group was left behind"
