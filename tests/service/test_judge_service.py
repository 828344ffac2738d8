"""Issue 19 (service part): the zoo's LLM judge labels answered requests in the
background, within its budget; a failed judge call is no label, never a client error."""

from __future__ import annotations

import json
import time

import pytest

from slarouter_core.encoders import HashingEncoder
from slarouter_core.service.core import RoutingService, ServiceConfig
from slarouter_core.service.zoo import JudgeEntry, Zoo, ZooError, parse_zoo
from tests.core.test_judge import Server, completion
from tests.service.conftest import make_zoo


class FakeJudge(Server):
    """A local judge endpoint: answers ``label`` (or HTTP ``status``) after ``delay`` s."""

    def __init__(self, label=1, status=200, delay=0.0):
        doc = {**completion(json.dumps({"label": label})), "usage": {"prompt_tokens": 100, "completion_tokens": 10}}
        super().__init__([(status, doc if status == 200 else {"error": "down"})], delay=delay, poll=0.05)

    @property
    def calls(self):
        """The request bodies the judge received, in order."""
        return [r["body"] for r in self.requests]


def judged_zoo(backends, judge_url, **kw) -> Zoo:
    base = make_zoo(backends, names=("small", "medium"))
    return Zoo(base.models, JudgeEntry(base_url=judge_url, model="judge-model", timeout_s=2.0, **kw))


