"""Shared links with values outside what the widgets offer: clamped with a warning, a reset
link, and a session that keeps working (issue 13)."""

from __future__ import annotations

import re

import pytest

from slarouter_core.live import LIMITS

from .conftest import open_app

PAGE = "pages/live_run.py"

# (query, settings field, widget key, clamped value)
CASES = [
    ({"V": "1e300", "fixedV": "1"}, "V", "w_V", LIMITS["V"][1]),
    ({"c": "1000"}, "c", "w_c", LIMITS["c"][1]),
    ({"tick": "50000"}, "per_tick", "w_tick", LIMITS["per_tick"][1]),
    ({"eps": "2"}, "eps", "w_eps", LIMITS["eps"][1]),
    ({"qmax": "1e7"}, "q_max", "w_qmax", LIMITS["q_max"][1]),
    ({"alpha": "0.0005"}, "alpha", "w_alpha", LIMITS["alpha"][0]),
    ({"warnz": "50"}, "warn_z", "w_warnz", LIMITS["warn_z"][1]),
    ({"warnafter": "5000000"}, "warn_after", "w_warnafter", LIMITS["warn_after"][1]),
]


def warning_text(at) -> str:
    return " ".join(w.value for w in at.warning)


@pytest.mark.parametrize("query,field,key,clamped", CASES, ids=[c[1] for c in CASES])
def test_an_out_of_range_link_is_clamped_with_a_warning_and_a_reset_link(query, field, key, clamped):
    at = open_app(PAGE, **query)  # open_app asserts that no exception was raised
    assert getattr(at.session_state.run_settings, field) == clamped
    assert at.number_input(key=key).value == clamped
    text = warning_text(at)
    param = [k for k in query if k != "fixedV"][0]
    said = str(clamped) if isinstance(clamped, int) else f"{clamped:g}"  # a whole number in full
    assert f"URL parameter {param}=" in text and f"using {said}." in text
    assert "](./live" in text and "every setting at its default" in text  # the reset link
    # the run uses the clamped value and the session stays usable on every page
    at.button(key="w_step").click().run()
    assert not at.exception and at.session_state.live.t > 0
    for page in ("pages/data_page.py", "pages/feedback_by_hand.py", PAGE):
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.sidebar.markdown  # the sidebar is drawn


@pytest.mark.parametrize("key,field", [("w_alpha", "alpha"), ("w_c", "c"), ("w_V", "V"), ("w_tick", "per_tick"),
                                       ("w_seed", "seed"), ("w_qmax", "q_max"), ("w_eps", "eps"),
                                       ("w_warnz", "warn_z"), ("w_warnafter", "warn_after")])
def test_widgets_use_the_same_limits_as_the_url_and_say_so(key, field):
    """The widgets check the URL's limits on the server: a value outside them is named in
    words (not a red box with the reason on hover) and the widget shows the value in use."""
    at = open_app(PAGE, fixedV="1" if field == "V" else "0")
    lo, hi = LIMITS[field]
    box = at.number_input(key=key)
    kept = box.value
    above = type(kept)(hi * 10 + 1)
    box.set_value(above).run()
    def num(v):  # whole-number settings in full (a seed of 2147483647, not 2.14748e+09)
        return str(int(v)) if isinstance(kept, int) else f"{v:g}"
    assert f"{field} = {num(above)} is above the highest allowed value ({num(hi)})" in at.main.error[0].value
    assert at.number_input(key=key).value == kept
    if lo > 0:
        below = type(kept)(lo / 10) if isinstance(kept, float) else type(kept)(lo - 1)
        at.number_input(key=key).set_value(below).run()
        assert f"is below the lowest allowed value ({num(lo)})" in at.main.error[0].value
        assert at.number_input(key=key).value == kept
    edge = type(kept)(hi)  # the limit itself is allowed
    at.number_input(key=key).set_value(edge).run()
    assert not at.main.error and getattr(at.session_state.run_settings, field) == edge


def test_the_reset_link_drops_run_settings_but_keeps_the_data_and_dismiss_hides_the_warning():
    at = open_app(PAGE, c="1000", seed="7")
    text = warning_text(at)
    # the encoder (data) stays, c and seed go (the page's URL is "live" or its file name "live_run")
    assert re.search(r"\(\./live(_run)?\?enc=hashing\)", text), text
    at.button(key="w_dismiss_url_problems").click().run()
    assert not at.warning
    assert at.session_state.run_settings.c == LIMITS["c"][1]


def test_a_link_within_the_limits_shows_no_warning():
    at = open_app(PAGE, c="100", tick="20000", alpha="0.999")
    assert not at.warning
    s = at.session_state.run_settings
    assert (s.c, s.per_tick, s.alpha) == (100.0, 20000, 0.999)
