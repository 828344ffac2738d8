from __future__ import annotations

import json
import time
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from slarouter_core.judge import (ACPBENCH_JUDGE, GPQA_JUDGE, JudgeClient, JudgeError, JudgeModel,
                                  build_messages, parse_label)

SECRET = "sk-test-very-secret-123"


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 for ``handler``, as a context manager."""

    def __init__(self, handler, poll=0.5):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(poll,), daemon=True)

    @property
    def origin(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def url(self):
        return self.origin + "/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class Server(LocalServer):
    """A local OpenAI-compatible endpoint; ``script`` lists (status, body) answers in turn,
    each sent ``delay`` seconds after its request."""

    def __init__(self, script, delay=0.0, poll=0.5):
        self.script = list(script)
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(body)})
                status, payload = outer.script.pop(0) if len(outer.script) > 1 else outer.script[0]
                time.sleep(delay)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        super().__init__(Handler, poll)


def completion(text):
    return {"choices": [{"message": {"role": "assistant", "content": text}}]}


def client(url, **kw):
    return JudgeClient(base_url=url, model="judge-model", api_key_env="SLAROUTER_TEST_JUDGE_KEY",
                       timeout=2.0, backoff=0.01, **kw)


def test_judge_round_trip_uses_the_paper_prompt_and_the_key(monkeypatch):
    monkeypatch.setenv("SLAROUTER_TEST_JUDGE_KEY", SECRET)
    with Server([(200, completion('Reasoning... the answer is B.\n{"label": 1}'))]) as srv:
        label = client(srv.url).judge("Which is bigger?", "B", choices="A) 1\nB) 2")
    assert label == 1
    req = srv.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {SECRET}"
    msgs = req["body"]["messages"]
    assert req["body"]["model"] == "judge-model"
    assert msgs[0]["content"].startswith("You are an expert evaluator for AI benchmark answers.")
    assert "fixed set of labeled answer choices" in msgs[0]["content"]
    assert "Answer choices:\nA) 1\nB) 2" in msgs[1]["content"]
    assert msgs[1]["content"].endswith('Respond ONLY with valid JSON:\n{"label": <0 or 1>}')


def test_open_question_prompt_has_no_choices():
    m = build_messages("2+2?", "4", None, reasoning=False)
    assert "there are no labeled choices" in m[0]["content"]
    assert "Answer choices" not in m[1]["content"] and "Think through" not in m[1]["content"]


def test_retries_on_server_errors_then_succeeds(monkeypatch):
    monkeypatch.delenv("SLAROUTER_TEST_JUDGE_KEY", raising=False)
    with Server([(503, {"error": "busy"}), (429, {"error": "slow down"}), (200, completion('{"label": 0}'))]) as srv:
        assert client(srv.url, retries=2).judge("q", "r") == 0
    assert len(srv.requests) == 3
    assert "Authorization" not in srv.requests[0]["headers"]


def test_gives_up_after_retries_with_a_clear_error(monkeypatch):
    monkeypatch.setenv("SLAROUTER_TEST_JUDGE_KEY", SECRET)
    with Server([(500, {"error": "down"})]) as srv:
        with pytest.raises(JudgeError, match="after 2 attempt") as exc:
            client(srv.url, retries=1).judge("q", "r")
    assert SECRET not in str(exc.value)


def test_auth_failure_is_not_retried_and_hides_the_key(monkeypatch):
    monkeypatch.setenv("SLAROUTER_TEST_JUDGE_KEY", SECRET)
    with Server([(401, {"error": "bad key " + SECRET})]) as srv:
        with pytest.raises(JudgeError, match="HTTP 401.*API key") as exc:
            client(srv.url, retries=3).judge("q", "r")
    assert len(srv.requests) == 1 and SECRET not in str(exc.value)


@pytest.mark.parametrize("answer", ["I think it is right", '{"label": 2}', '{"label": true}', '{"score": 1}', ""])
def test_nonsense_answers_raise(answer, monkeypatch):
    monkeypatch.setenv("SLAROUTER_TEST_JUDGE_KEY", SECRET)
    with Server([(200, completion(answer))]) as srv:
        with pytest.raises(JudgeError, match="label"):
            client(srv.url, retries=0).judge("q", "r")


def test_non_chat_json_raises(monkeypatch):
    with Server([(200, b"<html>hello</html>")]) as srv:
        with pytest.raises(JudgeError, match="chat completion"):
            client(srv.url, retries=0).judge("q", "r")


def test_unreachable_endpoint_is_a_clear_error(monkeypatch):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    monkeypatch.setenv("SLAROUTER_TEST_JUDGE_KEY", SECRET)
    with pytest.raises(JudgeError, match="cannot reach") as exc:
        client(f"http://127.0.0.1:{port}/v1", retries=1).judge("q", "r")
    assert SECRET not in str(exc.value)


def test_slow_endpoint_times_out_with_a_clear_error(monkeypatch):
    gate = threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            gate.wait(5)  # hold the request until the test is done
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    th = threading.Thread(target=httpd.serve_forever, daemon=True)
    th.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        c = JudgeClient(base_url=url, model="m", timeout=0.2, retries=1, backoff=0.01)
        with pytest.raises(JudgeError, match=r"after 2 attempt.*did not answer within 0.2 s"):
            c.judge("q", "r")
    finally:
        gate.set()
        httpd.shutdown()
        httpd.server_close()


def test_key_never_in_repr(monkeypatch):
    monkeypatch.setenv("SLAROUTER_TEST_JUDGE_KEY", SECRET)
    c = client("http://127.0.0.1:9/v1")
    assert SECRET not in repr(c) and SECRET not in str(c.__dict__)


@pytest.mark.parametrize("text,label", [('{"label": 1}', 1), ('```json\n{"label": 0}\n```', 0),
                                        ('blah {"label": "1"} end', 1), ('{"label": 0.0}', 0)])
def test_parse_label(text, label):
    assert parse_label(text) == label


@pytest.mark.parametrize("kw", [dict(base_url="ftp://x"), dict(model=""), dict(timeout=0),
                                dict(retries=-1), dict(api_key_env="not a name")])
def test_client_validation(kw):
    args = dict(base_url="http://127.0.0.1:1/v1", model="m")
    args.update(kw)
    with pytest.raises(ValueError):
        JudgeClient(**args)


@pytest.mark.parametrize("judge", [ACPBENCH_JUDGE, GPQA_JUDGE])
def test_simulated_judge_statistics(judge):
    rng = np.random.default_rng(0)
    y = (rng.random(200_000) < 0.5).astype(np.int8)
    out = judge.corrupt(y, rng)
    assert (out[y == 0] == 1).mean() == pytest.approx(judge.fpr, abs=0.005)
    assert (out[y == 1] == 0).mean() == pytest.approx(judge.fnr, abs=0.005)
    assert (out == y).mean() == pytest.approx(judge.agreement(0.5), abs=0.005)


def test_paper_presets_match_reported_agreement():
    # the paper reports 94.4% / 87.9% agreement; with these error rates that corresponds to
    # some base rate in [0, 1]: agreement is between 1 - fpr and 1 - fnr
    for judge, agree in ((ACPBENCH_JUDGE, 0.944), (GPQA_JUDGE, 0.879)):
        lo, hi = sorted((judge.agreement(0.0), judge.agreement(1.0)))
        assert lo - 0.001 <= agree <= hi + 0.001


@pytest.mark.parametrize("kw", [dict(fpr=-0.1, fnr=0.1), dict(fpr=0.1, fnr=1.5), dict(fpr=True, fnr=0.1)])
def test_judge_model_validation(kw):
    with pytest.raises(ValueError):
        JudgeModel(**kw)


# -- hardening (issue 11) -------------------------------------------------------------------

class Raw(LocalServer):
    """A local HTTP server whose ``reply(handler)`` writes whatever it wants (headers included)."""

    def __init__(self, reply):
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                n = int(self.headers.get("Content-Length", 0) or 0)
                body = self.rfile.read(n) if n else b""
                outer.requests.append({"method": self.command, "path": self.path,
                                       "headers": dict(self.headers), "body": body, "at": time.monotonic()})
                try:
                    reply(self, len(outer.requests))
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_POST = do_GET = _any  # noqa: N815

            def log_message(self, *a):
                pass

        super().__init__(Handler, poll=0.05)


def _send(h, status, payload=None, headers=()):
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode() if payload is not None else b""
    h.send_response(status)
    for k, v in headers:
        h.send_header(k, v)
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def _verdict(h, n=0):
    _send(h, 200, completion('{"label": 1}'))


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirect_to_another_host_is_an_error_and_the_key_stays_home(status, monkeypatch):
    monkeypatch.setenv("SLAROUTER_TEST_JUDGE_KEY", SECRET)
    with Raw(_verdict) as evil:
        def bounce(h, n):
            _send(h, status, {"moved": True}, [("Location", evil.url + "/chat/completions")])
        with Raw(bounce) as home:
            with pytest.raises(JudgeError, match=f"HTTP {status}.*redirect.*not followed") as exc:
                client(home.url, retries=2).judge("q", "r")
    assert evil.requests == []          # nothing (no key, no prompt) reached the other host
    assert len(home.requests) == 1      # a redirect is not retried
    assert SECRET not in str(exc.value)


def test_redirect_that_changes_the_method_is_an_error_even_on_the_same_host(monkeypatch):
    monkeypatch.setenv("SLAROUTER_TEST_JUDGE_KEY", SECRET)

    def reply(h, n):
        if h.path.endswith("/chat/completions") and h.command == "POST" and n == 1:
            _send(h, 302, b"", [("Location", "/v2/chat/completions")])
        else:
            _verdict(h)
    with Raw(reply) as srv:
        with pytest.raises(JudgeError, match="HTTP 302.*not followed"):
            client(srv.url).judge("q", "r")
    assert len(srv.requests) == 1


def test_same_origin_307_keeps_the_method_the_body_and_the_key(monkeypatch):
    monkeypatch.setenv("SLAROUTER_TEST_JUDGE_KEY", SECRET)

    def reply(h, n):
        if h.path.startswith("/v1/"):
            _send(h, 307, b"", [("Location", "/v2/chat/completions")])
        else:
            _send(h, 200, completion('{"label": 0}'))
    with Raw(reply) as srv:
        assert client(srv.url).judge("q", "r") == 0
    first, second = srv.requests
    assert second["method"] == "POST" and second["path"] == "/v2/chat/completions"
    assert second["body"] == first["body"] and second["headers"]["Authorization"] == f"Bearer {SECRET}"


def test_a_trickling_server_cannot_stretch_the_timeout(monkeypatch):
    monkeypatch.delenv("SLAROUTER_TEST_JUDGE_KEY", raising=False)
    body = json.dumps(completion('{"label": 1}')).encode()

    def trickle(h, n):
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        for b in body:  # one byte every 50 ms: each read is quick, the whole answer is not
            h.wfile.write(bytes([b]))
            h.wfile.flush()
            time.sleep(0.05)
    with Raw(trickle) as srv:
        start = time.monotonic()
        with pytest.raises(JudgeError, match="did not answer within 0.5 s"):
            JudgeClient(base_url=srv.url, model="m", timeout=0.5, retries=0).judge("q", "r")
        took = time.monotonic() - start
    assert len(body) * 0.05 > 2.0 and took < 1.5


def test_call_deadline_bounds_retries_and_waits(monkeypatch):
    with Raw(lambda h, n: _send(h, 503, {"error": "busy"})) as srv:
        start = time.monotonic()
        with pytest.raises(JudgeError, match="deadline"):
            JudgeClient(base_url=srv.url, model="m", timeout=1.0, retries=50, backoff=0.2,
                        deadline=0.6).judge("q", "r")
        assert time.monotonic() - start < 1.2


def test_short_body_is_retried_then_a_judge_error(monkeypatch):
    def short(h, n):
        h.send_response(200)
        h.send_header("Content-Length", "1000")
        h.end_headers()
        h.wfile.write(b'{"choices": [')
        h.close_connection = True
    with Raw(short) as srv:
        with pytest.raises(JudgeError, match=r"after 2 attempt.*broken reply.*IncompleteRead"):
            client(srv.url, retries=1).judge("q", "r")
    assert len(srv.requests) == 2


def test_short_body_then_a_good_answer_succeeds():
    def flaky(h, n):
        if n == 1:
            h.send_response(200)
            h.send_header("Content-Length", "500")
            h.end_headers()
            h.wfile.write(b"{")
            h.close_connection = True
        else:
            _verdict(h)
    with Raw(flaky) as srv:
        assert client(srv.url, retries=1).judge("q", "r") == 1


@pytest.mark.parametrize("reply", [b"garbage that is not HTTP\r\n\r\n", b""])
def test_a_reply_that_is_not_http_is_retried_then_a_judge_error(reply):
    import socketserver

    seen = []

    class Junk(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.recv(65536)
            seen.append(1)
            self.request.sendall(reply)

    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Junk)
    srv.daemon_threads = True
    th = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    th.start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        with pytest.raises(JudgeError, match=r"after 3 attempt.*broken reply.*(BadStatusLine|RemoteDisconnected)"):
            client(url, retries=2).judge("q", "r")
    finally:
        srv.shutdown()
        srv.server_close()
    assert len(seen) == 3


def test_retry_after_on_429_is_honoured():
    def reply(h, n):
        if n == 1:
            _send(h, 429, {"error": "slow down"}, [("Retry-After", "1")])
        else:
            _verdict(h)
    with Raw(reply) as srv:
        assert client(srv.url, retries=1).judge("q", "r") == 1  # backoff alone would be 0.01 s
    gap = srv.requests[1]["at"] - srv.requests[0]["at"]
    assert gap >= 0.95


def test_retry_after_beyond_the_bound_fails_at_once():
    with Raw(lambda h, n: _send(h, 429, {"error": "later"}, [("Retry-After", "3600")])) as srv:
        start = time.monotonic()
        with pytest.raises(JudgeError, match="Retry-After.*3600 s.*max_retry_after"):
            client(srv.url, retries=3, max_retry_after=5).judge("q", "r")
        assert time.monotonic() - start < 1.0
    assert len(srv.requests) == 1


def test_credentials_in_base_url_are_redacted(monkeypatch):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    c = client(f"http://alice:pa55w0rd-xyz@127.0.0.1:{port}/v1?api_key=tok-abc123", retries=0)
    with pytest.raises(JudgeError, match="cannot reach") as exc:
        c.judge("q", "r")
    for secret in ("pa55w0rd-xyz", "tok-abc123", "alice"):
        assert secret not in str(exc.value) and secret not in repr(c)
    with Raw(lambda h, n: _send(h, 500, {})) as srv:
        url = srv.url.replace("http://", "http://bob:hunter2-secret@")
        with pytest.raises(JudgeError) as exc:
            client(url, retries=0).judge("q", "r")
    assert "hunter2-secret" not in str(exc.value) and "***@127.0.0.1" in str(exc.value)


def test_the_sync_call_works_inside_a_running_event_loop():
    """As in a notebook: judge() from code that already runs an asyncio loop."""
    import asyncio

    with Server([(200, completion('{"label": 1}'))]) as srv:
        async def inside():
            return client(srv.url, retries=0).judge("q", "r")

        assert asyncio.run(inside()) == 1
