"""The Learn page's chapters: each chapter's name (in the URL as `chapter=`) and its opening text.

Here, not in pages/learn.py, so that app_ui.url_params can name a bad `chapter` link value from the
same list the page offers. Text only; the page draws each chapter's example.
"""

from __future__ import annotations

CHAPTERS = {
    "1 Masking": "A diffusion LM does not write left to right. It starts from a **canvas of mask tokens** after "
                 "the prompt and fills it in over several **steps**. Below: the canvas before any step — every "
                 "position is a mask (grey). On the Decode page, *Gen length* sets how many positions there are.",
    "2 Confidence": "Each step is one **forward pass** over the whole canvas. For every masked position the model "
                    "proposes a **candidate** token with a **confidence** (its probability). Below: the canvas "
                    "after one step — committed tokens are coloured by confidence, drafts are the candidates not "
                    "yet accepted. On the Decode page, press *Step* (→) to run exactly one pass.",
    "3 Remasking": "LLaDA commits a fixed number of positions per step — the most confident ones — and "
                   "**re-masks** the rest, so those positions are predicted again next step with more context. "
                   "Below: the commit order with 2 tokens per step (steps = 32 for 64 positions). On the Decode "
                   "page, pick the *fixed_steps* commit rule and change *steps*.",
    "4 Blocks": "Semi-autoregressive **blocks** split the canvas into windows decoded left to right; inside a "
                "block, the order is free. Move the slider and watch the commit order form bands. On the Decode "
                "page this is *block length* (or *adablock*, which sizes blocks at line breaks).",
    "5 NFE": "**NFE** (number of function evaluations) counts forward passes — the cost. The *threshold* rule "
             "commits every position whose confidence is above τ, so confident stretches go in parallel and "
             "NFE drops below the one-token-per-step baseline. Lower τ: fewer passes, more risk of mistakes.",
    "6 Block diffusion": "**Block diffusion** models (LLaDA2.x, SDAR, Fast-dLLM v2) are trained to decode block "
                         "after block. Inside a block they attend both ways; across blocks, **block-causal "
                         "attention**: a position sees its own block and the earlier ones, never a later one. So a "
                         "pass needs only the prompt and the canvas up to the current block's end, and a finished "
                         "block's keys and values never change: the *exact* cache keeps them and each pass "
                         "computes only the current block, with the same result. Their rule, LLaDA2's *block "
                         "refinement*, can also make a **token edit**: replace a committed token when the model "
                         "now prefers another one confidently. Once a block is full, **post-steps** keep refining "
                         "it while edits happen. Below: block refinement on aligned blocks of the loaded model's own "
                         "length (32 for the bundled tiny one, which is bidirectional, so it sees the whole canvas, "
                         "but the rule is the same).",
}

# What chapters 1-5 do differently on a block-causal model, shown under the chapter's text (pages/learn.py
# fills in {block}, its block length, {gen}, the canvas, and {steps}, chapter 3's budget). Such a model is
# trained to decode over aligned blocks of its own length, so the examples and the Decode links run on those
# instead of the fixed windows the texts above describe; chapter 6 runs on them anyway and says so itself.
BLOCK_MODEL_NOTES = {
    "1 Masking": "This model is block-diffusion with block length {block}: it was trained to decode over aligned "
                 "blocks of {block}, counted from the prompt's first token, so the example and the Decode link "
                 "run on those, its own, not on one window of all {gen} positions. The canvas still starts as all "
                 "masks; the blocks decide where each step may commit.",
    "2 Confidence": "This model is block-diffusion with block length {block}: the example and the Decode link run "
                    "on aligned blocks of {block}, its own, not on one window of all {gen} positions, so a step "
                    "commits only inside the current block (between the black edges on the heatmap), the block it "
                    "was trained to fill next.",
    "3 Remasking": "This model is block-diffusion with block length {block}: the example and the Decode link run on "
                   "aligned blocks of {block}, its own, not on one window of all {gen} positions. The budget is "
                   "still {steps} steps for {gen} positions, shared out block by block: each block commits its "
                   "most confident positions a few at a time, then the next block starts.",
    "4 Blocks": "This model is block-diffusion with block length {block}, and that length is its own, not a "
                "setting: it was trained on aligned blocks of {block}, counted from the prompt's first token, and "
                "its block-causal attention is built on them (a position sees its own block and the earlier ones). "
                "Other lengths would cut across the blocks it knows, so there is no slider here. Below: one token "
                "per step on its aligned blocks; the black edges on the heatmap mark the block each step works "
                "on, left to right.",
    "5 NFE": "This model is block-diffusion with block length {block}: both decodes, and the Decode link, run on "
             "aligned blocks of {block}, its own, not on one window of the whole canvas. One token per step is the "
             "dense baseline Compare measures against on this model, and τ commits in parallel only inside the "
             "current block.",
}
