"""The dashboard's view of a running service: library code, then the page itself."""

from __future__ import annotations

import httpx
import pytest

from slarouter_core.service.monitor import ServiceUnreachable, ServiceView, fetch_state, normalise_url
from tests.service.conftest import KEY
from tests.service.test_service import PROMPTS, ask, feedback


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    """The dashboard finds the service's key in its environment, as an operator sets it."""
    monkeypatch.setenv("SLAROUTER_API_KEY", KEY)


def test_urls_are_normalised_with_clear_errors():
    assert normalise_url(" 127.0.0.1:8000/ ") == "http://127.0.0.1:8000"
    assert normalise_url("https://router.example:443") == "https://router.example:443"
    with pytest.raises(ValueError, match="give the service URL"):
        normalise_url("")
    with pytest.raises(ValueError, match="not an http"):
        normalise_url("ftp://x")


def test_unreachable_or_foreign_urls_are_explained(backends):
    with pytest.raises(ServiceUnreachable, match="no answer"):
        fetch_state("http://127.0.0.1:9", timeout=0.5)
    with pytest.raises(ServiceUnreachable, match="HTTP 404"):
        fetch_state(backends["small"].url)  # a model server, not the router


def test_view_builds_the_live_run_charts_from_the_state(running, backends):
    httpx.post(f"{backends['small'].url}/control", json={"fail": "error"})
    svc = running(mode="guarded")
    client = svc.client()
    for i, p in enumerate(PROMPTS[:30]):
        _, comp = ask(client, p)
        if i % 3 == 0:
            feedback(svc, comp.id, True)
    with pytest.raises(ServiceUnreachable, match="needs an API key"):
        fetch_state(svc.url, api_key="sk-wrong-key-000000000000")
    view = ServiceView(fetch_state(svc.url, history=25, api_key=KEY))
    h = view.headline()
    assert h["served"] == 30 and h["thumbs_up"] == 10 and h["failures"] == view.models_frame()["failures"].sum() > 0
    charts = {c.key: c for c in view.charts()}
    assert set(charts) == {"queue", "cost", "satisfaction", "ratio", "events"}
    assert charts["queue"].frame["t"].tolist() == list(range(6, 31))  # the last 25 requests
    cost = charts["cost"].frame
    ours = cost[cost["series"] == "SLARouter (reported usage)"]["value"].iloc[-1]
    rows = view.state["history"]
    assert ours == pytest.approx(sum(r["cost"] for r in rows), rel=1e-6)
    ev = charts["events"].frame
    assert (ev["event"] == "feedback").sum() == sum(r["feedback"] is not None for r in rows)
    assert (ev["event"] == "backend failure").sum() == sum(r["retried"] for r in rows) > 0
    ratio = charts["ratio"].frame
    top = ratio.groupby("t")["value"].max()
    assert top.round(6).eq(1.0).all()  # stacked shares of served calls reach 1
    # the events strip's spec is built once, and each poll gets its own copy
    again = {c.key: c for c in view.charts()}["events"].spec
    assert again == charts["events"].spec and again is not charts["events"].spec
    assert again["mark"]["type"] == "tick" and again["encoding"]["y"]["field"] == "event"
    again["title"] = "changed by one caller"
    assert {c.key: c for c in view.charts()}["events"].spec["title"] != "changed by one caller"


def test_service_page_shows_a_running_service(running, monkeypatch):
    from tests.app.conftest import open_app

    monkeypatch.setenv("SLAROUTER_API_KEY", KEY)
    svc = running()
    ask(svc.client(), "hello")
    at = open_app("pages/service_page.py")
    at.text_input(key="w_service_url").set_value(svc.url).run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Requests routed"] == "1"
    assert len(at.main.get("vega_lite_chart")) == 5  # the sidebar has its own zoo picture
    at.text_input(key="w_service_url").set_value("127.0.0.1:9").run()
    assert any("no answer" in w.value for w in at.warning)


