"""Browser-typed paths stay inside the app's roots, and messages never show server paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dllm_viz.roots import OutsideRootError, browser_model, inside, redact, relative_name


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.npz").write_text("x")
    return tmp_path / "root"


@pytest.mark.parametrize("typed", ["", "sub", "sub/", "./sub/../sub", "new/folder", "a.npz"])
def test_names_inside_the_root_resolve_there(root: Path, typed: str) -> None:
    path = inside(root, typed, what="trace folder")
    assert path == root.resolve() or root.resolve() in path.parents


def test_an_absolute_path_inside_the_root_is_accepted(root: Path) -> None:
    assert inside(root, str(root / "sub"), what="trace folder") == (root / "sub").resolve()


@pytest.mark.parametrize("typed", ["/etc", "/", "..", "../outside", "sub/../../outside/secret.npz",
                                   "../outside/missing.npz", "~", "/etc/passwd\0"])
def test_paths_leaving_the_root_are_refused_without_server_paths(root: Path, typed: str) -> None:
    with pytest.raises(OutsideRootError) as caught:
        inside(root, typed, what="trace folder", folder="trace library")
    message = str(caught.value)
    assert "outside the app's trace library;" in message and str(root) not in message
    assert str(root.parent) not in message.replace(typed, "")


def test_refusal_reads_the_same_whether_the_outside_path_exists(root: Path) -> None:
    messages = set()
    for name in ("secret.npz", "missing.npz"):
        with pytest.raises(OutsideRootError) as caught:
            inside(root, f"../outside/{name}", what="trace folder")
        messages.add(str(caught.value).replace(name, "NAME"))
    assert len(messages) == 1


def test_a_symlink_out_of_the_root_is_refused(root: Path) -> None:
    os.symlink(root.parent / "outside", root / "escape")
    with pytest.raises(OutsideRootError):
        inside(root, "escape/secret.npz", what="trace folder")
    with pytest.raises(OutsideRootError):
        inside(root, "escape", what="trace folder")


def test_browser_models_are_tiny_the_operators_choice_or_a_folder_in_the_models_root(root: Path) -> None:
    allowed = {"tiny", "GSAI-ML/LLaDA-8B-Instruct"}
    assert browser_model("tiny", models_root=root, allowed=allowed) == "tiny"
    assert browser_model("GSAI-ML/LLaDA-8B-Instruct", models_root=root, allowed=allowed) == "GSAI-ML/LLaDA-8B-Instruct"
    # any other hub-like id is a folder under the models root, never a download
    assert browser_model("someone/model", models_root=root, allowed=allowed) == str(root.resolve() / "someone/model")
    with pytest.raises(OutsideRootError, match="model '/etc' is outside the app's models folder"):
        browser_model("/etc", models_root=root, allowed=allowed)


def test_relative_name_and_redact_hide_server_paths(root: Path) -> None:
    assert relative_name(root / "sub", root) == "sub" and relative_name(root, root) == "."
    message = f"cannot read {root / 'sub' / 'x.npz'!s}: bad (also {root.resolve()}/y)"
    cleaned = redact(message, {"trace folder": root})
    assert str(root) not in cleaned and str(root.resolve()) not in cleaned
    assert "<trace folder>/sub/x.npz" in cleaned
