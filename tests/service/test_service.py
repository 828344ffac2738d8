"""The routing service end to end: real HTTP on 127.0.0.1, driven with the openai client."""

from __future__ import annotations

import concurrent.futures as cf
import json
import math

import httpx
import pytest

from slarouter_core.router import policy_names
from slarouter_core.service.persistence import LEDGER_FILE
from tests.service.conftest import BACKENDS, calls, make_zoo

PROMPTS = [f"question {i}: " + " ".join(["word"] * (3 + i % 5)) for i in range(40)]


def ask(client, text, **kw):
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": text}], **kw)
    return raw.headers, raw.parse()


def feedback(svc, rid, satisfied):
    return svc.http.post("/v1/feedback", json={"request_id": rid, "satisfied": satisfied})


def test_non_streaming_answer_names_the_model_and_request_everywhere(running, backends):
    svc = running()
    before = calls(backends)
    headers, comp = ask(svc.client(), "What is 2 + 2?")
    served = headers["x-slarouter-model"]
    assert served in BACKENDS and comp.model == served
    assert comp.id == headers["x-slarouter-request-id"] and comp.id.startswith("slr-")
    assert comp.choices[0].message.content.split()[0] == served  # the fake names itself first
    after = calls(backends)
    assert {n: after[n] - before[n] for n in after} == {n: int(n == served) for n in after}
    st = svc.http.get("/v1/state").json()
    assert st["t"] == 1 and [m["served"] for m in st["models"] if m["name"] == served] == [1]
    assert svc.http.get("/healthz").json()["status"] == "ok"


def test_streaming_relays_chunks_and_accounts_usage(running):
    svc = running()
    client = svc.client()
    stream = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "stream please"}],
                                            stream=True)
    chunks = list(stream)
    served = {c.model for c in chunks}
    assert len(served) == 1
    name = served.pop()
    assert {c.id for c in chunks} == {chunks[0].id}
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.split()[0] == name and len(text.split()) == BACKENDS[name][1]
    assert all(c.usage is None for c in chunks)  # the client did not ask for usage
    # asked for usage: the last chunk carries it
    chunks = list(client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "two words"}],
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.prompt_tokens == 2
    st = svc.http.get("/v1/state").json()
    assert st["t"] == 2 and sum(m["usage_reports"] for m in st["models"]) == 2
    assert sum(m["completion_tokens"] for m in st["models"]) == sum(
        BACKENDS[m["name"]][1] * m["served"] for m in st["models"])
    assert feedback(svc, chunks[-1].id, True).status_code == 200


def test_cost_is_accounted_from_reported_usage(running, backends):
    zoo = make_zoo(backends)
    svc = running(zoo)
    client = svc.client()
    before = calls(backends)
    expected = {n: 0.0 for n in zoo.names}
    served = {n: 0 for n in zoo.names}
    for text in PROMPTS[:15]:
        headers, comp = ask(client, text)
        name = headers["x-slarouter-model"]
        u = comp.usage
        assert u.prompt_tokens == len(text.split()) + 2  # the fake counts words of every message
        assert u.completion_tokens == BACKENDS[name][1]
        expected[name] += zoo.models[zoo.names.index(name)].price(u.prompt_tokens, u.completion_tokens)
        served[name] += 1
    after = calls(backends)
    st = svc.http.get("/v1/state").json()
    for m in st["models"]:
        assert m["served"] == served[m["name"]] == after[m["name"]] - before[m["name"]]
        assert m["cost"] == pytest.approx(expected[m["name"]], rel=1e-12, abs=1e-15)
    assert st["cost_total"] == pytest.approx(sum(expected.values()))
    assert sum(1 for v in served.values() if v) >= 2  # the router did route, not pin one model