def wait_for(cond, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_the_judge_labels_answers_after_the_reply_and_its_cost_is_counted(running, backends, tmp_path):
    with FakeJudge(label=1, delay=0.5) as judge:
        svc = running(judged_zoo(backends, judge.url, price_per_request=0.25), mode="paper",
                      state_dir=str(tmp_path))
        client = svc.client()
        t0 = time.perf_counter()
        for i in range(4):
            comp = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": f"q{i}?"}])
        took = time.perf_counter() - t0
        assert took < 4 * 0.5  # the judge's 0.5 s never delayed a reply
        assert wait_for(lambda: svc.http.get("/v1/state").json()["judge"]["calls"] == 4)
        st = svc.http.get("/v1/state").json()
        assert st["judge"]["verdicts"] == 4 and st["judge"]["failures"] == 0
        assert st["judge"]["cost"] == pytest.approx(1.0)
        assert st["cost_total"] == pytest.approx(st["cost_models"] + 1.0)
        # the judge saw the question and the answer that was served
        user = judge.calls[-1]["messages"][1]["content"]
        assert "q3?" in user and comp.choices[0].message.content in user
        # paper mode takes a verdict as a label: the router counts them as feedback
        assert svc.service.router.n_feedback == 4
    # journaled like every other event: a crash (no checkpoint) keeps them
    svc.service.journal.close()
    again = RoutingService(svc.service.zoo, ServiceConfig(alpha=0.8, mode="paper", state_dir=str(tmp_path)),
                           encoder=HashingEncoder(64))
    assert again.judge["verdicts"] == 4 and again.router.n_feedback == 4


def test_a_failing_judge_means_no_label_and_no_client_error(running, backends):
    with FakeJudge(status=500) as judge:
        svc = running(judged_zoo(backends, judge.url), mode="paper")
        for i in range(3):
            r = svc.http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": f"q{i}"}]})
            assert r.status_code == 200
        assert wait_for(lambda: svc.http.get("/v1/state").json()["judge"]["calls"] == 3)
        st = svc.http.get("/v1/state").json()["judge"]
        assert st["failures"] == 3 and st["verdicts"] == 0
        assert svc.service.router.n_feedback == 0


def test_the_budget_and_the_concurrency_bound_the_judge_calls(running, backends):
    with FakeJudge(delay=0.3) as judge:
        svc = running(judged_zoo(backends, judge.url, budget=0.5, max_concurrent=1))
        for i in range(20):
            svc.http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": f"q{i}"}]})
        def settled():
            j = svc.http.get("/v1/state").json()["judge"]
            return j["calls"] + j["skipped"] >= 5 and j["calls"] == j["verdicts"] + j["failures"]

        assert wait_for(settled)
        time.sleep(0.5)
        j = svc.http.get("/v1/state").json()["judge"]
        wanted = j["calls"] + j["skipped"]
        assert 4 <= wanted <= 16  # about half of 20 (seeded)
        assert j["skipped"] >= 1  # one at a time: the others in that moment were skipped


def test_the_zoo_judge_entry_is_validated():
    models = [{"name": n, "base_url": "http://127.0.0.1:1/v1", "model": n, "price_per_request": p}
              for n, p in (("a", 0.0), ("b", 1.0))]
    zoo = parse_zoo({"models": models, "judge": {"base_url": "http://127.0.0.1:2/v1", "model": "j",
                                                  "budget": 0.3}})
    assert zoo.judge.budget == 0.3 and zoo.judge.client().url == "http://127.0.0.1:2/v1/chat/completions"
    for bad, needle in (({"base_url": "http://h/v1", "model": "j", "budget": 1.5}, "budget"),
                        ({"base_url": "http://h/v1"}, "missing base_url or model"),
                        ({"base_url": "http://h/v1", "model": "j", "colour": 1}, "unknown key"),
                        ({"base_url": "http://h/v1", "model": "j", "api_key_env": "sk-pasted key"}, "NAME"),
                        ({"base_url": "http://h/v1", "model": "j", "calibrate": "yes"}, "calibrate must be True or False"),
                        ({"base_url": "http://h/v1", "model": "j", "calibrate_within_s": -1}, "calibrate_within_s")):
        with pytest.raises(ZooError, match=needle):
            parse_zoo({"models": models, "judge": bad})


@pytest.mark.parametrize("mode", ["paper", "guarded", "contextual"])
def test_thumbs_after_a_judge_verdict(mode):
    """Guarded and contextual take the user's thumbs after the judge's verdict; paper mode
    has used the verdict as the step's label, and says so (not 'too old')."""
    zoo = Zoo(make_zoo({n: type("B", (), {"url": "http://127.0.0.1:1"})() for n in ("small", "medium")},
                       names=("small", "medium")).models,
              JudgeEntry(base_url="http://127.0.0.1:1/v1", model="j"))
    svc = RoutingService(zoo, ServiceConfig(alpha=0.8, mode=mode), encoder=HashingEncoder(16))
    tks = [svc.route(f"q {i}") for i in range(5)]
    for tk in tks:
        svc.complete(tk, tk.model, None)
    svc.judge_result(tks[2], 1)
    if mode == "paper":
        with pytest.raises(Exception) as e:
            svc.feedback(tks[2].request_id, False)
        assert e.value.status == 409 and "already labelled by the LLM judge" in str(e.value)
    else:
        assert svc.feedback(tks[2].request_id, False)["accepted"] is True


def test_thumbs_given_within_the_delay_win_over_the_judge(running, backends):
    with FakeJudge(label=0) as judge:
        svc = running(judged_zoo(backends, judge.url, delay_s=0.4), mode="paper")
        ids = [svc.http.post("/v1/chat/completions",
                             json={"messages": [{"role": "user", "content": f"q{i}"}]}).json()["id"] for i in range(4)]
        for rid in ids[:2]:  # thumbs for two of them, quickly
            assert svc.http.post("/v1/feedback", json={"request_id": rid, "satisfied": True}).status_code == 200
        assert wait_for(lambda: svc.http.get("/v1/state").json()["judge"]["calls"] == 2)
        time.sleep(0.6)
        st = svc.http.get("/v1/state").json()
        assert st["judge"]["calls"] == 2 and len(judge.calls) == 2  # only the two without thumbs
        assert st["feedback"]["satisfied"] == 2


def offline_judged_service(mode="contextual", budget=1.0, **cfg) -> RoutingService:
    zoo = Zoo(make_zoo({n: type("B", (), {"url": "http://127.0.0.1:1"})() for n in ("small", "medium")},
                       names=("small", "medium")).models,
              JudgeEntry(base_url="http://127.0.0.1:1/v1", model="j", budget=budget))
    return RoutingService(zoo, ServiceConfig(alpha=0.8, mode=mode, **cfg), encoder=HashingEncoder(16))


def certificate_state(svc: RoutingService) -> tuple:
    c = svc.router.policy.cert
    return c.thumbs, c.pairs_n, c.judged, round(c.dr, 12), round(c.var, 12)


def test_the_judge_reads_rated_answers_and_thumbs_wait_for_its_verdict(tmp_path):
    """Contextual mode: the judge's draw is made at the reply, whatever thumbs come; thumbs
    given before the verdict reach the router with it (the verdict sets the prediction they
    rectify, and the pair calibrates the judge). Journaled: a replay holds and releases them
    at the same points; a call lost with a stopped process releases them at the restart."""
    svc = offline_judged_service(state_dir=str(tmp_path))
    tks = [svc.route(f"q {i}") for i in range(4)]
    for tk in tks:
        svc.complete(tk, tk.model, None)
        assert svc.judge_assign(tk)  # the whole budget: every answer, rated or not
    cert = svc.router.policy.cert
    assert svc.feedback(tks[0].request_id, True)["accepted"] is True
    assert svc.feedback(tks[1].request_id, False)["accepted"] is True
    assert cert.thumbs == 0 and svc.judge_wanted(tks[0].request_id)  # waiting for the verdict
    assert {k: svc.state()["judge"][k] for k in ("due", "thumbs_waiting")} == {"due": 4, "thumbs_waiting": 2}
    svc.judge_result(tks[0], 1)
    assert cert.thumbs == 1 and cert.pairs_n == 1 and cert.judged == 1  # verdict, then its thumbs
    svc.judge_result(tks[2], 0)
    svc.judge_dropped(tks[3], "skipped")
    assert cert.thumbs == 1 and svc.judge["skipped"] == 1 and svc.judge["calls"] == 2
    before = certificate_state(svc)
    svc.journal.close()  # a crash: request 1's judge call is lost with the process
    again = RoutingService(svc.zoo, ServiceConfig(alpha=0.8, mode="contextual", state_dir=str(tmp_path)),
                           encoder=HashingEncoder(16))
    c2 = again.router.policy.cert
    assert (c2.thumbs, c2.pairs_n, c2.judged) == (2, 1, 2)  # request 1's thumbs released, unjudged
    assert certificate_state(again)[3:] != before[3:]
    assert not again.judge_wanted(tks[1].request_id)
    after = certificate_state(again)
    again.journal.close()  # the release was journaled: a second restart replays it where it was
    third = RoutingService(svc.zoo, ServiceConfig(alpha=0.8, mode="contextual", state_dir=str(tmp_path)),
                           encoder=HashingEncoder(16))
    assert certificate_state(third) == after
    third.journal.close()


def test_paper_mode_judges_only_answers_still_unrated_when_the_call_is_due():
    svc = offline_judged_service(mode="paper")
    tk = svc.route("q")
    svc.complete(tk, tk.model, None)
    assert svc.judge_assign(tk)
    svc.feedback(tk.request_id, True)  # a label now: paper mode does not wait for the judge
    assert svc.router.n_feedback == 1 and not svc.judge_wanted(tk.request_id)


def test_a_zero_budget_draws_no_judge_call():
    svc = offline_judged_service(budget=0.0)
    tk = svc.route("q")
    svc.complete(tk, tk.model, None)
    assert not svc.judge_assign(tk) and not svc.judge_wanted(tk.request_id)
    svc.feedback(tk.request_id, True)
    assert svc.router.policy.cert.thumbs == 1


def test_in_contextual_mode_the_judge_reads_rated_answers_too(running, backends):
    with FakeJudge(label=1) as judge:
        svc = running(judged_zoo(backends, judge.url, delay_s=0.4), mode="contextual")
        ids = [svc.http.post("/v1/chat/completions",
                             json={"messages": [{"role": "user", "content": f"q{i}"}]}).json()["id"] for i in range(4)]
        for rid in ids[:2]:  # thumbs for two of them, before the judge's call
            assert svc.http.post("/v1/feedback", json={"request_id": rid, "satisfied": True}).status_code == 200
        assert svc.service.router.policy.cert.thumbs == 0  # they wait for the verdicts
        assert wait_for(lambda: svc.http.get("/v1/state").json()["judge"]["verdicts"] == 4)
        assert len(judge.calls) == 4
        cert = svc.service.router.policy.cert
        assert cert.thumbs == 2 and cert.pairs_n == 2


def test_thumbs_for_a_step_the_router_no_longer_holds_are_refused_even_while_its_judge_is_due():
    svc = offline_judged_service()
    tk = svc.route("q")
    svc.complete(tk, tk.model, None)
    assert svc.judge_assign(tk) and svc.router.awaits_feedback(tk.t)
    svc.router.policy.pending.pop(tk.t)  # as if trimmed (too old)
    with pytest.raises(Exception) as e:
        svc.feedback(tk.request_id, True)
    assert e.value.status == 410 and "no longer holds" in str(e.value)


def test_a_rated_answer_outside_the_draw_is_judged_to_calibrate_the_judge_only(tmp_path):
    """Below a full budget the draw leaves the judge few rated answers to be calibrated on; a
    rated answer it left out is judged once its thumbs came, and that verdict only adds a
    calibration pair (the estimate is untouched). Journaled: a restart replays it."""
    svc = offline_judged_service(budget=0.0, state_dir=str(tmp_path))
    tks = [svc.route(f"q {i}") for i in range(3)]
    for tk in tks:
        svc.complete(tk, tk.model, None)
        assert not svc.judge_assign(tk)
    assert not svc.judge_calibrates(tks[0].request_id)  # no thumbs yet
    svc.feedback(tks[0].request_id, True)
    assert svc.judge_calibrates(tks[0].request_id)
    cert = svc.router.policy.cert
    dr, var = cert.dr, cert.var
    svc.judge_result(tks[0], 1, 100, 10, calibration=True)
    assert cert.pairs_n == 1 and cert.judged == 0 and (cert.dr, cert.var) == (dr, var)
    assert svc.judge["calibration_calls"] == 1 and svc.judge["calls"] == 1 and svc.judge["verdicts"] == 0
    assert svc.state()["judge"]["calibration_calls"] == 1
    svc.judge_result(tks[0], None, calibration=True)  # a failed call: counted, nothing learned
    assert svc.judge["failures"] == 1 and cert.pairs_n == 1
    before = certificate_state(svc) + (cert.pairs_n,)
    svc.journal.close()
    again = RoutingService(svc.zoo, ServiceConfig(alpha=0.8, mode="contextual", state_dir=str(tmp_path)),
                           encoder=HashingEncoder(16))
    assert certificate_state(again) + (again.router.policy.cert.pairs_n,) == before
    assert again.judge["calibration_calls"] == 1
    again.journal.close()


@pytest.mark.parametrize("mode, calibrate", [("paper", True), ("guarded", True), ("contextual", False)])
def test_no_calibration_read_where_the_router_does_not_calibrate_a_judge_or_the_zoo_says_not_to(mode, calibrate):
    zoo = Zoo(make_zoo({n: type("B", (), {"url": "http://127.0.0.1:1"})() for n in ("small", "medium")},
                       names=("small", "medium")).models,
              JudgeEntry(base_url="http://127.0.0.1:1/v1", model="j", budget=0.0, calibrate=calibrate))
    svc = RoutingService(zoo, ServiceConfig(alpha=0.8, mode=mode), encoder=HashingEncoder(16))
    tk = svc.route("q")
    svc.complete(tk, tk.model, None)
    svc.feedback(tk.request_id, True)
    assert not svc.judge_calibrates(tk.request_id)


@pytest.mark.parametrize("calibrate", [True, False])
def test_over_http_rated_answers_outside_the_draw_go_to_the_judge_when_their_thumbs_come(running, backends, calibrate):
    with FakeJudge(label=1) as judge:
        svc = running(judged_zoo(backends, judge.url, budget=0.0, calibrate=calibrate), mode="contextual")
        ids = [svc.http.post("/v1/chat/completions",
                             json={"messages": [{"role": "user", "content": f"q{i}"}]}).json()["id"] for i in range(4)]
        for rid in ids[:2]:
            assert svc.http.post("/v1/feedback", json={"request_id": rid, "satisfied": True}).status_code == 200
        cert = svc.service.router.policy.cert
        if calibrate:
            assert wait_for(lambda: svc.http.get("/v1/state").json()["judge"]["calibration_calls"] == 2)
            assert cert.pairs_n == 2 and cert.judged == 0 and cert.thumbs == 2
            user = judge.calls[0]["messages"][1]["content"]
            assert "q0" in user or "q1" in user  # the kept answer's question
        else:
            time.sleep(0.5)
            assert len(judge.calls) == 0 and cert.pairs_n == 0
        j = svc.http.get("/v1/state").json()["judge"]
        assert j["calls"] == (2 if calibrate else 0) and j["calibrate"] is calibrate
