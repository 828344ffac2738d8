"""The service core without HTTP: configuration, batched embedding, cost estimates."""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import re
import threading
import time

import numpy as np
import pytest

from slarouter_core.encoders import HashingEncoder
from slarouter_core.policies.paper import PaperConfig
from slarouter_core.router import policy_names
from slarouter_core.service.core import FeedbackError, RoutingService, ServiceConfig, wilson_lower
from slarouter_core.service.zoo import Zoo, ZooModel


def zoo() -> Zoo:
    return Zoo((ZooModel("a", "http://127.0.0.1:1/v1", "a", price_per_1k_input=1.0, price_per_1k_output=2.0,
                         expected_output_tokens=100),
                ZooModel("b", "http://127.0.0.1:1/v1", "b", price_per_request=1.0)))


class SlowEncoder(HashingEncoder):
    """Records the batch sizes it is asked for; slow enough that requests queue up."""

    def __init__(self):
        super().__init__(32)
        self.batches: list[int] = []

    def encode(self, texts, progress=None):
        self.batches.append(len(texts))
        time.sleep(0.02)
        return super().encode(texts)


class BrokenEncoder(HashingEncoder):
    def encode(self, texts, progress=None):
        raise RuntimeError("encoder exploded")


@pytest.mark.parametrize("kw, match", [
    ({"alpha": 1.2}, "alpha"), ({"alpha": 0.8, "mode": "nope"}, "mode must be one of paper, guarded, contextual"),
    ({"alpha": 0.8, "checkpoint_every_s": 0}, "checkpoint_every_s"),
    ({"alpha": 0.8, "instance": "a b"}, "instance"), ({"alpha": 0.8, "seed": -1}, "seed"),
])
def test_config_is_validated(kw, match):
    with pytest.raises(ValueError, match=match):
        ServiceConfig(**kw)


def test_every_router_mode_is_offered():
    for mode in policy_names():
        assert ServiceConfig(alpha=0.8, mode=mode).router_config().mode == mode


def test_concurrent_requests_share_embedding_batches_and_get_their_own_vectors():
    enc = SlowEncoder()
    svc = RoutingService(zoo(), ServiceConfig(alpha=0.8), encoder=enc)
    texts = [f"text number {i} " + "w " * i for i in range(24)]
    with cf.ThreadPoolExecutor(12) as pool:
        got = list(pool.map(svc.embed, texts))
    ref = HashingEncoder(32).encode(texts)
    assert np.allclose(np.array(got), ref)
    assert sum(enc.batches) == 24 and max(enc.batches) > 1


def test_an_encoder_error_reaches_the_request():
    svc = RoutingService(zoo(), ServiceConfig(alpha=0.8), encoder=BrokenEncoder(16))
    with pytest.raises(RuntimeError, match="exploded"):
        svc.route("hello")
    assert svc.router.t == 0


def test_cost_estimate_learns_each_models_completion_length():
    svc = RoutingService(zoo(), ServiceConfig(alpha=0.8), encoder=HashingEncoder(16))
    c = svc.estimate_costs(prompt_chars=4000)  # 1000 prompt tokens
    assert c == pytest.approx([1.0 + 2.0 * 100 / 1000, 1.0])
    assert svc.estimate_costs(4000, max_tokens=10)[0] == pytest.approx(1.0 + 2.0 * 10 / 1000)
    ticket = svc.route("hello")
    svc.complete(ticket, 0, {"prompt_tokens": 10, "completion_tokens": 300})
    assert svc.estimate_costs(4000)[0] == pytest.approx(1.0 + 2.0 * (100 + 300) / 2 / 1000)
    assert svc.stats[0].cost == pytest.approx(10 / 1000 + 2.0 * 300 / 1000)


def test_wilson_bound():
    assert np.isnan(wilson_lower(0, 0))
    assert 0 < wilson_lower(80, 100) < 0.8
    assert wilson_lower(800, 1000) > wilson_lower(80, 100)