def test_feedback_moves_routing_towards_the_model_users_like(running):
    """Thumbs up only for the large model: the guarded router learns to send traffic there."""
    svc = running(mode="guarded", alpha=0.9)
    client = svc.client()
    served = []
    for i in range(60):
        headers, comp = ask(client, PROMPTS[i % len(PROMPTS)])
        name = headers["x-slarouter-model"]
        served.append(name)
        assert feedback(svc, comp.id, name == "large").status_code == 200
    first, last = served[:20].count("large"), served[-20:].count("large")
    assert last >= 15 and last > first, served
    st = svc.http.get("/v1/state").json()
    assert st["feedback"]["satisfied"] == served.count("large")
    assert st["feedback"]["unsatisfied"] == 60 - served.count("large")
    est = st["satisfaction"]
    assert est["lower_bound"] <= est["estimate"] and math.isfinite(est["estimate"])


def test_feedback_late_out_of_order_unknown_duplicate_and_malformed(running):
    svc = running(mode="paper")
    client = svc.client()
    ids = [ask(client, p)[1].id for p in PROMPTS[:5]]
    for rid, ok in ((ids[3], True), (ids[0], False), (ids[4], True)):  # late and out of order
        r = feedback(svc, rid, ok)
        assert r.status_code == 200 and r.json()["accepted"] is True
    r = feedback(svc, ids[0], True)
    assert r.status_code == 409 and "already given" in r.json()["error"]["message"]
    r = feedback(svc, "slr-doesnotexist", True)
    assert r.status_code == 404 and "unknown request_id" in r.json()["error"]["message"]
    assert feedback(svc, ids[1], "yes").status_code == 422
    assert svc.http.post("/v1/feedback", json={"request_id": ids[1]}).status_code == 422
    assert svc.http.post("/v1/feedback", content=b"{not json").status_code == 400
    st = svc.http.get("/v1/state?history=5").json()
    assert (st["feedback"]["satisfied"], st["feedback"]["unsatisfied"], st["feedback"]["pending"]) == (2, 1, 2)
    assert [row["feedback"] for row in st["history"]] == [0, None, None, 1, 1]


def test_bad_chat_requests_get_openai_style_errors(running):
    svc = running()
    r = svc.http.post("/v1/chat/completions", json={"messages": [{"role": "system", "content": "x"}]})
    assert r.status_code == 400 and "user message" in r.json()["error"]["message"]
    assert svc.http.get("/v1/state").json()["t"] == 0


def test_a_failing_backend_fails_over_and_its_circuit_opens(running, backends):
    svc = running(breaker_failures=2)
    httpx.post(f"{backends['small'].url}/control", json={"fail": "error"})
    client = svc.client()
    seen = []
    for text in PROMPTS[:20]:
        headers, comp = ask(client, text)
        seen.append((headers["x-slarouter-chosen"], headers["x-slarouter-model"]))
        assert comp.model == headers["x-slarouter-model"] != "small"
    retried = [s for s in seen if s[0] == "small"]
    assert retried and all(served != "small" for _, served in retried)
    st = svc.http.get("/v1/state?history=20").json()
    small = st["models"][0]
    assert small["name"] == "small" and small["failures"] == len(retried) and small["served"] == 0
    assert small["chosen"] == len(retried)
    assert sum(row["retried"] for row in st["history"]) == len(retried)
    assert st["requests_failed"] == 0
    if len(retried) >= 2:
        assert small["circuit_open"] is True and small["circuit_opened"] >= 1


def test_a_hanging_backend_times_out_and_a_total_failure_is_a_502(running, backends):
    zoo = make_zoo(backends, names=("small", "medium"), small={"timeout_s": 0.3}, medium={"timeout_s": 0.3})
    svc = running(zoo)
    httpx.post(f"{backends['small'].url}/control", json={"fail": "hang"})
    client = svc.client()
    headers, comp = ask(client, "first")  # t = 1 explores; whichever it picks, medium answers
    assert comp.model == "medium"
    httpx.post(f"{backends['medium'].url}/control", json={"fail": "error"})
    r = svc.http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                   timeout=10)
    assert r.status_code == 502
    msg = r.json()["error"]["message"]
    assert "small: ReadTimeout" in msg and "medium: HTTP 500" in msg
    rid = r.headers["x-slarouter-request-id"]
    f = feedback(svc, rid, True)
    assert f.status_code == 409 and "failed on every backend" in f.json()["error"]["message"]
    st = svc.http.get("/v1/state").json()
    assert st["requests_failed"] == 1 and sum(m["failures"] for m in st["models"]) >= 2


