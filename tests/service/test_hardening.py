"""Issue 22: the service under faults and hostile input (each numbered defect has a test).

Real HTTP on 127.0.0.1: fake backends that misbehave on demand, the routing service in
front of them, small bodies and bounded loops.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math

import httpx
import numpy as np
import pytest

from slarouter_core.encoders import HashingEncoder
from slarouter_core.service.core import RoutingService, ServiceConfig
from slarouter_core.service.persistence import LEDGER_FILE
from tests.service.conftest import KEY, OTHER_KEY, make_zoo

USER = [{"role": "user", "content": "hello there"}]


def control(backends, name, fail):
    assert httpx.post(f"{backends[name].url}/control", json={"fail": fail}).status_code == 200


def chat(svc, **body):
    body.setdefault("messages", USER)
    # json.dumps escapes a lone surrogate as \ud800, as clients in other languages send it
    return svc.http.post("/v1/chat/completions", content=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"})


def all_finite_nonneg(state) -> bool:
    nums = [v for m in state["models"] for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return all(math.isfinite(v) and v >= 0 for v in nums) and math.isfinite(state["cost_total"])


# -- 1. poisoned usage ------------------------------------------------------------------------
def test_1_negative_usage_is_ignored_and_never_poisons_the_router(running, backends, tmp_path):
    svc = running(make_zoo(backends, names=("small", "medium")), state_dir=str(tmp_path))
    control(backends, "small", "negative_usage")
    control(backends, "medium", "negative_usage")
    for i in range(6):
        r = chat(svc, messages=[{"role": "user", "content": f"question {i}"}])
        assert r.status_code == 200, r.text
    st = svc.http.get("/v1/state").json()
    assert st["usage_rejected"] == 6 and all_finite_nonneg(st)
    assert st["cost_total"] > 0  # the estimate stands in for the broken figures
    control(backends, "small", "none")
    control(backends, "medium", "none")
    assert chat(svc).status_code == 200
    svc.service.checkpoint()
    svc.stop()
    # a checkpoint with such figures (written by an older version) is refused, clearly
    doc = json.loads((tmp_path / LEDGER_FILE).read_text())
    doc["stats"][0]["completion_tokens"] = -5000
    (tmp_path / LEDGER_FILE).write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="refusing a checkpoint with negative or non-finite accounting.*"
                                         "completion_tokens = -5000"):
        RoutingService(make_zoo(backends, names=("small", "medium")),
                       ServiceConfig(alpha=0.8, state_dir=str(tmp_path)), encoder=HashingEncoder(64))


# -- 2. one bad text fails only itself ------------------------------------------------------
class StrictUnicodeEncoder(HashingEncoder):
    """Refuses text that is not valid Unicode, as the MiniLM's Rust tokenizer does."""

    def encode(self, texts, progress=None):
        for t in texts:
            t.encode("utf-8")  # UnicodeEncodeError on a lone surrogate
        return super().encode(texts)


class PoisonEncoder(HashingEncoder):
    def encode(self, texts, progress=None):
        if any("POISON" in t for t in texts):
            raise RuntimeError("this text breaks the encoder")
        return super().encode(texts)


def test_2_a_lone_surrogate_among_concurrent_chats_fails_nobody(running, backends):
    svc = running()
    svc.service.encoder = StrictUnicodeEncoder(64)
    texts = [f"normal question {i}" for i in range(15)] + ["\ud800 a lone surrogate"]

    def one(text):
        return chat(svc, messages=[{"role": "user", "content": text}]).status_code

    with cf.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(one, texts))
    assert codes == [200] * 16


def test_2_an_encoder_failure_fails_only_its_own_request():
    zoo = make_zoo({n: type("B", (), {"url": "http://127.0.0.1:1"})() for n in ("small", "medium", "large")})
    svc = RoutingService(zoo, ServiceConfig(alpha=0.8, embed_wait_ms=50), encoder=PoisonEncoder(16))
    svc.incoming = 8  # the worker waits for the others, so the bad text shares their batch
    texts = [f"fine {i}" for i in range(7)] + ["POISON"]
    with cf.ThreadPoolExecutor(8) as pool:
        futs = [pool.submit(svc.embed, t) for t in texts]
    assert all(f.exception() is None for f in futs[:7])
    assert isinstance(futs[7].exception(), RuntimeError)


