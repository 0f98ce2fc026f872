"""What each column of the bench summary measures, declared once.

`dllm_viz.bench.summarize_bench` builds its columns in this order, `python -m dllm_viz bench --help`
lists them, and the app's Compare and Tune tables show each text as its column's help. A module of
its own because the CLI's help must not import pandas (bench.py does).
"""

from __future__ import annotations

SUMMARY_COLUMNS: dict[str, str] = {
    "accuracy": "share of problems answered correctly",
    "lost": "problems dense got right and this configuration wrong (paired, on the problems both ran)",
    "gained": "problems this configuration got right and dense wrong",
    "sign_p": "exact two-sided sign test on lost against gained: how likely a split this uneven is were both "
              "equally accurate (small: a real difference; dllm_viz/metrics.py)",
    "mean_nfe": "forward passes per problem",
    "nfe_speedup": "dense's forward passes / this configuration's",
    "wall_speedup": "dense's seconds / this configuration's, measured in the same run",
    "tokens_per_second": "answer tokens (end-of-text excluded) per second",
    "agreement": "share of problems whose output equals dense's",
    "overhead": "time inside the policy's calls per forward-pass time",
    "engine_overhead": "the decoding loop's own bookkeeping (step - forward - policy) per forward-pass time: "
                       "the same for every policy, so not the policy's cost",
    "same_as_uncached": "for a cached configuration (e.g. threshold+dual): share of outputs equal to the same "
                        "configuration's without the cache, when that ran too; NaN otherwise",
    "same_answer_as_uncached": "the same over final answers, the part of an output the task's scorer reads: "
                               "a cache that only changes an answer's surface form (a breadth problem's "
                               "lines in another order) keeps it",
    "cut_off": "answers that filled the canvas without an end-of-text token: too short a gen length, not "
               "necessarily a wrong policy",
    "tpf": "answer tokens per forward pass (d3LLM's TPF)",
    "aup": "d3LLM's AUP of the curve from dense to this configuration (accuracy in percent, y_max the run's "
           "best; dllm_viz/metrics.py)",
    "flip_share": "share of problems on which some answer position changed its top-1 candidate before it was "
                  "committed",
    "redundant": "mean share of masked token-steps spent on positions whose answer had already settled "
                 "(dllm_viz/dynamics.py)",
    "redundant_answer": "the same over the answer's positions only, the end-of-text tail left out (known from "
                        "the first pass, it dominates a canvas longer than the answer)",
    "n": "problems",
}