def test_route_is_safe_from_many_threads():
    svc = RoutingService(zoo(), ServiceConfig(alpha=0.8, mode="guarded"), encoder=HashingEncoder(16))
    barrier = threading.Barrier(8)

    def go(i):
        barrier.wait()
        return [svc.route(f"q {i} {k}").t for k in range(25)]

    with cf.ThreadPoolExecutor(8) as pool:
        ts = sorted(t for part in pool.map(go, range(8)) for t in part)
    assert ts == list(range(1, 201)) and svc.router.t == 200


@pytest.mark.parametrize("mode", policy_names())
def test_a_crash_loses_nothing_the_journal_replays_every_event(tmp_path, mode):
    """Decisions, answers, thumbs and failures after the last checkpoint come back from
    the journal, and the router goes on exactly as the one that never crashed."""
    def make():
        return RoutingService(zoo(), ServiceConfig(alpha=0.8, mode=mode, state_dir=str(tmp_path)),
                              encoder=HashingEncoder(16))

    svc = make()
    tickets = []
    for i in range(30):
        tk = svc.route(f"question {i} " + "w " * (i % 5))
        tickets.append(tk)
        if i % 7 == 3:
            svc.record_failure(tk, tk.model)
        svc.complete(tk, tk.order[0], {"prompt_tokens": 10 + i, "completion_tokens": 20})
        if i == 12:
            svc.checkpoint()  # the journal holds what comes after
        if i % 2 == 0:
            svc.feedback(tk.request_id, i % 4 == 0)
    before = svc.state()
    svc.journal.close()  # a crash: no checkpoint (the old one carries on in memory only)
    svc.journal = None
    back = make()
    after = back.state()
    assert back.replayed > 0
    for key in ("t", "q", "decision_queue", "models", "cost_total", "feedback", "satisfaction"):
        assert after[key] == before[key], key
    # both continue identically
    nxt = [s.route("the same next question") for s in (svc, back)]
    assert nxt[0].t == nxt[1].t == 31 and nxt[0].model == nxt[1].model
    assert back.feedback(tickets[1].request_id, True)["accepted"] is True
    with pytest.raises(FeedbackError) as e:
        back.feedback(tickets[0].request_id, True)
    assert e.value.status == 409


def test_a_restart_with_changed_stated_accuracies_is_refused_not_silently_ignored(tmp_path):
    def stated(*acc):
        return Zoo(tuple(ZooModel(n, "http://127.0.0.1:1/v1", n, price_per_request=p, accuracy=a)
                         for n, p, a in zip("ab", (1.0, 2.0), acc)))

    cfg = ServiceConfig(alpha=0.8, mode="contextual", state_dir=str(tmp_path / "s"))
    svc = RoutingService(stated(0.5, 0.9), cfg, encoder=HashingEncoder(16))
    svc.complete(svc.route("hello"), 0, None)
    svc.checkpoint()
    same = RoutingService(stated(0.5, 0.9), cfg, encoder=HashingEncoder(16))
    assert same.restored and same.router.config.settings.stated_levels == (0.5, 0.9)
    with pytest.raises(ValueError, match=r"stated_levels \(the zoo's stated accuracies\): \[0.5, 0.9\] "
                                         r"\(now \[0.6, 0.9\]\)"):
        RoutingService(stated(0.6, 0.9), cfg, encoder=HashingEncoder(16))
    with pytest.raises(ValueError, match=r"stated_levels \(the zoo's stated accuracies\): \[0.5, 0.9\] "
                                         r"\(now none\)"):
        RoutingService(zoo(), cfg, encoder=HashingEncoder(16))


def tuned(**settings) -> type[RoutingService]:
    """A service whose router gets other policy settings than the defaults, as a command line
    giving them (or a later version's defaults) would."""
    class Tuned(RoutingService):
        def router_config(self):
            return super().router_config().with_settings(**settings)
    return Tuned


def state_files(d) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def checkpointed(tmp_path, service=RoutingService, mode="contextual", **config):
    """A state folder with a checkpoint and one journaled decision after it; the service stopped."""
    cfg = ServiceConfig(alpha=0.8, mode=mode, state_dir=str(tmp_path / "s"), **config)
    svc = service(zoo(), cfg, encoder=HashingEncoder(16))
    svc.complete(svc.route("hello"), 0, None)
    svc.checkpoint()
    svc.complete(svc.route("after the checkpoint"), 1, None)
    svc.journal.close()
    return cfg