# -- 3. body size -----------------------------------------------------------------------------
def test_3_bodies_over_the_limit_get_413_without_being_read(running):
    svc = running(max_body_bytes=4096)
    big = "word " * 2000
    r = chat(svc, messages=[{"role": "user", "content": big}])
    assert r.status_code == 413 and "larger than 4,096 bytes" in r.json()["error"]["message"]

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(10):
            yield b"x" * 1000

    r = svc.http.post("/v1/chat/completions", content=chunks())
    assert r.status_code == 413
    assert svc.http.get("/v1/state").json()["t"] == 0
    assert chat(svc).status_code == 200  # a normal chat is unaffected


def test_3_the_default_limit_is_one_megabyte():
    assert ServiceConfig(alpha=0.8).max_body_bytes == 1_000_000


# -- 4. keys ----------------------------------------------------------------------------------
def test_4_every_endpoint_but_healthz_needs_a_key(running):
    svc = running()
    for method, path, body in (("post", "/v1/chat/completions", {"messages": USER}),
                               ("post", "/v1/feedback", {"request_id": "slr-x", "satisfied": True}),
                               ("get", "/v1/state", None)):
        for headers in ({}, {"Authorization": "Bearer sk-wrong-key-0000000000000"}, {"Authorization": KEY}):
            r = getattr(httpx, method)(f"{svc.url}{path}", headers=headers,
                                       **({"json": body} if body is not None else {}))
            assert r.status_code == 401, (path, headers, r.text)
            assert r.json()["error"]["type"] == "authentication_error" and r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{svc.url}/healthz").status_code == 200
    assert svc.http.get("/v1/state").json()["t"] == 0


def test_4_thumbs_only_from_the_key_that_made_the_request(running):
    svc = running()
    rid = chat(svc).json()["id"]
    forged = 0
    with httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {OTHER_KEY}"}) as other:
        for _ in range(30):
            r = other.post("/v1/feedback", json={"request_id": rid, "satisfied": False})
            forged += r.status_code == 200
            assert r.status_code == 403 and "another API key" in r.json()["error"]["message"]
    assert forged == 0
    assert svc.http.post("/v1/feedback", json={"request_id": rid, "satisfied": True}).status_code == 200
    st = svc.http.get("/v1/state").json()["feedback"]
    assert (st["satisfied"], st["unsatisfied"]) == (1, 0)


def test_4_keys_load_from_env_and_file_and_compare_in_constant_time(tmp_path):
    from slarouter_core.service.auth import ApiKeys

    f = tmp_path / "keys"
    f.write_text("# operators\nsk-file-key-aaaaaaaaaaaaaaaa\n\nsk-file-key-bbbbbbbbbbbbbbbb\n")
    keys = ApiKeys.load(f, environ={"SLAROUTER_MASTER_KEY": "sk-master-cccccccccccccccc"})
    ids = {keys.identify(k) for k in ("sk-file-key-aaaaaaaaaaaaaaaa", "sk-file-key-bbbbbbbbbbbbbbbb",
                                      "sk-master-cccccccccccccccc")}
    assert None not in ids and len(ids) == 3
    assert keys.identify("sk-file-key-aaaaaaaaaaaaaaa") is None and keys.identify(None) is None
    assert ApiKeys.load(None, environ={}) is None
    with pytest.raises(ValueError, match="at least 16"):
        ApiKeys.from_keys(["short"])
    assert "sk-file-key" not in repr(keys)


# -- 6. failover ------------------------------------------------------------------------------
def test_6_failover_reaches_the_one_healthy_model(running, backends):
    svc = running()
    control(backends, "small", "error")
    control(backends, "medium", "error")
    served = []
    for i in range(12):
        r = chat(svc, messages=[{"role": "user", "content": f"q {i}"}])
        assert r.status_code == 200, r.text
        served.append(r.headers["x-slarouter-model"])
    assert set(served) == {"large"}
    st = svc.http.get("/v1/state").json()
    assert st["requests_failed"] == 0
    opened = {m["name"]: m["circuit_open"] for m in st["models"]}
    assert opened["large"] is False
    failing_chosen = sum(m["chosen"] for m in st["models"] if m["name"] != "large")
    if failing_chosen >= 3:  # three failures in a row open a circuit; the router is then told
        assert opened["small"] or opened["medium"]
    h = httpx.get(f"{svc.url}/healthz").json()
    assert h["status"] == "ok" and set(h["circuits_open"]) <= {"small", "medium"}


