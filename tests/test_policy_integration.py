"""Every rule and composition decodes on a real (small, random) transformer and round-trips its trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dllm_viz.cli import main
from dllm_viz.config import DecodeConfig
from dllm_viz.engine import decode
from dllm_viz.models.families import calibrated_points
from dllm_viz.policies import RULES, Pipeline
from dllm_viz.trace import load_trace

COMPOSITIONS = [(rule, "fixed", None, None) for rule in sorted(RULES)] + [
    ("threshold", "adablock", None, None),
    ("cora", "adablock", "kalman", "eos"),
    ("fixed_steps", "fixed", "kalman", None),
    ("dream", "adablock", None, "eos"),
    ("tspd", "fixed", "kalman", None),
    ("learn2pd", "fixed", None, "eos"),
]


@pytest.mark.parametrize(("rule", "block", "extrapolate", "stop"), COMPOSITIONS)
def test_composition_decodes_and_round_trips(tiny_adapter, tmp_path: Path, rule: str, block: str,
                                             extrapolate: str | None, stop: str | None,
                                             tiny_controller_options: dict[str, str]) -> None:
    pipeline = Pipeline.from_names(rule, block, extrapolate, stop, block_length=8, init_block_length=8,
                                   threshold=0.05, eos_confidence=0.01, **tiny_controller_options)
    trace = decode(tiny_adapter, tiny_adapter.encode_prompt("Tom has 3 apples."), pipeline,
                   DecodeConfig(gen_length=32))
    assert trace.num_steps >= 1 and trace.committed.sum() <= 32
    loaded = load_trace(trace.save(tmp_path / "t.npz"))
    assert sorted(loaded.extras) == sorted(trace.extras)
    for name, values in trace.extras.items():
        np.testing.assert_array_equal(loaded.extras[name], values)
    resolved_pipeline = pipeline.resolve(tiny_adapter.info.family, tiny_adapter.info.delimiters)
    assert Pipeline.from_dict(loaded.meta.pipeline).rule == resolved_pipeline.rule  # with the family's points
    if block == "adablock":
        resolved = loaded.meta.pipeline["block"]["delimiter_threshold"]
        assert resolved == calibrated_points("tiny")["adablock"]["delimiter_threshold"]  # the family's point


def test_cli_accepts_a_full_composition(tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["decode", "--model", str(tiny_dir), "--prompt", "hi", "--device", "cpu", "--gen-length", "32",
                   "--block", "adablock", "--rule", "cora", "--extrapolate", "kalman", "--stop", "eos",
                   "--init-block-length", "8", "--delta-p", "0.5", "--m", "1", "--tau-ce", "0.8",
                   "--delimiters", "\\n,.", "--save", str(tmp_path / "t.npz")])
    assert status == 0
    out = capsys.readouterr().out
    assert "policy=adablock8(" in out and "+cora0.5(1)+kalman0.8+eos0.8" in out
    meta = load_trace(tmp_path / "t.npz").meta
    assert meta.pipeline["block"]["delimiters"] == ("\n", ".")


def test_labels_show_delimiters_as_text_not_python_reprs() -> None:
    """AdaBlock resolved for a family carries ('\\n',); titles showed the tuple's repr."""
    from dllm_viz.policies import Pipeline

    pipe = Pipeline.from_names("cora", block="adablock", extrapolate="kalman").resolve("tiny", ("\n", "."))
    points = calibrated_points("tiny")  # resolved: the label shows the points decoded with
    tau_d, cora = points.get("adablock", {}).get("delimiter_threshold", 0.3), points.get("cora", {})
    assert pipe.label == f"adablock32({tau_d},⏎|.)+cora{cora.get('delta_p', 0.97)}({cora.get('m', 2)})+kalman0.9"
    assert Pipeline.from_names("tspd").label == "fixed32+tspd:bundled"  # not "tspdbundled"
    assert Pipeline.from_names("learn2pd", filter_weights="/x/my_filter.safetensors").label == (
        "fixed32+learn2pd:my_filter")
