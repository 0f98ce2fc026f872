"""Benchmark script (not a test): answer-token accuracy of one forward pass, by hard-split family.

For each family of `HARD_FAMILIES`, 24 held-out problems (seed 1): the reference answer plus
end-of-text after the prompt, a share of its positions masked at random (0.25, 0.5, 1.0), one
pass, and the share of masked positions whose top-1 candidate is the reference token. Session 13
used it to see that the model could not yet copy names from the prompt (ParallelBench's lists).

    python tools/family_token_accuracy.py MODEL
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_arg import load_or_exit  # tools/ is not a package: found through sys.path

from dllm_viz.tasks import get_task
from dllm_viz.tasks.hard_split import HARD_FAMILIES

RATIOS = (0.25, 0.5, 1.0)


def main(argv: list[str] | None = None) -> int:
    """Print each family's answer-token accuracy at every masked share. The model is an argument
    (no default: the script compares exports), read by argparse so that a missing one or --help
    gets usage, not an IndexError or an attempt to load a model named '--help'."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a model name (e.g. tiny) or export directory")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    adapter = load_or_exit(args.model, device="cpu")
    mask, eos = adapter.info.mask_token_id, adapter.info.eos_token_id
    rng = random.Random(0)
    for name, _ in HARD_FAMILIES:
        task = get_task(name)
        problems = task.generate(24, seed=1, split="heldout")
        shown = []
        for ratio in RATIOS:
            right = total = 0
            for problem in problems:
                prompt = adapter.encode_prompt(problem.prompt)
                answer = [*adapter.encode_text(problem.target), eos]
                ids = torch.tensor(prompt + answer)
                hidden = rng.sample(range(len(prompt), len(ids)), max(1, round(ratio * len(answer))))
                masked = ids.clone()
                masked[hidden] = mask
                right += int((adapter.logits(masked)[hidden].argmax(-1) == ids[hidden]).sum())
                total += len(hidden)
            shown.append(f"@{ratio}: {right / total:.3f}")
        print(f"{name:28s} " + "  ".join(shown), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