def test_6_an_open_circuit_is_priced_out_of_the_routers_choice(running, backends):
    svc = running(breaker_failures=1, breaker_cooldown_s=60)
    control(backends, "small", "error")
    for i in range(20):
        assert chat(svc, messages=[{"role": "user", "content": f"warm {i}"}]).status_code == 200
    st = svc.http.get("/v1/state?history=20").json()
    assert st["models"][0]["circuit_open"] is True
    # once open, the router was told: the cost it saw for small dwarfs the others' ...
    told = [row for row in st["history"] if row["est_costs"][0] > 100 * max(row["est_costs"][1:])]
    assert len(told) >= 10
    # ... and it stopped choosing it (exploration may still, rarely)
    assert sum(row["model"] == 0 for row in told) <= len(told) // 4


# -- 7. streams that break ----------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["drop_stream", "hang_stream"])
def test_7_a_broken_stream_ends_with_an_error_event(running, backends, mode):
    import openai

    svc = running(make_zoo(backends, names=("small", "medium"), small={"timeout_s": 0.5},
                           medium={"timeout_s": 0.5}))
    control(backends, "small", mode)
    control(backends, "medium", mode)
    client = svc.client()
    with pytest.raises(openai.APIError, match="broke off"):
        for _ in client.chat.completions.create(model="auto", messages=USER, stream=True):
            pass
    st = svc.http.get("/v1/state").json()
    assert st["requests_failed"] == 1 and sum(m["failures"] for m in st["models"]) == 1


# -- 8. parseable but invalid input ---------------------------------------------------------------
@pytest.mark.parametrize("raw", [
    json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}).encode(),
    json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]}).encode(),
    b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1' + b"0" * 400 + b"}",
    b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": ' + b"7" * 5000 + b"}",
    b'{"messages": [{"role": "user", "content": "hi"}], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
    b'{"messages": [{"role": "user", "content": "hi"}], "stream": "no"}',
    b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": true}',
    b'{"messages": []}', b'{"messages": "hi"}', b"[1, 2]", b"\xff\xfe", b"{",
])
def test_8_invalid_chat_input_is_a_4xx_json_error(running, raw):
    svc = running()
    r = svc.http.post("/v1/chat/completions", content=raw, headers={"Content-Type": "application/json"})
    assert 400 <= r.status_code < 500, r.text
    assert isinstance(r.json()["error"]["message"], str) and len(r.text) < 2000
    assert svc.http.get("/v1/state").json()["t"] == 0  # nothing was routed


@pytest.mark.parametrize("raw", [b'{"request_id": ' + b"9" * 5000 + b', "satisfied": true}',
                                 b'{"request_id": "x", "satisfied": 1}', b'{"request_id": 5, "satisfied": true}',
                                 b'{"request_id": "x", "satisfied": true, "extra": 1}', b"null", b"[" * 50_000])
def test_8_invalid_feedback_is_a_4xx_json_error(running, raw):
    svc = running()
    r = svc.http.post("/v1/feedback", content=raw)
    assert 400 <= r.status_code < 500 and "error" in r.json()


def test_8_the_connection_survives_a_bad_request(running):
    svc = running()
    with httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {KEY}"}) as http:
        bad = http.post("/v1/chat/completions", content=b'{"messages": [], "temperature": NaN}')
        ok = http.post("/v1/chat/completions", json={"messages": USER})
    assert bad.status_code == 400 and ok.status_code == 200


