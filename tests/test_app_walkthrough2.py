"""AppTest regressions for what a second walk through the app in a browser found: Train, Traces,
Compare over a prompt set and Tune's sweep (docs/UX.md).

Each test names what a researcher or teacher did and what went wrong before the fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_app import FAST, click, errors, open_app
from test_app import dirs as dirs  # the fixture

from app_ui.export import uploaded_trace
from dllm_viz.trace import load_trace

pytestmark = pytest.mark.usefixtures("dirs")


def test_a_save_as_name_too_long_for_the_disk_is_refused_with_a_message(dirs: dict[str, Path]) -> None:
    """A 300-character Save as name (or 100 CJK characters, 300 bytes) made the file system refuse
    the path (ENAMETOOLONG) and Train showed Streamlit's redacted exception instead of a message."""
    at = open_app("train")
    for name, said in (("a" * 300, "has 300 characters"), ("名" * 100, "bytes in UTF-8")):
        at.text_input(key="train_name_tspd").set_value(name).run()
        click(at, "train_run")
        assert any(said in e for e in errors(at)), errors(at)
    assert "train_result" not in at.session_state


def test_the_suggested_controller_name_follows_the_settings_until_one_is_typed() -> None:
    """The Save as name kept its first suggestion: 'tspd_arith_8' for a controller trained on 2
    prompts, and a second Train with other settings was refused as a repeat of that name."""
    at = open_app("train")
    assert at.text_input(key="train_name_tspd").value == "tspd_arith_8"
    at.number_input(key="train_prompts").set_value(2).run()
    assert at.text_input(key="train_name_tspd").value == "tspd_arith_2"
    at.text_input(key="train_name_tspd").set_value("mine").run()
    at.number_input(key="train_prompts").set_value(3).run()
    assert at.text_input(key="train_name_tspd").value == "mine"  # a typed name is kept


def test_a_trace_file_name_too_long_for_the_disk_is_refused_with_a_message(dirs: dict[str, Path]) -> None:
    """Traces' Save with a 300-character name raised ENAMETOOLONG past TraceSaveError: Streamlit's
    redacted exception. And the library itself was named '.' ("Saved x.npz in .")."""
    at = click(open_app(query=FAST), "run")
    at.switch_page("pages/traces.py").run()
    for name, said in (("a" * 300, "has 300 characters"), ("名" * 100, "bytes in UTF-8")):
        at.text_input(key="traces_name").set_value(name).run()
        click(at, "traces_save")
        assert any(said in e for e in errors(at)), errors(at)
    at.text_input(key="traces_name").set_value("ok").run()
    click(at, "traces_save")
    assert [s.value for s in at.success] == ["Saved ok.npz in the trace library"]
    assert any("in the trace library" in h.value for h in at.subheader)


def test_a_trace_file_name_starting_with_a_dot_is_refused_not_lost(dirs: dict[str, Path]) -> None:
    """Traces' Save took '.hidden' (and '..x'): the trace was written as .hidden.npz, which the
    library never lists (it leaves hidden files out), so to the user it was gone. 'x.tmp' was
    lost the same way (the library takes '*.tmp.npz' for a failed save's leftover)."""
    at = click(open_app(query=FAST), "run")
    at.switch_page("pages/traces.py").run()
    for name, said in ((".hidden", "'.hidden' starts with '.'"), ("..x", "'..x' starts with '.'"),
                       ("x.tmp", "'x.tmp.npz' ends in '.tmp.npz'")):
        at.text_input(key="traces_name").set_value(name).run()
        click(at, "traces_save")
        assert any(e.startswith("Not saved: the file name ") and said in e for e in errors(at)), errors(at)
        assert not at.success
    assert [p.name for p in dirs["traces"].iterdir() if not p.name.startswith("autosave-")] == []
    at.text_input(key="traces_name").set_value("hidden").run()  # the name the message suggests
    click(at, "traces_save")
    assert "hidden.npz" in at.selectbox(key="file").options