@pytest.mark.parametrize("config, expected", [
    ({"mode": "guarded"}, "mode: contextual (now guarded)"),
    ({"alpha": 0.7}, "alpha: 0.8 (now 0.7)"),
    ({"seed": 7}, "seed: 0 (now 7)"),
])
def test_a_restart_asking_for_another_router_is_refused_and_the_state_folder_kept(tmp_path, config, expected):
    """The restored router would run with its checkpoint's settings whatever the command
    line says now: a start asking for another one is refused, naming it with both values,
    and touches nothing in the state folder; the same settings then restore everything."""
    cfg = checkpointed(tmp_path)
    before = state_files(tmp_path / "s")
    with pytest.raises(ValueError, match="other settings: " + re.escape(expected) + r"\. Start with the same"):
        RoutingService(zoo(), ServiceConfig(**{**cfg.__dict__, **config}), encoder=HashingEncoder(16))
    assert state_files(tmp_path / "s") == before
    back = RoutingService(zoo(), cfg, encoder=HashingEncoder(16))
    assert back.restored and back.replayed > 0 and back.router.t == 2
    assert back.router.config == cfg.router_config() and back.state()["kept_settings"] == []


@pytest.mark.parametrize("checkpointed_with, expected", [
    (tuned(explore_c=3.0), "explore_c: 3.0 (now 2.0)"),
    (tuned(delta=0.1), "delta: 0.1 (now 0.05)"),
    (tuned(sla_window=500), "sla_window: 500 (now 0)"),
    (tuned(fallback="level"), "fallback: level (now thompson)"),
])
def test_a_newer_versions_defaults_keep_the_checkpointed_settings_and_say_so(tmp_path, caplog, checkpointed_with,
                                                                             expected):
    """A policy setting the command line cannot give differs only when a newer library's
    default does: the learned router keeps its own settings (a refusal would strand the
    state folder), the log and /v1/state say which."""
    cfg = checkpointed(tmp_path, checkpointed_with)
    with caplog.at_level("WARNING", logger="slarouter.service"):
        back = RoutingService(zoo(), cfg, encoder=HashingEncoder(16))
    assert back.restored and back.replayed > 0 and back.router.t == 2
    assert back.router.config != cfg.router_config()  # the checkpoint's, not today's defaults
    assert back.state()["kept_settings"] == [expected]
    assert expected in caplog.text and "keeps the settings it was checkpointed with" in caplog.text


def test_a_restart_refusal_lists_every_difference_in_one_message(tmp_path):
    cfg = checkpointed(tmp_path)
    other = Zoo((zoo().models[0], dataclasses.replace(zoo().models[1], name="c")))
    with pytest.raises(ValueError) as e:
        RoutingService(other, ServiceConfig(**{**cfg.__dict__, "alpha": 0.75, "seed": 3}),
                       encoder=HashingEncoder(16))
    assert (f"other settings: models: ['a', 'b'] (now {list(other.names)}); alpha: 0.8 (now 0.75); "
            "seed: 0 (now 3). Start") in str(e.value)


def test_a_nested_policy_setting_is_compared_by_its_dotted_name(tmp_path):
    from slarouter_core.predictor import PredictorConfig

    cfg = checkpointed(tmp_path, tuned(predictor=PredictorConfig(lr=0.01)), mode="paper")
    back = RoutingService(zoo(), cfg, encoder=HashingEncoder(16))
    assert back.restored and back.state()["kept_settings"] == ["predictor.lr: 0.01 (now 0.006)"]