# -- 9. broken backend bodies --------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["list_body", "null_body", "nan_usage", "bad_bytes"])
def test_9_a_broken_200_fails_over(running, backends, mode):
    svc = running(make_zoo(backends, names=("small", "medium")))
    control(backends, "small", mode)
    for i in range(4):
        r = chat(svc, messages=[{"role": "user", "content": f"q {i}"}])
        assert r.status_code == 200 and r.headers["x-slarouter-model"] == "medium", r.text
    st = svc.http.get("/v1/state").json()
    assert st["models"][0]["served"] == 0 and st["models"][0]["failures"] == st["models"][0]["chosen"]
    assert all_finite_nonneg(st)


def test_9_text_usage_is_ignored_and_the_answer_kept(running, backends):
    svc = running(make_zoo(backends, names=("small", "medium")))
    control(backends, "small", "text_usage")
    control(backends, "medium", "text_usage")
    r = chat(svc)
    assert r.status_code == 200
    st = svc.http.get("/v1/state").json()
    assert st["usage_rejected"] == 1 and st["cost_total"] > 0 and all_finite_nonneg(st)


# -- low: the smaller findings ------------------------------------------------------------------
@pytest.mark.parametrize("mode, status, retry_after", [("client_400", 400, None), ("client_429", 429, "7")])
def test_low_a_backend_client_error_is_passed_on_and_not_a_failure(running, backends, mode, status, retry_after):
    svc = running(make_zoo(backends, names=("small", "medium")))
    control(backends, "small", mode)
    control(backends, "medium", mode)
    r = chat(svc)
    assert r.status_code == status and r.headers.get("retry-after") == retry_after
    msg = r.json()["error"]["message"]
    assert ("context length exceeded" if status == 400 else "rate limit reached") in msg
    st = svc.http.get("/v1/state").json()
    assert sum(m["failures"] for m in st["models"]) == 0 and not any(m["circuit_open"] for m in st["models"])


def test_low_a_client_that_hangs_up_mid_stream_is_not_a_backend_failure(running, backends):
    import time

    svc = running(make_zoo(backends, names=("small", "medium")))
    control(backends, "small", "hang_stream")
    control(backends, "medium", "hang_stream")
    with httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=5) as http:
        with http.stream("POST", "/v1/chat/completions", json={"messages": USER, "stream": True}) as r:
            rid = r.headers["x-slarouter-request-id"]
            next(r.iter_lines())  # the first chunk arrived; then the client goes away
    deadline = time.time() + 5
    while time.time() < deadline and svc.http.get("/v1/state").json()["feedback"]["pending"] == 0:
        time.sleep(0.05)
    st = svc.http.get("/v1/state").json()
    assert sum(m["failures"] for m in st["models"]) == 0 and st["requests_failed"] == 0
    assert svc.http.post("/v1/feedback", json={"request_id": rid, "satisfied": True}).status_code == 200


def test_low_an_unknown_feedback_id_is_not_echoed_at_length(running):
    svc = running()
    r = svc.http.post("/v1/feedback", json={"request_id": "z" * 150, "satisfied": True})
    assert r.status_code == 404 and len(r.text) < 400
    r = svc.http.post("/v1/feedback", json={"request_id": "z" * 100_000, "satisfied": True})
    assert r.status_code == 422 and len(r.text) < 1000


def test_low_a_crash_between_the_two_checkpoint_files_leaves_a_usable_state(running, backends, tmp_path):
    svc = running(state_dir=str(tmp_path))
    assert chat(svc).status_code == 200
    svc.service.checkpoint()
    # a crash after the router file of the next checkpoint was written, before its ledger
    (tmp_path / "router-999999999999-deadbeef.safetensors").write_bytes(b"half-written")
    assert chat(svc).status_code == 200
    svc.service.journal.close()  # as a kill would: no more checkpoints
    svc.server.should_exit = True
    svc2 = running(state_dir=str(tmp_path))
    st = svc2.http.get("/v1/state").json()
    assert st["restored"] is True and st["t"] == 2


def test_healthz_and_state_show_the_sla_status(running):
    svc = running(mode="guarded")
    chat(svc)
    st = svc.http.get("/v1/state").json()
    assert set(st["sla"]) == {"at_risk", "at_risk_since", "first_at_risk", "guarantee"}
    assert isinstance(st["sla"]["at_risk"], bool)
    assert st["sla"] == svc.service.router.sla_status()