def test_a_controller_name_starting_with_a_dot_is_refused(dirs: dict[str, Path]) -> None:
    """Train's Save as took '.mine' like Traces' Save took '.hidden': a hidden file."""
    at = open_app("train")
    at.text_input(key="train_name_tspd").set_value(".mine").run()
    click(at, "train_run")
    assert any("'.mine' starts with '.'" in e and "e.g. 'mine'" in e for e in errors(at)), errors(at)
    assert "train_result" not in at.session_state and not dirs["controllers"].exists()


def test_the_library_count_tells_saved_traces_from_autosaves(dirs: dict[str, Path]) -> None:
    """After one Save the heading said "Library: 2 traces": the run's autosave counted as a trace
    the user had saved. A trace saved as 'autosave-…' was counted (and pruned) as an autosave."""
    at = click(open_app(query=FAST), "run")  # autosaves the run into the library
    at.switch_page("pages/traces.py").run()

    def heading() -> str:
        return next(h.value for h in at.subheader if h.value.startswith("Library:"))

    assert heading() == "Library: 0 saved traces and 1 autosave in the trace library"
    at.text_input(key="traces_name").set_value("mine").run()
    click(at, "traces_save")
    assert heading() == "Library: 1 saved trace and 1 autosave in the trace library"
    listed = at.selectbox(key="file").options[1:]  # the list holds what the heading counts
    assert len(listed) == 2 and "mine.npz" in listed and sum(n.startswith("autosave-") for n in listed) == 1
    at.text_input(key="traces_name").set_value("autosave-mine").run()
    click(at, "traces_save")
    assert any("'autosave-mine' starts with 'autosave-'" in e and "e.g. 'mine'" in e for e in errors(at)), errors(at)
    assert not (dirs["traces"] / "autosave-mine.npz").exists()
    at.text_input(key="traces_dir").set_value("sub").run()  # a folder without autosaves: one plain count
    assert heading() == "Library: 0 traces in sub"


def test_an_uploaded_trace_with_a_name_too_long_for_the_disk_still_opens(dirs: dict[str, Path]) -> None:
    """A browser may send a file name of 90 CJK characters (270 bytes, fine on macOS): writing it to
    the temporary folder raised ENAMETOOLONG, an exception where the trace should open."""
    at = click(open_app(query=FAST), "run")
    data = at.session_state["trace"].save(dirs["traces"] / "t.npz").read_bytes()
    assert uploaded_trace(data, "名" * 90 + ".npz").nfe == load_trace(dirs["traces"] / "t.npz").nfe
    assert uploaded_trace(data, "").nfe == at.session_state["trace"].nfe


def test_an_interrupted_prompt_set_run_is_named_and_resumes_where_it_stopped() -> None:
    """A prompt-set run stopped by a page switch came back as a summary over whatever rows had
    finished (configurations over different problems, read as the whole set), with no note, and
    Run started over from the first problem."""
    at = open_app("compare", {"cmp_mode": "a prompt set", "cmp_gen": "16", "cmp_count": "2",
                              "c1_block_length": "16", "c2_block_length": "16"})
    at = click(at, "cmp_bench_run")
    rows = list(at.session_state["cmp_bench"])
    assert len(rows) == 6 and not [w.value for w in at.warning if "Interrupted" in w.value]
    at.session_state["cmp_bench"] = rows[:4]  # what a page switch after four runs leaves
    at.run()
    notes = [w.value for w in at.warning if "Interrupted" in w.value]
    assert notes and "4 of 6 runs" in notes[0] and "the 1 of 2 problems" in notes[0], notes
    click(at, "cmp_bench_run")
    assert any("Resuming" in i.value and "4 of 6" in i.value for i in at.info)
    resumed = at.session_state["cmp_bench"]
    assert len(resumed) == 6 and resumed[:4] == rows[:4]  # the kept runs were not decoded again
    assert not [w.value for w in at.warning if "Interrupted" in w.value]