def test_ask_and_send_feedback_through_the_service(running):
    from slarouter_core.service.monitor import ask as ask_service, send_feedback

    svc = running()
    ans = ask_service(svc.url, "Why is the sky blue?")
    assert ans.model in ("small", "medium", "large") and ans.text.split()[0] == ans.model
    assert send_feedback(svc.url, ans.request_id, True)["accepted"] is True
    with pytest.raises(ValueError, match="HTTP 409: feedback for .* was already given"):
        send_feedback(svc.url, ans.request_id, False)
    with pytest.raises(ValueError, match="empty"):
        ask_service(svc.url, "  ")
    with pytest.raises(ServiceUnreachable):
        ask_service("http://127.0.0.1:9", "hi", timeout=0.5)


def test_feedback_by_hand_page_uses_the_real_zoo(running):
    from tests.app.conftest import open_app

    svc = running()
    at = open_app("pages/feedback_by_hand.py")
    at.text_input(key="w_hand_svc").set_value(svc.url)
    at.text_area(key="w_svc_typed").set_value("Why is the sky blue?")
    at.button(key="w_svc_ask").click().run()
    assert not at.exception, [e.value for e in at.exception]
    ans = at.session_state.svc_answer
    assert any(f"Answered by {ans.model}" in m.value for m in at.markdown)
    at.session_state[f"svc_fb_{ans.request_id}"] = 0  # thumbs down
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Sent to the service's router" in s.value for s in at.success)
    st = svc.http.get("/v1/state").json()
    assert st["feedback"]["unsatisfied"] == 1 and st["t"] == 1


def test_refits_are_said_in_words_only_where_there_were_some():
    from slarouter_core.service.monitor import refit_text

    assert refit_text(None) == "" and refit_text({"done": 0, "failed": 0, "last_s": None, "running": False}) == ""
    text = refit_text({"done": 3, "failed": 1, "last_s": 1.234, "running": True})
    assert text == ("text model refits: 3 done (the last took 1.2 s, off the request path), one running, "
                    "1 failed (the text model kept)")



def test_the_sla_window_is_said_in_words_only_where_there_is_one():
    from slarouter_core.service.monitor import sla_window_text

    assert sla_window_text({"at_risk": False, "first_at_risk": None, "guarantee": None}) == ""
    sla = {"window": 10_000, "window_index": 2, "window_served": 1_234, "windows_at_risk": 0}
    assert sla_window_text(sla) == "SLA window 3: 1,234 of 10,000 requests served"
    assert sla_window_text({**sla, "windows_at_risk": 1}).endswith("; 1 window warned at risk so far")
    assert sla_window_text({**sla, "windows_at_risk": 2}).endswith("; 2 windows warned at risk so far")


def test_the_judge_is_said_in_words_with_its_spend_only_where_there_is_one():
    from slarouter_core.service.monitor import judge_text

    assert judge_text(None, 10.0) == ""
    judge = {"model": "j", "budget": 0.25, "calibrate": True, "calls": 9, "verdicts": 5, "calibration_calls": 3,
             "failures": 1, "skipped": 2, "cost": 0.9, "due": 1, "thumbs_waiting": 0}
    assert judge_text(judge, 9.0) == (
        "LLM judge j on 25% of answers (and rated ones outside that share, to calibrate it): 9 calls (5 verdicts, "
        "3 calibration reads, 1 failed, 2 skipped at the concurrency bound), cost 0.9 (10.0% of the total); "
        "1 call due")
    assert judge_text({**judge, "due": 2, "thumbs_waiting": 1}, 9.0).endswith(
        "; 2 calls due, 1 thumbs waiting for their verdicts")
    older = {"model": "j", "budget": 1.0, "calls": 2, "verdicts": 2, "cost": 0.0}  # before the calibration fields
    assert judge_text(older, 5.0) == "LLM judge j on 100% of answers: 2 calls (2 verdicts), cost 0"
