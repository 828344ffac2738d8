from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from slarouter_core.judge import (ACPBENCH_JUDGE, GPQA_JUDGE, JudgeClient, JudgeError, JudgeModel,
                                  build_messages, parse_label)

SECRET = "sk-test-very-secret-123"


class Server:
    """A local OpenAI-compatible endpoint; ``script`` lists (status, body) answers in turn."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(body)})
                status, payload = outer.script.pop(0) if len(outer.script) > 1 else outer.script[0]
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


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
