"""The shell scripts of tools/ (training stages, judging, promoting, swapping the bundled model): they
parse, and `judge_candidate.sh` refuses, before it decodes anything, what would leave the candidate
half replaced or a judgement with nothing to pair with.

Why only this much here: each script's real work decodes hundreds of problems at gen 256 (minutes to
hours), so each documents a dry run on copies instead (its header); a refusal, though, costs
milliseconds and is what stands between a typo and a lost candidate.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "tools").glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_each_script_parses(script: Path) -> None:
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def judge(tmp_path: Path, candidate: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    """tools/judge_candidate.sh on `candidate` against a copy of the bundled model as the base."""
    base = tmp_path / "base"
    if not base.exists():
        shutil.copytree(ROOT / "dllm_viz" / "assets" / "tiny", base)
    env = {**os.environ, "BASE": str(base), "N_CHAIN": "1", "N_LONG": "1", "LANES": "1", **environment}
    return subprocess.run(["bash", str(ROOT / "tools" / "judge_candidate.sh"), str(candidate), str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def refused_untouched(tmp_path: Path, result: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit 2 with one line naming `words`, nothing decoded and the base as it was."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert all(word in result.stderr for word in words), result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "base" / "bench").exists()
    assert sorted(p.name for p in (tmp_path / "base").iterdir()) == sorted(
        p.name for p in (ROOT / "dllm_viz" / "assets" / "tiny").iterdir())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("base.")] == []  # no stage left beside it


def test_promote_refuses_a_note_that_is_not_the_cards_section(tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("Step 95000 is better.\n")
    result = judge(tmp_path, ROOT / "dllm_viz" / "assets" / "tiny", PROMOTE=str(note))
    refused_untouched(tmp_path, result, str(note), "## This copy")


def test_promote_refuses_a_note_that_is_not_there(tmp_path: Path) -> None:
    result = judge(tmp_path, ROOT / "dllm_viz" / "assets" / "tiny", PROMOTE=str(tmp_path / "missing.md"))
    refused_untouched(tmp_path, result, "missing.md")


def test_promote_refuses_rows_kept_apart_from_the_base(tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("## This copy: step 1\n")
    result = judge(tmp_path, ROOT / "dllm_viz" / "assets" / "tiny", PROMOTE=str(note),
                   BASE_ROWS=str(tmp_path / "rows"))
    refused_untouched(tmp_path, result, "BASE_ROWS", str(tmp_path / "rows"))


def test_promote_refuses_a_candidate_without_a_card(tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("## This copy: step 1\n")
    candidate = tmp_path / "snapshot"
    shutil.copytree(ROOT / "dllm_viz" / "assets" / "tiny", candidate)
    (candidate / "MODEL_CARD.md").unlink()
    result = judge(tmp_path, candidate, PROMOTE=str(note))
    refused_untouched(tmp_path, result, str(candidate / "MODEL_CARD.md"))


def test_judging_adablock_refuses_without_the_bundled_models_rows(tmp_path: Path) -> None:
    """ADA=1 pairs with rows committed beside item 5's; without them it would decode the candidate for
    ~15 minutes and then have nothing to pair with."""
    result = judge(tmp_path, ROOT / "dllm_viz" / "assets" / "tiny", ADA="1", BUNDLED_ROWS=str(tmp_path / "rows"))
    refused_untouched(tmp_path, result, "ADA=1", str(tmp_path / "rows" / "item5_long_ada.csv"))