def test_concurrent_requests_are_all_routed_once(running):
    svc = running(mode="guarded")
    client = svc.client()
    with cf.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda p: ask(client, p), PROMPTS[:24]))
    ids = [c.id for _, c in results]
    assert len(set(ids)) == 24
    st = svc.http.get("/v1/state?history=100").json()
    assert st["t"] == 24 and sorted(row["t"] for row in st["history"]) == list(range(1, 25))
    assert sum(m["served"] for m in st["models"]) == 24
    with cf.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda rid: feedback(svc, rid, True).status_code, ids))
    assert codes == [200] * 24


@pytest.mark.parametrize("mode", policy_names())
def test_restart_restores_state_and_pending_feedback(running, backends, tmp_path, mode):
    state = tmp_path / "state"
    svc = running(mode=mode, state_dir=str(state))
    client = svc.client()
    ids = [ask(client, p)[1].id for p in PROMPTS[:8]]
    assert feedback(svc, ids[0], True).status_code == 200
    before = svc.http.get("/v1/state").json()
    svc.stop()  # graceful shutdown writes the checkpoint
    ledger = json.loads((state / LEDGER_FILE).read_text())
    assert (state / ledger["router_file"]).exists()
    svc2 = running(mode=mode, state_dir=str(state))
    after = svc2.http.get("/v1/state").json()
    assert after["restored"] is True
    for key in ("t", "q", "cost_total", "models", "feedback"):
        assert after[key] == before[key], key
    assert feedback(svc2, ids[0], False).status_code == 409  # still a duplicate after the restart
    # feedback that was still pending at shutdown reaches the router after the restart
    r = feedback(svc2, ids[5], True)
    assert r.status_code == 200, r.text
    _, comp = ask(svc2.client(), "after the restart")
    assert svc2.http.get("/v1/state").json()["t"] == 9


def test_restart_with_another_zoo_is_refused(running, backends, tmp_path):
    from slarouter_core.encoders import HashingEncoder
    from slarouter_core.service.core import RoutingService, ServiceConfig

    svc = running(state_dir=str(tmp_path))
    ask(svc.client(), "hello")
    svc.stop()
    with pytest.raises(ValueError, match="other settings: models"):
        RoutingService(make_zoo(backends, names=("small", "large")),
                       ServiceConfig(alpha=0.8, state_dir=str(tmp_path)), encoder=HashingEncoder(64))


def test_checkpoints_are_written_on_a_timer(running, tmp_path):
    import time

    svc = running(state_dir=str(tmp_path), checkpoint_every_s=0.2)
    ask(svc.client(), "hello")
    deadline = time.time() + 10
    while time.time() < deadline:
        if (tmp_path / LEDGER_FILE).exists() and json.loads((tmp_path / LEDGER_FILE).read_text())["t"] == 1:
            break
        time.sleep(0.05)
    doc = json.loads((tmp_path / LEDGER_FILE).read_text())
    assert doc["t"] == 1 and len(doc["requests"]) == 1


def test_streaming_fails_over_before_the_first_byte(running, backends):
    svc = running(make_zoo(backends, names=("small", "medium")))
    httpx.post(f"{backends['small'].url}/control", json={"fail": "error"})
    client = svc.client()
    for text in PROMPTS[:6]:
        with client.chat.completions.with_streaming_response.create(
                model="auto", messages=[{"role": "user", "content": text}], stream=True) as resp:
            served = resp.headers["x-slarouter-model"]
            chunks = list(resp.parse())
        assert served == "medium" and {c.model for c in chunks} == {"medium"}
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).startswith("medium")
    st = svc.http.get("/v1/state").json()
    assert st["models"][0]["failures"] == st["models"][0]["chosen"] > 0 and st["requests_failed"] == 0
