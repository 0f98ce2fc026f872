"""GSM8K and HumanEval loaders and scorers on the shared data files (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dllm_viz.tasks import get_task, load_gsm8k, load_humaneval
from dllm_viz.tasks.gsm8k import flexible_extract, gold_answer, strict_match
from dllm_viz.tasks.humaneval import program

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "gsm8k_test.jsonl").is_file(), reason="../shared/data is absent")


@pytest.mark.parametrize(("completion", "strict", "flexible"), [
    ("She pays 5 * 2 = 10.\n#### 10", "10", "10"),
    ("#### 1,234\n", "1234", "1234"),
    ("The total is $1,234.", None, "1234"),
    ("#### -7", "-7", "-7"),
    ("First 3 then 4 and finally 12.", None, "12"),
    ("no number here", None, None),
    ("#### 5\nQuestion: next one #### 9", "5", "5"),
    ("It costs $3.50.", None, "3.50"),
])
def test_gsm8k_extraction_edge_cases(completion: str, strict: str | None, flexible: str | None) -> None:
    assert strict_match(completion) == strict
    assert flexible_extract(completion) == flexible


def test_gold_answer_needs_the_marker() -> None:
    assert gold_answer("... so 3 + 4 = 7\n#### 7") == "7"
    with pytest.raises(ValueError, match="####"):
        gold_answer("no marker")


@needs_data
def test_gsm8k_loader_builds_five_shot_prompts_and_scores() -> None:
    problems = load_gsm8k(DATA / "gsm8k_test.jsonl", n=3)
    assert len(problems) == 3 and problems[0].problem_id == "gsm8k/5"
    assert problems[0].prompt.count("Question:") == 6 and problems[0].prompt.endswith("Answer:")
    task = get_task("gsm8k")
    assert task.score(problems[0], problems[0].target)
    assert not task.score(problems[0], "#### 123456789")
    assert task.score_both(problems[0], f"so the answer is {problems[0].gold}.") == {"strict": False, "flexible": True}


@needs_data
def test_humaneval_canonical_solutions_pass_and_wrong_ones_fail() -> None:
    problems = load_humaneval(DATA / "HumanEval.jsonl.gz", n=3)
    task = get_task("humaneval")
    assert [task.score(p, p.target) for p in problems] == [True, True, True]
    assert not task.score(problems[0], "    return None\n")
    fenced = f"Here it is:\n```python\n{problems[1].prompt}{problems[1].target}```\n"
    assert task.score(problems[1], fenced)  # a full function inside a code fence


def test_humaneval_program_appends_body_or_uses_a_full_definition() -> None:
    from dllm_viz.tasks import Problem

    p = Problem(task="humaneval", problem_id="x", prompt="import math\ndef f(x):\n", target="",
                gold="def check(c):\n    assert c(4) == 2\n", entry_point="f")
    appended = program(p, "    return math.isqrt(x)\n")
    assert appended.candidate.startswith("import math\ndef f(x):\n    return")
    full = program(p, "```python\ndef f(x):\n    return 2\n```")
    assert full.candidate.startswith("import math\ndef f(x):\n    return 2") and "check" not in full.candidate
    assert full.setup == p.prompt and full.tests.rstrip().endswith("check(f)") and full.entry_point == "f"


def test_real_benchmarks_are_not_generated() -> None:
    with pytest.raises(ValueError, match="load_gsm8k"):
        get_task("gsm8k").generate(1, seed=0, split="heldout")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_humaneval("/no/such/HumanEval.jsonl.gz")


@needs_data
def test_eval_cli_reads_gsm8k_from_a_path(tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dllm_viz.cli import main

    status = main(["eval", "--model", str(tiny_dir), "--device", "cpu", "--task", "gsm8k", "--data",
                   str(DATA / "gsm8k_test.jsonl"), "--n", "1", "--gen-length", "16", "--block-length", "16",
                   "--quiet"])
    assert status == 2  # 5-shot GSM8K prompts exceed the test model's 512-token context
    assert "exceeds the model's context" in capsys.readouterr().err
    assert main(["eval", "--model", str(tiny_dir), "--device", "cpu", "--task", "gsm8k", "--n", "1"]) == 2
    assert "--data" in capsys.readouterr().err


@needs_data
def test_hub_loading_builds_the_same_problems_as_the_local_files(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`--data hub` fetches the official parquet files; a fake hub serves the shared data as parquet."""
    import gzip
    import json

    import pandas as pd

    from dllm_viz.tasks import hub

    with gzip.open(DATA / "HumanEval.jsonl.gz", "rt") as handle:
        humaneval_lines = handle.read().splitlines()[:5]
    sources = {"openai/gsm8k": [json.loads(line) for line in (DATA / "gsm8k_test.jsonl").read_text().splitlines()[:20]],
               "openai/openai_humaneval": [json.loads(line) for line in humaneval_lines]}
    asked = []

    def fake_download(*, repo_id: str, filename: str, repo_type: str) -> str:
        asked.append((repo_id, filename, repo_type))
        path = tmp_path / repo_id.replace("/", "_") / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(sources[repo_id]).to_parquet(path)
        return str(path)

    monkeypatch.setattr(hub, "_hf_hub_download", fake_download)
    assert load_gsm8k("hub", n=10) == load_gsm8k(DATA / "gsm8k_test.jsonl", n=10)
    assert load_humaneval("hub", n=5) == load_humaneval(DATA / "HumanEval.jsonl.gz", n=5)
    assert asked == [(*hub.HUB_FILES["gsm8k"], "dataset"), (*hub.HUB_FILES["humaneval"], "dataset")]


def test_offline_hub_error_names_the_local_file_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from dllm_viz.tasks import hub

    def offline(**kwargs: object) -> str:
        raise OSError("no route to host")

    monkeypatch.setattr(hub, "_hf_hub_download", offline)
    with pytest.raises(ValueError, match=r"openai/gsm8k.*offline.*gsm8k_test\.jsonl"):
        load_gsm8k("hub")
    with pytest.raises(ValueError, match="no hub source"):
        hub.hub_records("arith")
