"""GSM8K and HumanEval from the Hugging Face hub, for machines that can reach it.

`load_gsm8k("hub")` / `load_humaneval("hub")` (and `--data hub` on the CLI) fetch the official
test split's parquet file with huggingface_hub (cached in the usual HF cache, so a second run
works offline) and hand its records to the same problem builders as the local files. Offline,
the error says to pass a local file instead (../shared/data has both sets).
"""

from __future__ import annotations

from typing import Any

HUB = "hub"
# (dataset repo, parquet file of the test split) as published on the hub.
HUB_FILES: dict[str, tuple[str, str]] = {
    "gsm8k": ("openai/gsm8k", "main/test-00000-of-00001.parquet"),
    "humaneval": ("openai/openai_humaneval", "openai_humaneval/test-00000-of-00001.parquet"),
}


def _hf_hub_download(**kwargs: Any) -> str:
    from huggingface_hub import hf_hub_download

    return hf_hub_download(**kwargs)


def hub_records(task: str) -> list[dict[str, Any]]:
    """The test-split records of `task` ('gsm8k' or 'humaneval') from the hub.

    Raises:
        ValueError: unknown task, or the hub could not be reached (names the local-file fix).
    """
    import pandas as pd

    if task not in HUB_FILES:
        raise ValueError(f"no hub source for task {task!r}; known: {sorted(HUB_FILES)}")
    repo_id, filename = HUB_FILES[task]
    try:
        path = _hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset")
    except Exception as exc:  # the hub client raises many types for offline / not found
        raise ValueError(
            f"could not fetch {repo_id}/{filename} from the Hugging Face hub ({type(exc).__name__}: {exc}); "
            f"if this machine is offline, pass a local file instead of 'hub' "
            f"(e.g. ../shared/data/gsm8k_test.jsonl or ../shared/data/HumanEval.jsonl.gz)"
        ) from exc
    return pd.read_parquet(path).to_dict("records")
