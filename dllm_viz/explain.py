"""Plain-language explanations of every decoding component, its main knobs and the glossary.

One source for the words a newcomer reads: the CLI's `decode --help` and the app's widgets and
Learn page all read these tables, so an explanation is written (and corrected) once. Each
component entry is two or three sentences plus the paper it comes from; ALGORITHMS.md-level
detail stays in the policy modules' docstrings. Nothing here imports torch or streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

from dllm_viz.model_facts import AdapterInfo


@dataclass(frozen=True, slots=True)
class Explanation:
    """What a component does, in two or three sentences, and where it comes from."""

    text: str
    paper: str


LLADA2_PAPER = "LLaDA2.0: Scaling Up Diffusion Language Models to 100B, arXiv 2512.15745; diffusers LLaDA2Pipeline"

COMPONENTS: dict[str, Explanation] = {
    "fixed_steps": Explanation(
        "LLaDA's rule: every step commits the same number of positions (gen length / steps), the most "
        "confident ones, and re-masks the rest so they are predicted again with more context. With one "
        "token per step it is the dense baseline every speedup is measured against.",
        "Large Language Diffusion Models (LLaDA), arXiv 2502.09992"),
    "threshold": Explanation(
        "Fast-dLLM's confidence rule: commit every masked position whose confidence is at least the "
        "threshold, and at least one per step. Confident stretches go in parallel, so NFE drops; a lower "
        "threshold is faster but accepts more wrong tokens.",
        "Fast-dLLM: Training-free Acceleration of Diffusion LLM, arXiv 2505.22618"),
    "factor": Explanation(
        "Fast-dLLM's factor rule: sort the candidates by confidence and commit the n most confident while "
        "(n + 1)(1 - c_n) <= f. It commits many tokens when they are all confident and few when they are "
        "not, without one fixed bar.",
        "Fast-dLLM, arXiv 2505.22618 (factor version)"),
    "cora": Explanation(
        "CORA-Diff commits a position when its confidence clears delta_p and its candidate has stayed the "
        "same for m passes (persistence), then accepts the residual of the block early. Persistence guards "
        "against a token that is confident once but still changing.",
        "CORA-Diff: Confidence-Oriented Residual Acceptance, arXiv 2608.11235"),
    "dream": Explanation(
        "Dream's sampler: a schedule fixes how many positions each step commits and a score (confidence, "
        "margin, entropy or MaskGIT's) picks which. It is the reference decoder of Dream-7B.",
        "Dream 7B: Diffusion Large Language Models, arXiv 2508.15487"),
    "tspd": Explanation(
        "TSPD: a small LSTM reads each position's confidence history and decides fix-or-continue, trained to "
        "imitate an oracle that knows the dense run's final tokens. Train your own on the Train page.",
        "Temporal-Spatial Parallel Decoding and Confidence Extrapolation, arXiv 2605.30753"),
    "learn2pd": Explanation(
        "Learn2PD: a tiny filter network looks at the confidences of the whole window and predicts which "
        "positions already hold their final token; those are committed together. It also stops at "
        "end-of-text.",
        "Learning to Parallel Decode, arXiv 2509.25188"),
    "fixed": Explanation(
        "Semi-autoregressive blocks: the canvas is split into windows of block length, decoded left to "
        "right; inside a window the order is free. Smaller blocks are closer to left-to-right writing.",
        "LLaDA, arXiv 2502.09992"),
    "adablock": Explanation(
        "AdaBlock sizes each block at run time: it ends the window at a confidently predicted delimiter "
        "(a line break), so a block holds one reasoning step instead of a fixed count of tokens.",
        "AdaBlock-dLLM: Semantic-Aware Adaptive Block Size, arXiv 2509.26432"),
    "block_refinement": Explanation(
        "LLaDA2's rule for block-diffusion models: each step commits every masked position of the block "
        "whose confidence clears commit_threshold, or at least the step's quota of the most confident, and "
        "may also edit: replace an already committed token the model now prefers to change. Once the block "
        "is full, post-steps keep refining it while edits still happen.",
        LLADA2_PAPER),
    "aligned": Explanation(
        "Absolute-aligned blocks: the whole row, prompt included, is cut into blocks of block length from "
        "position 0, and the canvas is padded to a whole number of blocks. It is the geometry a block-causal "
        "model is trained with, so use its own block length.",
        LLADA2_PAPER),
    "kalman": Explanation(
        "Confidence Extrapolation (CE) runs a Kalman filter over each position's confidence and commits a "
        "position early when the forecast's lower bound clears tau_ce, before the rule itself would. It "
        "plugs in over any rule.",
        "Temporal-Spatial Parallel Decoding and Confidence Extrapolation, arXiv 2605.30753"),
    "eos": Explanation(
        "End-of-text stop: once the model is confident the answer has ended (an EOS committed or "
        "predicted), the rest of the canvas is filled with EOS instead of being decoded pass by pass.",
        "Learning to Parallel Decode (EoTP), arXiv 2509.25188"),
    "eos_first": Explanation(
        "LLaDA2's early stop: once a step commits or edits an end-of-text token and every position before "
        "the answer's first one is filled, decoding halts there. No confidence bar and nothing is filled in: "
        "the later positions are simply never decoded.",
        LLADA2_PAPER + " (eos_early_stop)"),
}

# The KV-cache modes (dllm_viz.cache_modes), for --cache's help and the app's cache picker.
CACHES: dict[str, Explanation] = {
    "none": Explanation("No cache: every step recomputes every row it feeds the model (prompt and canvas, or a "
                        "block-diffusion model's prefix up to the current block).", "baseline"),
    "prefix": Explanation(
        "Fast-dLLM's prefix cache: the keys and values of everything before the current block are kept from "
        "the pass that opened the block and reused by the steps inside it. Approximate for a bidirectional "
        "model, whose earlier keys would change as the block fills.",
        "Fast-dLLM, arXiv 2505.22618"),
    "dual": Explanation(
        "Fast-dLLM's dual cache: like prefix, and the still-masked suffix after the block is cached too, so "
        "each step computes only the block. Approximate, and the fastest of the three.",
        "Fast-dLLM, arXiv 2505.22618"),
    "exact": Explanation(
        "The exact prefix cache of a block-causal model: a finished block's keys and values depend only on "
        "finished tokens, so they are recorded once and each pass computes only the current block, with the "
        "same result as no cache. Only block-diffusion models can use it.",
        "block-causal attention as in LLaDA2.0, arXiv 2512.15745; the exact cache is ours (docs/PARADIGMS.md)"),
}

KNOBS: dict[str, str] = {
    "threshold": "The confidence a candidate needs to be committed. 0.9 is Fast-dLLM's choice; lower means "
                 "fewer passes and more risk of a wrong token.",
    "steps": "How many forward passes the schedule spreads the canvas over; gen length / steps tokens commit "
             "per pass. Equal to gen length is the dense, one-token-per-step run.",
    "remasking": "Which positions stay masked each step: low_confidence keeps the least confident masked "
                 "(LLaDA's default), random picks at random.",
    "factor": "f in (n + 1)(1 - c_n) <= f: larger f commits more tokens per pass.",
    "delta_p": "The confidence bar a candidate must clear in CORA-Diff; together with m it decides a commit.",
    "m": "How many consecutive passes a candidate must stay the same before CORA-Diff commits it.",
    "block_length": "Positions per semi-autoregressive window; the canvas is decoded window by window.",
    "tau_ce": "The forecast lower bound that lets CE commit a position early (higher is more careful).",
    "init_block_length": "AdaBlock's block size when no delimiter is confidently predicted.",
    "eos_confidence": "How confident the model must be in an end-of-text token before the rest is cut.",
    "block_steps": "Block refinement's step budget per block: the block's length is spread over this many "
                   "steps as the per-step commit quota (LLaDA2's num_inference_steps, 32 by default).",
    "commit_threshold": "The confidence at which block refinement commits a masked position without waiting "
                        "for its quota (LLaDA2's threshold, 0.7); above 1 only the quota commits.",
    "editing_threshold": "How confident the model must be in a different token before block refinement "
                         "replaces a committed one (a token edit). 0.5 is LLaDA2's default; 0 turns editing and "
                         "post-steps off.",
    "minimal_topk": "Caps block refinement's steps at gen length / minimal_topk (LLaDA2's minimal_topk); it "
                    "changes nothing else.",
    "max_post_steps": "How many extra passes block refinement may spend on a full block while edits keep "
                      "happening (LLaDA2's max_post_steps, 16).",
    "top_k": "Sample candidates among the k most likely tokens only (with a temperature above 0); empty "
             "samples from the whole vocabulary.",
    "top_p": "Nucleus sampling: draw candidates from the smallest set of tokens holding this much probability "
             "(with a temperature above 0); empty keeps them all.",
}

GLOSSARY: dict[str, str] = {
    "diffusion LM": "A language model that writes by filling a canvas of masked positions over several "
                    "passes, in any order, instead of one token after another.",
    "LLaDA": "An 8B-parameter masked diffusion LM (arXiv 2502.09992); its decoding rule is our dense baseline.",
    "mask": "The placeholder token of a position that has no committed token yet.",
    "canvas": "The positions after the prompt that the model fills; its size is the gen length.",
    "forward pass": "One run of the model over the whole canvas; it proposes a token for every masked "
                    "position at once. NFE counts them.",
    "step": "One forward pass plus the rule's decision about what to commit.",
    "candidate": "The token the model proposes now for a masked position (the most probable one).",
    "confidence": "The probability the model gives its candidate; rules commit confident candidates.",
    "commit": "Turning a masked position into a token for good.",
    "remasking": "Leaving a position masked after a pass, so it is predicted again with more context; its "
                 "candidate can change before it is committed.",
    "semi-autoregressive": "Decoding the canvas in blocks from left to right, any order inside a block.",
    "block": "One window of the canvas decoded before the next one starts.",
    "NFE": "Number of function evaluations: forward passes, the cost of a decode.",
    "tau": "τ, a threshold: the confidence a rule needs before it commits.",
    "adablock": "A block sizer that ends blocks at predicted line breaks (arXiv 2509.26432).",
    "dense": "One token per step: the slowest, most careful decode, the reference for speedups.",
    "block diffusion": "A diffusion LM trained to decode block after block, left to right, filling each "
                       "block by diffusion (LLaDA2.x, SDAR, Fast-dLLM v2; arXiv 2512.15745).",
    "block-causal attention": "Each position sees its own block and every earlier block, never a later one: "
                              "a pass needs only the rows up to the current block, and finished blocks' "
                              "keys and values never change (the exact cache).",
    "token edit": "Replacing a token that was already committed, because the model now prefers another one "
                  "confidently; block refinement does it, earlier rules never do.",
    "post-step": "A pass over a block that is already full, run only to let edits happen; block refinement "
                 "stops once a pass edits nothing.",
    "cut off": "An answer that filled the whole canvas without an end-of-text token: it may be wrong only "
               "for lack of room.",
}


def component_help(name: str) -> str:
    """The component's explanation and paper as one line (for --help and widget tooltips)."""
    entry = COMPONENTS.get(name)
    return "" if entry is None else f"{entry.text} ({entry.paper})"


def cache_help(mode: str) -> str:
    """A cache mode's explanation and source as one line (--cache's help, the app's cache picker)."""
    entry = CACHES.get(mode)
    return "" if entry is None else f"{mode}: {entry.text} ({entry.paper})"


def model_summary(info: AdapterInfo) -> str:
    """One line on how a loaded model attends (the app's sidebar says it under the model)."""
    if info.attention == "block_causal":
        return (f"Block-diffusion model ({info.family}): block-causal attention, block length {info.block_length}. "
                "Each pass feeds the prompt and the canvas up to the current block; the defaults are block "
                f"refinement over aligned blocks of {info.block_length}.")
    if info.context == "prefix":
        return f"{info.family} model: {info.attention.replace('_', '-')} attention over prefix-only passes."
    return f"{info.family} model: bidirectional attention over the whole canvas."


def knob_help(field_name: str, short: str) -> str:
    """A field's one-line help, lengthened by its explanation where there is one."""
    longer = KNOBS.get(field_name)
    return short if longer is None else f"{longer} ({short})"