def test_a_restart_may_change_what_is_not_the_routers(tmp_path):
    """Encoder runtime and threads, timers, limits, breakers and the instance prefix are not
    kept in the router: a restart with other values restores as before."""
    cfg = checkpointed(tmp_path)
    changed = dict(cfg.__dict__, checkpoint_every_s=5.0, instance="r2", history=50, max_body_bytes=4096,
                   breaker_failures=7, breaker_cooldown_s=1.0, embed_wait_ms=0.0, encoder_runtime="eager",
                   encoder_threads=1)
    back = RoutingService(zoo(), ServiceConfig(**changed), encoder=HashingEncoder(16))
    assert back.restored and back.router.t == 2 and back.route("next").request_id.startswith("r2-")


def test_state_files_are_private_and_the_checkpoint_names_its_router_file(tmp_path):
    import json
    import os

    svc = RoutingService(zoo(), ServiceConfig(alpha=0.8, state_dir=str(tmp_path / "s")), encoder=HashingEncoder(16))
    svc.complete(svc.route("hello"), 0, None)
    svc.checkpoint()
    svc.checkpoint()
    files = sorted(p.name for p in (tmp_path / "s").iterdir())
    ledger = json.loads((tmp_path / "s" / "service.json").read_text())
    assert [f for f in files if f.startswith("router")] == [ledger["router_file"]]  # the old one is gone
    assert all(os.stat(p).st_mode & 0o777 == 0o600 for p in (tmp_path / "s").iterdir())
    assert os.stat(tmp_path / "s").st_mode & 0o777 == 0o700


def test_a_zoos_stated_accuracies_are_the_prior_of_a_policy_that_takes_one():
    models = [ZooModel("a", "http://127.0.0.1:1/v1", "a", price_per_request=1.0, accuracy=0.5),
              ZooModel("b", "http://127.0.0.1:1/v1", "b", price_per_request=2.0, accuracy=0.9)]
    svc = RoutingService(Zoo(tuple(models)), ServiceConfig(alpha=0.8, mode="contextual"), encoder=HashingEncoder(16))
    assert svc.router.config.settings.stated_levels == (0.5, 0.9)
    paper = RoutingService(Zoo(tuple(models)), ServiceConfig(alpha=0.8, mode="paper"), encoder=HashingEncoder(16))
    assert paper.router.config.settings == PaperConfig()  # a policy without a prior ignores them


def test_policy_settings_given_to_the_service_reach_its_router_and_a_restart_must_give_them_again(tmp_path):
    """``slarouter serve --set sla_window=500``: the SLA window the router certifies; a
    restart that drops or changes an explicitly given setting is refused, naming it."""
    cfg = checkpointed(tmp_path, settings={"sla_window": 500, "delta": 0.1})
    back = RoutingService(zoo(), cfg, encoder=HashingEncoder(16))
    assert back.restored and back.router.t == 2 and back.state()["kept_settings"] == []
    assert back.router.config.settings.sla_window == 500 and back.router.policy.cert.window == 500
    back.journal.close()
    before = state_files(tmp_path / "s")
    for settings, expected in (({"delta": 0.1}, "sla_window: 500 (now 0)"),
                               ({"sla_window": 600, "delta": 0.1}, "sla_window: 500 (now 600)"),
                               ({"sla_window": 500}, "delta: 0.1 (now 0.05)")):
        with pytest.raises(ValueError, match="other settings: " + re.escape(expected) + r"\. Start"):
            RoutingService(zoo(), ServiceConfig(**{**cfg.__dict__, "settings": settings}), encoder=HashingEncoder(16))
        assert state_files(tmp_path / "s") == before


def test_service_settings_are_checked_on_construction():
    with pytest.raises(ValueError, match="explore_k"):
        ServiceConfig(alpha=0.8, mode="contextual", settings={"explore_k": 1})
    with pytest.raises(ValueError, match="sla_window"):
        ServiceConfig(alpha=0.8, mode="contextual", settings={"sla_window": -5})
    with pytest.raises(ValueError, match="plain JSON"):
        ServiceConfig(alpha=0.8, mode="paper", settings={"predictor": PaperConfig().predictor})


# -- the text model's refits run on a worker thread, outside the lock ------------------------
class Gate:
    """Holds every contextual refit until released (``TextRefit.run`` waits on it)."""

    def __init__(self, monkeypatch):
        from slarouter_core.policies.contextual import TextRefit

        self.open = threading.Event()
        self.started = threading.Event()
        run = TextRefit.run

        def gated(job):
            self.started.set()
            assert self.open.wait(20), "the test never released the refit"
            return run(job)

        monkeypatch.setattr(TextRefit, "run", gated)


