"""AppTest regressions for what a walk through the app in a browser found (docs/UX.md).

Each test names what a teacher or student did and what went wrong before the fix.
"""

from __future__ import annotations

import pytest
from test_app import dirs, errors, open_app, step  # noqa: F401  (dirs: the fixture the tests use)

pytestmark = pytest.mark.usefixtures("dirs")


def link_warnings(at: object) -> list[str]:
    return [w.value for w in at.warning if "This link has settings" in w.value]  # type: ignore[attr-defined]


def test_a_value_set_in_a_form_is_not_called_a_bad_link() -> None:
    """Setting a field to a value its rule refuses (the threshold slider at 0.00 then; Dream's eps,
    open at 0, typed as 0 now) showed "This link has settings the page cannot use" though no link
    was opened, and the warning stayed after the value moved on."""
    at = open_app(query={"rule": "dream"})
    at.number_input(key="eps").set_value(0.0).run()
    at.query_params["eps"] = "0.0"  # what the bound widget writes into the browser's address
    at.run()
    assert not link_warnings(at)
    step(at)
    assert any("must be in (0, 1)" in e for e in errors(at)), errors(at)  # the form's own, clear error
    at.number_input(key="eps").set_value(0.01).run()
    at.query_params["eps"] = "0.01"
    at.run()
    assert not link_warnings(at)


def test_a_bad_link_is_named_until_the_user_sets_that_value() -> None:
    at = open_app(query={"threshold": "5", "gen": "32"})
    assert link_warnings(at) and "threshold='5'" in link_warnings(at)[0]
    at.query_params.pop("threshold", None)  # the browser's address after Streamlit dropped the bad value
    at.run()
    assert link_warnings(at)  # still named on the page's reruns
    at.slider(key="threshold").set_value(0.5).run()
    at.query_params["threshold"] = "0.5"  # what the bound slider writes into the address
    at.run()
    assert not link_warnings(at)
