"""Service page (issue 23, defect 4): a text that is no URL is refused in words, the
satisfaction figures shown side by side are of one population or say which, the cost
names its unit, and the sidebar describes the service, not the dashboard's dataset."""

from __future__ import annotations

import pytest

from tests.service.conftest import KEY, _healthy, backends, running  # noqa: F401  (fixtures)
from tests.service.test_service import ask, feedback

from .conftest import open_app

PAGE = "pages/service_page.py"


@pytest.mark.parametrize("text", ["not a url at all", "http://host name:80", "localhost:notaport", "zzz " * 75])
def test_a_text_that_is_no_url_is_refused_in_words(text):
    at = open_app(PAGE)
    at.text_input(key="w_service_url").set_value(text).run()
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert "is not a URL" in errors or "port that is not a number" in errors
    assert "ConnectError" not in errors and not at.warning


def test_a_valid_url_is_not_echoed_on_the_page():
    """Checking the port once showed it under the box (a bare expression: Streamlit's magic)."""
    at = open_app(PAGE)
    at.text_input(key="w_service_url").set_value("http://127.0.0.1:59999").run()
    assert not at.exception
    assert not any("59999" in m.value for m in at.main.markdown), [m.value for m in at.main.markdown]


def test_the_sidebar_describes_the_service_not_the_dataset():
    at = open_app(PAGE)
    side = " ".join(m.value for m in at.sidebar.markdown) + " ".join(c.value for c in at.sidebar.caption)
    assert "the service's own" in side and "Model zoo" not in side
    assert not at.sidebar.get("vega_lite_chart") and not at.sidebar.table


def test_figures_side_by_side_are_comparable_or_say_which_population(running, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SLAROUTER_API_KEY", KEY)  # the page reads the service's key from the environment
    svc = running()
    client = svc.client()
    for i in range(12):
        _, comp = ask(client, f"question number {i}")
        if i % 2 == 0:
            feedback(svc, comp.id, i % 4 == 0)
    at = open_app(PAGE)
    at.text_input(key="w_service_url").set_value(svc.url).run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert "Cost so far (zoo prices)" in metrics
    assert "Satisfaction, all requests (estimate)" in metrics
    if "Thumbs up: 90% lower bound" in metrics:  # the paper mode claims no bound: Wilson on the thumbs
        assert metrics["Thumbs up (of 6 thumbs)"] == "50.0%"  # the share that bound is about
        assert "Lower bound" not in metrics
    else:
        assert "Satisfaction, all requests: 90% lower bound" in metrics
    caption = " ".join(c.value for c in at.caption)
    assert "small" in caption and "large" in caption  # the service's zoo, named on the page


def test_a_contextual_service_labels_its_window_and_its_own_confidence(running, monkeypatch):  # noqa: F811
    """The contextual mode's estimate and bound are of the current SLA window, the bound at
    its own 1 - delta: the page says so instead of "all requests" and "90%"."""
    monkeypatch.setenv("SLAROUTER_API_KEY", KEY)
    svc = running(mode="contextual")
    client = svc.client()
    for i in range(6):
        ask(client, f"question number {i}")
    st = svc.http.get("/v1/state").json()
    assert st["satisfaction"]["confidence"] == 0.95 and st["satisfaction"]["covers"] == "this SLA window"
    assert "95%" in st["satisfaction"]["bound"] and st["sla"]["window_index"] == 0
    at = open_app(PAGE)
    at.text_input(key="w_service_url").set_value(svc.url).run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m for m in at.metric}
    assert "Satisfaction, this SLA window (estimate)" in metrics
    assert "Satisfaction, this SLA window: 95% lower bound" in metrics
    assert not any("all requests" in label or "90%" in label for label in metrics)
    assert "SLA window 1: 6 of 10,000 requests served" in metrics["SLA"].help


def test_a_zoo_with_stated_accuracies_gets_the_preflight_check(running, backends, monkeypatch):  # noqa: F811
    from tests.service.conftest import make_zoo

    monkeypatch.setenv("SLAROUTER_API_KEY", KEY)
    zoo = make_zoo(backends, small={"accuracy": 0.6}, medium={"accuracy": 0.75}, large={"accuracy": 0.9})
    svc = running(zoo, alpha=0.8, mode="contextual")
    ask(svc.client(), "a first question")
    at = open_app(PAGE)
    at.text_input(key="w_service_url").set_value(svc.url).run()
    assert not at.exception, [e.value for e in at.exception]
    exp = next(e for e in at.main.expander if e.label.startswith("Pre-flight"))
    text = " ".join(m.value for m in exp.markdown)
    assert "certifiable: yes" in text and "large (90.0%)" in text
    assert "assumed" in " ".join(c.value for c in exp.caption)


def test_a_service_with_a_judge_shows_its_calls_and_spend(running, backends, monkeypatch):  # noqa: F811
    from tests.service.test_judge_service import FakeJudge, judged_zoo, wait_for

    monkeypatch.setenv("SLAROUTER_API_KEY", KEY)
    with FakeJudge(label=1) as judge:
        svc = running(judged_zoo(backends, judge.url, price_per_request=0.5), alpha=0.8, mode="contextual")
        client = svc.client()
        for i in range(3):
            ask(client, f"question {i}")
        assert wait_for(lambda: svc.http.get("/v1/state").json()["judge"]["calls"] == 3)
        at = open_app(PAGE)
        at.text_input(key="w_service_url").set_value(svc.url).run()
        assert not at.exception, [e.value for e in at.exception]
        line = next(c.value for c in at.main.caption if c.value.startswith("LLM judge"))
        assert "judge-model on 100% of answers: 3 calls (3 verdicts), cost 1.5 (" in line