def _contextual_service(state_dir=None) -> RoutingService:
    return RoutingService(zoo(), ServiceConfig(alpha=0.8, mode="contextual", state_dir=state_dir,
                                               settings={"min_labels": 4}), encoder=HashingEncoder(16))


def _serve(svc: RoutingService, n: int, start: int = 0) -> list:
    """``n`` answered requests, thumbs on every other one (both verdicts)."""
    out = []
    for i in range(start, start + n):
        tk = svc.route(f"question {i} " + "w " * (i % 7))
        svc.complete(tk, tk.model, {"prompt_tokens": 10, "completion_tokens": 20})
        if i % 2 == 0:
            svc.feedback(tk.request_id, i % 4 == 0)
        out.append(tk)
    return out


def test_requests_are_served_while_the_text_model_refits(monkeypatch):
    """A refit that takes long (seconds on a full label ring) holds no request: routing
    and thumbs go on with the current text model, and the new one is installed when done."""
    gate = Gate(monkeypatch)
    svc = _contextual_service()
    _serve(svc, 8)  # 4 thumbs: the first refit is due and handed to the worker
    assert gate.started.wait(10) and svc.state()["refits"]["running"] is True
    version = svc.router.model_version
    t0 = time.perf_counter()
    _serve(svc, 30, start=8)  # served while the refit is held
    assert time.perf_counter() - t0 < 5.0
    assert svc.router.model_version == version and svc.router.t == 38
    gate.open.set()
    assert svc.wait_refits(20)
    st = svc.state()["refits"]
    assert svc.router.model_version > version and st["done"] >= 1 and st["running"] is False


def test_a_checkpoint_waits_for_the_running_refit(monkeypatch, tmp_path):
    gate = Gate(monkeypatch)
    svc = _contextual_service(str(tmp_path))
    _serve(svc, 8)
    assert gate.started.wait(10)
    saver = threading.Thread(target=svc.checkpoint)
    saver.start()
    saver.join(0.5)
    assert saver.is_alive()  # waiting for the refit
    gate.open.set()
    saver.join(20)
    assert not saver.is_alive()
    svc.journal.close()
    back = _contextual_service(str(tmp_path))
    assert back.replayed == 0 and back.router.model_version == svc.router.model_version >= 1


@pytest.mark.parametrize("crash_while_refitting", [False, True])
def test_a_replay_installs_each_refit_where_the_journal_says(monkeypatch, tmp_path, caplog, crash_while_refitting):
    """Refits installed some requests after they fell due (the worker's timing) come back
    from the journal at the same points: the replayed router is the one that never crashed,
    also when the service stopped while a refit was running."""
    gate = Gate(monkeypatch)
    svc = _contextual_service(str(tmp_path))
    _serve(svc, 8)
    assert gate.started.wait(10)
    _serve(svc, 12, start=8)  # decided on the old text model
    gate.open.set()
    assert svc.wait_refits(20)
    _serve(svc, 40, start=20)  # more refits, installed whenever the worker is done
    assert svc.wait_refits(20)
    if crash_while_refitting:
        gate.open.clear()
        gate.started.clear()
        _serve(svc, 40, start=60)
        assert gate.started.wait(10)
    kinds = [k for _, k, _ in svc.journal.after(0)]
    assert kinds.count("refit") >= 3 and kinds.count("refit_done") == kinds.count("refit") - crash_while_refitting
    svc.journal.close()  # a crash: no checkpoint
    svc.journal = None
    gate.open.set()  # (the crashed service's worker may finish; nothing is journaled)
    svc.wait_refits(20)
    back = _contextual_service(str(tmp_path))
    assert back.replayed > 0 and back.wait_refits(20)  # (a refit due at the crash runs after the replay)
    assert "journal replay" not in caplog.text  # every decision as journaled
    # every decision replayed as journaled, and the text model where it was
    assert np.array_equal(back.router.policy.W, svc.router.policy.W)
    assert back.router.model_version == svc.router.model_version
    assert back.state()["refits"]["running"] is False
    nxt = [s.route("the same next question") for s in (svc, back)]
    assert nxt[0].t == nxt[1].t and nxt[0].model == nxt[1].model
    # a refit that was running is journaled as installed: a second crash replays the same
    kinds = [k for _, k, _ in back.journal.after(0)]
    assert kinds.count("refit_done") == kinds.count("refit")


