"""Bad inputs to the public Python API (not the CLI, not the app): each ends in one ValueError that
names the bad value and the fix, before any model pass, instead of an exception deep inside
torch / numpy / random or a silently wrong result.

Categories: Engine (prompt ids, initial canvas), DecodeConfig fields, Pipeline options, Branching
(forks of another model's trace, non-integer forks), Replay, Tasks (counts and difficulty knobs),
Evaluation (problem slices).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from toy import MASK, VOCAB, ToyAdapter

from dllm_viz.branching import Fork, fork_decode
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode, iter_decode
from dllm_viz.evaluation import heldout_problems, take
from dllm_viz.models import ModelAdapter
from dllm_viz.policies import Pipeline
from dllm_viz.replay import replay
from dllm_viz.tasks import get_task
from dllm_viz.trace import Trace

PIPE = Pipeline.from_names("threshold", threshold=0.6, block_length=8)
CONFIG = DecodeConfig(gen_length=16)


@pytest.fixture(scope="module")
def toy() -> ToyAdapter:
    return ToyAdapter()


@pytest.fixture(scope="module")
def recorded(toy: ToyAdapter) -> Trace:
    return decode(toy, [3, 4, 5], PIPE, CONFIG)


class TestEngine:
    """decode / iter_decode refuse ids the model cannot read, before any pass."""

    @pytest.mark.parametrize(("prompt", "needle"), [
        ([3, VOCAB], f"`prompt_ids` holds {VOCAB}, outside the model's vocabulary \\[0, {VOCAB}\\)"),
        ([-1, 4], "`prompt_ids` holds -1, outside"),
        ([3.5, 4.0], "`prompt_ids` must hold integer token ids, got 3.5"),
        (["a", "b"], "must hold integer token ids, got 'a'"),
        (np.array([[3, 4]]), r"flat sequence of token ids, got shape \(1, 2\)"),
    ])
    def test_prompt_ids_the_model_cannot_read(self, prompt: Any, needle: str, toy: ToyAdapter) -> None:
        with pytest.raises(ValueError, match=needle):
            iter_decode(toy, prompt, PIPE, CONFIG)
        with pytest.raises(ValueError, match=needle):
            decode(toy, prompt, PIPE, CONFIG)

    def test_out_of_vocabulary_prompt_on_a_real_model(self, tiny_adapter: ModelAdapter) -> None:
        # Was "IndexError: index out of range in self" from torch's embedding.
        vocab = tiny_adapter.info.vocab_size
        with pytest.raises(ValueError, match=f"holds {vocab}, outside the model's vocabulary"):
            decode(tiny_adapter, [5, vocab], PIPE, CONFIG)

    @pytest.mark.parametrize(("canvas", "needle"), [
        (np.full(16, 3.7), "`initial_tokens` must hold integer token ids, got 3.7"),  # was truncated to 3
        (np.full(16, VOCAB + 5), f"`initial_tokens` holds {VOCAB + 5}, outside"),  # was kept in the trace
        (np.full(16, -3), "`initial_tokens` holds -3, outside"),  # crashed in the tokenizer
    ])
    def test_initial_tokens_the_model_cannot_read(self, canvas: np.ndarray, needle: str, toy: ToyAdapter) -> None:
        with pytest.raises(ValueError, match=needle):
            decode(toy, [3, 4], PIPE, CONFIG, initial_tokens=canvas)

    def test_valid_inputs_of_any_integer_type_still_decode(self, toy: ToyAdapter) -> None:
        start = np.full(16, MASK, dtype=np.int32)
        start[0] = 7
        trace = decode(toy, np.array([3, 4], dtype=np.int16), PIPE, CONFIG, initial_tokens=start)
        assert trace.final_tokens[0] == 7 and (trace.final_tokens != MASK).all()


class TestDecodeConfig:
    @pytest.mark.parametrize(("field", "value", "needle"), [
        ("temperature", "0.5", "`temperature` must be a finite number"),  # was TypeError from math.isfinite
        ("temperature", None, "`temperature` must be a finite number"),
        ("max_steps", 2.5, "`max_steps` must be an integer >= 1"),  # accepted, then failed in range()
        ("max_steps", "3", "`max_steps` must be an integer >= 1"),
        ("max_steps", True, "`max_steps` must be an integer >= 1"),
        ("suppress_eos", "no", "`suppress_eos` must be True or False, got 'no'"),  # was read as True
        ("deprioritize_eos", 1, "`deprioritize_eos` must be True or False"),
    ])
    def test_fields_of_the_wrong_type(self, field: str, value: Any, needle: str) -> None:
        with pytest.raises(ValueError, match=needle):
            DecodeConfig(**{field: value})

    def test_numpy_numbers_still_accepted(self) -> None:
        config = DecodeConfig(temperature=np.float64(0.5), max_steps=np.int64(3), seed=np.int64(1))
        assert config.step_cap == 3


class TestPipelineOptions:
    def test_a_misspelt_option_is_refused_not_ignored(self) -> None:
        with pytest.raises(ValueError, match="unknown policy option 'treshold'; did you mean 'threshold'"):
            Pipeline.from_names("threshold", treshold=0.5)

    def test_an_option_of_an_unchosen_component_is_still_ignored(self) -> None:
        # Documented: the CLI and the app pass every knob, each goes to whichever component has it.
        assert Pipeline.from_names("fixed_steps", threshold=0.5, block_length=8).label == "fixed8+fixed_steps"

    def test_a_negative_veto_is_refused(self) -> None:
        with pytest.raises(ValueError, match="`veto_steps` must be >= 0, got -1"):
            Pipeline.from_names("threshold", extrapolate="kalman", veto_steps=-1)


class TestBranching:
    def test_fork_of_another_models_trace(self, recorded: Trace, tiny_adapter: ModelAdapter) -> None:
        # Its ids mean other tokens there (the bundled model's mask id is 2, the toy's 0: the toy's masks
        # read as committed tokens), and the fork returned a silently wrong answer.
        with pytest.raises(ValueError, match=r"another model .*family 'toy' vs 'tiny'.*vocab_size 24 vs") as info:
            fork_decode(tiny_adapter, recorded, Fork(step=1, pipeline=PIPE))
        assert tiny_adapter.info.name_or_path not in str(info.value)  # the app shows it: no server path

    @pytest.mark.parametrize(("fork", "needle"), [
        (dict(step=0.5), "fork step must be an integer, got 0.5"),  # was a numpy IndexError
        (dict(step=0, force_position=1.5, force_token=5), "forced position must be an integer, got 1.5"),
        (dict(step=0, force_position=0, force_token=5.7), "forced token must be an integer, got 5.7"),  # truncated
        (dict(step=0, force_position=0, force_token=MASK), "forced token 0 is the mask token"),  # forced nothing
        (dict(step=0, force_position=0, force_token=VOCAB), f"forced token {VOCAB} is outside the model's voc"),
        (dict(step=0, force_position=0, force_token=-1), "forced token -1 is outside"),
    ])
    def test_bad_forks(self, fork: dict[str, Any], needle: str, recorded: Trace, toy: ToyAdapter) -> None:
        with pytest.raises(ValueError, match=needle):
            fork_decode(toy, recorded, Fork(pipeline=PIPE, **fork))

    def test_a_good_fork_still_runs(self, recorded: Trace, toy: ToyAdapter) -> None:
        branches = fork_decode(toy, recorded, Fork(step=np.int64(1), pipeline=PIPE, force_position=15,
                                                   force_token=np.int64(5)))
        assert branches.fork.final_tokens[15] == 5


class TestReplay:
    @pytest.mark.parametrize("seed", [-1, 1.5, "x"])
    def test_bad_seed(self, seed: Any, recorded: Trace) -> None:
        with pytest.raises(ValueError, match="`seed` must be an integer >= 0"):
            replay(recorded, Pipeline.from_names("threshold", threshold=0.3), seed=seed)

    def test_a_rule_that_cannot_run_over_the_recorded_blocks(self, recorded: Trace) -> None:
        # Was: an estimate for fixed_steps(steps=3) over two blocks of 8, a decode the engine refuses.
        with pytest.raises(ValueError, match="steps"):
            replay(recorded, Pipeline.from_names("fixed_steps", steps=3))
        assert replay(recorded, Pipeline.from_names("fixed_steps", steps=4)).nfe <= 4


class TestPipelineDicts:
    """Pipeline.from_dict on a description that to_dict did not write (a hand-edited file, another version)."""

    @pytest.mark.parametrize(("data", "needle"), [
        ({"rule": {"threshold": 0.9}}, "a commit rule must be described as {'name': ..."),
        ({"rule": "threshold"}, "a commit rule must be described as"),
        ({"rule": {"name": "threshold", "treshold": 0.5}}, "commit rule 'threshold' has no option 'treshold'"),
        ({"rule": {"name": "nope"}}, "nope"),
    ])
    def test_a_malformed_description_is_a_named_error(self, data: dict, needle: str) -> None:
        with pytest.raises(ValueError, match=re.escape(needle)):
            Pipeline.from_dict(data)

    def test_to_dict_round_trips(self) -> None:
        assert Pipeline.from_dict(PIPE.to_dict()) == PIPE


class TestTasks:
    @pytest.mark.parametrize("n", [-1, 2.5, "3"])
    def test_code_task_count(self, n: Any) -> None:
        # Was: n=-1 gave [] and n=2.5 gave three problems, silently; "3" a TypeError.
        with pytest.raises(ValueError, match=f"`n` must be a whole number >= 0, got {n!r}"):
            get_task("code").generate(n, seed=0)

    @pytest.mark.parametrize(("task", "knob", "value"), [
        ("arith", "min_ops", 2.5),  # was "non-integer arg 1 for randrange()"
        ("arith", "max_ops", "3"),  # was a TypeError on a comparison
        ("arith", "max_multiplier", 2.5),
        ("arith", "max_operand", "3"),
        ("arith", "min_ops", True),  # was read as 1
        ("hard/breadth", "max_result", "30"),
        ("hard/breadth", "min_extra", 1.5),
        ("hard/chain", "max_multiplier", 2.5),
        ("parallelbench/copy", "min_length", 2.5),
        ("parallelbench/sudoku", "blanks", 2.5),  # was accepted silently
        ("code", "max_tries", 10.5),
    ])
    def test_difficulty_knobs_that_are_not_whole_numbers(self, task: str, knob: str, value: Any) -> None:
        with pytest.raises(ValueError, match=f"`{knob}` must be a whole number, got {value!r}"):
            get_task(task).generate(2, seed=0, **{knob: value})

    def test_whole_number_knobs_still_work(self) -> None:
        assert len(get_task("arith").generate(2, seed=0, min_ops=1, max_ops=2)) == 2


class TestEvaluation:
    @pytest.mark.parametrize("n", [-1, 2.5])
    def test_a_count_that_is_not_a_whole_number(self, n: Any) -> None:
        # Was problems[:-1]: every problem but the last, silently (2.5: a slice TypeError).
        problems = heldout_problems("arith", 5)
        with pytest.raises(ValueError, match=f"`n` must be a whole number >= 0, got {n!r}"):
            take(problems, 0, n)
        with pytest.raises(ValueError, match=f"`n` must be a whole number >= 0, got {n!r}"):
            heldout_problems("arith", n)

    def test_a_skip_that_is_not_a_whole_number(self) -> None:
        with pytest.raises(ValueError, match=r"`--skip` must be a whole number, got 1\.5"):
            take(heldout_problems("arith", 5), 1.5, 2)

    def test_slices_still_work(self) -> None:
        problems = heldout_problems("arith", 5)
        assert take(problems, 1, 2) == problems[1:3] and take(problems, 0, 0) == []
