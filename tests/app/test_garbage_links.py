"""Every page opened with every link parameter set to garbage renders without an exception
and names the parameter it could not use (issue 23, defect 1)."""

from __future__ import annotations

import pytest

from slarouter_core.live.settings import _DATA_KEYS, _RUN_KEYS, DataSpec, RunSettings, settings_from_query

from .conftest import open_app

PAGES = ["pages/data_page.py", "pages/live_run.py", "pages/feedback_by_hand.py", "pages/experiments_page.py",
         "pages/service_page.py"]
GARBAGE = ["zzz", "-1", "1e400", "nan", "", "x" * 300]
#: every parameter a page reads from its link (the pages read no other: ``_shared.init_session``)
ALL_PARAMS = list(_RUN_KEYS.values()) + list(_DATA_KEYS.values())
#: the encoder stays instant (a garbage encoder is its own case below)
PARAMS = [k for k in list(_RUN_KEYS.values()) + list(_DATA_KEYS.values()) if k != "enc"]


@pytest.mark.parametrize("value", GARBAGE, ids=["zzz", "-1", "1e400", "nan", "empty", "300chars"])
def test_every_page_survives_every_parameter_set_to_garbage(value):
    """One session per garbage value with every parameter set to it at once, then every
    page: nothing raises, and the session's settings are valid ones."""
    at = open_app(None, **{k: value for k in PARAMS})
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
    if value:
        text = " ".join(w.value for w in at.warning)
        assert "could not be used" in text


@pytest.mark.parametrize("key", PARAMS)
def test_one_garbage_parameter_is_named_on_live_run(key):
    at = open_app("pages/live_run.py", **{key: "zzz"})
    assert not at.exception
    text = " ".join(w.value for w in at.warning)
    if key not in ("path",):  # a path without src=path is not used at all
        assert key in text, (key, text)
    at.button(key="w_step").click().run()
    assert not at.exception, [e.value for e in at.exception]


@pytest.mark.parametrize("page", ["pages/live_run.py", "pages/feedback_by_hand.py"])
@pytest.mark.parametrize("value", ["zzz", "nan"])
def test_a_garbage_feedback_model_link_keeps_the_page(page, value):
    at = open_app(page, fbmodel=value)
    assert not at.exception
    assert at.session_state.run_settings.feedback_model == "iid"
    assert "fbmodel" in " ".join(w.value for w in at.warning)


def test_a_clamped_seed_is_written_as_a_whole_number():
    at = open_app("pages/live_run.py", seed="99999999999")
    text = " ".join(w.value for w in at.warning)
    assert "using 2147483647" in text and "e+09" not in text
    assert at.session_state.run_settings.seed == 2**31 - 1


@pytest.mark.parametrize("key", ALL_PARAMS)
def test_each_parameter_alone_set_to_each_garbage_value_gives_valid_settings_and_names_itself(key):
    """The one place links are read, parameter by parameter (the pages above get every one
    at once): valid settings, and a non-empty garbage value that was not used is named."""
    for value in GARBAGE:
        data, run, problems = settings_from_query({key: value})
        assert isinstance(data, DataSpec) and isinstance(run, RunSettings)
        DataSpec(**vars(data)), RunSettings(**vars(run))  # noqa: B018  (valid: construction checks)
        used = {**vars(data), **vars(run)}
        text = " ".join(problems)
        if value and key not in ("path", "cost", "bench"):  # any text is a path, a cost or a benchmark name
            assert f"{key}" in text, (key, value, problems)
            assert len(text) < 600, text  # a 300-character value is quoted cut
        assert not any(isinstance(v, float) and v != v for v in used.values()), used  # no nan kept


@pytest.mark.parametrize("value", GARBAGE, ids=["zzz", "-1", "1e400", "nan", "empty", "300chars"])
def test_every_page_survives_a_garbage_encoder_and_a_garbage_data_path(value):
    """``enc`` (not a name of an encoder: refused where the link is read, the default used)
    and ``src=path`` with a path that is no data file (the demo shown instead)."""
    at = open_app(None, enc=value, src="path", path=value)
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
    text = " ".join(w.value for w in at.warning)
    assert "could not be used" in text and "URL parameter enc" in text
    assert at.session_state.data_spec.encoder == "minilm" and at.session_state.data_spec.source == "demo"