def test_a_journal_of_refits_in_place_replays_in_place(tmp_path, caplog):
    """An older version refitted inside the request that made a refit due, and journaled no
    refit events: its journal replays with refits in place, as it was served."""
    svc = _contextual_service(str(tmp_path))
    svc.router.defer_refits(False)  # as before refits left the request path
    _serve(svc, 60)
    assert svc.router.model_version >= 3 and svc.refits["done"] == 0
    svc.journal.close()
    svc.journal = None
    back = _contextual_service(str(tmp_path))
    assert back.wait_refits(20) and "journal replay" not in caplog.text
    assert back.router.model_version == svc.router.model_version
    assert np.array_equal(back.router.policy.W, svc.router.policy.W)


def test_state_gives_the_preflight_check_from_stated_accuracies_at_the_observed_thumbs_rate():
    models = [ZooModel("a", "http://127.0.0.1:1/v1", "a", price_per_request=1.0, accuracy=0.6),
              ZooModel("b", "http://127.0.0.1:1/v1", "b", price_per_request=4.0, accuracy=0.9)]
    svc = RoutingService(Zoo(tuple(models)), ServiceConfig(alpha=0.87, mode="contextual",
                                                           settings={"sla_window": 2000, "delta": 0.1}),
                         encoder=HashingEncoder(16))
    pre = svc.state()["preflight"]
    assert pre["feedback_rate"] == 0.2 and pre["feedback_rate_source"].startswith("assumed")
    assert pre["window"] == 2000 and pre["delta"] == 0.1  # the router's own claim
    assert pre["models"] == ["a", "b"] and pre["mean_cost"] == [1.0, 4.0]
    assert pre["certifiable"] is True and pre["report"][1].startswith("certifiable: yes")
    # 120 answers with thumbs on 6 of them: 5%, too few to certify 87% over 2,000 requests
    for st_, up in ((svc.stats[0], 3), (svc.stats[1], 3)):
        st_.served, st_.thumbs_up = 60, up
    pre = svc.state()["preflight"]
    assert pre["feedback_rate"] == pytest.approx(0.05) and pre["feedback_rate_source"].startswith("observed (6 thumbs")
    assert pre["certifiable"] is False and pre["feedback_rate_min"] > 0.05
    # no stated accuracies: nothing to check against
    plain = [dataclasses.replace(m, accuracy=None) for m in models]
    assert RoutingService(Zoo(tuple(plain)), ServiceConfig(alpha=0.8), encoder=HashingEncoder(16)).state()["preflight"] is None


def test_the_preflight_check_runs_outside_the_routing_lock_and_once_per_thumbs_rate(monkeypatch):
    import slarouter_core.preflight as pf

    models = [ZooModel("a", "http://127.0.0.1:1/v1", "a", price_per_request=1.0, accuracy=0.6),
              ZooModel("b", "http://127.0.0.1:1/v1", "b", price_per_request=4.0, accuracy=0.9)]
    svc = RoutingService(Zoo(tuple(models)), ServiceConfig(alpha=0.8, mode="contextual"), encoder=HashingEncoder(16))
    calls = []
    real = pf.preflight
    monkeypatch.setattr(pf, "preflight", lambda *a, **k: calls.append(svc._lock.locked()) or real(*a, **k))
    svc.state()
    svc.state()
    assert calls == [False]  # computed once, with no routing decision waiting on it
    svc.stats[0].served, svc.stats[0].thumbs_up = 200, 50  # a new thumbs rate: computed again
    assert svc.state()["preflight"]["feedback_rate"] == 0.25 and calls == [False, False]
